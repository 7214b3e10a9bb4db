//! mcpmux's end-to-end suites, linked into one test binary (one build of `tests/support` and one
//! link instead of one per suite). Each module was a test binary of its own before; run one with
//! `cargo test --test e2e faults::` (or any test name filter).
//!
//! Tests of one suite run side by side as libtest schedules them, as before; tests of different
//! suites never overlap, as when each suite was a binary run after the other. Every test therefore
//! starts with `let _suite = crate::suite::enter(module_path!());` (see [`suite`]): several suites
//! run real npm and PyPI servers and timing-sensitive scenarios, and 2 cores do not leave room
//! for two suites at once.

// The tests' support drives processes the Unix way (signals, process groups, waitid): on
// Windows this test crate is empty (docs/development.md, "Windows").
#![cfg(unix)]

mod suite;
#[path = "../support/mod.rs"]
mod support;

mod admin_page;
mod audit;
mod auth;
mod canary;
mod cli;
mod cluster;
mod cluster_events;
mod compose;
mod config_hygiene;
mod conformance_auth;
mod drain;
mod edge;
mod example_config;
mod faults;
mod forwarding;
mod graceful_stop;
mod grants_cli;
mod host_mistakes;
mod http_status;
mod http_upstream;
mod import;
mod legacy_sse;
mod lifecycle;
mod meta_tools;
mod metrics;
mod modern;
mod mtls;
mod names;
mod oauth_flows;
mod pinning;
mod policy;
mod policy_explain;
mod policy_property;
mod profiles;
mod pypi_run;
mod rate_limit;
mod real_clients;
mod reload;
mod reload_live;
mod replicas;
mod replicas_clients;
mod resumption;
mod rolling_restart;
mod routing;
mod shaping;
mod shared_store;
mod slow_start;
mod stdio_setup;
mod tls;
mod trace_access;
mod traces;
mod upstream_auth;
mod upstream_auth_team;
mod upstream_tls;
mod upstream_token_exchange;

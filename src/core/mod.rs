//! The request pipeline between host faces and upstreams, one for both eras: each request's
//! context, one file per method ([`methods`]), what the audit log hears of them, forwarded calls and their frames, the bridges
//! between the two protocol eras, and the gateway's shared state ([`hub`]).

pub mod access;
pub mod audit_trail;
#[cfg(test)]
mod audit_trail_tests;
pub mod context;
pub mod forward;
pub mod hub;
pub mod input_bridge;
pub mod input_required;
pub mod methods;
pub mod observe;
pub mod profile_choice;
pub mod rate_limit;
pub mod request_spans;
pub mod request_state;
pub mod restore;
pub mod sign_in;
pub mod takeover;

#![no_main]
//! See `mcpmux_fuzz::config` for what this target feeds and asserts.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpmux_fuzz::config::check_config(data));

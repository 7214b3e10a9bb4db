#![no_main]
//! See `mcpmux_fuzz::message` for what this target feeds and asserts.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpmux_fuzz::message::check_message(data));

#![no_main]
//! See `mcpmux_fuzz::sse` for what this target feeds and asserts.

libfuzzer_sys::fuzz_target!(|data: &[u8]| mcpmux_fuzz::sse::check_sse(data));

//! The checks behind mcpmux's fuzz targets, shared with the stable regression test
//! (`tests/fuzz_regressions.rs` includes this file with `#[path]`), so a stored crash input
//! goes through exactly the code path and the invariants of the target that found it.
//!
//! Each `check_*` function takes the raw fuzz input, must never panic on its own, and panics
//! (through `assert!`) only when mcpmux breaks one of the invariants written next to it.

pub mod config;
pub mod message;
pub mod rewrite;
pub mod sse;

/// Deterministic small numbers drawn from the input (not random: the same input must always
/// take the same path).
pub struct Knobs<'a> {
    bytes: &'a [u8],
}

impl<'a> Knobs<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Knobs { bytes }
    }

    /// The next byte, or 0 once the input is used up.
    pub fn byte(&mut self) -> u8 {
        match self.bytes.split_first() {
            Some((first, rest)) => {
                self.bytes = rest;
                *first
            }
            None => 0,
        }
    }

    /// What is left of the input.
    pub fn rest(&self) -> &'a [u8] {
        self.bytes
    }
}

//! Fuzzes PromQL evaluation over a small in-memory store (see `checks::eval` for the oracle).

#![no_main]

#[path = "checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::eval(data));

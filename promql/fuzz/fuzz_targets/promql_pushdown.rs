//! Fuzzes PromQL evaluation with push-down against evaluation without it, over a real
//! database with block statistics (see `checks::pushdown` for the oracle).

#![no_main]

#[path = "checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::pushdown(data));

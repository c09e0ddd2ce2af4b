//! Fuzzes the query API's parameters end to end (see `checks::query_api` for the oracle).

#![no_main]

#[path = "checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::query_api(data));

//! Fuzzes the rewriting of Go-syntax regexes (see `checks::regex_translate` for the oracle).

#![no_main]

#[path = "checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::regex_translate(data));

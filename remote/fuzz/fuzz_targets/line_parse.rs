//! Fuzzes the line-protocol parser (see `checks::line_parse` for the oracle).

#![no_main]

mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::line_parse(data));

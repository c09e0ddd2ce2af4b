//! Fuzzes remote write 2.0 decoding (see `prw_common::check` for the oracle).

#![no_main]

#[path = "prw_common.rs"]
mod prw_common;

use libfuzzer_sys::fuzz_target;
use remote::prw::Version;

fuzz_target!(|data: &[u8]| prw_common::check(Version::V2, data));

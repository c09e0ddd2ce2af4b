//! remote's integration tests, in one test binary: each former `tests/<name>.rs` is a module
//! here, so the crate and its dependencies are compiled into and linked with one executable
//! instead of one per file. `cargo test -p remote --test integration <module>::` runs one
//! module's tests.

mod common;

mod fuzz_corpus;
mod histogram_chunks;
mod histograms;
mod line;
mod prw;
mod prw_golden;

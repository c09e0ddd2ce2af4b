//! storage's integration tests, in one test binary: each former `tests/<name>.rs` is a module
//! here, so the crate and its dependencies are compiled into and linked with one executable
//! instead of one per file. `cargo test -p storage --test integration <module>::` runs one
//! module's tests.
//!
//! They share one process. The process-wide test hooks are safe for that: injected faults
//! (`storage::fault`) and power-cut recorders (`storage::powercut`) are scoped to the
//! directory a test arms them for, and the crash tests run the writer in a child process.

mod common;

mod bucket;
mod crash;
mod db;
mod disk_full;
mod encoding_sizes;
mod histograms;
mod metadata_model;
mod model;
mod out_of_order;
mod power_loss;
mod raw_labels;
mod series_limits;
mod window_pushdown;

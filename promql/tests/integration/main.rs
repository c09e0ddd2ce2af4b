//! promql's integration tests, in one test binary: each former `tests/<name>.rs` is a module
//! here, so the crate, storage and their dependencies are compiled into and linked with one
//! executable instead of one per file. `cargo test -p promql --test integration <module>::` runs
//! one module's tests.
//!
//! The conformance runner, `tests/promqltest/`, stays a binary of its own: it has its own
//! `main` (`harness = false` in Cargo.toml) and prints a report instead of running `#[test]`s.
//! The corpus locator, `tests/corpus/`, is shared with it.

mod common;
#[path = "../corpus/mod.rs"]
mod corpus;

mod column_aggregation;
mod comparison_filter;
mod differential_prometheus;
mod engine;
mod fuzz_corpus;
mod name_blind;
mod or_chain;
mod out_of_order;
mod parallel;
mod parser_differential;
mod preselect;
mod pushdown;
mod robustness;
mod start_timestamps;
mod timings;

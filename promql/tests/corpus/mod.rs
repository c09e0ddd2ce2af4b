//! Where Prometheus' PromQL conformance corpus is, for the tests that read it.
//!
//! The corpus (Prometheus' `promql/promqltest/testdata`, its inventory and index) is not part of
//! this repository. It is looked for in `$STRATA_PROMQL_CORPUS` if set, else in
//! `../shared/promql` beside the repository. Without it a test that needs it prints what it
//! skipped and how to run it, and passes, so a fresh clone's `cargo test --workspace` passes;
//! under CI (`CI=true`) a missing corpus fails instead, so CI never passes without running it.

use std::path::PathBuf;

/// The environment variable naming the corpus directory.
const ENV: &str = "STRATA_PROMQL_CORPUS";

/// The corpus directory (holding `testdata/` and `eval_index.tsv`), or `None` after printing
/// that `what` was skipped. Panics under `CI=true` when the corpus is missing.
pub fn dir(what: &str) -> Option<PathBuf> {
    let dir = std::env::var_os(ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/promql"));
    if dir.join("testdata").is_dir() && dir.join("eval_index.tsv").is_file() {
        return Some(dir);
    }
    let missing = format!(
        "{what}: skipped: Prometheus' PromQL test corpus is not at {} (put it at ../shared/promql beside \
         the repository, or set {ENV}=<dir>)",
        dir.display()
    );
    assert!(std::env::var("CI").map_or(true, |v| v != "true"), "{missing}; CI=true requires it");
    eprintln!("{missing}");
    None
}

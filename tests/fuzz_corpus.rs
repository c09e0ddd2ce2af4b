//! Replays the query API fuzz target's named inputs (`tests/fuzz/regressions/query_api/`: seeds
//! and inputs that once failed, committed) through the target's own oracle
//! (`tests/fuzz/fuzz_targets/checks.rs`) in a plain `cargo test`, so they stay regression tests
//! without nightly or libFuzzer. With `STRATA_FUZZ_CORPUS=1` the local, git-ignored grown corpus
//! (`tests/fuzz/corpus/query_api/`, see docs/fuzzing.md) is replayed too.

#[path = "fuzz/fuzz_targets/checks.rs"]
mod checks;

use std::path::{Path, PathBuf};

fn files_of(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files
}

#[test]
fn query_api_corpus() {
    let fuzz = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz");
    let dir = fuzz.join("regressions/query_api");
    assert!(dir.is_dir(), "{} is missing", dir.display());
    let mut files = files_of(&dir);
    // A moved directory must not make the replay pass on nothing.
    assert!(!files.is_empty(), "no named inputs in {}", dir.display());
    let grown = fuzz.join("corpus/query_api");
    if std::env::var_os("STRATA_FUZZ_CORPUS").is_some_and(|v| v != "0") && grown.is_dir() {
        files.extend(files_of(&grown));
    }
    for file in files {
        checks::query_api(&std::fs::read(&file).unwrap());
    }
}

//! Replays the query API fuzz corpus (`tests/fuzz/corpus/query_api/`) through the fuzz target's own
//! oracle (`tests/fuzz/fuzz_targets/checks.rs`) in a plain `cargo test`, so every input the fuzzer
//! found interesting stays a regression test without nightly or libFuzzer.

#[path = "fuzz/fuzz_targets/checks.rs"]
mod checks;

use std::path::PathBuf;

#[test]
fn query_api_corpus() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/corpus/query_api");
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&dir).map(|d| d.map(|e| e.unwrap().path()).collect()).unwrap_or_default();
    files.sort();
    assert!(!files.is_empty(), "the query_api corpus is missing");
    for file in files {
        checks::query_api(&std::fs::read(&file).unwrap());
    }
}

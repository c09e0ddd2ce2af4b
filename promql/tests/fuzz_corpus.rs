//! Replays the PromQL fuzz corpora (`fuzz/corpus/<target>/`) through the fuzz targets' own
//! oracles (`fuzz/fuzz_targets/checks.rs`) in a plain `cargo test`, so every input the
//! fuzzers found interesting stays a regression test without nightly or libFuzzer.

#[path = "../fuzz/fuzz_targets/checks.rs"]
mod checks;

use std::path::PathBuf;

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target);
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&dir).map(|d| d.map(|e| e.unwrap().path()).collect()).unwrap_or_default();
    files.sort();
    let inputs: Vec<Vec<u8>> = files.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert!(!inputs.is_empty(), "the {target} corpus is missing");
    inputs
}

#[test]
fn parse_corpus() {
    for data in corpus("promql_parse") {
        checks::parse(&data);
    }
}

#[test]
fn eval_corpus() {
    for data in corpus("promql_eval") {
        checks::eval(&data);
    }
}

#[test]
fn regex_translate_corpus() {
    for data in corpus("regex_translate") {
        checks::regex_translate(&data);
    }
}

#[test]
fn pushdown_corpus() {
    for data in corpus("promql_pushdown") {
        checks::pushdown(&data);
    }
}

/// The push-down target's store is what its oracle needs: hourly aggregations take blocks
/// from statistics, and so do per-group extremes, and some blocks must
/// still be decoded (the blocks the out-of-order samples overlap).
#[test]
fn pushdown_store_uses_block_statistics() {
    checks::pushdown(b"\x01max_over_time(m[1h])");
    let stats = checks::pushdown_stats("max_over_time(m[1h])", 1);
    assert!(stats.blocks_from_stats > 50, "{stats:?}");
    assert!(stats.blocks_decoded > 0, "{stats:?}");
    let stats = checks::pushdown_stats("max by (h) (max_over_time(m[1h]))", 1);
    assert!(stats.blocks_from_stats > 50, "{stats:?}");
    let stats = checks::pushdown_stats("sum(rate(c_total[1h]))", 1);
    assert!(stats.blocks_from_stats > 10, "{stats:?}");
}

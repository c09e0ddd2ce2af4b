//! Replays the PromQL fuzz corpora (`fuzz/corpus/<target>/`) through the fuzz targets' own
//! oracles (`fuzz/fuzz_targets/checks.rs`) in a plain `cargo test`, so every input the
//! fuzzers found interesting stays a regression test without nightly or libFuzzer.

#[path = "../fuzz/fuzz_targets/checks.rs"]
mod checks;

use std::path::PathBuf;

use rayon::prelude::*;

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target);
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&dir).map(|d| d.map(|e| e.unwrap().path()).collect()).unwrap_or_default();
    files.sort();
    let inputs: Vec<(PathBuf, Vec<u8>)> = files
        .into_iter()
        .map(|p| {
            let data = std::fs::read(&p).unwrap();
            (p, data)
        })
        .collect();
    assert!(!inputs.is_empty(), "the {target} corpus is missing");
    inputs
}

/// Runs `check` on every input of `target`'s corpus on rayon's pool: the push-down corpus
/// alone takes minutes on one core in a debug build, and `cargo test` runs one test binary at
/// a time, so a single-threaded replay left the other cores idle. A failing input is named
/// before its panic goes on.
fn replay(target: &str, check: fn(&[u8])) {
    corpus(target).par_iter().for_each(|(path, data)| {
        if let Err(panic) = std::panic::catch_unwind(|| check(data)) {
            eprintln!("corpus input {} failed", path.display());
            std::panic::resume_unwind(panic);
        }
    });
}

#[test]
fn parse_corpus() {
    replay("promql_parse", checks::parse);
}

#[test]
fn eval_corpus() {
    replay("promql_eval", checks::eval);
}

#[test]
fn regex_translate_corpus() {
    replay("regex_translate", checks::regex_translate);
}

#[test]
fn pushdown_corpus() {
    replay("promql_pushdown", checks::pushdown);
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

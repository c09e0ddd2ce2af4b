//! Replays the PromQL fuzz targets' named inputs (`fuzz/regressions/<target>/`: seeds and inputs
//! that once failed, committed) through the targets' own oracles (`fuzz/fuzz_targets/checks.rs`)
//! in a plain `cargo test`, so they stay regression tests without nightly or libFuzzer. With
//! `STRATA_FUZZ_CORPUS=1` the local, git-ignored grown corpus (`fuzz/corpus/<target>/`, see
//! docs/fuzzing.md) is replayed too.

#[path = "../../fuzz/fuzz_targets/checks.rs"]
mod checks;

use std::path::{Path, PathBuf};

use rayon::prelude::*;

/// The inputs of `target`: every file of `fuzz/regressions/<target>/`, which must exist and
/// hold some (so a moved directory cannot make the replay pass on nothing), then, when
/// `STRATA_FUZZ_CORPUS` is set to anything but `0`, those of `fuzz/corpus/<target>/` if present.
fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let fuzz = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let dir = fuzz.join("regressions").join(target);
    assert!(dir.is_dir(), "{} is missing", dir.display());
    let mut files = files_of(&dir);
    assert!(!files.is_empty(), "no named inputs in {}", dir.display());
    if std::env::var_os("STRATA_FUZZ_CORPUS").is_some_and(|v| v != "0") {
        let dir = fuzz.join("corpus").join(target);
        if dir.is_dir() {
            files.extend(files_of(&dir));
        }
    }
    files
        .into_iter()
        .map(|p| {
            let data = std::fs::read(&p).unwrap();
            (p, data)
        })
        .collect()
}

fn files_of(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files
}

/// Runs `check` on every input of `target` on rayon's pool: a grown push-down corpus alone
/// takes minutes on one core in a debug build, and `cargo test` runs one test binary at
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

/// The hand-written parser seeds are what their names say: `seed_parse_error_*` is refused,
/// every other one parses with the features its mode byte switches on (and is refused without
/// them, when it needs any).
#[test]
fn parse_seeds_are_what_they_say() {
    use promql::parser::{self, ParseOptions};
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions/promql_parse");
    for path in files_of(&dir) {
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if !name.starts_with("seed_") {
            continue;
        }
        let data = std::fs::read(&path).unwrap();
        let (&mode, query) = data.split_first().unwrap();
        let query = std::str::from_utf8(query).unwrap();
        let opts = |mode: u8| ParseOptions {
            experimental_functions: mode & 1 != 0,
            duration_expressions: mode & 2 != 0,
            extended_range_selectors: mode & 4 != 0,
            binop_fill_modifiers: mode & 8 != 0,
            ..ParseOptions::default()
        };
        let parsed = parser::parse(query, &opts(mode));
        if name.starts_with("seed_parse_error_") {
            assert!(parsed.is_err(), "{name}: {query:?} parses");
        } else {
            assert!(parsed.is_ok(), "{name}: {}", parsed.err().unwrap().render(query));
            if mode != 0 {
                assert!(parser::parse(query, &opts(0)).is_err(), "{name} needs no feature");
            }
        }
    }
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

//! Replays the fuzz targets' named inputs (`fuzz/regressions/<target>/`: seeds and inputs that
//! once failed, committed) through the decoders in a plain `cargo test`, so they stay regression
//! tests without nightly or libFuzzer. With `STRATA_FUZZ_CORPUS=1` the local, git-ignored grown
//! corpus (`fuzz/corpus/<target>/`, see docs/fuzzing.md) is replayed too. Each file starts with
//! the fuzz targets' mode byte.

#[path = "../../fuzz/fuzz_targets/checks.rs"]
mod checks;

use std::path::PathBuf;

use remote::Limits;
use remote::line;
use remote::prw::{self, Version};
use remote::read;

/// The inputs of `target`: every file of `fuzz/regressions/<target>/`, which must exist and
/// hold some (so a moved directory cannot make the replay pass on nothing), then, when
/// `STRATA_FUZZ_CORPUS` is set to anything but `0`, those of `fuzz/corpus/<target>/` if present.
fn corpus(target: &str) -> Vec<Vec<u8>> {
    let fuzz = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut files = files(&fuzz.join("regressions").join(target));
    assert!(!files.is_empty(), "no named inputs in fuzz/regressions/{target}/");
    if std::env::var_os("STRATA_FUZZ_CORPUS").is_some_and(|v| v != "0") {
        let dir = fuzz.join("corpus").join(target);
        if dir.is_dir() {
            files.extend(files_of(&dir));
        }
    }
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

fn files(dir: &std::path::Path) -> Vec<PathBuf> {
    assert!(dir.is_dir(), "{} is missing", dir.display());
    files_of(dir)
}

fn files_of(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files
}

#[test]
fn line_corpus() {
    for data in corpus("line_parse") {
        checks::line_parse(&data);
    }
}

/// The hand-written line-protocol seeds parse as their names say: the good ones store every
/// field, the `seed_error_*` ones have bad lines, and the `seed_precision_*` ones land on the
/// same instant (2023-11-14T22:13:20Z, or the minute and hour before it).
#[test]
fn line_seeds_are_what_they_say() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions/line_parse");
    for path in files(&dir) {
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        let data = std::fs::read(&path).unwrap();
        let (mode, body) = data.split_first().unwrap();
        let p = line::parse(body, checks::line_precision(*mode), 0, &Limits::default());
        if name.starts_with("seed_error_") || name == "seed_many_bad_lines" {
            assert!(p.bad_lines > 0, "{name}: no bad line");
        } else {
            assert_eq!(p.bad_lines, 0, "{name}: {:?}", p.errors);
            assert!(p.fields > 0, "{name}");
        }
        if let Some(unit) = name.strip_prefix("seed_precision_") {
            let t = p.batch.series[0].1[0].t;
            let want = match unit {
                "m" => 28_333_333 * 60_000,
                "h" => 472_222 * 3_600_000,
                _ => 1_700_000_000_000,
            };
            assert_eq!(t, want, "{name}");
        }
    }
}

#[test]
fn prw_corpora() {
    for (target, version) in [("prw_v1_decode", Version::V1), ("prw_v2_decode", Version::V2)] {
        for data in corpus(target) {
            let Some((&mode, rest)) = data.split_first() else { continue };
            let result = if mode & 1 == 1 {
                prw::decode(version, rest, &Limits::default())
            } else {
                prw::decode_uncompressed(version, rest, &Limits::default())
            };
            if let Ok(d) = result {
                // Every float and every histogram (a stale one among the floats) is in the batch.
                assert_eq!((d.samples + d.histograms) as usize, d.batch.sample_count());
                // Our sender's encoding brings back the same floats and, by bits, histograms.
                let body = prw::encode(version, &d.batch, &d.metadata);
                let again = prw::decode(version, &body, &Limits::default()).unwrap();
                assert_eq!(again.batch.series, d.batch.series);
                assert_eq!(histogram_bits(&again.batch), histogram_bits(&d.batch));
            }
        }
    }
}

/// Every histogram's counts, sum and thresholds as bits (`f64`'s `==` hides -0.0 and NaN).
fn histogram_bits(batch: &storage::Batch) -> Vec<(i64, Vec<u64>)> {
    let mut out = Vec::new();
    for s in batch.histograms.iter().flat_map(|(_, s)| s) {
        let h = &s.h;
        let buckets = h.positive.iter().chain(&h.negative).map(|b| b.1);
        let floats = [h.zero_threshold, h.zero_count, h.count, h.sum].into_iter().chain(buckets);
        out.push((s.t, floats.chain(h.custom_values.iter().copied()).map(f64::to_bits).collect()));
    }
    out
}

#[test]
fn read_request_corpus() {
    for data in corpus("read_request_decode") {
        // Odd mode byte: the rest is the body as sent; even: the protobuf, compressed here.
        let Some((&mode, rest)) = data.split_first() else { continue };
        let body =
            if mode & 1 == 1 { rest.to_vec() } else { snap::raw::Encoder::new().compress_vec(rest).unwrap() };
        let Ok(request) = read::decode_request(&body, &Limits::default()) else { continue };
        let _ = read::negotiate(&request.accepted_response_types);
        for query in &request.queries {
            if let Ok(matchers) = read::matchers(&query.matchers) {
                assert_eq!(matchers.len(), query.matchers.len());
            }
        }
        let again = read::encode_request(&request).unwrap();
        assert_eq!(read::decode_request(&again, &Limits::default()).unwrap(), request);
    }
}

/// Found while writing the fuzz target's oracle: a pattern that closes the anchoring group
/// early (`a)|(b`) used to be accepted and matched unanchored.
#[test]
fn read_matchers_cannot_escape_their_anchors() {
    use read::proto::{LabelMatcher, MATCH_RE};
    let m = LabelMatcher { r#type: MATCH_RE, name: "job".into(), value: "a)|(b".into() };
    assert!(matches!(read::matchers(&[m]), Err(remote::Error::InvalidMatcher(_))));
}

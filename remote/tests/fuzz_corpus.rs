//! Replays the fuzz corpora (`fuzz/corpus/<target>/`) through the decoders in a plain
//! `cargo test`, so every input the fuzzers found interesting stays a regression test without
//! nightly or libFuzzer. Each file starts with the fuzz targets' mode byte.

use std::path::PathBuf;

use remote::Limits;
use remote::line::{self, Precision};
use remote::prw::{self, Version};
use remote::read;

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target);
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&dir).map(|d| d.map(|e| e.unwrap().path()).collect()).unwrap_or_default();
    files.sort();
    files.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

#[test]
fn line_corpus() {
    let inputs = corpus("line_parse");
    assert!(!inputs.is_empty(), "the line_parse corpus is missing");
    for data in inputs {
        // The mode byte picks precision and limits in the fuzz target; here only the body matters.
        let body = data.get(1..).unwrap_or_default();
        let p = line::parse(body, Precision::Ns, 0, &Limits::default());
        assert_eq!(p.fields as usize, p.batch.sample_count());
    }
}

#[test]
fn prw_corpora() {
    for (target, version) in [("prw_v1_decode", Version::V1), ("prw_v2_decode", Version::V2)] {
        let inputs = corpus(target);
        assert!(!inputs.is_empty(), "the {target} corpus is missing");
        for data in inputs {
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
    let inputs = corpus("read_request_decode");
    assert!(!inputs.is_empty(), "the read_request_decode corpus is missing");
    for data in inputs {
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

//! Shared checks for the remote-write fuzz targets.

use prost::Message;
use remote::prw::{self, Version, proto_v1 as v1, proto_v2 as v2};
use remote::{Error, Limits};

/// `(labels without empty values, timestamp, value bits)` of every float sample (a histogram
/// stale marker counts as the float stale marker it is stored as).
type Flat = Vec<(Vec<(String, String)>, i64, u64)>;

/// `(labels without empty values, timestamp, sum bits)` of every histogram sample.
type FlatHist = Vec<(Vec<(String, String)>, i64, u64)>;

fn pairs_of(labels: &storage::Labels) -> Vec<(String, String)> {
    labels.iter().map(|l| (l.name.to_string(), l.value.to_string())).collect()
}

fn flat_ours(d: &prw::Decoded) -> (Flat, FlatHist) {
    let mut out = Flat::new();
    for (labels, samples) in &d.batch.series {
        let l = pairs_of(labels);
        for s in samples {
            out.push((l.clone(), s.t, s.v.to_bits()));
        }
    }
    let mut hists = FlatHist::new();
    for (labels, samples) in &d.batch.histograms {
        let l = pairs_of(labels);
        for h in samples {
            hists.push((l.clone(), h.t, h.h.sum.to_bits()));
        }
    }
    (out, hists)
}

/// Every field of every histogram of `batch`, floats as bits.
#[allow(clippy::type_complexity)]
fn hist_bits(
    batch: &storage::Batch,
) -> Vec<(String, i64, String, i32, [u64; 4], Vec<(i32, u64)>, Vec<(i32, u64)>, Vec<u64>)> {
    let bits = |v: &[(i32, f64)]| v.iter().map(|&(i, c)| (i, c.to_bits())).collect::<Vec<_>>();
    let mut out = Vec::new();
    for (labels, samples) in &batch.histograms {
        for s in samples {
            let h = &s.h;
            out.push((
                labels.to_string(),
                s.t,
                format!("{:?}", h.counter_reset_hint),
                h.schema,
                [h.zero_threshold.to_bits(), h.zero_count.to_bits(), h.count.to_bits(), h.sum.to_bits()],
                bits(&h.positive),
                bits(&h.negative),
                h.custom_values.iter().map(|v| v.to_bits()).collect(),
            ));
        }
    }
    out
}

/// Splits a request's histograms (timestamp, sum) into stale markers, which join the floats,
/// and histograms.
fn push_prost_histograms(
    l: &[(String, String)],
    hists: impl Iterator<Item = (i64, f64)>,
    out: &mut Flat,
    out_h: &mut FlatHist,
) {
    for (t, sum) in hists {
        if sum.to_bits() == storage::STALE_NAN_BITS {
            out.push((l.to_vec(), t, sum.to_bits()));
        } else {
            out_h.push((l.to_vec(), t, sum.to_bits()));
        }
    }
}

fn sorted_pairs(pairs: impl Iterator<Item = (String, String)>) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = pairs.filter(|(_, v)| !v.is_empty()).collect();
    v.sort();
    v
}

/// The samples prost finds in the same bytes (v2 with references resolved), if it decodes.
fn flat_prost(version: Version, raw: &[u8]) -> Option<(Flat, FlatHist)> {
    let mut out = Flat::new();
    let mut out_h = FlatHist::new();
    match version {
        Version::V1 => {
            let req = v1::WriteRequest::decode(raw).ok()?;
            for ts in req.timeseries {
                let l = sorted_pairs(ts.labels.into_iter().map(|l| (l.name, l.value)));
                for s in ts.samples {
                    out.push((l.clone(), s.timestamp, s.value_bits));
                }
                push_prost_histograms(&l, ts.histograms.iter().map(|h| (h.timestamp, f64::from_bits(h.sum_bits))), &mut out, &mut out_h);
            }
        }
        Version::V2 => {
            let req = v2::Request::decode(raw).ok()?;
            for ts in req.timeseries {
                let mut pairs = Vec::new();
                for p in ts.labels_refs.chunks(2) {
                    let get = |i: usize| p.get(i).and_then(|&r| req.symbols.get(r as usize)).cloned();
                    pairs.push((get(0)?, get(1)?));
                }
                let l = sorted_pairs(pairs.into_iter());
                for s in ts.samples {
                    out.push((l.clone(), s.timestamp, s.value_bits));
                }
                push_prost_histograms(&l, ts.histograms.iter().map(|h| (h.timestamp, f64::from_bits(h.sum_bits))), &mut out, &mut out_h);
            }
        }
    }
    // Our batch keeps a series' floats (and histogram stale markers) apart from its
    // histograms, and may split a series in two (floats with start timestamps, then
    // histograms): compare as multisets.
    out.sort();
    out_h.sort();
    Some((out, out_h))
}

/// Decodes `data` (raw protobuf, or a snappy body if the first byte is odd) and checks:
/// only decoding errors come out; an accepted request is a well-formed batch that agrees with
/// prost on the same bytes and survives a round trip through our sender.
pub fn check(version: Version, data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    let limits = if mode & 0x80 != 0 {
        Limits {
            labels_per_series_max: 3,
            label_name_bytes_max: 9,
            label_value_bytes_max: 8,
            ..Limits::default()
        }
    } else {
        Limits { decoded_bytes_max: 1 << 20, ..Limits::default() }
    };
    let (result, raw) = if mode & 1 == 1 {
        // The harness decompresses too (for the differential check), within the same bound.
        let raw = snap::raw::decompress_len(rest)
            .ok()
            .filter(|&n| n <= limits.decoded_bytes_max)
            .and_then(|_| snap::raw::Decoder::new().decompress_vec(rest).ok());
        (prw::decode(version, rest, &limits), raw)
    } else {
        (prw::decode_uncompressed(version, rest, &limits), Some(rest.to_vec()))
    };
    let d = match result {
        Ok(d) => d,
        Err(
            Error::Snappy(_)
            | Error::Protobuf(_)
            | Error::InvalidLabels { .. }
            | Error::InvalidHistogram { .. }
            | Error::LimitExceeded { .. },
        ) => {
            return;
        }
        Err(e) => panic!("unexpected error kind: {e:?}"),
    };
    assert_eq!((d.samples + d.histograms) as usize, d.batch.sample_count());
    for (labels, samples) in &d.batch.series {
        assert!(!samples.is_empty());
        assert!(labels.metric_name().is_some_and(|n| !n.is_empty()));
        let names: Vec<&str> = labels.iter().map(|l| l.name.as_ref()).collect();
        assert!(names.windows(2).all(|w| w[0] < w[1]), "{labels}");
        assert!(labels.iter().all(|l| !l.name.is_empty() && !l.value.is_empty()));
        assert!(labels.len() <= limits.labels_per_series_max);
    }
    // Differential: where prost can decode the same bytes, it sees the same samples.
    if let Some(raw) = raw
        && let Some(theirs) = flat_prost(version, &raw)
    {
        let (mut ours, mut ours_h) = flat_ours(&d);
        ours.sort();
        ours_h.sort();
        assert_eq!((ours, ours_h), theirs);
    }
    // Round trip through our sender.
    let body = prw::encode(version, &d.batch, &d.metadata);
    let again = prw::decode(version, &body, &Limits::default()).expect("our own encoding decodes");
    assert_eq!(again.batch.series, d.batch.series);
    // By bits: a histogram's NaN sum (observed NaNs) must keep its payload, and NaN != NaN.
    assert_eq!(hist_bits(&again.batch), hist_bits(&d.batch));
    if version == Version::V1 {
        assert_eq!(again.metadata, d.metadata);
    }
}

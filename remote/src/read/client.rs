//! A query node's remote reads from writers (`--query.writer`): the request for one selection
//! and the series of the `SAMPLES` answer as storage types, raw samples and native histograms.

use storage::{HistogramSample, Labels, MatchOp, Matcher, Sample};

use super::proto::{self, LabelMatcher, Query, ReadRequest};
use crate::Result;

/// The request header in which a query node tells a writer which of the writer's bucket
/// records it holds, so that the writer answers only what that record does not list
/// (`storage::Db::snapshot_unuploaded`).
pub const RECORDS_HEADER: &str = "strata-bucket-records";

/// [`RECORDS_HEADER`]'s value: `<writer nonce, 16 hex digits>:<record number>` per followed
/// prefix, comma-separated.
pub fn records_header(records: &[(u64, u64)]) -> String {
    records.iter().map(|(w, seq)| format!("{w:016x}:{seq}")).collect::<Vec<_>>().join(",")
}

/// Reads [`records_header`]'s value; entries that do not parse are left out (the writer then
/// answers more, never less).
pub fn parse_records_header(value: &str) -> Vec<(u64, u64)> {
    value
        .split(',')
        .filter_map(|e| {
            let (w, seq) = e.trim().split_once(':')?;
            Some((u64::from_str_radix(w, 16).ok()?, seq.parse().ok()?))
        })
        .collect()
}

/// One series of an answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadSeries {
    /// Its labels.
    pub labels: Labels,
    /// Float samples and stale markers, ascending by time.
    pub samples: Vec<Sample>,
    /// Native histogram samples, ascending by time.
    pub histograms: Vec<HistogramSample>,
}

/// The body of a `SAMPLES` request for the series `matchers` select in `[mint, maxt]`.
pub fn request(matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<u8>> {
    let matchers = matchers
        .iter()
        .map(|m| LabelMatcher {
            r#type: match m.op {
                MatchOp::Equal => proto::MATCH_EQ,
                MatchOp::NotEqual => proto::MATCH_NEQ,
                MatchOp::Regex => proto::MATCH_RE,
                MatchOp::NotRegex => proto::MATCH_NRE,
            },
            name: m.name.clone(),
            value: m.value.clone(),
        })
        .collect();
    super::encode_request(&ReadRequest {
        queries: vec![Query { start_timestamp_ms: mint, end_timestamp_ms: maxt, matchers, hints: None }],
        accepted_response_types: vec![proto::RESPONSE_SAMPLES],
    })
}

/// The series of a `SAMPLES` answer to [`request`].
pub fn series(body: &[u8]) -> Result<Vec<ReadSeries>> {
    let response = super::decode_samples_response(body)?;
    let mut out = Vec::new();
    for (q, result) in response.results.into_iter().enumerate() {
        for (i, ts) in result.timeseries.into_iter().enumerate() {
            let labels =
                Labels::from_pairs(&ts.labels.iter().map(|l| (&l.name, &l.value)).collect::<Vec<_>>());
            let mut samples: Vec<Sample> =
                ts.samples.iter().map(|s| Sample::new(s.timestamp, f64::from_bits(s.value_bits))).collect();
            let mut histograms = Vec::new();
            for (k, m) in ts.histograms.iter().enumerate() {
                let at = || format!("results[{q}].timeseries[{i}].histograms[{k}]");
                match crate::prw::histogram_sample(m, at)? {
                    (t, Some(h)) => histograms.push(HistogramSample { t, h }),
                    // A histogram series' stale marker is a float one in storage.
                    (t, None) => samples.push(Sample::new(t, f64::from_bits(storage::STALE_NAN_BITS))),
                }
            }
            samples.sort_by_key(|s| s.t);
            out.push(ReadSeries { labels, samples, histograms });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_round_trips() {
        let labels = Labels::from_pairs(&[("__name__", "up"), ("job", "a")]);
        let samples = vec![Sample::new(1, 1.5), Sample::new(2, f64::from_bits(storage::STALE_NAN_BITS))];
        let response = proto::ReadResponse {
            results: vec![proto::QueryResult {
                timeseries: vec![super::super::time_series(&labels, &samples)],
            }],
        };
        let body = super::super::encode_samples_response(&response).unwrap();
        let got = series(&body).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].labels, labels);
        assert_eq!(got[0].samples[1].v.to_bits(), storage::STALE_NAN_BITS);
        let m = [Matcher::new(MatchOp::Regex, "job", "a|b").unwrap()];
        let req =
            super::super::decode_request(&request(&m, 5, 9).unwrap(), &crate::Limits::default()).unwrap();
        let q = &req.queries[0];
        assert_eq!((q.start_timestamp_ms, q.end_timestamp_ms, q.matchers[0].value.as_str()), (5, 9, "a|b"));
        let records = [(u64::MAX, 7), (0xabc, 1)];
        assert_eq!(parse_records_header(&records_header(&records)), records);
        assert_eq!(parse_records_header("zz:1, 00000000000000ff:2,x"), [(255, 2)]);
    }
}

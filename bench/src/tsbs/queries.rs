//! The TSBS devops query types as PromQL, with random hosts and windows from a fixed seed.
//!
//! The types TSBS writes PromQL for (`cmd/tsbs_generate_queries/databases/victoriametrics/
//! devops.go`) keep TSBS's selectors, functions, windows and steps: single-groupby is the
//! per-minute `max(max_over_time(SEL[1m]))` at a 60 s step over 1 h or 12 h, cpu-max-all the
//! hourly `max(max_over_time(SEL[1h]))` of all ten metrics over 8 h, double-groupby the hourly
//! `avg(avg_over_time(SEL[1h])) by (hostname)` over 24 h. TSBS's own strings (one selector for
//! several metrics, grouped `by (__name__)`) only work on VictoriaMetrics, which keeps metric
//! names through `*_over_time`: Prometheus drops them, so several metrics of one host become
//! series with the same labels, an error ("vector cannot contain metrics with the same
//! labelset"). So a query over several metrics is written as one aggregate per metric, labelled
//! `metric="usage_x"` with `label_replace` and joined with `or`: the per-metric answer TSBS asks
//! for, in a form every engine evaluates alike, reading the same series. TSBS has no PromQL for
//! the other three types; ours keep their meaning:
//!
//! * high-cpu-1 / high-cpu-all: `cpu_usage_user{hostname="h"} > 90` (or every host) over 24 h
//!   at the data interval: every reading above 90.
//! * lastpoint: the instant query `{__name__=~"cpu_.*"}` at the end of the data: each series'
//!   latest value.
//! * groupby-orderby-limit: `max(max_over_time(cpu_usage_user[1m]))` over the 5 minutes before a
//!   random time at 60 s: the last five per-minute maxima.
//!
//! Windows start at a random multiple of the interval after the data's start, plus half an
//! interval: no sample lies on a window or range boundary, where systems differ (Prometheus 2.x
//! closes range windows on the left, VictoriaMetrics and Prometheus 3 do not), so every correct
//! engine gives the same answer. A window longer than the dataset is cut to the dataset.

mod cardinality;

pub use cardinality::{CARDINALITY, CARDINALITY_TYPES};

use super::hosts::{STREAM_QUERIES, stream};
use super::{Dataset, FIELDS};
use crate::datagen::Rng;

const HOUR_MS: i64 = 3_600_000;

/// What one query type asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// single-groupby-M-H-T.
    SingleGroupby { metrics: usize, hosts: usize, hours: i64 },
    /// cpu-max-all-H.
    MaxAll { hosts: usize },
    /// double-groupby-M.
    DoubleGroupby { metrics: usize },
    /// high-cpu-H (0 = all hosts).
    HighCpu { hosts: usize },
    /// lastpoint.
    Lastpoint,
    /// groupby-orderby-limit.
    GroupbyOrderbyLimit,
}

/// The query types, by TSBS's names, in TSBS's order.
pub const TYPES: [&str; 15] = [
    "single-groupby-1-1-1",
    "single-groupby-1-1-12",
    "single-groupby-1-8-1",
    "single-groupby-5-1-1",
    "single-groupby-5-1-12",
    "single-groupby-5-8-1",
    "cpu-max-all-1",
    "cpu-max-all-8",
    "double-groupby-1",
    "double-groupby-5",
    "double-groupby-all",
    "high-cpu-1",
    "high-cpu-all",
    "lastpoint",
    "groupby-orderby-limit",
];

fn shape(name: &str) -> Option<Shape> {
    let num = |s: &str| s.parse::<usize>().ok();
    if let Some(rest) = name.strip_prefix("single-groupby-") {
        let p: Vec<usize> = rest.split('-').filter_map(num).collect();
        return match p[..] {
            [metrics, hosts, hours] => Some(Shape::SingleGroupby { metrics, hosts, hours: hours as i64 }),
            _ => None,
        };
    }
    if let Some(rest) = name.strip_prefix("cpu-max-all-") {
        return num(rest).map(|hosts| Shape::MaxAll { hosts });
    }
    if let Some(rest) = name.strip_prefix("double-groupby-") {
        return if rest == "all" { Some(FIELDS.len()) } else { num(rest) }
            .map(|metrics| Shape::DoubleGroupby { metrics });
    }
    if let Some(rest) = name.strip_prefix("high-cpu-") {
        return if rest == "all" { Some(0) } else { num(rest) }.map(|hosts| Shape::HighCpu { hosts });
    }
    match name {
        "lastpoint" => Some(Shape::Lastpoint),
        "groupby-orderby-limit" => Some(Shape::GroupbyOrderbyLimit),
        _ => None,
    }
}

/// Which API a query goes to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Api {
    /// `/api/v1/query_range`; times in milliseconds.
    Range {
        /// First evaluation time.
        start_ms: i64,
        /// Last evaluation time.
        end_ms: i64,
        /// Step between evaluations.
        step_ms: i64,
    },
    /// `/api/v1/query` at one time (milliseconds).
    Instant {
        /// Evaluation time.
        time_ms: i64,
    },
    /// `/api/v1/series`: the label sets of the series the query's selector (sent as `match[]`)
    /// selects that have data in `[start_ms, end_ms]`.
    Series {
        /// Start of the time range.
        start_ms: i64,
        /// End of the time range.
        end_ms: i64,
    },
    /// `/api/v1/labels`: the label names of the series with data in `[start_ms, end_ms]` (of
    /// those the query's selector selects, if it has one).
    LabelNames {
        /// Start of the time range.
        start_ms: i64,
        /// End of the time range.
        end_ms: i64,
    },
    /// `/api/v1/label/<label>/values`: the values of one label over the series with data in
    /// `[start_ms, end_ms]` (of those the query's selector selects, if it has one).
    LabelValues {
        /// The label.
        label: &'static str,
        /// Start of the time range.
        start_ms: i64,
        /// End of the time range.
        end_ms: i64,
    },
}

impl Api {
    /// Whether the answer is metadata (label sets, names or values) rather than a PromQL result.
    pub fn is_metadata(&self) -> bool {
        !matches!(self, Api::Range { .. } | Api::Instant { .. })
    }
}

/// One query to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// The query type (one of [`TYPES`] or [`CARDINALITY_TYPES`]).
    pub kind: &'static str,
    /// The PromQL expression; for the metadata APIs the series selector sent as `match[]`
    /// (empty: none).
    pub promql: String,
    /// Where and when it is evaluated.
    pub api: Api,
}

impl Query {
    /// The query's evaluation time (a range query's end).
    pub fn time_ms(&self) -> i64 {
        match self.api {
            Api::Range { end_ms, .. }
            | Api::Series { end_ms, .. }
            | Api::LabelNames { end_ms, .. }
            | Api::LabelValues { end_ms, .. } => end_ms,
            Api::Instant { time_ms } => time_ms,
        }
    }

    /// The request path and query string, e.g. `/api/v1/query_range?query=...&start=...`.
    /// The metadata APIs always get `start` and `end`: without them VictoriaMetrics answers for
    /// the last day only, and the data may lie further back.
    pub fn path(&self) -> String {
        let secs = |ms: i64| format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000));
        let q = encode_component(&self.promql);
        let range = |start_ms: i64, end_ms: i64| format!("start={}&end={}", secs(start_ms), secs(end_ms));
        // `match[]` with its brackets percent-encoded: they are not allowed in a query string
        // (RFC 3986), and every server decodes parameter names.
        let matcher = if self.promql.is_empty() { String::new() } else { format!("&match%5B%5D={q}") };
        match self.api {
            Api::Range { start_ms, end_ms, step_ms } => format!(
                "/api/v1/query_range?query={q}&start={}&end={}&step={}",
                secs(start_ms),
                secs(end_ms),
                secs(step_ms)
            ),
            Api::Instant { time_ms } => format!("/api/v1/query?query={q}&time={}", secs(time_ms)),
            Api::Series { start_ms, end_ms } => {
                format!("/api/v1/series?{}{matcher}", range(start_ms, end_ms))
            }
            Api::LabelNames { start_ms, end_ms } => {
                format!("/api/v1/labels?{}{matcher}", range(start_ms, end_ms))
            }
            Api::LabelValues { label, start_ms, end_ms } => format!(
                "/api/v1/label/{}/values?{}{matcher}",
                encode_component(label),
                range(start_ms, end_ms)
            ),
        }
    }
}

/// Percent-encodes everything but unreserved characters (RFC 3986).
fn encode_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `n` distinct random hosts of `scale` (TSBS: `rand.Perm(scale)[:n]`), as a selector matcher.
fn host_matcher(rng: &mut Rng, scale: usize, n: usize) -> String {
    let mut ids: Vec<usize> = (0..scale).collect();
    let n = n.min(scale);
    for i in 0..n {
        let j = rng.range(i as i64, scale as i64 - 1) as usize;
        ids.swap(i, j);
    }
    let names: Vec<String> = ids[..n].iter().map(|id| format!("host_{id}")).collect();
    if names.len() == 1 {
        format!("hostname=\"{}\"", names[0])
    } else {
        format!("hostname=~\"{}\"", names.join("|"))
    }
}

/// `template` (with `SEL` standing for a one-metric selector) for each of the first `metrics`
/// metrics: the expression itself for one metric, else one term per metric labelled
/// `metric="usage_x"` and joined with `or`.
fn per_metric(metrics: usize, hosts: Option<&str>, template: &str) -> String {
    let metrics = &FIELDS[..metrics.clamp(1, FIELDS.len())];
    let selector = |m: &str| match hosts {
        Some(h) => format!("cpu_{m}{{{h}}}"),
        None => format!("cpu_{m}"),
    };
    if let [one] = metrics {
        return template.replace("SEL", &selector(one));
    }
    let terms: Vec<String> = metrics
        .iter()
        .map(|m| {
            format!(
                "label_replace({}, \"metric\", \"{m}\", \"\", \"\")",
                template.replace("SEL", &selector(m))
            )
        })
        .collect();
    terms.join(" or ")
}

/// A random window of `len_ms` inside the data (cut to the data if longer): `(start, end)`,
/// both half an interval off the sample grid.
fn window(rng: &mut Rng, ds: &Dataset, len_ms: i64) -> (i64, i64) {
    let span = ds.end_ms() - ds.start_ms;
    let len = len_ms.min(span - ds.interval_ms).max(ds.interval_ms);
    let slots = ((span - len) / ds.interval_ms).max(1);
    let start = ds.start_ms + rng.range(0, slots - 1) * ds.interval_ms + ds.interval_ms / 2;
    (start, start + len)
}

/// The query types `--query-types` names, in the order given, each once: every one of [`TYPES`]
/// when none is named; [`CARDINALITY`] stands for every one of [`CARDINALITY_TYPES`]. Unknown
/// names are an error.
pub fn resolve_types(names: &[String]) -> Result<Vec<&'static str>, String> {
    if names.is_empty() {
        return Ok(TYPES.to_vec());
    }
    let mut out: Vec<&'static str> = Vec::new();
    for name in names {
        let kinds: Vec<&'static str> = if name == CARDINALITY {
            CARDINALITY_TYPES.to_vec()
        } else {
            let known = TYPES.iter().chain(&CARDINALITY_TYPES).copied().find(|t| t == name);
            vec![known.ok_or_else(|| format!("unknown query type {name}"))?]
        };
        for kind in kinds {
            if !out.contains(&kind) {
                out.push(kind);
            }
        }
    }
    Ok(out)
}

/// `per_type` queries of each type in `types` (names from [`TYPES`] and [`CARDINALITY_TYPES`])
/// for `dataset`, the same for the same dataset seed. Unknown names are an error.
pub fn generate(dataset: &Dataset, types: &[&str], per_type: usize) -> Result<Vec<Query>, String> {
    let mut out = Vec::new();
    for (i, name) in types.iter().enumerate() {
        let unknown = || format!("unknown query type {name}");
        let mut rng = stream(dataset.seed, i as u64, STREAM_QUERIES);
        if let Some(kind) = CARDINALITY_TYPES.iter().copied().find(|t| t == name) {
            for _ in 0..per_type {
                out.push(cardinality::one(&mut rng, dataset, kind).ok_or_else(unknown)?);
            }
            continue;
        }
        let kind = TYPES.iter().copied().find(|t| t == name).ok_or_else(unknown)?;
        let shape = shape(kind).ok_or_else(unknown)?;
        for _ in 0..per_type {
            out.push(one(&mut rng, dataset, kind, shape));
        }
    }
    Ok(out)
}

fn one(rng: &mut Rng, ds: &Dataset, kind: &'static str, shape: Shape) -> Query {
    let hosts = |rng: &mut Rng, n: usize| host_matcher(rng, ds.hosts, n);
    let range = |(start_ms, end_ms): (i64, i64), step_ms: i64| Api::Range { start_ms, end_ms, step_ms };
    let (promql, api) = match shape {
        Shape::SingleGroupby { metrics, hosts: n, hours } => {
            let h = hosts(rng, n);
            let q = per_metric(metrics, Some(&h), "max(max_over_time(SEL[1m]))");
            (q, range(window(rng, ds, hours * HOUR_MS), 60_000))
        }
        Shape::MaxAll { hosts: n } => {
            let h = hosts(rng, n);
            let q = per_metric(FIELDS.len(), Some(&h), "max(max_over_time(SEL[1h]))");
            (q, range(window(rng, ds, 8 * HOUR_MS), HOUR_MS))
        }
        Shape::DoubleGroupby { metrics } => {
            let q = per_metric(metrics, None, "avg by (hostname) (avg_over_time(SEL[1h]))");
            (q, range(window(rng, ds, 24 * HOUR_MS), HOUR_MS))
        }
        Shape::HighCpu { hosts: n } => {
            let h = (n > 0).then(|| hosts(rng, n));
            (per_metric(1, h.as_deref(), "SEL > 90"), range(window(rng, ds, 24 * HOUR_MS), ds.interval_ms))
        }
        Shape::Lastpoint => {
            ("{__name__=~\"cpu_.*\"}".to_owned(), Api::Instant { time_ms: ds.last_ms() + ds.interval_ms / 2 })
        }
        Shape::GroupbyOrderbyLimit => {
            let (_, end) = window(rng, ds, 5 * 60_000);
            ("max(max_over_time(cpu_usage_user[1m]))".to_owned(), range((end - 4 * 60_000, end), 60_000))
        }
    };
    Query { kind, promql, api }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tsbs::ValueModel;

    fn ds() -> Dataset {
        Dataset {
            hosts: 100,
            start_ms: 1_700_000_000_000,
            interval_ms: 10_000,
            epochs: 8640,
            model: ValueModel::Tsbs,
            seed: 3,
        }
    }

    #[test]
    fn every_type_generates_with_tsbs_strings() {
        let qs = generate(&ds(), &TYPES, 2).unwrap();
        assert_eq!(qs.len(), 30);
        let first = |k: &str| qs.iter().find(|q| q.kind == k).unwrap().clone();
        let q = first("single-groupby-5-8-1");
        let terms: Vec<&str> = q.promql.split(" or ").collect();
        assert_eq!(terms.len(), 5);
        assert!(terms[0].starts_with("label_replace(max(max_over_time(cpu_usage_user{hostname=~\"host_"));
        assert!(terms[4].starts_with("label_replace(max(max_over_time(cpu_usage_iowait{hostname=~\"host_"));
        assert!(terms[4].ends_with("[1m])), \"metric\", \"usage_iowait\", \"\", \"\")"));
        assert_eq!(terms[0].matches("host_").count(), 8);
        let hosts_of = |t: &str| t.split('{').nth(1).unwrap().split('}').next().unwrap().to_owned();
        assert!(terms.iter().all(|t| hosts_of(t) == hosts_of(terms[0])), "every metric over the same hosts");
        let Api::Range { start_ms, end_ms, step_ms } = q.api else { panic!("range") };
        assert_eq!((end_ms - start_ms, step_ms), (HOUR_MS, 60_000));
        assert_eq!((start_ms - ds().start_ms) % 10_000, 5_000, "off the sample grid");
        let one = first("single-groupby-1-1-12").promql;
        assert!(
            one.starts_with("max(max_over_time(cpu_usage_user{hostname=\"host_")
                && one.ends_with("\"}[1m]))"),
            "{one}"
        );
        assert_eq!(first("cpu-max-all-8").promql.split(" or ").count(), 10);
        let all = first("double-groupby-all").promql;
        assert_eq!(all.split(" or ").count(), 10);
        assert!(all.starts_with(
            "label_replace(avg by (hostname) (avg_over_time(cpu_usage_user[1h])), \"metric\", \"usage_user\", \"\", \"\") or "
        ));
        assert_eq!(first("double-groupby-1").promql, "avg by (hostname) (avg_over_time(cpu_usage_user[1h]))");
        assert_eq!(first("high-cpu-all").promql, "cpu_usage_user > 90");
        assert_eq!(first("lastpoint").api, Api::Instant { time_ms: ds().last_ms() + 5_000 });
        let Api::Range { start_ms, end_ms, .. } = first("groupby-orderby-limit").api else { panic!("range") };
        assert_eq!(end_ms - start_ms, 4 * 60_000);
    }

    #[test]
    fn windows_stay_inside_the_data_and_are_cut_to_short_datasets() {
        let short = Dataset { epochs: 360, ..ds() };
        for q in generate(&short, &TYPES, 20).unwrap() {
            if let Api::Range { start_ms, end_ms, .. } = q.api {
                assert!(start_ms > short.start_ms && end_ms < short.end_ms(), "{q:?}");
            }
        }
    }

    #[test]
    fn same_seed_same_queries() {
        let a = generate(&ds(), &TYPES, 5).unwrap();
        assert_eq!(a, generate(&ds(), &TYPES, 5).unwrap());
        assert_ne!(a, generate(&Dataset { seed: 4, ..ds() }, &TYPES, 5).unwrap());
        assert!(generate(&ds(), &["nope"], 1).is_err());
    }

    #[test]
    fn paths_are_percent_encoded() {
        let q = Query {
            kind: "lastpoint",
            promql: "{a=~\"x|y\"} > 9".into(),
            api: Api::Instant { time_ms: 1_500 },
        };
        assert_eq!(q.path(), "/api/v1/query?query=%7Ba%3D~%22x%7Cy%22%7D%20%3E%209&time=1.500");
    }

    #[test]
    fn metadata_paths_carry_their_range_and_an_optional_selector() {
        let q = |promql: &str, api| Query { kind: "label-values", promql: promql.into(), api };
        let (start_ms, end_ms) = (1_000, 2_500);
        let values = Api::LabelValues { label: "hostname", start_ms, end_ms };
        assert_eq!(q("", values).path(), "/api/v1/label/hostname/values?start=1.000&end=2.500");
        assert_eq!(
            q("up", values).path(),
            "/api/v1/label/hostname/values?start=1.000&end=2.500&match%5B%5D=up"
        );
        assert_eq!(
            q("", Api::LabelNames { start_ms, end_ms }).path(),
            "/api/v1/labels?start=1.000&end=2.500"
        );
        let series = q("{hostname=\"host_7\"}", Api::Series { start_ms, end_ms });
        assert_eq!(
            series.path(),
            "/api/v1/series?start=1.000&end=2.500&match%5B%5D=%7Bhostname%3D%22host_7%22%7D"
        );
        assert_eq!(series.time_ms(), end_ms);
        assert!(series.api.is_metadata() && !Api::Instant { time_ms: 0 }.is_metadata());
    }
}

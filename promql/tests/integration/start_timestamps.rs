//! Start timestamps through the public API: the engine option that switches them on, a querier
//! that has none, `start_timestamp()`, subqueries, and the overlap warning. The exact
//! `rate`/`increase`/`irate`/`resets` semantics are checked by Prometheus' own
//! `start_timestamps.test` in the conformance suite.

use promql::{Engine, EngineOptions, Value};
use storage::mem::MemStore;
use storage::{Labels, Matcher, Querier, Sample, SeriesRef};

const MIN: i64 = 60_000;

fn engine(use_start_timestamps: bool) -> Engine {
    Engine::new(EngineOptions {
        use_start_timestamps,
        experimental_functions: true,
        ..EngineOptions::default()
    })
}

/// `delta_total`: a delta counter exported as cumulative samples, 60 per minute from 1m to 10m,
/// each sample's start timestamp the previous sample's time. Values alone show no increase.
/// `c_total{job="x"}`: three samples, the second without a start timestamp.
fn data() -> MemStore {
    let mut s = MemStore::new();
    let samples: Vec<Sample> = (1..=10).map(|i| Sample::new(i * MIN, 60.0)).collect();
    let sts: Vec<i64> = samples.iter().map(|x| x.t - MIN).collect();
    s.append_with_start_timestamps(&Labels::from_pairs(&[("__name__", "delta_total")]), &samples, &sts);
    let c = [Sample::new(10_000, 1.0), Sample::new(20_000, 2.0), Sample::new(30_000, 3.0)];
    s.append_with_start_timestamps(
        &Labels::from_pairs(&[("__name__", "c_total"), ("job", "x")]),
        &c,
        &[5_000, 0, 25_500],
    );
    s
}

/// The same data seen through a querier that keeps no start timestamps (the trait's default).
struct WithoutStartTimestamps(MemStore);

impl Querier for WithoutStartTimestamps {
    fn select(&self, m: &[Matcher], mint: i64, maxt: i64) -> storage::Result<Vec<SeriesRef>> {
        self.0.select(m, mint, maxt)
    }
    fn samples(&self, r: &SeriesRef, mint: i64, maxt: i64, out: &mut Vec<Sample>) -> storage::Result<()> {
        self.0.samples(r, mint, maxt, out)
    }
    fn label_names(&self, m: &[Matcher], mint: i64, maxt: i64) -> storage::Result<Vec<String>> {
        self.0.label_names(m, mint, maxt)
    }
    fn label_values(&self, n: &str, m: &[Matcher], mint: i64, maxt: i64) -> storage::Result<Vec<String>> {
        self.0.label_values(n, m, mint, maxt)
    }
}

fn single(v: &Value) -> Option<f64> {
    match v {
        Value::Vector(s) if s.len() == 1 => Some(s[0].v),
        Value::Vector(s) if s.is_empty() => None,
        other => panic!("expected at most one sample, got {other:?}"),
    }
}

/// Points of a one-series matrix as `(seconds, value)`, with the series' labels.
fn matrix(v: &Value) -> Vec<(String, Vec<(i64, f64)>)> {
    let Value::Matrix(m) = v else { panic!("expected a matrix, got {v:?}") };
    m.iter().map(|s| (s.labels.to_string(), s.points.iter().map(|p| (p.t / 1000, p.v)).collect())).collect()
}

#[test]
fn rate_functions_use_start_timestamps_only_when_switched_on_and_stored() {
    let s = data();
    let at = 10 * MIN;
    // Every sample restarts the counter: 4 resets inside (5m, 10m], extrapolated to 5 minutes.
    let on = engine(true).instant(&s, "increase(delta_total[5m])", at).unwrap();
    assert_eq!(single(&on.value), Some(300.0));
    let irate = engine(true).instant(&s, "irate(delta_total[5m])", at).unwrap();
    assert_eq!(single(&irate.value), Some(1.0));
    let resets = engine(true).instant(&s, "resets(delta_total[5m])", at).unwrap();
    assert_eq!(single(&resets.value), Some(4.0));
    // Off (Prometheus' default), or a storage without start timestamps: values only.
    for (name, r) in [
        ("off", engine(false).instant(&s, "increase(delta_total[5m])", at).unwrap()),
        (
            "not stored",
            engine(true).instant(&WithoutStartTimestamps(data()), "increase(delta_total[5m])", at).unwrap(),
        ),
    ] {
        assert_eq!(single(&r.value), Some(0.0), "{name}");
    }
    // `delta` treats the series as a gauge and ignores them.
    let delta = engine(true).instant(&s, "delta(delta_total[5m])", at).unwrap();
    assert_eq!(single(&delta.value), Some(0.0));
}

#[test]
fn subqueries_cut_start_timestamps() {
    let r = engine(true).instant(&data(), "increase(delta_total[5m:1m])", 10 * MIN).unwrap();
    assert_eq!(single(&r.value), Some(0.0));
}

#[test]
fn start_timestamp_returns_the_picked_sample_s_start() {
    let s = data();
    let r = engine(true).range(&s, "start_timestamp(c_total)", 10_000, 40_000, 10_000).unwrap();
    // Unknown start is 0; at 40s the look-back still picks the 30s sample; the name is dropped.
    assert_eq!(
        matrix(&r.value),
        vec![(r#"{job="x"}"#.to_string(), vec![(10, 5.0), (20, 0.0), (30, 25.5), (40, 25.5)])]
    );
    let paren = engine(true).instant(&s, "start_timestamp((c_total))", 10_000).unwrap();
    assert_eq!(single(&paren.value), Some(5.0));
    // Only a selector's samples have start timestamps, and only when they are switched on.
    for (use_st, q) in [(true, "start_timestamp(c_total * 1)"), (false, "start_timestamp(c_total)")] {
        let r = engine(use_st).instant(&s, q, 10_000).unwrap();
        assert_eq!(single(&r.value), None, "{q} with start timestamps {use_st}");
    }
}

#[test]
fn overlapping_start_timestamps_warn() {
    let mut s = MemStore::new();
    let samples = [Sample::new(2 * MIN, 60.0), Sample::new(3 * MIN, 120.0), Sample::new(4 * MIN, 180.0)];
    // The 3m sample claims to count since 1m, although the 2m sample was already counting.
    s.append_with_start_timestamps(
        &Labels::from_pairs(&[("__name__", "x_total")]),
        &samples,
        &[0, MIN, 2 * MIN],
    );
    let r = engine(true).instant(&s, "rate(x_total[3m])", 4 * MIN).unwrap();
    assert_eq!(
        r.warnings,
        vec![
            "PromQL warning: sample has start time that overlaps with previous sample timestamp for metric \
             \"x_total\" (1:6)"
                .to_string()
        ]
    );
    assert!(engine(false).instant(&s, "rate(x_total[3m])", 4 * MIN).unwrap().warnings.is_empty());
}

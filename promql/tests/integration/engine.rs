//! Engine behaviour through the public API, on an in-memory store: vector matching, limits,
//! errors and their types, annotations, range queries.

use std::time::Duration;

use promql::{Engine, EngineOptions, Error, Value};
use storage::mem::MemStore;
use storage::{Labels, Sample};

/// A series given as label pairs and `(ms, value)` samples.
type SeriesSpec<'a> = (&'a [(&'a str, &'a str)], &'a [(i64, f64)]);

fn store(series: &[SeriesSpec<'_>]) -> MemStore {
    let mut s = MemStore::new();
    for (labels, samples) in series {
        let samples: Vec<Sample> = samples.iter().map(|&(t, v)| Sample::new(t, v)).collect();
        s.append(&Labels::from_pairs(labels), &samples);
    }
    s
}

fn vector(v: &Value) -> Vec<(String, f64)> {
    let Value::Vector(samples) = v else { panic!("expected a vector, got {v:?}") };
    let mut out: Vec<(String, f64)> = samples.iter().map(|s| (s.labels.to_string(), s.v)).collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn requests() -> MemStore {
    store(&[
        (&[("__name__", "req"), ("job", "a"), ("status", "200")], &[(0, 10.0)]),
        (&[("__name__", "req"), ("job", "a"), ("status", "500")], &[(0, 2.0)]),
        (&[("__name__", "req"), ("job", "b"), ("status", "200")], &[(0, 5.0)]),
        (&[("__name__", "limit"), ("job", "a")], &[(0, 100.0)]),
        (&[("__name__", "limit"), ("job", "b")], &[(0, 50.0)]),
    ])
}

#[test]
fn many_to_one_matching_with_group_left() {
    let e = Engine::default();
    let r = e.instant(&requests(), "req / on(job) group_left limit", 0).unwrap();
    assert_eq!(
        vector(&r.value),
        vec![
            (r#"{job="a", status="200"}"#.to_string(), 0.1),
            (r#"{job="a", status="500"}"#.to_string(), 0.02),
            (r#"{job="b", status="200"}"#.to_string(), 0.1),
        ]
    );
}

#[test]
fn one_to_one_matching_needs_group_modifier_for_many_matches() {
    let e = Engine::default();
    let err = e.instant(&requests(), "req / on(job) limit", 0).unwrap_err();
    assert_eq!(err.error_type(), "execution");
    assert!(err.to_string().contains("many-to-one matching must be explicit"), "{err}");
    let err = e.instant(&requests(), "limit / on(job) group_left req", 0).unwrap_err();
    assert!(err.to_string().contains("found duplicate series for the match group"), "{err}");
}

#[test]
fn comparison_filters_and_bool_returns_zero_or_one() {
    let e = Engine::default();
    let r = e.instant(&requests(), "req > 4", 0).unwrap();
    assert_eq!(vector(&r.value).len(), 2);
    let r = e.instant(&requests(), "req > bool 4", 0).unwrap();
    let v = vector(&r.value);
    assert_eq!(v.iter().map(|x| x.1).collect::<Vec<_>>(), vec![1.0, 0.0, 1.0]);
    assert!(v.iter().all(|(l, _)| !l.starts_with("req")), "bool drops the metric name: {v:?}");
}

#[test]
fn set_operators_match_on_signatures() {
    let e = Engine::default();
    let r = e.instant(&requests(), r#"req unless on(job) limit{job="b"}"#, 0).unwrap();
    assert_eq!(vector(&r.value).len(), 2);
    let r = e.instant(&requests(), r#"limit{job="a"} or on(job) limit"#, 0).unwrap();
    assert_eq!(vector(&r.value).len(), 2);
}

#[test]
fn range_query_slides_windows_over_each_series() {
    let samples: Vec<(i64, f64)> = (0..=60).map(|i| (i * 10_000, i as f64 * 10.0)).collect();
    let s = store(&[(&[("__name__", "c_total")], &samples)]);
    let r = Engine::default().range(&s, "rate(c_total[1m])", 60_000, 600_000, 60_000).unwrap();
    let Value::Matrix(m) = r.value else { panic!("expected a matrix") };
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].points.len(), 10);
    assert!(m[0].points.iter().all(|p| (p.v - 1.0).abs() < 1e-9), "{:?}", m[0].points);
    assert!(r.stats.samples_read >= 60);
}

#[test]
fn parse_errors_are_bad_data_with_position() {
    let err = Engine::default().instant(&MemStore::new(), "sum(", 0).unwrap_err();
    assert_eq!(err.error_type(), "bad_data");
    assert!(err.to_string().starts_with("1:"), "{err}");
    let deep = format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000));
    let err = Engine::default().instant(&MemStore::new(), &deep, 0).unwrap_err();
    assert!(matches!(err, Error::BadData(_)), "{err}");
    let err = Engine::default().range(&MemStore::new(), "x[5m]", 0, 10, 1).unwrap_err();
    assert!(err.to_string().contains("invalid expression type"), "{err}");
}

#[test]
fn sample_limit_is_enforced() {
    let samples: Vec<(i64, f64)> = (0..1000).map(|i| (i * 1000, 1.0)).collect();
    let s = store(&[(&[("__name__", "x")], &samples)]);
    let e = Engine::new(EngineOptions { max_samples: 100, ..EngineOptions::default() });
    let err = e.range(&s, "x", 0, 999_000, 1000).unwrap_err();
    assert!(matches!(err, Error::TooManySamples(_)), "{err}");
    assert_eq!(err.error_type(), "execution");
    assert!(e.instant(&s, "x", 999_000).is_ok());
}

#[test]
fn timeout_is_enforced() {
    let samples: Vec<(i64, f64)> = (0..1000).map(|i| (i * 1000, 1.0)).collect();
    let s = store(&[(&[("__name__", "x")], &samples)]);
    let e = Engine::new(EngineOptions { timeout: Duration::ZERO, ..EngineOptions::default() });
    let err = e.range(&s, "sum_over_time(x[1m])", 0, 999_000, 1000).unwrap_err();
    assert!(matches!(err, Error::Timeout(_)), "{err}");
    assert_eq!(err.error_type(), "timeout");
}

#[test]
fn annotations_carry_positions() {
    let s = store(&[(&[("__name__", "gauge")], &[(0, 1.0), (30_000, 2.0), (60_000, 3.0)])]);
    let q = "1 + rate(gauge[1m])";
    let r = Engine::default().instant(&s, q, 60_000).unwrap();
    assert_eq!(r.infos, vec![
        "PromQL info: metric might not be a counter, name does not end in _total/_sum/_count/_bucket: \"gauge\" (1:10)"
            .to_string()
    ]);
    assert!(r.warnings.is_empty());
}

#[test]
fn experimental_features_are_off_by_default() {
    let s = MemStore::new();
    let e = Engine::default();
    assert!(e.instant(&s, "x[5m+1m]", 0).is_err());
    assert!(e.instant(&s, "limitk(1, x)", 0).is_err());
    let all = Engine::new(EngineOptions {
        experimental_functions: true,
        duration_expressions: true,
        ..Default::default()
    });
    assert!(all.instant(&s, "limitk(1, x)", 0).is_ok());
    assert!(all.instant(&s, "count_over_time(x[5m+1m])", 0).is_ok());
}

#[test]
fn stale_markers_end_series_and_lookback_is_left_open() {
    let s = store(&[(&[("__name__", "x")], &[(0, 1.0), (10_000, storage::stale_nan()), (20_000, 2.0)])]);
    let e = Engine::default();
    assert!(vector(&e.instant(&s, "x", 15_000).unwrap().value).is_empty());
    assert_eq!(vector(&e.instant(&s, "x", 320_000).unwrap().value).len(), 0);
    assert_eq!(vector(&e.instant(&s, "x", 319_999).unwrap().value).len(), 1);
}

/// A range query over many series: one pass per series. The default run is small; with
/// `STRATA_SLOW_TESTS=1` it uses 1,000 series with a day of 15s samples and prints the timing.
#[test]
fn range_query_over_many_series() {
    let slow = std::env::var("STRATA_SLOW_TESTS").is_ok_and(|v| v == "1");
    let (n_series, n_samples) = if slow { (1_000, 5_760) } else { (20, 240) };
    let mut s = MemStore::new();
    for i in 0..n_series {
        let l = Labels::from_pairs(&[("__name__", "req_total".to_string()), ("i", i.to_string())]);
        let samples: Vec<Sample> =
            (0..n_samples).map(|k| Sample::new(k * 15_000, (k * (i + 1)) as f64)).collect();
        s.append(&l, &samples);
    }
    let end = (n_samples - 1) * 15_000;
    let e = Engine::new(EngineOptions { max_samples: 100_000_000, ..EngineOptions::default() });
    let started = std::time::Instant::now();
    let r = e.range(&s, "sum(rate(req_total[5m]))", 300_000, end, 60_000).unwrap();
    let took = started.elapsed();
    let Value::Matrix(m) = r.value else { panic!("expected a matrix") };
    assert_eq!(m.len(), 1);
    let expected = (1..=n_series).sum::<i64>() as f64 / 15.0;
    assert!(m[0].points.iter().all(|p| (p.v - expected).abs() / expected < 1e-9));
    if slow {
        println!(
            "sum(rate(x[5m])) over {n_series} series x {n_samples} samples, {} steps: {took:?}, {} samples read",
            m[0].points.len(),
            r.stats.samples_read
        );
    }
}

/// The deepest queries the depth guard lets through still evaluate (recursion stays within the
/// evaluation thread's stack), in every shape that nests.
#[test]
fn deepest_accepted_queries_evaluate() {
    let s = store(&[(&[("__name__", "x")], &[(0, 1.0)])]);
    let e = Engine::default();
    let n = 120;
    for q in [
        format!("{}x{}", "abs(".repeat(n), ")".repeat(n)),
        format!("{}x{}", "(".repeat(n * 2), ")".repeat(n * 2)),
        format!("x{}", " + x".repeat(n * 2)),
        format!("{}x", "-".repeat(n * 2)),
        format!("{}x{}", "sum(".repeat(n), ")".repeat(n)),
        format!("2{}", " ^ 1".repeat(n * 2)),
    ] {
        let r = e.instant(&s, &q, 0);
        assert!(r.is_ok(), "{}...: {:?}", &q[..20], r.err());
    }
}

/// `or` of two sides whose signatures never meet is answered by moving the series (no per-step
/// work): the range answer must be the union of the sides' answers, and an aggregation over it
/// must see every sample at every step, including series that start late or end early.
#[test]
fn or_of_disjoint_sides_is_the_union_at_every_step() {
    let every = |from: i64, to: i64, v: f64| -> Vec<(i64, f64)> {
        (from..=to).map(|i| (i * 60_000, v + i as f64)).collect()
    };
    let (a1, a2, b3, b4, b1) =
        (every(3, 20, 1.0), every(0, 20, 100.0), every(0, 5, 1000.0), every(8, 12, 5.0), every(0, 20, 7.0));
    let s = store(&[
        (&[("__name__", "a"), ("h", "1")], &a1),
        (&[("__name__", "a"), ("h", "2")], &a2),
        (&[("__name__", "b"), ("h", "3")], &b3),
        (&[("__name__", "b"), ("h", "4")], &b4),
        (&[("__name__", "c"), ("h", "1")], &b1),
    ]);
    let e = Engine::default();
    let range = |q: &str| -> Vec<(String, Vec<(i64, u64)>)> {
        let Value::Matrix(m) = e.range(&s, q, 0, 30 * 60_000, 60_000).unwrap().value else {
            panic!("matrix")
        };
        m.iter()
            .map(|s| (s.labels.to_string(), s.points.iter().map(|p| (p.t, p.v.to_bits())).collect()))
            .collect()
    };
    let mut union = range("a");
    union.extend(range("b"));
    union.sort();
    assert_eq!(range("a or b"), union);
    // Per step, the sum over the union.
    let mut sums: std::collections::BTreeMap<i64, f64> = Default::default();
    for (_, points) in &union {
        for &(t, v) in points {
            *sums.entry(t).or_default() += f64::from_bits(v);
        }
    }
    let want: Vec<(i64, u64)> = sums.into_iter().map(|(t, v)| (t, v.to_bits())).collect();
    assert_eq!(range("sum(a or b)"), vec![("{}".to_string(), want)]);
    // Sides that share a signature (h="1") still exclude the right side where the left has one.
    let shared = range("a or c");
    let c1 = shared.iter().find(|(l, _)| l.starts_with("c{")).unwrap();
    let a1_first = range("a").iter().find(|(l, _)| l.contains("h=\"1\"")).unwrap().1[0].0;
    assert!(c1.1.iter().all(|&(t, _)| t < a1_first), "{c1:?}");
}

/// With `inline_points_max`, a small query answers exactly as without it, and a query that is
/// not small stops with `NotInline` (the server then runs it on a blocking thread): too many
/// estimated points, too many series for one loop, or a selector without an equality to
/// narrow its lookup.
#[test]
fn inline_evaluation_answers_small_queries_and_declines_the_rest() {
    let mut s = MemStore::new();
    for i in 0..300 {
        let l = Labels::from_pairs(&[("__name__", "req_total".to_string()), ("i", i.to_string())]);
        let samples: Vec<Sample> = (0..240).map(|k| Sample::new(k * 15_000, (k * (i + 1)) as f64)).collect();
        s.append(&l, &samples);
    }
    let inline = Engine::new(EngineOptions { inline_points_max: Some(5_000), ..EngineOptions::default() });
    let anywhere = Engine::default();
    let end = 239 * 15_000;
    for q in [
        "sum(rate(req_total{i=\"7\"}[5m]))",
        "req_total{i=\"3\"} + on() group_left vector(1)",
        "vector(time())",
    ] {
        let a = inline.range(&s, q, 300_000, end, 60_000).unwrap();
        let b = anywhere.range(&s, q, 300_000, end, 60_000).unwrap();
        assert_eq!(format!("{:?}", a.value), format!("{:?}", b.value), "{q}");
    }
    for q in [
        // 300 series: one loop of parallel_min_series (256) or more.
        "sum(rate(req_total[5m]))",
        // 111 series of ~300 points each (the samples read and the steps): past 5,000.
        "sum(rate({__name__=\"req_total\", i=~\"1.*\"}[5m]))",
        // Nothing but a regex to look the series up by.
        "count({__name__=~\"req.*\"})",
        "count({i!=\"\"})",
    ] {
        let err = inline.range(&s, q, 300_000, end, 60_000).unwrap_err();
        assert!(matches!(err, Error::NotInline), "{q}: {err}");
        anywhere.range(&s, q, 300_000, end, 60_000).unwrap();
    }
}

//! Parallel evaluation (`EngineOptions::parallel`, forced on for every selector, with and
//! without the trial of each loop's first series on the query's thread) against the sequential
//! engine, over a real `storage::Db` with many series, part of them flushed into partition files
//! so push-down runs too. Everything must be identical: float bits, series order, warnings and
//! infos, the statistics counters, and the error when the sample limit trips.
//!
//! `STRATA_SLOW_TESTS=1` runs many more cases.

use std::sync::LazyLock;
use std::time::Duration;

use promql::{Engine, EngineOptions, QueryPool, QueryResult};
use proptest::prelude::*;
use storage::{Batch, Db, Labels, Options, Sample, stale_nan};

use crate::common::bits;

/// A whole hour, so hourly steps line up with hour-grid blocks.
const BASE: i64 = 1_699_999_200_000;
const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;

/// One pool for every case of a test, as a server shares one; more threads than this machine's
/// cores so that chunks really interleave. Each test has its own, so that the other test's
/// loops never take the pool's places (a loop refused runs sequentially: still right, but not
/// what these tests are about).
static POOL: LazyLock<QueryPool> = LazyLock::new(|| QueryPool::new(4));
static LIMIT_POOL: LazyLock<QueryPool> = LazyLock::new(|| QueryPool::new(4));

fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        8 => (0i32..50).prop_map(f64::from),
        1 => any::<f64>(),
        1 => Just(stale_nan()),
        1 => prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(-0.0)],
    ]
}

/// Series `i`: a counter (`c_total`), a gauge (`g`), or a gauge named like nothing in
/// particular (`x`, which `rate` warns about), in groups `h`.
fn labels(i: usize) -> Labels {
    let name = ["c_total", "g", "x"][i % 3];
    Labels::from_pairs(&[("__name__", name), ("i", &i.to_string()), ("h", &(i % 5).to_string())])
}

#[derive(Debug, Clone)]
struct Data {
    series: usize,
    /// Per batch: the seed of its values, how many samples per series, and whether to flush
    /// after it.
    batches: Vec<(Vec<f64>, usize, bool)>,
}

fn data() -> impl Strategy<Value = Data> {
    (
        20usize..300,
        proptest::collection::vec(
            (proptest::collection::vec(value(), 1..40), 1usize..60, any::<bool>()),
            1..5,
        ),
    )
        .prop_map(|(series, batches)| Data { series, batches })
}

fn build(dir: &std::path::Path, d: &Data) -> Db {
    let mut o = Options::new(dir);
    o.maintenance_interval = std::time::Duration::from_secs(3600);
    o.partition_ms = 3 * HOUR;
    o.block_samples_max = 16;
    let db = Db::open(o).unwrap();
    let mut t0 = BASE;
    for (values, n, flush) in &d.batches {
        let mut batch = Batch::new();
        for i in 0..d.series {
            // Series have different lengths and phases; counters mostly grow, with resets.
            let len = 1 + (n + i) % (n + 1);
            let mut acc = 0.0;
            let samples = (0..len)
                .map(|k| {
                    let v = values[(i * 7 + k) % values.len()];
                    acc = if i % 3 == 0 && v.is_finite() {
                        if k % 17 == 16 { v } else { acc + v.abs() }
                    } else {
                        v
                    };
                    Sample::new(t0 + (k as i64) * 60_000 + (i as i64 % 4) * 15_000, acc)
                })
                .collect();
            batch.push(labels(i), samples);
        }
        db.append(&batch).unwrap();
        if *flush {
            db.flush().unwrap();
        }
        t0 += (*n as i64 + 1) * 60_000;
    }
    db
}

/// Everything a result says except the timings.
fn summary(r: &promql::Result<QueryResult>) -> String {
    match r {
        Err(e) => format!("error: {e}"),
        Ok(r) => {
            let s = &r.stats;
            format!(
                "{:?}\nwarnings {:?}\ninfos {:?}\nstats read={} selected={} from_stats={} decoded={}/{} peak={}",
                bits(r),
                r.warnings,
                r.infos,
                s.samples_read,
                s.series_selected,
                s.blocks_from_stats,
                s.blocks_decoded,
                s.samples_decoded,
                s.peak_samples
            )
        }
    }
}

/// The sequential engine, the oracle.
fn sequential(max_samples: usize) -> Engine {
    engine_with(None, max_samples, Duration::ZERO)
}

/// `min_work`: `EngineOptions::parallel_min_work`. Zero sends every loop to the pool at once;
/// a nanosecond evaluates each loop's first series on the query's thread, then the rest on the
/// pool; an hour keeps the rest on the query's thread after that trial.
fn engine_with(parallel: Option<QueryPool>, max_samples: usize, min_work: Duration) -> Engine {
    Engine::new(EngineOptions {
        parallel,
        parallel_min_series: 0,
        parallel_min_points: 0,
        parallel_min_work: min_work,
        max_samples,
        experimental_functions: true,
        use_start_timestamps: true,
        ..EngineOptions::default()
    })
}

/// A range function over a selector, or over a subquery, with a modifier.
fn range_call() -> impl Strategy<Value = String> {
    let function = prop_oneof![
        Just("rate"),
        Just("increase"),
        Just("delta"),
        Just("irate"),
        Just("resets"),
        Just("changes"),
        Just("deriv"),
        Just("sum_over_time"),
        Just("avg_over_time"),
        Just("min_over_time"),
        Just("max_over_time"),
        Just("count_over_time"),
        Just("last_over_time"),
        Just("first_over_time"),
        Just("stddev_over_time"),
        Just("present_over_time"),
        Just("absent_over_time"),
    ];
    let selector =
        prop_oneof![Just("c_total"), Just("g"), Just("x"), Just("{h=\"1\"}"), Just("{__name__=~\".+\"}")];
    let range = prop_oneof![Just("1m"), Just("5m"), Just("10m"), Just("1h")];
    let modifier = prop_oneof![Just(""), Just(" offset 10m"), Just(" @ end()")];
    (function, selector, range, modifier, 0u8..8).prop_map(|(f, sel, r, m, shape)| match shape {
        0 => format!("{sel}{m}"),
        1 => format!("sum by (h) ({f}({sel}[{r}]{m}))"),
        2 => format!("quantile_over_time(1.5, {sel}[{r}]{m})"),
        3 => format!("{f}({sel}[{r}:2m]{m})"),
        4 => format!("predict_linear({sel}[{r}]{m}, 600)"),
        5 => format!("timestamp({sel}{m})"),
        _ => format!("{f}({sel}[{r}]{m})"),
    })
}

/// One range call, or several combined, as dashboards and TSBS combine them: the engine
/// computes the range calls of a query ahead in one loop (`prefetch.rs`) when there are two
/// or more.
fn query() -> impl Strategy<Value = String> {
    let op =
        prop_oneof![Just("or"), Just("+"), Just("and"), Just("unless"), Just("> bool"), Just("/ on (h)")];
    prop_oneof![
        2 => range_call(),
        1 => (range_call(), op, range_call()).prop_map(|(a, op, b)| format!("{a} {op} {b}")),
        1 => proptest::collection::vec(range_call(), 2..5).prop_map(|calls| {
            calls
                .iter()
                .enumerate()
                .map(|(i, c)| format!("label_replace(max({c}), \"metric\", \"m{i}\", \"\", \"\")"))
                .collect::<Vec<_>>()
                .join(" or ")
        }),
        1 => (range_call(), range_call()).prop_map(|(a, b)| format!("histogram_count({a}) or -{b}")),
    ]
}

fn cases() -> u32 {
    if std::env::var_os("STRATA_SLOW_TESTS").is_some() { 300 } else { 16 }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn parallel_equals_sequential(
        d in data(),
        queries in proptest::collection::vec(query(), 4..10),
        start_min in 0i64..120,
        step_min in prop_oneof![Just(1i64), Just(5), 1i64..30],
        max_samples in prop_oneof![3 => Just(50_000_000usize), 1 => 10usize..20_000],
        min_work in prop_oneof![
            2 => Just(Duration::ZERO),
            1 => Just(Duration::from_nanos(1)),
            1 => Just(Duration::from_secs(3600)),
        ],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let db = build(dir.path(), &d);
        let snap = db.snapshot();
        let (start, step) = (BASE + start_min * MINUTE, step_min * MINUTE);
        let end = start + 4 * HOUR;
        let (par, seq) = (engine_with(Some(POOL.clone()), max_samples, min_work), sequential(max_samples));
        for q in &queries {
            let a = par.range(&snap, q, start, end, step);
            let b = seq.range(&snap, q, start, end, step);
            prop_assert_eq!(summary(&a), summary(&b), "range {} step {}", q, step);
            let a = par.instant(&snap, q, end);
            let b = seq.instant(&snap, q, end);
            prop_assert_eq!(summary(&a), summary(&b), "instant {}", q);
        }
        // A range selector at the top of an instant query: raw samples.
        let a = par.instant(&snap, "{__name__=~\".+\"}[30m]", end);
        let b = seq.instant(&snap, "{__name__=~\".+\"}[30m]", end);
        prop_assert_eq!(summary(&a), summary(&b));
    }
}

/// The sample limit trips in the parallel engine exactly when it does in the sequential one,
/// with the same peak below it, whatever the limit.
#[test]
fn sample_limit_trips_at_the_same_point() {
    let dir = tempfile::tempdir().unwrap();
    let d = Data { series: 200, batches: vec![(vec![1.0, 2.0, 5.0], 50, true), (vec![3.0], 40, false)] };
    let db = build(dir.path(), &d);
    let snap = db.snapshot();
    let (start, end) = (BASE, BASE + 2 * HOUR);
    // The second is computed ahead of evaluation (`prefetch.rs`): its points count when
    // evaluation takes them, as without.
    for q in ["rate(c_total[5m])", "rate(c_total[5m]) + max_over_time(g[10m]) or delta(x[5m])"] {
        let full = sequential(50_000_000).range(&snap, q, start, end, MINUTE).unwrap();
        let peak = full.stats.peak_samples;
        assert!(peak > 1000, "{peak}");
        for limit in [1, 10, peak / 3, peak / 2, peak - 1, peak, peak + 1] {
            let b = sequential(limit).range(&snap, q, start, end, MINUTE);
            for min_work in [Duration::ZERO, Duration::from_nanos(1)] {
                let a = engine_with(Some(LIMIT_POOL.clone()), limit, min_work)
                    .range(&snap, q, start, end, MINUTE);
                assert_eq!(summary(&a), summary(&b), "{q}: limit {limit}, {min_work:?}");
                assert_eq!(a.is_ok(), limit >= peak, "{q}: limit {limit}");
            }
        }
    }
}

//! Aggregations computed by columns (`EngineOptions::column_aggregation`) against the step-wise
//! path, over random float data with gaps, stale markers, NaNs, infinities and sums that
//! overflow (which switch `avg` to its incremental mean). Every answer must be identical,
//! float bits, series order and warnings included.
//!
//! `STRATA_SLOW_TESTS=1` runs many more cases.

use promql::{Engine, EngineOptions};
use proptest::prelude::*;
use storage::{Batch, Db, Labels, Options, Sample, stale_nan};

use crate::common::bits;

const BASE: i64 = 1_699_999_200_000;
const MINUTE: i64 = 60_000;

fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        6 => (-3i32..4).prop_map(f64::from),
        2 => any::<f64>(),
        1 => prop_oneof![Just(1.0e308), Just(-1.5e308), Just(f64::MAX)],
        1 => Just(stale_nan()),
        1 => prop_oneof![
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(-0.0),
            Just(0.1),
        ],
    ]
}

/// A series: which metric (`m` or `n`), its `s` and `h` labels, and samples at minute offsets.
type SeriesSpec = (bool, u8, u8, Vec<(u16, f64)>);

fn series() -> impl Strategy<Value = SeriesSpec> {
    (any::<bool>(), 0u8..6, 0u8..3, proptest::collection::vec((0u16..240, value()), 0..60))
}

fn load(db: &Db, specs: &[SeriesSpec]) {
    let mut batch = Batch::new();
    for (is_m, s, h, samples) in specs {
        let name = if *is_m { "m" } else { "n" };
        let labels = Labels::from_pairs(&[("__name__", name), ("s", &s.to_string()), ("h", &h.to_string())]);
        let mut samples: Vec<Sample> =
            samples.iter().map(|&(min, v)| Sample::new(BASE + i64::from(min) * MINUTE, v)).collect();
        samples.sort_by_key(|s| s.t);
        samples.dedup_by_key(|s| s.t);
        batch.push(labels, samples);
    }
    db.append(&batch).unwrap();
}

fn engine(columns: bool, delayed: bool) -> Engine {
    Engine::new(EngineOptions {
        column_aggregation: columns,
        delayed_name_removal: delayed,
        ..EngineOptions::default()
    })
}

fn cases() -> u32 {
    if std::env::var_os("STRATA_SLOW_TESTS").is_some() { 1000 } else { 48 }
}

const OPS: [&str; 6] = ["sum", "avg", "min", "max", "count", "group"];
const GROUPINGS: [&str; 5] = ["", " by (h)", " by (s, h)", " without (s)", " by (__name__)"];
const INNER: [&str; 6] = [
    "m",
    "{__name__=~\"m|n\"}",
    "-m",
    "max_over_time(m[7m])",
    "m offset 5m or n",
    "last_over_time({__name__=~\".+\"}[3m])",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn columns_equal_step_wise(
        specs in proptest::collection::vec(series(), 1..12),
        start_min in 0i64..200,
        span_min in 0i64..240,
        step_min in prop_oneof![Just(1i64), Just(5), 1i64..30],
        delayed in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut o = Options::new(dir.path());
        o.maintenance_interval = std::time::Duration::from_secs(3600);
        let db = Db::open(o).unwrap();
        load(&db, &specs);
        let snap = db.snapshot();
        let (start, end, step) =
            (BASE + start_min * MINUTE, BASE + (start_min + span_min) * MINUTE, step_min * MINUTE);
        for op in OPS {
            for grouping in GROUPINGS {
                for inner in INNER {
                    let q = format!("{op}{grouping} ({inner})");
                    let (cols, steps) = (engine(true, delayed), engine(false, delayed));
                    let a = cols.range(&snap, &q, start, end, step);
                    let b = steps.range(&snap, &q, start, end, step);
                    match (a, b) {
                        (Ok(a), Ok(b)) => {
                            prop_assert_eq!(bits(&a), bits(&b), "{} over [{}, {}] step {}", q, start, end, step);
                            prop_assert_eq!(a.warnings, b.warnings);
                        }
                        (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
                        (a, b) => prop_assert!(false, "{}: {:?} vs {:?}", q, a.map(|r| bits(&r)), b.map(|r| bits(&r))),
                    }
                    let a = cols.instant(&snap, &q, end).map(|r| bits(&r)).map_err(|e| e.to_string());
                    let b = steps.instant(&snap, &q, end).map(|r| bits(&r)).map_err(|e| e.to_string());
                    prop_assert_eq!(a, b, "{} at {}", q, end);
                }
            }
        }
    }
}

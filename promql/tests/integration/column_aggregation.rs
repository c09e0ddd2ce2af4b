//! Aggregations computed by columns (`EngineOptions::column_aggregation`) against the step-wise
//! path, over random float data with gaps, stale markers, NaNs, infinities and sums that
//! overflow (which switch `avg` to its incremental mean). Every answer must be identical,
//! float bits, series order and warnings included.
//!
//! `STRATA_SLOW_TESTS=1` runs many more cases.

use promql::{Engine, EngineOptions};
use proptest::prelude::*;

use crate::common::{BASE, MINUTE, agree, loaded_db, series};

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
        let (_dir, db) = loaded_db(&specs);
        let snap = db.snapshot();
        let (start, end, step) =
            (BASE + start_min * MINUTE, BASE + (start_min + span_min) * MINUTE, step_min * MINUTE);
        for op in OPS {
            for grouping in GROUPINGS {
                for inner in INNER {
                    let q = format!("{op}{grouping} ({inner})");
                    let (cols, steps) = (engine(true, delayed), engine(false, delayed));
                    let over = format!("{q} over [{start}, {end}] step {step}");
                    agree(cols.range(&snap, &q, start, end, step), steps.range(&snap, &q, start, end, step), &over)?;
                    agree(cols.instant(&snap, &q, end), steps.instant(&snap, &q, end), &format!("{q} at {end}"))?;
                }
            }
        }
    }
}

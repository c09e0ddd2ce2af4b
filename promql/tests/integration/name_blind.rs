//! A range call whose output goes straight into an aggregation that cannot see the metric name
//! (`sum by (h) (rate(m[5m]))`) keeps its input's names instead of dropping them from every
//! series. Its answers must be those of the same call with the name dropped: the call wrapped
//! in a `label_replace` that changes nothing, which keeps the engine from seeing it below the
//! aggregation. Float bits, series order, warnings and errors included (two series that differ
//! only in their names, `{__name__=~"m|n"}`, are still the duplicate-labelset error), over
//! random data, with and without delayed name removal, with and without push-down.
//!
//! `STRATA_SLOW_TESTS=1` runs many more cases.

use promql::{Engine, EngineOptions};
use proptest::prelude::*;

use crate::common::{BASE, MINUTE, agree, loaded_db, series};

fn cases() -> u32 {
    if std::env::var_os("STRATA_SLOW_TESTS").is_some() { 500 } else { 32 }
}

/// Aggregations, `X` standing for the call: the first ones cannot see names; `without`,
/// `by (__name__)` and `topk` can, and are here to show they are left alone.
const AGGREGATIONS: [&str; 10] = [
    "sum by (h) (X)",
    "avg by (h, s) (X)",
    "count(X)",
    "max by (s) (X)",
    "quantile by (h) (0.5, X)",
    "stddev by (h) (X)",
    "sum without (s) (X)",
    "sum by (__name__) (X)",
    "topk by (h) (1, X)",
    "sum by (h) (X) / count by (h) (X)",
];

const CALLS: [&str; 8] = [
    "rate(SEL[5m])",
    "avg_over_time(SEL[10m])",
    "sum_over_time(SEL[7m])",
    "max_over_time(SEL[1h])",
    "count_over_time(SEL[3m])",
    "last_over_time(SEL[5m])",
    "deriv(SEL[15m])",
    "quantile_over_time(0.9, SEL[20m])",
];

const SELECTORS: [&str; 3] = ["m", "n{s!=\"1\"}", "{__name__=~\"m|n\"}"];

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn a_call_below_an_aggregation_answers_as_with_names_dropped(
        specs in proptest::collection::vec(series(), 1..10),
        agg in 0usize..AGGREGATIONS.len(),
        start_min in 0i64..200,
        span_min in 0i64..240,
        step_min in prop_oneof![Just(1i64), Just(5), 1i64..30],
        delayed in any::<bool>(),
        pushdown in any::<bool>(),
    ) {
        let (_dir, db) = loaded_db(&specs);
        let snap = db.snapshot();
        let engine = Engine::new(EngineOptions { delayed_name_removal: delayed, pushdown, ..EngineOptions::default() });
        let (start, end, step) =
            (BASE + start_min * MINUTE, BASE + (start_min + span_min) * MINUTE, step_min * MINUTE);
        // Every call over every selector: the pairs that differ (a call that keeps names over
        // series that differ only in them) are too few to leave to chance.
        for call in CALLS {
            for sel in SELECTORS {
                let call = call.replace("SEL", sel);
                let query = AGGREGATIONS[agg].replace('X', &call);
                let seen = AGGREGATIONS[agg].replace('X', &format!("label_replace({call}, \"zz\", \"\", \"zz\", \"\")"));
                let over = format!("{query} over [{start}, {end}] step {step}");
                agree(engine.range(&snap, &query, start, end, step), engine.range(&snap, &seen, start, end, step), &over)?;
                agree(engine.instant(&snap, &query, end), engine.instant(&snap, &seen, end), &format!("{query} at {end}"))?;
            }
        }
    }
}

//! A selector compared with a literal (`m > 1`, `1 < m`) is filtered while the selector reads,
//! so a query holds only the points that pass. Its answers must be those of the same comparison
//! evaluated after the selector (`m > scalar(vector(1))`, which the engine does not fuse), float
//! bits, series order and warnings included, over random data with gaps, stale markers, NaNs,
//! infinities and signed zeros; and the sample limit must count what passed, not what was read.
//!
//! `STRATA_SLOW_TESTS=1` runs many more cases.

use promql::{Engine, EngineOptions, Error};
use proptest::prelude::*;
use storage::{Batch, Labels, Sample};

use crate::common::{BASE, MINUTE, agree, loaded_db, open_db, series};

fn cases() -> u32 {
    if std::env::var_os("STRATA_SLOW_TESTS").is_some() { 1000 } else { 32 }
}

const OPS: [&str; 6] = ["==", "!=", ">", "<", ">=", "<="];
const LITERALS: [&str; 6] = ["0", "1", "-1", "NaN", "Inf", "-0.5"];
/// `SEL` is the selector, `OP` the operator, `C` the literal; each form is fused.
const FORMS: [&str; 5] = ["SEL OP C", "C OP SEL", "(SEL) OP (C)", "SEL OP -C", "-C OP (SEL)"];
const SELECTORS: [&str; 3] = ["m", "{__name__=~\"m|n\"}", "m offset 5m"];

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn fused_filter_equals_comparison_after_the_selector(
        specs in proptest::collection::vec(series(), 1..10),
        start_min in 0i64..200,
        span_min in 0i64..240,
        step_min in prop_oneof![Just(1i64), Just(5), 1i64..30],
        delayed in any::<bool>(),
    ) {
        let (_dir, db) = loaded_db(&specs);
        let snap = db.snapshot();
        let engine = Engine::new(EngineOptions { delayed_name_removal: delayed, ..EngineOptions::default() });
        let (start, end, step) =
            (BASE + start_min * MINUTE, BASE + (start_min + span_min) * MINUTE, step_min * MINUTE);
        for form in FORMS {
            for sel in SELECTORS {
                for op in OPS {
                    for c in LITERALS {
                        let fused = form.replace("SEL", sel).replace("OP", op).replace("C", c);
                        let after = form.replace("SEL", sel).replace("OP", op)
                            .replace("-C", &format!("scalar(vector(-{c}))"))
                            .replace("C", &format!("scalar(vector({c}))"));
                        let over = format!("{fused} over [{start}, {end}] step {step}");
                        agree(engine.range(&snap, &fused, start, end, step), engine.range(&snap, &after, start, end, step), &over)?;
                        agree(engine.instant(&snap, &fused, end), engine.instant(&snap, &after, end), &format!("{fused} at {end}"))?;
                    }
                }
            }
        }
    }
}

/// 50 series of 600 samples, one of which per series passes `> 90`: the filtered query holds
/// 50 points and fits a 1,000-sample limit that the selector's 30,000 points would exceed, as
/// the unfused comparison shows.
#[test]
fn the_sample_limit_counts_what_passes_the_filter() {
    let dir = tempfile::tempdir().unwrap();
    let db = open_db(dir.path());
    let mut batch = Batch::new();
    for s in 0..50 {
        let labels = Labels::from_pairs(&[("__name__", "cpu"), ("host", &format!("h{s}"))]);
        let samples = (0..600)
            .map(|i| Sample::new(BASE + i * 10_000, if i == 300 + s { 95.0 } else { 10.0 }))
            .collect();
        batch.push(labels, samples);
    }
    db.append(&batch).unwrap();
    let snap = db.snapshot();
    let engine = Engine::new(EngineOptions { max_samples: 1_000, ..EngineOptions::default() });
    let (start, end) = (BASE, BASE + 599 * 10_000);
    let r = engine.range(&snap, "cpu > 90", start, end, 10_000).unwrap();
    let promql::Value::Matrix(m) = &r.value else { panic!("not a matrix: {:?}", r.value) };
    assert_eq!(m.len(), 50);
    assert!(m.iter().all(|s| s.points.len() == 1 && s.points[0].v == 95.0));
    assert!(r.stats.peak_samples <= 1_000, "peak {}", r.stats.peak_samples);
    let unfused = engine.range(&snap, "cpu > scalar(vector(90))", start, end, 10_000);
    assert!(matches!(unfused, Err(Error::TooManySamples(_))), "{unfused:?}");
}

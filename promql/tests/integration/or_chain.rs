//! A chain of `or` (`a or b or c`, which parses as `(a or b) or c`) is evaluated as one
//! operation over all its operands. Its answers must be those of the same operands joined one
//! pair at a time: each level wrapped in a `label_replace` that changes nothing, which keeps
//! the engine from seeing a chain. Float bits, series order and warnings included, over random
//! data whose operands share signatures or not.
//!
//! `STRATA_SLOW_TESTS=1` runs many more cases.

use promql::{Engine, EngineOptions};
use proptest::prelude::*;

use crate::common::{BASE, MINUTE, agree, loaded_db, series};

fn cases() -> u32 {
    if std::env::var_os("STRATA_SLOW_TESTS").is_some() { 500 } else { 32 }
}

/// Operands: some share signatures with each other (`m` and `-m`, `m` and `m offset 5m`),
/// some hold series with the same labels once the name is dropped (`-{__name__=~"m|n"}`).
const OPERANDS: [&str; 8] =
    ["m", "n", "m offset 5m", "-m", "sum by (h) (m)", "m > 0", "{__name__=~\"m|n\"}", "max by (s) (n) * 2"];

/// `label_replace(x, "zz", "", "zz", "")` sets an absent label to "": it changes nothing.
fn unchained(operands: &[&str]) -> String {
    let mut q = operands[0].to_owned();
    for (i, o) in operands[1..].iter().enumerate() {
        q = format!("({q} or {o})");
        if i + 2 < operands.len() {
            q = format!("label_replace({q}, \"zz\", \"\", \"zz\", \"\")");
        }
    }
    q
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn a_chain_equals_the_pairs(
        specs in proptest::collection::vec(series(), 1..10),
        picks in proptest::collection::vec(0usize..OPERANDS.len(), 3..6),
        start_min in 0i64..200,
        span_min in 0i64..240,
        step_min in prop_oneof![Just(1i64), Just(5), 1i64..30],
        delayed in any::<bool>(),
    ) {
        let (_dir, db) = loaded_db(&specs);
        let snap = db.snapshot();
        let engine = Engine::new(EngineOptions { delayed_name_removal: delayed, ..EngineOptions::default() });
        let operands: Vec<&str> = picks.iter().map(|&i| OPERANDS[i]).collect();
        let chain = operands.join(" or ");
        let pairs = unchained(&operands);
        let (start, end, step) =
            (BASE + start_min * MINUTE, BASE + (start_min + span_min) * MINUTE, step_min * MINUTE);
        let over = format!("{chain} over [{start}, {end}] step {step}");
        agree(engine.range(&snap, &chain, start, end, step), engine.range(&snap, &pairs, start, end, step), &over)?;
        agree(engine.instant(&snap, &chain, end), engine.instant(&snap, &pairs, end), &format!("{chain} at {end}"))?;
    }
}

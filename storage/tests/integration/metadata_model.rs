//! `select`, `label_names` and `label_values` with matchers and time ranges checked against
//! `MemStore`, the plain model: data spread over the head, several partition files and
//! tombstones, with restarts, plus series the index knows that hold no data (every sample
//! rejected, or all deleted), so the fast lookups must leave out exactly the series without a
//! sample in the range.
//!
//! `STRATA_SLOW_TESTS=1` runs many more cases.

use proptest::prelude::*;
use storage::mem::MemStore;
use storage::{Batch, Db, Labels, MatchOp, Matcher, Options, Querier, Sample};

const BASE: i64 = 1_700_000_000_000;
const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
const RETENTION: i64 = 3 * HOUR;

/// The label set of series `s`: two metric names, `x` and `y` present on some series only.
fn labels(s: u8) -> Labels {
    let mut pairs = vec![("__name__", if s.is_multiple_of(2) { "a" } else { "b" }.to_string())];
    if !s.is_multiple_of(3) {
        pairs.push(("x", (s % 4).to_string()));
    }
    if s % 5 < 3 {
        pairs.push(("y", if s.is_multiple_of(5) { "p" } else { "q" }.to_string()));
    }
    Labels::from_pairs(&pairs)
}

#[derive(Debug, Clone)]
enum Op {
    /// Samples of series `s` at these minutes after BASE.
    Append(u8, Vec<u16>),
    /// A series whose only sample is too far in the future: created in the index, no data.
    Rejected(u8),
    Flush,
    /// Deletes minutes `[from, from + len]` of series matching `x=<v>`.
    Delete(u8, u16, u16),
    /// Close and open again (the index and per-series state are rebuilt from files and WAL).
    Restart,
    /// Retention: whole partitions before the one holding `newest sample - RETENTION` go.
    Retention,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..12, proptest::collection::vec(0u16..360, 1..6)).prop_map(|(s, t)| Op::Append(s, t)),
        1 => (12u8..16).prop_map(Op::Rejected),
        2 => Just(Op::Flush),
        1 => (0u8..4, 0u16..360, 0u16..120).prop_map(|(v, from, len)| Op::Delete(v, from, len)),
        1 => Just(Op::Restart),
        1 => Just(Op::Retention),
    ]
}

fn matcher() -> impl Strategy<Value = Matcher> {
    let names = prop_oneof![Just("__name__"), Just("x"), Just("y"), Just("z")];
    let values = prop_oneof![
        Just(""),
        Just("a"),
        Just("1"),
        Just("2"),
        Just("p"),
        Just("q"),
        Just("1|2"),
        Just(".+"),
        Just("p|")
    ];
    let ops = prop_oneof![
        Just(MatchOp::Equal),
        Just(MatchOp::NotEqual),
        Just(MatchOp::Regex),
        Just(MatchOp::NotRegex)
    ];
    (names, ops, values).prop_map(|(n, op, v)| Matcher::new(op, n, v).unwrap())
}

/// A time range: all of time, or a window of a few hours around the data.
fn range() -> impl Strategy<Value = (i64, i64)> {
    prop_oneof![
        1 => Just((i64::MIN, i64::MAX)),
        4 => (-60i64..420, 0i64..240).prop_map(|(from, len)| (BASE + from * MINUTE, BASE + (from + len) * MINUTE)),
        1 => (-60i64..420).prop_map(|at| (BASE + at * MINUTE, BASE + at * MINUTE)),
    ]
}

fn options(dir: &std::path::Path) -> Options {
    let mut o = Options::new(dir);
    o.maintenance_interval = std::time::Duration::from_secs(3600);
    o.partition_ms = HOUR;
    o.retention_ms = RETENTION;
    o.ooo_window_ms = Some(100 * 24 * HOUR);
    o.block_samples_max = 3;
    o.block_grid_ms = 10 * MINUTE;
    o
}

fn check(db: &Db, model: &MemStore, queries: &[(Vec<Matcher>, (i64, i64))]) -> Result<(), TestCaseError> {
    let snap = db.snapshot();
    for (matchers, (mint, maxt)) in queries {
        let (mint, maxt) = (*mint, *maxt);
        let what = format!("{matchers:?} [{mint}, {maxt}]");
        prop_assert_eq!(
            snap.label_names(matchers, mint, maxt).unwrap(),
            model.label_names(matchers, mint, maxt).unwrap(),
            "label_names {}",
            what
        );
        for name in ["__name__", "x", "y", "z", "h", "g"] {
            prop_assert_eq!(
                snap.label_values(name, matchers, mint, maxt).unwrap(),
                model.label_values(name, matchers, mint, maxt).unwrap(),
                "label_values {} {}",
                name,
                what
            );
        }
        let got =
            snap.select(matchers, mint, maxt).map(|v| v.into_iter().map(|s| s.labels).collect::<Vec<_>>());
        let want =
            model.select(matchers, mint, maxt).map(|v| v.into_iter().map(|s| s.labels).collect::<Vec<_>>());
        match (got, want) {
            (Ok(got), Ok(want)) => prop_assert_eq!(got, want, "select {}", what),
            (Err(_), Err(_)) => {}
            (got, want) => prop_assert!(false, "select {}: {:?} vs {:?}", what, got, want),
        }
    }
    Ok(())
}

fn run(ops: Vec<Op>, queries: Vec<(Vec<Matcher>, (i64, i64))>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let mut db = Db::open(options(dir.path())).unwrap();
    let mut model = MemStore::new();
    let mut newest = i64::MIN;
    for op in ops {
        match op {
            Op::Append(s, minutes) => {
                let samples: Vec<Sample> = minutes
                    .iter()
                    .map(|m| Sample::new(BASE + i64::from(*m) * MINUTE, f64::from(*m)))
                    .collect();
                let mut batch = Batch::new();
                batch.push(labels(s), samples.clone());
                let outcome = db.append(&batch).unwrap();
                let mut sorted = samples;
                sorted.sort_by_key(|x| x.t);
                newest = newest.max(sorted.last().map_or(i64::MIN, |x| x.t));
                // Samples in partitions retention deletes are refused, measured back from the
                // newest sample (this batch's included).
                let first_kept = (newest - RETENTION).div_euclid(HOUR) * HOUR;
                let before = sorted.len();
                sorted.retain(|x| x.t >= first_kept);
                prop_assert_eq!(outcome.outside_retention, (before - sorted.len()) as u64);
                model.append(&labels(s), &sorted);
            }
            Op::Rejected(s) => {
                let mut batch = Batch::new();
                batch.push(labels(s), vec![Sample::new(i64::MAX / 2, 1.0)]);
                let outcome = db.append(&batch).unwrap();
                prop_assert_eq!(outcome.too_far_future, 1);
            }
            Op::Flush => db.flush().unwrap(),
            Op::Delete(v, from, len) => {
                let ms = [Matcher::equal("x", v.to_string())];
                let (mint, maxt) = (BASE + i64::from(from) * MINUTE, BASE + i64::from(from + len) * MINUTE);
                db.delete(&ms, mint, maxt).unwrap();
                model.delete(&ms, mint, maxt);
            }
            Op::Retention => {
                db.apply_retention().unwrap();
                if newest != i64::MIN {
                    model.drop_before((newest - RETENTION).div_euclid(HOUR) * HOUR);
                }
            }
            Op::Restart => {
                db.close().unwrap();
                drop(db);
                db = Db::open(options(dir.path())).unwrap();
            }
        }
    }
    check(&db, &model, &queries)?;
    // The same after compaction rewrote files and applied the tombstones.
    db.compact().unwrap();
    db.clean_tombstones().unwrap();
    check(&db, &model, &queries)
}

/// Many values and candidates, so the lookups cross their copy batches (512 values), build a
/// candidate bitmap, gallop through long postings and go on past first series without data:
/// 2100 series, each value of `h` on three metrics, data placed so that many values have data
/// in the queried windows only in a later series, some only outside them or between two samples
/// of one block, some none at all.
#[test]
fn lookups_over_many_values_match_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path());
    // Data 400 minutes apart, none of it refused as older than retention.
    o.retention_ms = 24 * HOUR;
    let db = Db::open(o).unwrap();
    let mut model = MemStore::new();
    let mut batch = Batch::new();
    // Blocks are cut on a 10-minute grid (from the epoch): `cell` is the first whole minute
    // after BASE in a new grid cell.
    let cell = 10 - BASE.rem_euclid(10 * MINUTE).div_euclid(MINUTE);
    for s in 0..2100u32 {
        let host = s / 3;
        let labels = Labels::from_pairs(&[
            ("__name__", format!("m{}", s % 3).as_str()),
            ("h", format!("h{host:04}").as_str()),
            ("g", (host % 7).to_string().as_str()),
        ]);
        // Two samples in one block, so a window between them straddles a block without a
        // sample in it.
        let k = cell + 10 * i64::from(host % 5) + 1;
        let minutes = match host % 4 {
            0 => vec![k, k + 8, 200],
            1 if s % 3 == 2 => vec![cell + 4, 200],
            1 | 2 => vec![400],
            _ => {
                // Every sample rejected: in the index, without data.
                batch.push(labels, vec![Sample::new(i64::MAX / 2, 1.0)]);
                continue;
            }
        };
        let samples: Vec<Sample> = minutes.iter().map(|m| Sample::new(BASE + m * MINUTE, 1.0)).collect();
        model.append(&labels, &samples);
        batch.push(labels, samples);
    }
    db.append(&batch).unwrap();
    let queries: Vec<Vec<Matcher>> = vec![
        vec![],
        vec![Matcher::equal("__name__", "m2")],
        vec![Matcher::equal("__name__", "m0")],
        vec![Matcher::equal("g", "3")],
        vec![Matcher::new(MatchOp::Regex, "h", "h00.*").unwrap()],
        vec![Matcher::equal("h", "h0001")],
    ];
    let ranges = [
        (i64::MIN, i64::MAX),
        (BASE, BASE + 30 * MINUTE),
        (BASE + 30 * MINUTE, BASE + 300 * MINUTE),
        (BASE + (cell + 3) * MINUTE, BASE + (cell + 6) * MINUTE),
    ];
    let all: Vec<_> = queries.iter().flat_map(|q| ranges.iter().map(move |r| (q.clone(), *r))).collect();
    check(&db, &model, &all).unwrap();
    db.flush().unwrap();
    check(&db, &model, &all).unwrap();
    let gone = [Matcher::equal("g", "1")];
    db.delete(&gone, BASE, BASE + 100 * MINUTE).unwrap();
    model.delete(&gone, BASE, BASE + 100 * MINUTE);
    check(&db, &model, &all).unwrap();
}

fn cases() -> u32 {
    if std::env::var_os("STRATA_SLOW_TESTS").is_some() { 1000 } else { 48 }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]
    #[test]
    fn lookups_match_the_model(
        ops in proptest::collection::vec(op(), 1..40),
        queries in proptest::collection::vec((proptest::collection::vec(matcher(), 0..3), range()), 1..12),
    ) {
        run(ops, queries)?;
    }
}

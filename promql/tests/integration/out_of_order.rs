//! Out-of-order data at the query level: the PromQL answers over a real
//! `storage::Db` do not depend on the order the data arrived in, and block statistics are never
//! used for a block that out-of-order data overlaps.
//!
//! - `permuted_batches_answer_the_same`: random batches of a gauge `m` (small integers, stale
//!   markers, odd NaNs, several writes at one timestamp) and a counter `c_total` (mostly rising,
//!   with resets and rewrites) go into two databases, (a) in time order and (b) as a random
//!   permutation of the same batches, with random flushes (files with block statistics) and
//!   compactions between batches, the rest left in the head. Where the permutation keeps the
//!   writes to each (series, timestamp) in their relative order, a fixed list of queries
//!   (`rate`, `increase`, `*_over_time`, `max by`, `sum(rate)`, instant selectors) evaluated
//!   with push-down over both must give the same series, timestamps and float bits. Over each
//!   database, push-down on and off must agree too.
//! - `out_of_order_samples_inside_a_flushed_block_are_decoded`: a day flushed into hour
//!   blocks, then late samples inside some of those blocks (in the head, then in a second file
//!   of the same partition, then compacted): hourly `max_over_time` sees them, and answers
//!   from statistics only the blocks they leave alone.
//!
//! The out-of-order window is left at its default. `PROPTEST_CASES` sets the cases (default
//! 64); `STRATA_SLOW_TESTS=1` runs 1,000.

use promql::{Engine, EngineOptions, QueryResult};
use proptest::prelude::*;
use storage::testing::keeps_write_order;
use storage::{Batch, Db, Labels, Options, Sample, stale_nan};

use crate::common::bits;

/// A whole day, so hourly steps line up with hour-grid blocks.
const BASE: i64 = 1_699_920_000_000;
const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
/// Batch `i` writes around `BASE + i * BATCH_SPAN`.
const BATCH_SPAN: i64 = 40 * MINUTE;
/// Timestamps are multiples of this, so writes meet at timestamps.
const SLOT: i64 = 30_000;
const SLOTS: i64 = BATCH_SPAN / SLOT;

fn slow() -> bool {
    std::env::var("STRATA_SLOW_TESTS").is_ok_and(|v| v == "1")
}

fn gauge(s: u8) -> Labels {
    Labels::from_pairs(&[("__name__", "m"), ("s", &s.to_string()), ("h", if s == 0 { "a" } else { "b" })])
}

fn counter(s: u8) -> Labels {
    Labels::from_pairs(&[("__name__", "c_total"), ("s", &s.to_string())])
}

/// What a write stores: a gauge value, or for the counter a value that rises with time (so any
/// arrival order leaves a mostly rising counter), a reset, or a stale marker.
#[derive(Debug, Clone, Copy)]
enum Val {
    Gauge(f64),
    Rising(u8),
    Reset(u8),
    Stale,
}

fn gauge_value() -> impl Strategy<Value = f64> {
    prop_oneof![
        8 => (-3i32..20).prop_map(f64::from),
        1 => Just(stale_nan()),
        1 => prop_oneof![
            Just(f64::NAN),
            Just(f64::from_bits(0x7ff8_0000_0000_0abc)),
            Just(f64::INFINITY),
            Just(-0.0),
            Just(0.1),
            Just(3.0e15),
        ],
    ]
}

/// (series: 0..3 the gauges, 3..5 the counters; slot; value; repeat the previous write's
/// series and timestamp).
fn raw_write() -> impl Strategy<Value = (u8, i64, Val, bool)> {
    (
        0u8..5,
        prop_oneof![6 => 0..SLOTS, 1 => -300i64..0],
        gauge_value(),
        prop_oneof![10 => (0u8..4).prop_map(Val::Rising), 1 => (0u8..4).prop_map(Val::Reset), 1 => Just(Val::Stale)],
        proptest::bool::weighted(0.15),
    )
        .prop_map(|(s, slot, g, c, repeat)| (s, slot, if s < 3 { Val::Gauge(g) } else { c }, repeat))
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Step {
    Flush,
    Compact,
}

#[derive(Debug, Clone)]
struct Case {
    /// Per batch, in time order: (series, time, value).
    batches: Vec<Vec<(u8, i64, Val)>>,
    perm: Vec<usize>,
    /// What runs after the `i`-th batch applied, in both databases.
    steps: Vec<Option<Step>>,
    block_samples: usize,
    range_min: i64,
    step_min: i64,
}

fn case() -> impl Strategy<Value = Case> {
    (proptest::collection::vec(proptest::collection::vec(raw_write(), 1..40), 1..12), any::<bool>())
        .prop_flat_map(|(raw, overlap)| {
            let n = raw.len();
            let batches: Vec<Vec<(u8, i64, Val)>> = raw
                .into_iter()
                .enumerate()
                .map(|(i, writes)| {
                    let start = BASE + i as i64 * BATCH_SPAN;
                    let mut out: Vec<(u8, i64, Val)> = Vec::new();
                    for (s, slot, v, repeat) in writes {
                        let slot = if overlap { slot } else { slot.rem_euclid(SLOTS) };
                        let (s, t) = match out.last() {
                            // The gauges and the counters keep to their own kind of value.
                            Some(&(ps, pt, _)) if repeat && (ps < 3) == (s < 3) => (ps, pt),
                            _ => (s, start + slot * SLOT),
                        };
                        out.push((s, t, v));
                    }
                    out
                })
                .collect();
            (
                Just(batches),
                Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
                proptest::collection::vec(
                    prop_oneof![2 => Just(None), 2 => Just(Some(Step::Flush)), 1 => Just(Some(Step::Compact))],
                    n,
                ),
                1usize..20,
                prop_oneof![Just(5i64), Just(15), Just(60), Just(120), 1i64..180],
                prop_oneof![Just(1i64), Just(5), Just(60), 1i64..90],
            )
                .prop_map(|(batches, perm, steps, block_samples, range_min, step_min)| Case {
                    batches,
                    perm,
                    steps,
                    block_samples,
                    range_min,
                    step_min,
                })
        })
}

fn open(dir: &std::path::Path, block_samples: usize) -> Db {
    let mut o = Options::new(dir);
    o.maintenance_interval = std::time::Duration::from_secs(3600);
    o.partition_ms = 3 * HOUR;
    o.block_samples_max = block_samples;
    o.compact_files_min = 2;
    Db::open(o).unwrap()
}

/// A temporary directory, on tmpfs when there is one (the WAL fsyncs every batch).
fn scratch() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(d) = tempfile::tempdir_in(shm)
    {
        return d;
    }
    tempfile::tempdir().unwrap()
}

/// Appends one batch: in time order (`sorted`: one entry per series, stably sorted by time) or
/// as generated (one entry per write).
fn append(db: &Db, writes: &[(u8, i64, Val)], sorted: bool) {
    let sample = |&(_, t, v): &(u8, i64, Val)| {
        let v = match v {
            Val::Gauge(v) => v,
            Val::Rising(k) => (t - BASE) as f64 / 1000.0 + f64::from(k) * 0.25,
            Val::Reset(k) => f64::from(k),
            Val::Stale => stale_nan(),
        };
        Sample::new(t, v)
    };
    let labels = |s: u8| if s < 3 { gauge(s) } else { counter(s - 3) };
    let mut batch = Batch::new();
    if sorted {
        for s in 0..5 {
            let mut e: Vec<Sample> = writes.iter().filter(|w| w.0 == s).map(sample).collect();
            e.sort_by_key(|x| x.t);
            if !e.is_empty() {
                batch.push(labels(s), e);
            }
        }
    } else {
        for w in writes {
            batch.push(labels(w.0), vec![sample(w)]);
        }
    }
    let out = db.append(&batch).unwrap();
    assert_eq!(out.rejected(), 0, "{out:?}");
}

fn apply(dir: &std::path::Path, c: &Case, order: &[usize], sorted: bool) -> Db {
    let db = open(dir, c.block_samples);
    for (i, &b) in order.iter().enumerate() {
        append(&db, &c.batches[b], sorted);
        match c.steps[i] {
            Some(Step::Flush) => db.flush().unwrap(),
            Some(Step::Compact) => {
                db.flush().unwrap();
                db.compact().unwrap();
            }
            None => {}
        }
    }
    db
}

fn engine(pushdown: bool) -> Engine {
    Engine::new(EngineOptions { pushdown, ..EngineOptions::default() })
}

const QUERIES: [&str; 12] = [
    "rate(c_total[{r}])",
    "increase(c_total[{r}])",
    "rate(m[{r}])",
    "max_over_time(m[{r}])",
    "min_over_time(m[{r}])",
    "sum_over_time(m[{r}])",
    "count_over_time({__name__=~\"m|c_total\"}[{r}])",
    "last_over_time(m[{r}])",
    "max by (h) (max_over_time(m[{r}]))",
    "sum(rate(c_total[{r}]))",
    "m",
    "c_total",
];

/// The answer as compared: series, timestamps and float bits, plus the annotations.
type Answer = (Vec<(String, i64, u64)>, Vec<String>, Vec<String>);

fn answer(r: &QueryResult) -> Answer {
    let notes = |v: &[_]| v.iter().map(|x| format!("{x:?}")).collect::<Vec<_>>();
    (bits(r), notes(&r.warnings), notes(&r.infos))
}

/// Every query of [`QUERIES`], as a range query and as an instant query at the range's end.
fn answers(db: &Db, c: &Case, pushdown: bool) -> Vec<(String, Answer)> {
    let snap = db.snapshot();
    let e = engine(pushdown);
    let (start, end) = (BASE - 3 * HOUR, BASE + c.batches.len() as i64 * BATCH_SPAN + HOUR);
    let mut out = Vec::new();
    for q in QUERIES {
        let q = q.replace("{r}", &format!("{}m", c.range_min));
        let r = e.range(&snap, &q, start, end, c.step_min * MINUTE).unwrap();
        out.push((format!("{q} (range)"), answer(&r)));
        let t = BASE + c.batches.len() as i64 * BATCH_SPAN / 2;
        let r = e.instant(&snap, &q, t).unwrap();
        out.push((format!("{q} (instant at {t})"), answer(&r)));
    }
    out
}

fn assert_same(x: &[(String, Answer)], y: &[(String, Answer)], what: &str) {
    for ((q, a), (_, b)) in x.iter().zip(y) {
        assert_eq!(a, b, "{what}: {q}");
    }
}

fn run(c: Case) {
    let (da, db_dir) = (scratch(), scratch());
    let in_order: Vec<usize> = (0..c.batches.len()).collect();
    let a = apply(da.path(), &c, &in_order, true);
    let b = apply(db_dir.path(), &c, &c.perm, false);
    let (a_on, b_on) = (answers(&a, &c, true), answers(&b, &c, true));
    assert_same(&b_on, &answers(&b, &c, false), "(b) push-down on vs off");
    assert_same(&a_on, &answers(&a, &c, false), "(a) push-down on vs off");
    // Only where the permutation keeps the writes to each (series, timestamp) in their relative
    // order does the same write win in (a) and (b).
    if keeps_write_order(&c.batches, &c.perm, |&(s, t, _)| (s, t)) {
        assert_same(&a_on, &b_on, "(a) vs (b)");
    }
}

fn cases() -> u32 {
    let default = if slow() { 1000 } else { 64 };
    std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn permuted_batches_answer_the_same(c in case()) {
        run(c);
    }
}

#[test]
fn out_of_order_samples_inside_a_flushed_block_are_decoded() {
    let dir = scratch();
    let db = open(dir.path(), 1024);
    let l = gauge(0);
    let mut batch = Batch::new();
    // A day every 15 s, values in 0..50: hour blocks (the default grid) with statistics.
    let samples = (1..=24 * 240).map(|i| Sample::new(BASE + i * 15_000, ((i * 7) % 50) as f64)).collect();
    batch.push(l.clone(), samples);
    db.append(&batch).unwrap();
    db.flush().unwrap();
    let (start, end) = (BASE + HOUR, BASE + 24 * HOUR);
    let query = "max_over_time(m[1h])";
    let run = |db: &Db| {
        let snap = db.snapshot();
        let on = engine(true).range(&snap, query, start, end, HOUR).unwrap();
        let off = engine(false).range(&snap, query, start, end, HOUR).unwrap();
        assert_eq!(bits(&on), bits(&off), "push-down on vs off");
        on
    };
    let before = run(&db);
    assert_eq!(before.stats.blocks_decoded, 0, "{:?}", before.stats);
    let all_blocks = before.stats.blocks_from_stats;
    // Late samples, hours behind the newest, inside the blocks of hours 3 and 17: a new maximum
    // (1000 at 02:30:07) and a rewrite of a sample already in a block (17:00:15 becomes 500).
    let late = vec![
        Sample::new(BASE + 2 * HOUR + 30 * MINUTE + 7000, 1000.0),
        Sample::new(BASE + 16 * HOUR + 15_000, 500.0),
    ];
    let mut batch = Batch::new();
    batch.push(l.clone(), late);
    let out = db.append(&batch).unwrap();
    assert_eq!(out.rejected(), 0, "{out:?}");
    let at = |r: &QueryResult, t: i64| {
        bits(r).iter().find(|(_, at, _)| *at == t).map(|(_, _, v)| f64::from_bits(*v)).unwrap()
    };
    for phase in ["in the head", "in a second file", "compacted"] {
        match phase {
            "in a second file" => db.flush().unwrap(),
            "compacted" => db.compact_all().unwrap(),
            _ => {}
        }
        let r = run(&db);
        assert_eq!(at(&r, BASE + 3 * HOUR), 1000.0, "{phase}");
        assert_eq!(at(&r, BASE + 17 * HOUR), 500.0, "{phase}");
        assert_eq!(bits(&r).len(), bits(&before).len(), "{phase}");
        if phase == "compacted" {
            // One file again, whose statistics include the late samples.
            assert_eq!(r.stats.blocks_from_stats, all_blocks, "{phase}: {:?}", r.stats);
            assert_eq!(r.stats.blocks_decoded, 0, "{phase}: {:?}", r.stats);
        } else {
            // Only the two blocks the late samples fall in are decoded (with the second
            // file's block of each, once flushed).
            assert_eq!(r.stats.blocks_from_stats, all_blocks - 2, "{phase}: {:?}", r.stats);
            let decoded = if phase == "in the head" { 2 } else { 4 };
            assert_eq!(r.stats.blocks_decoded, decoded, "{phase}: {:?}", r.stats);
        }
    }
}

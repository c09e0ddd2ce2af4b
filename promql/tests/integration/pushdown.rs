//! Push-down (`EngineOptions::pushdown`) against the decoding path, over a real `storage::Db`
//! whose data went through flushes into partition files, so block statistics are really used.
//! Every answer must be identical, float bits included.
//!
//! `STRATA_SLOW_TESTS=1` runs many more cases.

use promql::{Engine, EngineOptions, QueryResult};
use proptest::prelude::*;
use storage::{Batch, Db, Labels, Options, Sample, stale_nan};

use crate::common::bits;

/// A whole hour, so hourly steps line up with hour-grid blocks.
const BASE: i64 = 1_699_999_200_000;
const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;

fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        6 => (-3i32..4).prop_map(f64::from),
        // Integers whose sums leave the exact range after a few samples.
        1 => prop_oneof![Just(3.0e15), Just(-4.0e15), Just(9_007_199_254_740_991.0)],
        2 => any::<f64>(),
        1 => Just(stale_nan()),
        1 => prop_oneof![
            Just(f64::NAN),
            Just(f64::from_bits(0x7ff8_0000_0000_0abc)),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(-0.0),
        ],
    ]
}

#[derive(Debug, Clone)]
enum Op {
    /// Samples for series `s` at `cursor + dt` seconds (negative: out of order or rewrites).
    Append(u8, Vec<(i64, f64)>),
    /// Samples of the counter `c_total{s}` at `cursor + dt` seconds: each value is the counter's
    /// last value plus the increment, or the increment itself after a reset (`None`: a stale
    /// marker).
    Count(u8, Vec<(i64, Option<(f64, bool)>)>),
    Advance(i64),
    Flush,
}

/// A counter's increment, whether it resets first, or a stale marker.
fn increment() -> impl Strategy<Value = Option<(f64, bool)>> {
    prop_oneof![
        12 => (0i32..5).prop_map(|i| Some((f64::from(i), false))),
        3 => prop_oneof![Just(0.25), Just(1.5), Just(0.1)].prop_map(|f| Some((f, false))),
        1 => (0i32..5).prop_map(|i| Some((f64::from(i), true))),
        1 => Just(None),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..3, proptest::collection::vec((-900i64..600, value()), 1..30)).prop_map(|(s, v)| Op::Append(s, v)),
        // Mostly in order, as counters are scraped.
        5 => (0u8..2, proptest::collection::vec((prop_oneof![9 => 0i64..600, 1 => -600i64..0], increment()), 1..30))
            .prop_map(|(s, v)| Op::Count(s, v)),
        4 => (60i64..3600).prop_map(Op::Advance),
        2 => Just(Op::Flush),
    ]
}

fn labels(s: u8) -> Labels {
    Labels::from_pairs(&[("__name__", "m"), ("s", &s.to_string()), ("h", if s == 0 { "a" } else { "b" })])
}

fn open(dir: &std::path::Path, block_samples: usize) -> Db {
    let mut o = Options::new(dir);
    o.maintenance_interval = std::time::Duration::from_secs(3600);
    o.partition_ms = 3 * HOUR;
    o.ooo_window_ms = Some(6 * HOUR);
    o.block_samples_max = block_samples;
    Db::open(o).unwrap()
}

fn apply(db: &Db, ops: &[Op]) {
    let mut now = BASE;
    let mut counters = [0.0; 2];
    for op in ops {
        match op {
            Op::Count(s, incs) => {
                let c = &mut counters[usize::from(*s)];
                let samples = incs
                    .iter()
                    .map(|&(dt, inc)| {
                        let v = match inc {
                            Some((inc, reset)) => {
                                *c = if reset { inc } else { *c + inc };
                                *c
                            }
                            None => stale_nan(),
                        };
                        Sample::new(now + dt * 1000, v)
                    })
                    .collect();
                let mut batch = Batch::new();
                batch.push(Labels::from_pairs(&[("__name__", "c_total"), ("s", &s.to_string())]), samples);
                db.append(&batch).unwrap();
            }
            Op::Append(s, samples) => {
                let mut batch = Batch::new();
                batch.push(
                    labels(*s),
                    samples.iter().map(|&(dt, v)| Sample::new(now + dt * 1000, v)).collect(),
                );
                db.append(&batch).unwrap();
            }
            Op::Advance(secs) => now += secs * 1000,
            Op::Flush => db.flush().unwrap(),
        }
    }
}

fn engine(pushdown: bool) -> Engine {
    Engine::new(EngineOptions { pushdown, experimental_functions: true, ..EngineOptions::default() })
}

/// Runs `query` both ways over `[start, end]` and asserts equal answers; returns the push-down
/// run's result.
fn same(db: &Db, query: &str, start: i64, end: i64, step: i64) -> QueryResult {
    let snap = db.snapshot();
    let pushed = engine(true).range(&snap, query, start, end, step).unwrap();
    let decoded = engine(false).range(&snap, query, start, end, step).unwrap();
    assert_eq!(bits(&pushed), bits(&decoded), "{query} over [{start}, {end}] step {step}");
    assert_eq!(pushed.warnings, decoded.warnings);
    // `rate` and `increase` of a name without a counter suffix note it either way.
    assert_eq!(pushed.infos, decoded.infos, "{query}");
    pushed
}

/// Runs the instant `query` both ways at `t` and asserts equal answers; returns the push-down
/// run's result.
fn same_instant(db: &Db, query: &str, t: i64) -> QueryResult {
    let snap = db.snapshot();
    let pushed = engine(true).instant(&snap, query, t).unwrap();
    let decoded = engine(false).instant(&snap, query, t).unwrap();
    assert_eq!(bits(&pushed), bits(&decoded), "{query} at {t}");
    assert_eq!(pushed.warnings, decoded.warnings);
    pushed
}

const FUNCTIONS: [&str; 8] = [
    "min_over_time",
    "max_over_time",
    "count_over_time",
    "first_over_time",
    "last_over_time",
    "present_over_time",
    "sum_over_time",
    "avg_over_time",
];

fn cases() -> u32 {
    if std::env::var_os("STRATA_SLOW_TESTS").is_some() { 500 } else { 24 }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn pushdown_equals_decoding(
        ops in proptest::collection::vec(op(), 1..30),
        block_samples in 1usize..40,
        range_min in prop_oneof![Just(60i64), Just(15), 1i64..240],
        step_min in prop_oneof![Just(60i64), Just(15), 1i64..120],
        start_min in 0i64..240,
        modifier in prop_oneof![Just(""), Just(" offset 10m"), Just(" offset -30m"), Just(" @ end()"), Just(" @ 1699999800")],
        tiled in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path(), block_samples);
        apply(&db, &ops);
        // Tiled windows (step = range, as hourly dashboards use) split blocks for sums.
        let step_min = if tiled { range_min } else { step_min };
        let (start, step) = (BASE + start_min * MINUTE, step_min * MINUTE);
        let end = start + 6 * HOUR;
        for f in FUNCTIONS {
            same(&db, &format!("{f}(m[{range_min}m]{modifier})"), start, end, step);
        }
        for f in ["rate", "increase", "delta"] {
            for metric in ["m", "c_total"] {
                same(&db, &format!("{f}({metric}[{range_min}m]{modifier})"), start, end, step);
            }
        }
        same(&db, &format!("sum by (s) (increase(c_total[{range_min}m]{modifier}))"), start, end, step);
        same(&db, &format!("sum by (h) (max_over_time(m[{range_min}m]{modifier}))"), start, end, step);
        // Answered per group by storage (`group_extreme.rs`), except `by (__name__)`.
        for q in [
            "max(max_over_time(m[{r}m]{o}))",
            "min by (h) (min_over_time(m[{r}m]{o}))",
            "max without (s) (max_over_time(m[{r}m]{o}))",
            "min(min_over_time({__name__=~\"m|c_total\"}[{r}m]{o}))",
            "max by (__name__) (max_over_time(m[{r}m]{o}))",
            // Sees the order of the aggregation's output series.
            "limitk(1, max by (h) (max_over_time(m[{r}m]{o})))",
        ] {
            let q = q.replace("{r}", &range_min.to_string()).replace("{o}", modifier);
            same(&db, &q, start, end, step);
        }
        same(&db, &format!("count_over_time(m{{s=\"1\"}}[{range_min}m]{modifier}) > 2"), start, end, step);
        // An instant selector takes the latest sample from the statistics of the block that
        // ends with it.
        for t in [start, start + 7 * MINUTE, end, end + HOUR] {
            for q in ["m{o}", "timestamp(m{o})", "m{o} > 0", "c_total{o}", "last_over_time(m[5m]{o})"] {
                same_instant(&db, &q.replace("{o}", modifier), t);
            }
        }
        // Comparisons with a literal skip blocks none of whose values passes.
        for op in ["==", "!=", ">", "<", ">=", "<="] {
            for c in ["1", "-2", "NaN", "Inf"] {
                same(&db, &format!("m{modifier} {op} {c}"), start, end, step);
            }
            same(&db, &format!("0 {op} c_total{modifier}"), start, end, step);
        }
    }
}

/// A day of 15 s data flushed into hour blocks, above 90 in one hour of the day only: `m > 90`
/// decodes the blocks of that hour and reads the others from their statistics, with the
/// decoding path's answer; so do the same filter with the literal on the left, and others.
#[test]
fn comparisons_skip_blocks_where_nothing_passes() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), 1024);
    let mut batch = Batch::new();
    let samples = (1..=24 * 240)
        .map(|i| Sample::new(BASE + i * 15_000, if (10 * 240..11 * 240).contains(&i) { 95.0 } else { 50.0 }))
        .collect();
    batch.push(labels(0), samples);
    db.append(&batch).unwrap();
    db.flush().unwrap();
    let (start, end) = (BASE + 7_500, BASE + 24 * HOUR);
    for q in ["m > 90", "90 < m", "m >= 95", "m == 95"] {
        let r = same(&db, q, start, end, 15_000);
        let QueryResult { value: promql::Value::Matrix(m), stats, .. } = &r else {
            panic!("{q}: not a matrix")
        };
        assert_eq!(m.iter().map(|s| s.points.len()).sum::<usize>(), 240, "{q}");
        // Of the 24 hour blocks and the 8 one-sample blocks on 3 h partition boundaries, the
        // hot hour touches at most 3: its first sample ends the hour block before it (blocks
        // are left-open hours) and lies on a partition boundary.
        assert!(stats.blocks_decoded <= 3, "{q}: {stats:?}");
        assert_eq!(stats.blocks_from_stats + stats.blocks_decoded, 24 + 8, "{q}: {stats:?}");
        assert!(stats.samples_decoded <= 3 * 240, "{q}: {stats:?}");
    }
    // `!=` passes NaN, which statistics do not describe: nothing is skipped.
    let r = same(&db, "m != 50", start, end, 15_000);
    assert_eq!(r.stats.blocks_from_stats, 0, "{:?}", r.stats);
}

/// A day of 15 s data, flushed into hour-aligned blocks: hourly `max_over_time` is answered
/// from block statistics, and the statistics say so.
#[test]
fn hourly_aggregates_come_from_block_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), 1024);
    for s in 0..3u8 {
        let mut batch = Batch::new();
        let samples = (1..=24 * 240)
            .map(|i| Sample::new(BASE + i * 15_000, ((i * 7 + i64::from(s)) % 101) as f64 - 50.0))
            .collect();
        batch.push(labels(s), samples);
        db.append(&batch).unwrap();
    }
    db.flush().unwrap();
    // Windows (t - 1h, t] at whole hours hold whole blocks: blocks are cut on the same
    // left-open hours. Partitions (3 h here) start on their boundary, so the sample on each of
    // the 8 boundaries inside the day is a block of its own, inside its window too.
    let (start, end) = (BASE + HOUR, BASE + 24 * HOUR);
    let blocks = 3 * (24 + 8);
    for f in FUNCTIONS {
        let r = same(&db, &format!("{f}(m[1h])"), start, end, HOUR);
        assert_eq!(r.stats.series_selected, 3);
        assert_eq!(r.stats.blocks_from_stats, blocks, "{f}: {:?}", r.stats);
        assert_eq!((r.stats.blocks_decoded, r.stats.samples_decoded), (0, 0), "{f}: {:?}", r.stats);
    }
    let r = same(&db, "sum by (h) (max_over_time(m[1h]))", start, end, HOUR);
    assert_eq!(r.stats.blocks_from_stats, blocks);
    // Unaligned windows decode, and still agree.
    // Unaligned windows contain no whole block: storage says so, the engine decodes as usual,
    // and the answers still agree.
    let r = same(&db, "max_over_time(m[1h])", start + 30 * MINUTE, end, HOUR);
    assert_eq!(r.stats.blocks_from_stats, 0, "{:?}", r.stats);
    assert!(r.stats.samples_read > 0, "{:?}", r.stats);
    // The statistics still say what the plain read decoded: every block the range touches.
    assert!(r.stats.blocks_decoded >= 3 * 24, "{:?}", r.stats);
    assert!(r.stats.samples_decoded >= r.stats.samples_read, "{:?}", r.stats);
    // Sums over the same windows split each block at the half hour: about half the samples
    // are decoded, the rest taken from the blocks' sums.
    for f in ["sum_over_time", "avg_over_time"] {
        let r = same(&db, &format!("{f}(m[1h])"), start + 30 * MINUTE, end, HOUR);
        let decoded = r.stats.samples_decoded;
        assert!(decoded > 0 && decoded <= 3 * 23 * 120 + 3 * 8 + 3 * 240, "{f}: {:?}", r.stats);
    }
    // The decoding path answers nothing from statistics and decodes every block in range.
    let snap = db.snapshot();
    let r = engine(false).range(&snap, "max_over_time(m[1h])", start, end, HOUR).unwrap();
    assert_eq!(r.stats.blocks_from_stats, 0);
    assert_eq!(r.stats.samples_read, 3 * 24 * 240);
    assert_eq!((r.stats.blocks_decoded, r.stats.samples_decoded), (blocks, 3 * 24 * 240), "{:?}", r.stats);
}

/// A day of a counter scraped every 15 s, restarting twice (once at an hour's first sample,
/// once inside an hour), flushed into hour blocks: hourly `increase` and `rate` take every
/// block that never decreases from its statistics and decode the one with a reset inside; a
/// day-long instant `increase` likewise. Every answer equals the decoding path's.
#[test]
fn counters_come_from_block_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), 1024);
    let mut batch = Batch::new();
    let mut v = 0.0;
    let samples: Vec<Sample> = (1..=24 * 240)
        .map(|i| {
            // Requests of 0.25 s each, as a `_seconds_total` counter counts them.
            v = if i == 5 * 240 + 1 || i == 17 * 240 + 77 { 0.25 } else { v + 0.25 * ((i * 13) % 7) as f64 };
            Sample::new(BASE + i * 15_000, v)
        })
        .collect();
    batch.push(Labels::from_pairs(&[("__name__", "c_total")]), samples.clone());
    // The same counter under a name without a counter suffix: `rate` notes that it might not
    // be one, from statistics as from samples.
    batch.push(Labels::from_pairs(&[("__name__", "c_seconds")]), samples);
    db.append(&batch).unwrap();
    db.flush().unwrap();
    let (start, end) = (BASE + HOUR, BASE + 24 * HOUR);
    let r = same(&db, "rate(c_seconds[1h])", start, end, HOUR);
    assert!(r.stats.blocks_from_stats > 0 && r.infos.len() == 1, "{:?} {:?}", r.stats, r.infos);
    // 24 hour blocks and the 8 single samples on partition boundaries; hour 17's block (the
    // reset inside) and its window's other blocks decode.
    for f in ["increase", "rate", "delta"] {
        let r = same(&db, &format!("{f}(c_total[1h])"), start, end, HOUR);
        assert_eq!(r.stats.blocks_decoded, u64::from(f != "delta"), "{f}: {:?}", r.stats);
        assert_eq!(r.stats.blocks_from_stats, 32 - r.stats.blocks_decoded, "{f}: {:?}", r.stats);
    }
    let snap = db.snapshot();
    for q in ["increase(c_total[1d])", "rate(c_total[1d])", "sum(increase(c_total[6h]))"] {
        let pushed = engine(true).instant(&snap, q, end).unwrap();
        let decoded = engine(false).instant(&snap, q, end).unwrap();
        assert_eq!(bits(&pushed), bits(&decoded), "{q}");
        assert_eq!((&pushed.warnings, &pushed.infos), (&decoded.warnings, &decoded.infos), "{q}");
        assert!(pushed.stats.blocks_from_stats > 0, "{q}: {:?}", pushed.stats);
    }
}

/// The latest sample of each series, flushed into hour blocks, comes from the statistics of the
/// block ending with it; once a newer sample is in the head, or the block ends in a stale
/// marker, the series is read instead. Every answer equals the decoding path's.
#[test]
fn instant_selectors_take_the_latest_sample_from_block_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), 1024);
    let mut batch = Batch::new();
    for s in 0..3u8 {
        let samples =
            (1..=4 * 240).map(|i| Sample::new(BASE + i * 15_000, f64::from(s) + i as f64)).collect();
        batch.push(labels(s), samples);
    }
    db.append(&batch).unwrap();
    db.flush().unwrap();
    let t = BASE + 4 * HOUR + MINUTE;
    let r = same_instant(&db, "m", t);
    assert_eq!(r.stats.blocks_from_stats, 3, "{:?}", r.stats);
    assert_eq!((r.stats.blocks_decoded, r.stats.samples_decoded), (0, 0), "{:?}", r.stats);
    let r = same_instant(&db, "timestamp(m)", t);
    assert_eq!(r.stats.blocks_from_stats, 3, "{:?}", r.stats);

    // A newer sample of series 0 (in the head), and a stale marker ending series 1.
    let mut batch = Batch::new();
    batch.push(labels(0), vec![Sample::new(BASE + 4 * HOUR + 30_000, -1.0)]);
    batch.push(labels(1), vec![Sample::new(BASE + 4 * HOUR + 15_000, stale_nan())]);
    db.append(&batch).unwrap();
    let r = same_instant(&db, "m", t);
    assert_eq!(r.stats.blocks_from_stats, 1, "{:?}", r.stats);
    db.flush().unwrap();
    let r = same_instant(&db, "m", t);
    // Series 0's newest sample is now a block of its own; series 1's ends in a stale marker.
    assert_eq!(r.stats.blocks_from_stats, 2, "{:?}", r.stats);
    let promql::Value::Vector(v) = &r.value else { panic!("not a vector") };
    assert_eq!(v.len(), 2);
}

//! Push-down of windowed aggregates: a [`Snapshot`] answering blocks from their statistics
//! must give, bit for bit, what folding the decoded samples gives
//! ([`decode_window_aggregates`], the oracle), over random data (NaN, ±Inf, signed zeros, stale
//! markers, rewrites, out-of-order writes, deletions), random block sizes and grids, flushes and
//! compactions, and random windows.
//!
//! The same for the group extremes of `max(max_over_time(..))` ([`decode_group_extremes`]).
//!
//! `STRATA_SLOW_TESTS=1` runs many more cases.

use proptest::prelude::*;
use storage::query::{decode_group_extremes, decode_window_aggregates};
use storage::window_agg::{Extreme, Need, ScanStats, WindowAgg};
use storage::{Batch, Db, Labels, Matcher, Options, Querier, Sample, stale_nan};

/// A whole hour, so hourly windows line up with hour-grid blocks.
const BASE: i64 = 1_699_999_200_000;
const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;

#[derive(Debug, Clone)]
enum Op {
    /// Samples for series `s` at `cursor + dt` seconds (negative: out of order or rewrites).
    Append(u8, Vec<(i64, f64)>),
    /// Samples of a counter (series 2) at `cursor + dt` seconds: each value is the counter's
    /// last value plus the increment, or the increment itself after a reset (`None` adds a
    /// stale marker).
    Count(Vec<(i64, Option<(f64, bool)>)>),
    /// Move the cursor forward by this many seconds.
    Advance(i64),
    Flush,
    Compact,
    /// Delete `[cursor + from, cursor + from + len]` seconds of series `s`.
    Delete(u8, i64, i64),
}

fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        6 => (-3i32..4).prop_map(f64::from),
        // Integers whose sums leave the exact range after a few samples.
        1 => prop_oneof![Just(3.0e15), Just(-4.0e15), Just(9_007_199_254_740_991.0)],
        2 => any::<f64>(),
        1 => Just(stale_nan()),
        1 => prop_oneof![
            Just(f64::NAN),
            Just(-f64::NAN),
            Just(f64::from_bits(0x7ff8_0000_0000_0abc)),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(-0.0),
            Just(0.0),
        ],
    ]
}

/// A counter's increment, whether it resets first, or a stale marker.
fn increment() -> impl Strategy<Value = Option<(f64, bool)>> {
    prop_oneof![
        12 => (0i32..5).prop_map(|i| Some((f64::from(i), false))),
        3 => prop_oneof![Just(0.25), Just(1.5), Just(1e-3)].prop_map(|f| Some((f, false))),
        1 => (0i32..5).prop_map(|i| Some((f64::from(i), true))),
        1 => Just(None),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u8..2, proptest::collection::vec((-900i64..900, value()), 1..40)).prop_map(|(s, v)| Op::Append(s, v)),
        // Mostly in order, as counters are scraped.
        6 => proptest::collection::vec((prop_oneof![9 => 0i64..900, 1 => -900i64..0], increment()), 1..40).prop_map(Op::Count),
        4 => (1i64..3600).prop_map(Op::Advance),
        3 => Just(Op::Flush),
        1 => Just(Op::Compact),
        1 => (0u8..3, -3600i64..0, 0i64..1800).prop_map(|(s, from, len)| Op::Delete(s, from, len)),
    ]
}

/// Windows `[r - range + 1, r]` for `n` steps from `start` (seconds from `BASE`), as PromQL's
/// `(r - range, r]`; step 0 repeats one window (`@`). A third of the lists tile time (range =
/// step, as hourly `avg_over_time(x[1h])` does), mostly not aligned with the blocks, where
/// sums split blocks at the window boundaries.
fn windows() -> impl Strategy<Value = Vec<(i64, i64)>> {
    (0i64..6 * 3600, prop_oneof![Just(0i64), 1i64..7200], 1i64..7200, 1usize..30, 0u8..3).prop_map(
        |(start, step, range, n, tiled)| {
            let range = if tiled == 0 && step > 0 { step } else { range };
            (0..n as i64)
                .map(|i| {
                    let r = BASE + (start + i * step) * 1000;
                    (r - range * 1000 + 1, r)
                })
                .collect()
        },
    )
}

fn labels(s: u8) -> Labels {
    Labels::from_pairs(&[("__name__", "m"), ("s", &s.to_string())])
}

fn options(dir: &std::path::Path, block_samples: usize, grid_ms: i64) -> Options {
    let mut o = Options::new(dir);
    o.maintenance_interval = std::time::Duration::from_secs(3600);
    o.partition_ms = 3 * HOUR;
    o.ooo_window_ms = Some(6 * HOUR);
    o.block_samples_max = block_samples;
    o.block_grid_ms = grid_ms;
    o.compact_files_min = 2;
    o
}

fn apply(db: &Db, ops: &[Op]) {
    let mut now = BASE;
    let mut counter = 0.0;
    for op in ops {
        match op {
            Op::Count(incs) => {
                let mut samples: Vec<Sample> = Vec::new();
                for &(dt, inc) in incs {
                    let v = match inc {
                        Some((inc, reset)) => {
                            counter = if reset { inc } else { counter + inc };
                            counter
                        }
                        None => stale_nan(),
                    };
                    samples.push(Sample::new(now + dt * 1000, v));
                }
                let mut batch = Batch::new();
                batch.push(labels(2), samples);
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
            Op::Compact => db.compact().unwrap(),
            Op::Delete(s, from, len) => {
                let mint = now + from * 1000;
                db.delete(&[Matcher::equal("s", s.to_string())], mint, mint + len * 1000).unwrap();
            }
        }
    }
}

/// Asserts push-down equals decoding for every series, window list and [`Need`]; returns the
/// push-down scan counters of [`Need::Values`] and [`Need::Sums`].
fn check(db: &Db, window_lists: &[Vec<(i64, i64)>]) -> ScanStats {
    let snap = db.snapshot();
    let mut total = ScanStats::default();
    for s in snap.select(&[Matcher::equal("__name__", "m")], i64::MIN, i64::MAX).unwrap() {
        let needs = [Need::Values, Need::Sums, Need::Ends, Need::Resets];
        for (windows, need) in window_lists.iter().flat_map(|w| needs.map(|n| (w, n))) {
            let (mut got, mut want) = (Vec::new(), Vec::new());
            let (mut st, mut oracle_st) = (ScanStats::default(), ScanStats::default());
            let answered = snap.window_aggregates(&s, windows, need, &mut got, &mut st).unwrap();
            decode_window_aggregates(&snap, &s, windows, &mut want, &mut oracle_st).unwrap();
            if !answered {
                // Nothing could come from statistics: the caller reads samples instead.
                assert!(got.is_empty() && st == ScanStats::default(), "{got:?} {st:?}");
                continue;
            }
            assert_eq!(got.len(), windows.len());
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g, w, "series {:?} window {i} {:?} of {windows:?}", s.labels, windows[i]);
                // An exact sum from push-down is the decoded one (which is exact then too).
                if let Some(sum) = g.exact_sum() {
                    assert_eq!(
                        Some(sum.to_bits()),
                        w.exact_sum().map(f64::to_bits),
                        "sum: series {:?} window {i} {:?} of {windows:?}",
                        s.labels,
                        windows[i]
                    );
                }
                // What `delta`, `rate` and `increase` rely on is known, and equal (`==` above).
                if matches!(need, Need::Ends | Need::Resets) && w.count > 0 {
                    assert!(g.times().is_some(), "times: series {:?} window {i} {:?}", s.labels, windows[i]);
                }
                if need == Need::Resets && w.resets().is_some() {
                    assert!(
                        g.resets().is_some(),
                        "resets: series {:?} window {i} {:?}",
                        s.labels,
                        windows[i]
                    );
                }
            }
            if matches!(need, Need::Ends | Need::Resets) {
                continue;
            }
            total.blocks_from_stats += st.blocks_from_stats;
            total.blocks_decoded += st.blocks_decoded;
            total.samples_decoded += st.samples_decoded;
        }
    }
    total
}

/// Asserts group extremes from statistics equal decoding, bit for bit, for groups of the
/// series in select order, reversed, and alone; returns the push-down scan counters.
fn check_groups(db: &Db, window_lists: &[Vec<(i64, i64)>]) -> ScanStats {
    let snap = db.snapshot();
    let all = snap.select(&[Matcher::equal("__name__", "m")], i64::MIN, i64::MAX).unwrap();
    let mut groups = vec![all.clone(), all.iter().rev().cloned().collect()];
    groups.extend(all.iter().map(|s| vec![s.clone()]));
    let mut total = ScanStats::default();
    for windows in window_lists {
        for (group, which) in groups.iter().flat_map(|g| [(g, Extreme::Max), (g, Extreme::Min)]) {
            let (mut got, mut want) = (Vec::new(), Vec::new());
            let mut st = ScanStats::default();
            let answered = snap.group_extremes(group, windows, which, &mut got, &mut st).unwrap();
            decode_group_extremes(&snap, group, windows, which, &mut want, &mut ScanStats::default())
                .unwrap();
            if !answered {
                assert!(got.is_empty() && st == ScanStats::default(), "{got:?} {st:?}");
                continue;
            }
            let bits = |v: &[Option<f64>]| v.iter().map(|v| v.map(f64::to_bits)).collect::<Vec<_>>();
            assert_eq!(
                bits(&got),
                bits(&want),
                "{which:?} of {:?} over {windows:?}: {got:?} {want:?}",
                group.iter().map(|s| &s.labels).collect::<Vec<_>>()
            );
            total.add(&st);
        }
    }
    total
}

/// Asserts that [`Querier::samples_latest`] ends with the sample a full read ends with, bit for
/// bit, over every window of `window_lists`: whether it came from a block's statistics, from
/// the head's last sample, or from reading.
fn check_latest(db: &Db, window_lists: &[Vec<(i64, i64)>]) {
    let snap = db.snapshot();
    for s in snap.select(&[Matcher::equal("__name__", "m")], i64::MIN, i64::MAX).unwrap() {
        for &(mint, maxt) in window_lists.iter().flatten() {
            let (mut got, mut want) = (Vec::new(), Vec::new());
            snap.samples_latest(&s, mint, maxt, &mut got, &mut ScanStats::default()).unwrap();
            snap.samples_scanned(&s, mint, maxt, &mut want, &mut ScanStats::default()).unwrap();
            let last = |v: &[Sample]| v.last().map(|x| (x.t, x.v.to_bits()));
            assert_eq!(last(&got), last(&want), "series {:?} in [{mint}, {maxt}]", s.labels);
        }
    }
}

fn cases() -> u32 {
    if std::env::var_os("STRATA_SLOW_TESTS").is_some() { 1000 } else { 48 }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn pushdown_equals_decoding(
        ops in proptest::collection::vec(op(), 1..40),
        block_samples in 1usize..64,
        grid in prop_oneof![Just(0i64), Just(MINUTE), Just(10 * MINUTE), Just(HOUR)],
        window_lists in proptest::collection::vec(windows(), 1..6),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(options(dir.path(), block_samples, grid)).unwrap();
        apply(&db, &ops);
        check(&db, &window_lists);
        check_groups(&db, &window_lists);
        check_latest(&db, &window_lists);
        // Aligned windows over everything written: the case push-down is built for.
        // PromQL windows `(t - 1h, t]` at whole hours, as closed ranges.
        let hourly: Vec<(i64, i64)> = (0..12).map(|h| (BASE + h * HOUR + 1, BASE + (h + 1) * HOUR)).collect();
        check(&db, std::slice::from_ref(&hourly));
        check_groups(&db, &[hourly]);
    }
}

/// Values that tie: signed zeros, NaN, stale markers, and two numbers.
fn tie_value() -> impl Strategy<Value = f64> {
    prop_oneof![
        3 => Just(0.0),
        3 => Just(-0.0),
        2 => Just(-1.0),
        1 => Just(1.0),
        1 => Just(f64::NAN),
        1 => Just(f64::from_bits(0x7ff8_0000_0000_0abc)),
        1 => Just(stale_nan()),
    ]
}

fn tie_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u8..3, proptest::collection::vec((-900i64..900, tie_value()), 1..12)).prop_map(|(s, v)| Op::Append(s, v)),
        4 => (1i64..3600).prop_map(Op::Advance),
        3 => Just(Op::Flush),
        1 => Just(Op::Compact),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// Group extremes where the fold's order decides the bits: few distinct values, signed
    /// zeros that compare equal, NaN with different payloads, small blocks.
    #[test]
    fn group_extremes_keep_the_order_of_ties(
        ops in proptest::collection::vec(tie_op(), 1..30),
        block_samples in 1usize..8,
        grid in prop_oneof![Just(0i64), Just(10 * MINUTE), Just(HOUR)],
        window_lists in proptest::collection::vec(windows(), 1..4),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(options(dir.path(), block_samples, grid)).unwrap();
        apply(&db, &ops);
        check_groups(&db, &window_lists);
    }
}

/// Hourly windows over flushed 15 s data with hour-aligned blocks are answered from statistics
/// alone; a head sample and a rewrite in a later file force exactly the blocks they touch to be
/// decoded.
#[test]
fn aligned_windows_use_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(options(dir.path(), 1024, HOUR)).unwrap();
    let mut batch = Batch::new();
    // Hour k's block holds (BASE + k h, BASE + (k + 1) h], as PromQL windows at whole hours do.
    let samples: Vec<Sample> = (1..=8 * 240)
        .map(|i| Sample::new(BASE + i * 15_000, if i % 97 == 5 { f64::NAN } else { (i % 13) as f64 }))
        .collect();
    batch.push(labels(0), samples);
    db.append(&batch).unwrap();
    db.flush().unwrap();
    let hourly: Vec<(i64, i64)> = (0..8).map(|h| (BASE + h * HOUR + 1, BASE + (h + 1) * HOUR)).collect();
    let st = check(&db, std::slice::from_ref(&hourly));
    // Eight hourly blocks, and the samples at BASE + 2 h, 5 h and 8 h, each alone in the block
    // that starts the next 3 h partition (partitions are cut [k·3h, (k+1)·3h)).
    assert_eq!(st, ScanStats { blocks_from_stats: 11, blocks_decoded: 0, samples_decoded: 0 });

    // Rewrite one sample of hour 5 (lands in a new file after a flush), add one in the head in
    // hour 6 and a stale marker in hour 7: the blocks they touch are decoded, the rest still
    // come from statistics (more samples than are decoded, so push-down is worth it).
    let mut batch = Batch::new();
    batch.push(labels(0), vec![Sample::new(BASE + 5 * HOUR + 15_000, -7.0)]);
    db.append(&batch).unwrap();
    db.flush().unwrap();
    let mut batch = Batch::new();
    batch.push(
        labels(0),
        vec![Sample::new(BASE + 6 * HOUR + 37_000, 99.0), Sample::new(BASE + 7 * HOUR + 20_000, stale_nan())],
    );
    db.append(&batch).unwrap();
    let st = check(&db, std::slice::from_ref(&hourly));
    // Decoded: hour 5's block and the rewrite's, hour 6's (a head sample in its range) and hour
    // 7's (a stale marker in the head); the other 8 blocks as before.
    assert_eq!(st.blocks_from_stats, 8, "{st:?}");
    assert_eq!(st.blocks_decoded, 4, "{st:?}");
    let snap = db.snapshot();
    let s = &snap.select(&[Matcher::equal("s", "0")], BASE, BASE + 8 * HOUR).unwrap()[0];
    let mut got: Vec<WindowAgg> = Vec::new();
    assert!(snap.window_aggregates(s, &hourly, Need::Values, &mut got, &mut ScanStats::default()).unwrap());
    assert_eq!((got[5].min, got[6].max, got[6].count, got[7].count), (-7.0, 99.0, 241, 240));
}

/// Integer data in hour-aligned blocks: hourly sums come from the blocks' statistics alone and
/// equal the decoded ones; a NaN in one block makes that window's sum unknown (the caller then
/// decodes), and the stale marker at the end of a series does not.
#[test]
fn aligned_windows_sum_integers_from_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(options(dir.path(), 1024, HOUR)).unwrap();
    let mut samples: Vec<Sample> =
        (1..=2 * 240).map(|i| Sample::new(BASE + i * 15_000, ((i * 7919) % 201) as f64 - 100.0)).collect();
    samples.push(Sample::new(BASE + 2 * HOUR + 5_000, stale_nan()));
    let mut batch = Batch::new();
    batch.push(labels(0), samples.clone());
    let mut with_nan = samples.clone();
    with_nan[300].v = f64::NAN;
    batch.push(labels(1), with_nan);
    db.append(&batch).unwrap();
    db.flush().unwrap();
    let hourly: Vec<(i64, i64)> = (0..3).map(|h| (BASE + h * HOUR + 1, BASE + (h + 1) * HOUR)).collect();
    check(&db, std::slice::from_ref(&hourly));
    let snap = db.snapshot();
    let series = snap.select(&[Matcher::equal("__name__", "m")], BASE, BASE + 3 * HOUR).unwrap();
    let sums = |s: &storage::SeriesRef| {
        let (mut got, mut st) = (Vec::new(), ScanStats::default());
        assert!(snap.window_aggregates(s, &hourly, Need::Sums, &mut got, &mut st).unwrap());
        (got.iter().map(WindowAgg::exact_sum).collect::<Vec<_>>(), st)
    };
    let want: Vec<Option<f64>> =
        [1..=240, 241..=480].into_iter().map(|r| Some(r.map(|i| samples[i - 1].v).sum())).collect();
    let (got, st) = sums(&series[0]);
    assert_eq!(got[..2], want[..]);
    assert_eq!(got[2], None, "only a stale marker: an empty window");
    assert!(st.blocks_from_stats >= 2 && st.blocks_decoded == 0, "{st:?}");
    // The NaN stops the scaled codec from vouching for hour 2's block: it is decoded, and
    // its window has no exact sum.
    let (got, _) = sums(&series[1]);
    assert_eq!((got[0], got[1]), (want[0], None));
}

/// Hourly windows 20 and 50 minutes off the hour blocks: for sums each block is split at the
/// window boundary inside it, only its part before the boundary is decoded, and the sums equal
/// the decoded ones. A split near a block's end still beats decoding the block (the plain read
/// decodes all of it), so 50 minutes in is answered too. Without sums (min, max, ...) the same
/// windows cannot use the blocks.
#[test]
fn unaligned_windows_sum_integers_by_splitting_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(options(dir.path(), 1024, HOUR)).unwrap();
    let samples: Vec<Sample> =
        (1..=6 * 240).map(|i| Sample::new(BASE + i * 15_000, ((i * 7919) % 201) as f64 - 100.0)).collect();
    let mut batch = Batch::new();
    batch.push(labels(0), samples.clone());
    db.append(&batch).unwrap();
    db.flush().unwrap();
    for minutes in [20, 50] {
        let off = minutes * MINUTE;
        let hourly: Vec<(i64, i64)> =
            (0..5).map(|h| (BASE + h * HOUR + off + 1, BASE + (h + 1) * HOUR + off)).collect();
        check(&db, std::slice::from_ref(&hourly));
        let snap = db.snapshot();
        let series = snap.select(&[Matcher::equal("__name__", "m")], BASE, BASE + 7 * HOUR).unwrap();
        let (mut got, mut st) = (Vec::new(), ScanStats::default());
        assert!(
            snap.window_aggregates(&series[0], &hourly, Need::Sums, &mut got, &mut st).unwrap(),
            "{minutes} min"
        );
        for (w, agg) in hourly.iter().zip(&got) {
            let inside: Vec<f64> = samples.iter().filter(|s| s.t >= w.0 && s.t <= w.1).map(|s| s.v).collect();
            assert_eq!(agg.exact_sum(), Some(inside.iter().sum()), "{w:?}");
            assert_eq!(agg.count, inside.len() as u64);
        }
        assert!(got.iter().all(WindowAgg::is_partial), "every window takes a block's rest");
        // Hour blocks (cut also where the 3-hour partitions begin), each split `minutes` in:
        // 4 samples a minute decoded. The first block's first part and the last block's
        // rest lie outside the windows.
        let prefix = (minutes * 4) as u64;
        assert!(st.blocks_decoded >= 6 && st.samples_decoded <= 6 * prefix + 2, "{minutes} min: {st:?}");
        let mut none = Vec::new();
        assert!(
            !snap
                .window_aggregates(&series[0], &hourly, Need::Values, &mut none, &mut ScanStats::default())
                .unwrap()
        );
    }
}

/// A counter in hour blocks, with hourly windows two hours wide (`increase(x[2h])` every hour):
/// a block that never decreases comes from its statistics for `rate`, with the reset at a
/// block boundary seen between two blocks; the block holding a reset is decoded, and its
/// window still knows its resets. A stale marker in a block makes it decode for `delta` too.
#[test]
fn counters_from_statistics_with_resets_between_and_inside_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(options(dir.path(), 1024, HOUR)).unwrap();
    // 15 s samples of hours 0..6; the counter restarts at the first sample of hour 2 (between
    // blocks) and in the middle of hour 4 (inside its block); a stale marker ends hour 5.
    let mut samples = Vec::new();
    let mut v = 0.0;
    for i in 1..=6 * 240i64 {
        v = if i == 2 * 240 + 1 || i == 4 * 240 + 100 { 1.0 } else { v + 3.0 };
        samples.push(Sample::new(BASE + i * 15_000, v));
    }
    samples[6 * 240 - 1].v = stale_nan();
    let mut batch = Batch::new();
    batch.push(labels(2), samples.clone());
    db.append(&batch).unwrap();
    db.flush().unwrap();
    let windows: Vec<(i64, i64)> =
        (1..6).map(|h| (BASE + (h - 1) * HOUR + 1, BASE + (h + 1) * HOUR)).collect();
    check(&db, std::slice::from_ref(&windows));
    let snap = db.snapshot();
    let s = &snap.select(&[Matcher::equal("s", "2")], BASE, BASE + 7 * HOUR).unwrap()[0];
    let (mut got, mut st) = (Vec::new(), ScanStats::default());
    assert!(snap.window_aggregates(s, &windows, Need::Resets, &mut got, &mut st).unwrap());
    let at = |i: i64| samples[(i - 1) as usize];
    // Window (1h, 3h]: hours 1 and 2, a reset between them, after hour 1's last value.
    assert_eq!(got[1].times(), Some((at(241).t, at(720).t)));
    assert_eq!(got[1].resets(), Some(&[at(480).v][..]));
    assert_eq!((got[1].first, got[1].last, got[1].count), (at(241).v, at(720).v, 480));
    // Window (3h, 5h]: hour 4's reset inside its block, which is decoded.
    assert_eq!(got[3].resets(), Some(&[at(4 * 240 + 99).v][..]));
    // Hours 0-3 from statistics, hour 4 (a reset inside) and hour 5 (a stale marker) decoded;
    // the six 3-hour partitions' edge blocks make it more than 6 blocks.
    assert!(st.blocks_decoded >= 2 && st.blocks_from_stats >= 4, "{st:?}");
    let from_stats_for_resets = st.blocks_from_stats;
    let mut st = ScanStats::default();
    assert!(snap.window_aggregates(s, &windows, Need::Ends, &mut Vec::new(), &mut st).unwrap());
    assert_eq!(st.blocks_from_stats, from_stats_for_resets + 1, "hour 4 from statistics for delta: {st:?}");
}

/// The next value of a xorshift64 generator: fixed pseudo-random test data from a seed.
fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Appends and flushes `series` series `m{s="<i>"}` of `samples` samples every 10 s from BASE:
/// integer random walks from 50 with steps of at most `step`, clamped to `range`, drawn from
/// an xorshift generator seeded with `seed`.
fn append_walks(db: &Db, series: u64, samples: i64, seed: u64, step: u64, range: (f64, f64)) {
    let mut batch = Batch::new();
    let mut x = seed;
    for s in 0..series {
        let mut v = 50.0;
        let walk: Vec<Sample> = (1..=samples)
            .map(|i| {
                v = (v + (xorshift(&mut x) % (2 * step + 1)) as f64 - step as f64).clamp(range.0, range.1);
                Sample::new(BASE + i * 10_000, v)
            })
            .collect();
        batch.push(Labels::from_pairs(&[("__name__", "m"), ("s", &s.to_string())]), walk);
    }
    db.append(&batch).unwrap();
    db.flush().unwrap();
}

/// Eight series of random-walk data in hour blocks, hourly windows 20 minutes off the blocks
/// (every block cut in two, as TSBS cpu-max-all's windows are): the group's maximum and minimum
/// equal decoding, and far fewer blocks are decoded than the windows overlap. A head sample
/// larger than everything, then a rewrite, are seen.
#[test]
fn group_extremes_skip_blocks_that_cannot_win() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(options(dir.path(), 1024, HOUR)).unwrap();
    append_walks(&db, 8, 9 * 360, 0x9e37_79b9_7f4a_7c15, 3, (0.0, 100.0));
    let off = 20 * MINUTE;
    let hourly: Vec<(i64, i64)> =
        (0..8).map(|h| (BASE + h * HOUR + off + 1, BASE + (h + 1) * HOUR + off)).collect();
    let st = check_groups(&db, std::slice::from_ref(&hourly));
    // Per group and extreme, the windows cut about 9 blocks of each series; the two
    // eight-series groups would decode 2 x 2 x 72 blocks without pruning, the single series
    // 8 x 2 x 9 (the windows then cut a series' every block).
    let grouped = {
        let snap = db.snapshot();
        let all = snap.select(&[Matcher::equal("__name__", "m")], i64::MIN, i64::MAX).unwrap();
        let mut st = ScanStats::default();
        assert!(snap.group_extremes(&all, &hourly, Extreme::Max, &mut Vec::new(), &mut st).unwrap());
        st
    };
    // Measured: 8 decoded (one a window), 88 left to their statistics.
    assert!(grouped.blocks_decoded <= 16, "{grouped:?}");
    assert!(grouped.blocks_from_stats >= 64, "{grouped:?}");
    assert!(st.blocks_decoded < 2 * 2 * 72 + 8 * 2 * 9, "{st:?}");

    let mut batch = Batch::new();
    batch.push(
        Labels::from_pairs(&[("__name__", "m"), ("s", "3")]),
        vec![Sample::new(BASE + 4 * HOUR + 7_000, 1e9)],
    );
    db.append(&batch).unwrap();
    check_groups(&db, std::slice::from_ref(&hourly));
    db.flush().unwrap();
    let mut batch = Batch::new();
    batch.push(
        Labels::from_pairs(&[("__name__", "m"), ("s", "5")]),
        vec![Sample::new(BASE + 6 * HOUR + 10_000, -1e9)],
    );
    db.append(&batch).unwrap();
    db.flush().unwrap();
    check_groups(&db, std::slice::from_ref(&hourly));
    let snap = db.snapshot();
    let all = snap.select(&[Matcher::equal("__name__", "m")], i64::MIN, i64::MAX).unwrap();
    let (mut max, mut min) = (Vec::new(), Vec::new());
    assert!(snap.group_extremes(&all, &hourly, Extreme::Max, &mut max, &mut ScanStats::default()).unwrap());
    assert!(snap.group_extremes(&all, &hourly, Extreme::Min, &mut min, &mut ScanStats::default()).unwrap());
    // (BASE + 4h + 7 s) lies in window 3 (it ends 4h 20 min in); BASE + 6h + 10 s in window 5.
    assert_eq!((max[3], min[5]), (Some(1e9), Some(-1e9)));
}

/// 300 series of random-walk data between 1 and 100 in hour blocks, five 1-minute windows in
/// the middle of the second hour (TSBS groupby-orderby-limit: every window inside one block
/// per series): the group's maximum and minimum equal decoding, and once a few blocks show a
/// window reaching 100 (or 1), the rest are left to their statistics instead of decoded. (Not
/// 0: a block whose minimum is a zero might hold a -0, so ties at zero are decoded.)
#[test]
fn group_extremes_over_narrow_windows_decode_few_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(options(dir.path(), 1024, HOUR)).unwrap();
    let series = 300;
    append_walks(&db, series, 3 * 360, 0x2545_f491_4f6c_dd1d, 10, (1.0, 100.0));
    let narrow: Vec<(i64, i64)> =
        (0..5).map(|m| (BASE + HOUR + (30 + m) * MINUTE + 1, BASE + HOUR + (31 + m) * MINUTE)).collect();
    check_groups(&db, std::slice::from_ref(&narrow));
    let snap = db.snapshot();
    let all = snap.select(&[Matcher::equal("__name__", "m")], i64::MIN, i64::MAX).unwrap();
    for which in [Extreme::Max, Extreme::Min] {
        let mut st = ScanStats::default();
        let mut got = Vec::new();
        assert!(snap.group_extremes(&all, &narrow, which, &mut got, &mut st).unwrap());
        assert_eq!(got, vec![Some(if which == Extreme::Max { 100.0 } else { 1.0 }); 5], "{which:?}");
        // Each window lies inside one block of every series: the per-series loop decodes 300.
        assert!(st.blocks_decoded < series / 5, "{which:?}: {st:?}");
    }
}

/// Four series of a sample every 10 s for 6 hours in hour blocks and day partitions, hourly
/// windows 20 minutes off the blocks, once inside one partition and once across a partition
/// boundary: the statistics count every block the windows overlap exactly once.
///
/// Hour cells are open on the left, `(k·1h, (k+1)·1h]` (like PromQL windows), and partitions
/// closed on the left, `[d, d + 24h)`. So the sample exactly at a partition start `d` belongs
/// to the cell `(d - 1h, d]` but is written into partition `d`, a block of its own: the cell
/// holds two blocks, `(d - 1h, d - 10 s]` in the earlier partition and `[d, d]` in the later.
/// Across a boundary the windows overlap 7 blocks of each series, not 6.
#[test]
fn group_extremes_count_each_block_once_across_partitions() {
    const DAY: i64 = 24 * HOUR;
    // A day boundary: BASE is 22:00 UTC, so this is BASE + 2h.
    let midnight = (BASE / DAY + 1) * DAY;
    for (start, blocks_per_series) in [(midnight + 2 * HOUR, 6), (midnight - 3 * HOUR, 7)] {
        let dir = tempfile::tempdir().unwrap();
        let mut o = options(dir.path(), 1024, HOUR);
        o.partition_ms = DAY;
        let db = Db::open(o).unwrap();
        let mut batch = Batch::new();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for s in 0..4 {
            let samples: Vec<Sample> = (1..=6 * 360)
                .map(|i| Sample::new(start + i * 10_000, (xorshift(&mut x) % 1000) as f64))
                .collect();
            batch.push(Labels::from_pairs(&[("__name__", "m"), ("s", &s.to_string())]), samples);
        }
        db.append(&batch).unwrap();
        db.flush().unwrap();
        let hourly: Vec<(i64, i64)> =
            (1..6).map(|h| (start + h * HOUR - 40 * MINUTE + 1, start + h * HOUR + 20 * MINUTE)).collect();
        check_groups(&db, std::slice::from_ref(&hourly));

        let snap = db.snapshot();
        let all = snap.select(&[Matcher::equal("__name__", "m")], i64::MIN, i64::MAX).unwrap();
        let (lo, hi) = (hourly[0].0, hourly[4].1);
        let mut overlapped = 0;
        for s in &all {
            let views = snap.blocks(s, lo, hi).unwrap();
            assert!(views.iter().all(|v| v.exclusive));
            // Across midnight, the sample at midnight is a block of its own.
            let single =
                views.iter().filter(|v| v.meta.stats.min_t == midnight && v.meta.stats.max_t == midnight);
            assert_eq!(single.count(), usize::from(blocks_per_series == 7), "{start}");
            assert_eq!(views.len(), blocks_per_series, "{start}");
            overlapped += views.len() as u64;
        }
        for which in [Extreme::Max, Extreme::Min] {
            let mut st = ScanStats::default();
            assert!(snap.group_extremes(&all, &hourly, which, &mut Vec::new(), &mut st).unwrap());
            assert_eq!(st.blocks_from_stats + st.blocks_decoded, overlapped, "{start} {which:?}: {st:?}");
            assert!(st.blocks_decoded <= overlapped * 2 / 3, "{start} {which:?}: {st:?}");
        }
    }
}

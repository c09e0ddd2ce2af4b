//! Samples accepted in any order: with the default options, any sample inside
//! retention is stored, however far behind its series' newest sample it lies.
//!
//! - `permuted_batches_equal_the_model`: random batches over several series (floats with stale
//!   markers and odd NaNs, native histograms of changing layouts, several writes at one
//!   timestamp) go into two databases, (a) in time order and (b) as a random permutation of the
//!   same batches, with random flushes, compactions (policy and forced), retention passes,
//!   clean restarts and crash restarts (WAL replay) between batches. Each database must equal
//!   its model (per series and timestamp the last write in arrival order wins), float bits and
//!   histograms exactly, over the whole range and random sub-ranges, after every batch, after a
//!   final forced compaction and in an admin backup; nothing may be rejected; and where the
//!   permutation keeps the writes to each (series, timestamp) in their relative order, (a) and
//!   (b) must hold the same data.
//! - `backfill_*`: a database holding the present day takes 30 days of older data (4-hour
//!   batches, newest first or shuffled) with 40 days of retention: every sample is stored, a
//!   forced compaction leaves one file per daily partition holding only that day, and a range
//!   query over the backfilled days returns exactly what was written.
//! - `a_sample_older_than_retention_is_rejected_and_counted`: the one limit left.
//!
//! The tests never set `Options::ooo_window_ms`: they test the default.
//! `PROPTEST_CASES` sets the property test's cases (default 128); `STRATA_SLOW_TESTS=1` runs
//! 2,000 cases and backfills at a 10 s interval instead of 60 s.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use proptest::prelude::*;
use storage::manifest::Manifest;
use storage::testing::keeps_write_order;
use storage::{
    Batch, BatchRef, Db, FloatHistogram, HistogramSample, Labels, Matcher, Options, Querier, Sample,
    stale_nan,
};

use crate::common::{self, Rng, scratch};

/// A whole day (partitions start on it).
const BASE: i64 = 1_699_920_000_000;
const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;
/// Batch `i` of the property test writes around `BASE + i * BATCH_SPAN`.
const BATCH_SPAN: i64 = 40 * MINUTE;
/// Timestamps are multiples of this: 80 slots per batch span, so writes meet at timestamps.
const SLOT: i64 = 30_000;
const SLOTS: i64 = BATCH_SPAN / SLOT;
const SERIES: u8 = 4;

fn slow() -> bool {
    std::env::var("STRATA_SLOW_TESTS").is_ok_and(|v| v == "1")
}

fn labels(s: u8) -> Labels {
    Labels::from_pairs(&[("__name__", "ooo"), ("s", &s.to_string())])
}

/// Small partitions, blocks and WAL segments, so a few hours of data cross all of them; no
/// background work, so what happens when is the test's choice. The out-of-order window is left
/// at its default.
fn options(dir: &Path) -> Options {
    let mut o = Options::new(dir);
    o.maintenance_interval = Duration::from_secs(3600);
    o.partition_ms = 2 * HOUR;
    o.block_samples_max = 7;
    o.block_grid_ms = 15 * MINUTE;
    o.compact_files_min = 2;
    o.wal_segment_bytes = 4096;
    o
}

#[derive(Debug, Clone)]
enum Val {
    F(f64),
    /// A native histogram made by [`histogram`].
    H(i16, u8),
}

/// One write: series, timestamp, value.
#[derive(Debug, Clone)]
struct Write {
    s: u8,
    t: i64,
    v: Val,
}

/// A histogram derived from `v` ([`common::histogram`]): its counts are integers unless `k` is
/// odd, and `k >= 2` makes it a gauge histogram.
fn histogram(v: i16, k: u8) -> FloatHistogram {
    common::histogram(v, k % 2 == 1, k >= 2)
}

fn float() -> impl Strategy<Value = f64> {
    prop_oneof![
        8 => (-3i32..50).prop_map(f64::from),
        2 => any::<f64>().prop_filter("the histogram marker", |v| !storage::hist::is_marker(*v)),
        2 => Just(stale_nan()),
        1 => prop_oneof![
            Just(f64::NAN),
            Just(f64::from_bits(0x7ff8_0000_0000_0abc)),
            Just(f64::INFINITY),
            Just(-0.0),
        ],
    ]
}

fn val() -> impl Strategy<Value = Val> {
    prop_oneof![4 => float().prop_map(Val::F), 1 => (any::<i16>(), 0u8..4).prop_map(|(v, k)| Val::H(v, k))]
}

/// The raw writes of one batch: (series, slot, value, repeat the previous write's series and
/// timestamp). Slots are counted from the batch's start; negative ones reach up to 2.5 h back
/// into earlier batches when batches overlap.
fn raw_batch() -> impl Strategy<Value = Vec<(u8, i64, Val, bool)>> {
    proptest::collection::vec(
        (0..SERIES, prop_oneof![6 => 0..SLOTS, 1 => -300i64..0], val(), proptest::bool::weighted(0.15)),
        1..25,
    )
}

#[derive(Debug, Clone, Copy)]
enum Step {
    Flush,
    Compact,
    CompactAll,
    Retention,
    /// Close (which flushes) and reopen.
    Restart,
    /// Drop without closing and reopen: the WAL is replayed.
    Crash,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => Just(Step::Flush),
        2 => Just(Step::Compact),
        1 => Just(Step::CompactAll),
        1 => Just(Step::Retention),
        1 => Just(Step::Restart),
        2 => Just(Step::Crash),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    /// In time order: batch `i` starts at `BASE + i * BATCH_SPAN`.
    batches: Vec<Vec<Write>>,
    /// The order database (b) receives them in.
    perm: Vec<usize>,
    /// What runs after the `i`-th batch applied (the same in both databases).
    steps: Vec<Vec<Step>>,
    /// Sub-ranges read besides the whole range.
    ranges: Vec<(i64, i64)>,
}

fn case() -> impl Strategy<Value = Case> {
    (proptest::collection::vec(raw_batch(), 1..12), any::<bool>()).prop_flat_map(|(raw, overlap)| {
        let n = raw.len();
        let batches: Vec<Vec<Write>> = raw
            .into_iter()
            .enumerate()
            .map(|(i, writes)| {
                let start = BASE + i as i64 * BATCH_SPAN;
                let mut out: Vec<Write> = Vec::with_capacity(writes.len());
                for (s, slot, v, repeat) in writes {
                    let slot = if overlap { slot } else { slot.rem_euclid(SLOTS) };
                    let (s, t) = match out.last() {
                        Some(p) if repeat => (p.s, p.t),
                        _ => (s, start + slot * SLOT),
                    };
                    out.push(Write { s, t, v });
                }
                out
            })
            .collect();
        let lo = BASE - 3 * HOUR;
        let hi = BASE + n as i64 * BATCH_SPAN;
        (
            Just(batches),
            Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
            proptest::collection::vec(proptest::collection::vec(step(), 0..3), n),
            proptest::collection::vec((lo..hi, 0..4 * HOUR).prop_map(|(a, len)| (a, a + len)), 3),
        )
            .prop_map(|(batches, perm, steps, ranges)| Case { batches, perm, steps, ranges })
    })
}

/// Per (series, timestamp), the last write.
type Model = BTreeMap<(u8, i64), Val>;

/// A database's (or model's) contents in `[lo, hi]`: per series, its floats as (time, bits)
/// and its histograms.
type Dump = Vec<(String, Floats, Vec<HistogramSample>)>;

/// Float samples as (time, bits).
type Floats = Vec<(i64, u64)>;

fn model_dump(m: &Model, lo: i64, hi: i64) -> Dump {
    let mut out: BTreeMap<u8, (Floats, Vec<HistogramSample>)> = BTreeMap::new();
    for ((s, t), v) in m {
        let e = out.entry(*s).or_default();
        if *t < lo || *t > hi {
            continue;
        }
        match v {
            Val::F(f) => e.0.push((*t, f.to_bits())),
            Val::H(v, k) => e.1.push(HistogramSample { t: *t, h: histogram(*v, *k) }),
        }
    }
    out.into_iter().map(|(s, (f, h))| (labels(s).to_string(), f, h)).collect()
}

fn db_dump(db: &Db, lo: i64, hi: i64) -> Dump {
    let snap = db.snapshot();
    let all = snap.select(&[Matcher::equal("__name__", "ooo")], i64::MIN, i64::MAX).unwrap();
    let mut out: Dump = all
        .iter()
        .map(|s| {
            let (mut f, mut h) = (Vec::new(), Vec::new());
            snap.samples(s, lo, hi, &mut f).unwrap();
            snap.histograms(s, lo, hi, &mut h).unwrap();
            (s.labels.to_string(), f.iter().map(|x| (x.t, x.v.to_bits())).collect(), h)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The database equals the model over everything and over each of `ranges`.
fn check(db: &Db, m: &Model, ranges: &[(i64, i64)], context: &str) {
    assert_eq!(db_dump(db, i64::MIN, i64::MAX), model_dump(m, i64::MIN, i64::MAX), "{context}: everything");
    for &(lo, hi) in ranges {
        assert_eq!(db_dump(db, lo, hi), model_dump(m, lo, hi), "{context}: [{lo}, {hi}]");
    }
}

/// Appends batch `writes`: in time order (`sorted`: one entry per series, its samples sorted
/// by time, stably, so writes at one timestamp keep their order) or as generated (an entry per
/// run of writes to one series, unsorted). Updates the model in the order the database sees.
fn append(db: &Db, writes: &[Write], sorted: bool, m: &mut Model) {
    let mut entries: Vec<Vec<&Write>> = Vec::new();
    if sorted {
        for s in 0..SERIES {
            let mut e: Vec<&Write> = writes.iter().filter(|w| w.s == s).collect();
            e.sort_by_key(|w| w.t);
            if !e.is_empty() {
                entries.push(e);
            }
        }
    } else {
        for w in writes {
            match entries.last_mut() {
                Some(e) if e[0].s == w.s => e.push(w),
                _ => entries.push(vec![w]),
            }
        }
    }
    let names: Vec<String> = (0..SERIES).map(|s| s.to_string()).collect();
    let mut batch = BatchRef::new();
    for e in &entries {
        let mut b = batch.series();
        b.label("__name__", "ooo");
        b.label("s", &names[usize::from(e[0].s)]);
        for w in e {
            match w.v {
                Val::F(v) => b.sample(Sample::new(w.t, v)),
                Val::H(v, k) => b.histogram(w.t, histogram(v, k)),
            }
            m.insert((w.s, w.t), w.v.clone());
        }
        b.finish();
    }
    let out = db.append_ref(&batch).unwrap();
    assert_eq!(out.rejected(), 0, "rejected: {out:?}");
    assert_eq!(out.appended, writes.len() as u64, "{out:?}");
}

/// Applies the batches in `order` into a fresh database under `dir`, checking it against the
/// model after every batch and its steps; returns the open database and the model.
fn apply(dir: &Path, c: &Case, order: &[usize], sorted: bool) -> (Db, Model) {
    let mut db = Db::open(options(dir)).unwrap();
    let mut m = Model::new();
    for (i, &b) in order.iter().enumerate() {
        append(&db, &c.batches[b], sorted, &mut m);
        for step in &c.steps[i] {
            match step {
                Step::Flush => db.flush().unwrap(),
                Step::Compact => db.compact().unwrap(),
                Step::CompactAll => db.compact_all().unwrap(),
                Step::Retention => assert_eq!(db.apply_retention().unwrap(), 0, "retention removed data"),
                Step::Restart => {
                    db.close().unwrap();
                    drop(db);
                    db = Db::open(options(dir)).unwrap();
                }
                Step::Crash => {
                    drop(db);
                    db = Db::open(options(dir)).unwrap();
                }
            }
        }
        let context =
            format!("{} batch {i} (#{b}), then {:?}", if sorted { "(a)" } else { "(b)" }, c.steps[i]);
        check(&db, &m, &c.ranges, &context);
    }
    (db, m)
}

/// Every partition holds one file, whose samples all lie inside it.
fn assert_one_file_per_partition(db: &Db, partition_ms: i64, context: &str) {
    let m = Manifest::load(&db.dir().join("MANIFEST")).unwrap().unwrap_or_default();
    let mut per: BTreeMap<i64, usize> = BTreeMap::new();
    for f in &m.files {
        *per.entry(f.partition).or_default() += 1;
        assert!(
            f.partition <= f.min_t && f.max_t < f.partition + partition_ms,
            "{context}: file {} of partition {} holds [{}, {}]",
            f.id,
            f.partition,
            f.min_t,
            f.max_t
        );
    }
    assert!(per.values().all(|n| *n == 1), "{context}: files per partition {per:?}");
}

fn run(c: Case) {
    let (da, db_dir) = (scratch(), scratch());
    let in_order: Vec<usize> = (0..c.batches.len()).collect();
    let (a, ma) = apply(da.path(), &c, &in_order, true);
    let (b, mb) = apply(db_dir.path(), &c, &c.perm, false);
    for (db, m, name) in [(&a, &ma, "(a)"), (&b, &mb, "(b)")] {
        db.compact_all().unwrap();
        check(db, m, &c.ranges, &format!("{name} after compact_all"));
        assert_one_file_per_partition(db, options(db.dir()).partition_ms, name);
        // The admin snapshot of the head and files opens as the same data.
        let copy = scratch();
        db.backup_to(&copy.path().join("b"), true).unwrap();
        let restored = Db::open(options(&copy.path().join("b"))).unwrap();
        check(&restored, m, &c.ranges, &format!("{name} backup"));
    }
    // Only where the permutation keeps the writes to each (series, timestamp) in their relative
    // order does the same write win in (a) and (b).
    if keeps_write_order(&c.batches, &c.perm, |w| (w.s, w.t)) {
        assert_eq!(ma, mb, "the models differ");
        assert_eq!(db_dump(&a, i64::MIN, i64::MAX), db_dump(&b, i64::MIN, i64::MAX), "(a) and (b) differ");
    }
}

impl PartialEq for Val {
    fn eq(&self, o: &Val) -> bool {
        match (self, o) {
            (Val::F(x), Val::F(y)) => x.to_bits() == y.to_bits(),
            (Val::H(a, b), Val::H(c, d)) => (a, b) == (c, d),
            _ => false,
        }
    }
}

fn cases() -> u32 {
    let default = if slow() { 2000 } else { 128 };
    std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_shrink_iters: 1000, ..ProptestConfig::default() })]
    #[test]
    fn permuted_batches_equal_the_model(c in case()) {
        run(c);
    }
}

/// The wall clock, whole seconds in ms: "now" for the backfill (not too far in the future).
fn now_ms() -> i64 {
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    ms - ms % 10_000
}

fn backfill_options(dir: &Path) -> Options {
    let mut o = Options::new(dir);
    o.retention_ms = 40 * DAY;
    o.maintenance_interval = Duration::from_secs(3600);
    o
}

/// The value of series `s` at `t`: distinct per sample, so a misplaced one shows.
fn backfill_value(s: u8, t: i64) -> f64 {
    (t / 1000) as f64 + f64::from(s) * 0.125
}

fn backfill_batch(from: i64, to: i64, every: i64) -> Batch {
    let mut b = Batch::new();
    for s in 0..3u8 {
        let samples =
            (from..to).step_by(every as usize).map(|t| Sample::new(t, backfill_value(s, t))).collect();
        b.push(Labels::from_pairs(&[("__name__", "backfill"), ("s", &s.to_string())]), samples);
    }
    b
}

/// Every sample of the three series in `[lo, hi]`, as (series, time, bits).
fn backfill_read(db: &Db, lo: i64, hi: i64) -> Vec<(String, i64, u64)> {
    let snap = db.snapshot();
    let mut out = Vec::new();
    for s in snap.select(&[Matcher::equal("__name__", "backfill")], lo, hi).unwrap() {
        let mut v = Vec::new();
        snap.samples(&s, lo, hi, &mut v).unwrap();
        out.extend(v.iter().map(|x| (s.labels.get("s").unwrap().to_string(), x.t, x.v.to_bits())));
    }
    out
}

/// What [`backfill_batch`] wrote in `[lo, hi]` for samples every `every` ms from `first`.
fn backfill_expected(first: i64, every: i64, lo: i64, hi: i64) -> Vec<(String, i64, u64)> {
    let start = first + ((lo - first).max(0) + every - 1) / every * every;
    (0..3u8)
        .flat_map(|s| {
            (start..=hi)
                .step_by(every as usize)
                .map(move |t| (s.to_string(), t, backfill_value(s, t).to_bits()))
        })
        .collect()
}

/// The present day every 10 s, then 30 older days every `every` (60 s; 10 s with
/// `STRATA_SLOW_TESTS=1`) in 4-hour batches, newest first or shuffled.
fn backfill(shuffle: bool) {
    let dir = scratch();
    let db = Db::open(backfill_options(dir.path())).unwrap();
    let now = now_ms();
    let day_start = now - DAY;
    let present = backfill_batch(day_start, now + 1, 10_000);
    let out = db.append(&present).unwrap();
    assert_eq!(out.rejected(), 0, "{out:?}");
    let mut written = out.appended;
    db.flush().unwrap();
    let every = if slow() { 10_000 } else { 60_000 };
    let first = day_start - 30 * DAY;
    let mut batches: Vec<i64> = (0..30 * 6).map(|i| day_start - (i + 1) * 4 * HOUR).collect();
    if shuffle {
        let mut rng = Rng(0xbac_cf11);
        for i in (1..batches.len()).rev() {
            batches.swap(i, (rng.next() % (i as u64 + 1)) as usize);
        }
    }
    for (i, from) in batches.iter().enumerate() {
        let out = db.append(&backfill_batch(*from, from + 4 * HOUR, every)).unwrap();
        assert_eq!(out.rejected(), 0, "batch from {from}: {out:?}");
        written += out.appended;
        if i % 12 == 11 {
            db.flush().unwrap();
        }
    }
    let expect_written = 3 * (DAY / 10_000 + 1) + 3 * (30 * DAY / every);
    assert_eq!(written, expect_written as u64);
    let count = |db: &Db| backfill_read(db, i64::MIN, i64::MAX).len() as u64;
    assert_eq!(count(&db), written, "before compaction");
    assert_eq!(db.apply_retention().unwrap(), 0, "retention removed backfilled data");
    db.compact_all().unwrap();
    assert_eq!(count(&db), written, "after compaction");
    assert_one_file_per_partition(&db, DAY, "after compact_all");
    // Daily partitions from the first backfilled day to today, each with its file.
    let m = Manifest::load(&dir.path().join("MANIFEST")).unwrap().unwrap();
    let got: Vec<i64> =
        m.files.iter().map(|f| f.partition).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    let want: Vec<i64> = (first.div_euclid(DAY)..=now.div_euclid(DAY)).map(|d| d * DAY).collect();
    assert_eq!(got, want, "partitions");
    assert_eq!(m.files.iter().map(|f| f.samples).sum::<u64>(), written, "samples in the files");
    // A range inside the backfill, across a day boundary, reads back exactly what was written.
    let (lo, hi) = (first + 12 * DAY + 17 * HOUR + 1, first + 14 * DAY + 3 * HOUR);
    assert_eq!(backfill_read(&db, lo, hi), backfill_expected(first, every, lo, hi));
    db.close().unwrap();
    drop(db);
    let db = Db::open(backfill_options(dir.path())).unwrap();
    assert_eq!(count(&db), written, "after reopening");
    assert_eq!(backfill_read(&db, lo, hi), backfill_expected(first, every, lo, hi));
}

#[test]
fn backfill_newest_first() {
    backfill(false);
}

#[test]
fn backfill_shuffled() {
    backfill(true);
}

/// With 40 days of retention and the newest sample now, a sample in a partition that
/// retention would remove is rejected and counted; one in the oldest partition retention
/// keeps (older than now - 40 d, but not in a partition to remove) is stored.
#[test]
fn a_sample_older_than_retention_is_rejected_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(backfill_options(dir.path())).unwrap();
    let now = now_ms();
    let l = Labels::from_pairs(&[("__name__", "old")]);
    let mut b = Batch::new();
    b.push(l.clone(), vec![Sample::new(now, 1.0)]);
    db.append(&b).unwrap();
    let first_kept = (now - 40 * DAY).div_euclid(DAY) * DAY;
    let mut b = Batch::new();
    b.push(
        l.clone(),
        vec![
            Sample::new(first_kept - 1, 2.0),
            Sample::new(first_kept, 3.0),
            Sample::new(now - 60 * DAY, 4.0),
        ],
    );
    let out = db.append(&b).unwrap();
    assert_eq!((out.outside_retention, out.rejected()), (2, 2), "{out:?}");
    assert_eq!(out.retention_first_kept, Some(first_kept), "{out:?}");
    assert_eq!(out.appended, 1, "{out:?}");
    assert_eq!(out.first_rejected.as_ref().map(|(_, s)| s.t), Some(first_kept - 1), "{out:?}");
    let snap = db.snapshot();
    let s = snap.select(&[Matcher::equal("__name__", "old")], i64::MIN, i64::MAX).unwrap();
    let mut v = Vec::new();
    snap.samples(&s[0], i64::MIN, i64::MAX, &mut v).unwrap();
    assert_eq!(v, vec![Sample::new(first_kept, 3.0), Sample::new(now, 1.0)]);
}

/// After compaction, the arrival order leaves no trace on disk: a day of TSBS-like data (20
/// series, integer random walks every 10 s) sent in order, as ten-minute batches shuffled, and
/// as ten-minute batches in the order four workers taking them from one queue deliver them
/// (each batch overtaken by up to three later ones), is stored in files of the same size, within
/// the 2 % the issue allows and in fact to the byte, since compaction writes the same blocks.
#[test]
fn after_compaction_bytes_do_not_depend_on_arrival_order() {
    const SERIES: u8 = 20;
    const EVERY: i64 = 10_000;
    let start = (now_ms() - 2 * DAY).div_euclid(DAY) * DAY;
    // Ten-minute batches of every series, in time order.
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut values = vec![50i64; usize::from(SERIES)];
    let mut batches: Vec<Batch> = Vec::new();
    for b in 0..(DAY / (10 * 60_000)) {
        let mut batch = Batch::new();
        let from = start + b * 10 * 60_000;
        let mut per_series: Vec<Vec<Sample>> = vec![Vec::new(); usize::from(SERIES)];
        for t in (from..from + 10 * 60_000).step_by(EVERY as usize) {
            for (s, v) in values.iter_mut().enumerate() {
                *v = (*v + (rng.next() % 3) as i64 - 1).clamp(0, 100);
                per_series[s].push(Sample::new(t, *v as f64));
            }
        }
        for (s, samples) in per_series.into_iter().enumerate() {
            batch.push(Labels::from_pairs(&[("__name__", "backfill"), ("s", &s.to_string())]), samples);
        }
        batches.push(batch);
    }
    let in_order: Vec<usize> = (0..batches.len()).collect();
    let mut shuffled = in_order.clone();
    for i in (1..shuffled.len()).rev() {
        shuffled.swap(i, (rng.next() % (i as u64 + 1)) as usize);
    }
    // Four workers on one queue: each window of four batches arrives in a random order.
    let mut shared_queue = in_order.clone();
    for w in shared_queue.chunks_mut(4) {
        for i in (1..w.len()).rev() {
            w.swap(i, (rng.next() % (i as u64 + 1)) as usize);
        }
    }
    let mut sizes = Vec::new();
    for order in [&in_order, &shuffled, &shared_queue] {
        let dir = scratch();
        let db = Db::open(backfill_options(dir.path())).unwrap();
        for (k, &i) in order.iter().enumerate() {
            let out = db.append(&batches[i]).unwrap();
            assert_eq!(out.rejected(), 0, "{out:?}");
            if k % 40 == 39 {
                db.flush().unwrap();
            }
        }
        db.flush().unwrap();
        db.compact_all().unwrap();
        let disk = db.disk_stats().unwrap();
        assert!(disk.partitions.iter().all(|p| p.files == 1), "{disk:?}");
        let samples: usize = backfill_read(&db, i64::MIN, i64::MAX).len();
        assert_eq!(samples as i64, i64::from(SERIES) * DAY / EVERY);
        sizes.push(disk.partitions.iter().map(|p| p.bytes).sum::<u64>());
    }
    assert_eq!(sizes[1], sizes[0], "shuffled vs in order: {sizes:?}");
    assert_eq!(sizes[2], sizes[0], "shared queue vs in order: {sizes:?}");
}

//! The engine checked against `MemStore`, a plain in-memory model, over random operation
//! sequences: appends in and out of order, duplicates and rewrites, flushes, compactions,
//! deletions, retention, clean restarts and crash restarts (drop without close). Samples carry
//! random start timestamps (or none), and `start_timestamps` is compared as well as samples.
//! Some samples are native histograms (of changing layouts, integer and float counts), which
//! replace and are replaced by floats at equal timestamps; `histograms` is compared too.
//!
//! `STRATA_SLOW_TESTS=1` runs many more and longer sequences.

use std::collections::HashMap;

use proptest::prelude::*;
use storage::mem::MemStore;
use storage::query::StartTimestamp;
use storage::{
    BatchRef, Db, FloatHistogram, HistogramSample, Labels, MatchOp, Matcher, Options, Querier, Sample,
};

use crate::common;

const BASE: i64 = 1_700_000_000_000;
const HOUR: i64 = 3_600_000;
const OOO_WINDOW: i64 = HOUR;
const PARTITION: i64 = 6 * HOUR;
const RETENTION: i64 = 24 * HOUR;

#[derive(Debug, Clone)]
enum Op {
    /// Append to series `s` samples at (time offset in s from a moving cursor, value, start
    /// timestamp choice: 0 none, otherwise one of a few start timestamps; 4 and up: a native
    /// histogram made from the value instead, see [`histogram`]).
    Append(Vec<(u8, i64, i16, u8)>),
    /// Move time forward by this many minutes.
    Advance(u16),
    Flush,
    Compact,
    Delete {
        series: u8,
        from: i64,
        len: i64,
    },
    Retention,
    CleanTombstones,
    Restart,
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => proptest::collection::vec((0u8..4, -5400i64..600, any::<i16>(), 0u8..7), 1..20).prop_map(Op::Append),
        3 => (1u16..600).prop_map(Op::Advance),
        2 => Just(Op::Flush),
        2 => Just(Op::Compact),
        1 => (0u8..4, -7200i64..0, 0i64..3600).prop_map(|(series, from, len)| Op::Delete { series, from, len }),
        1 => Just(Op::Retention),
        1 => Just(Op::CleanTombstones),
        1 => Just(Op::Restart),
        1 => Just(Op::Crash),
    ]
}

fn labels(s: u8) -> Labels {
    Labels::from_pairs(&[
        ("__name__", "m"),
        ("s", &s.to_string()),
        ("parity", if s.is_multiple_of(2) { "even" } else { "odd" }),
    ])
}

/// The start timestamp of choice `k` (0: none). Few distinct values, so runs form and break.
fn start(k: u8) -> i64 {
    if k == 0 { 0 } else { BASE - i64::from(k) * 60_000 }
}

/// A histogram derived from `v` ([`common::histogram`]): its counts are integers unless `k` is
/// 6, and `k == 5` makes it a gauge histogram.
fn histogram(v: i16, k: u8) -> FloatHistogram {
    common::histogram(v, k == 6, k == 5)
}

fn options(dir: &std::path::Path) -> Options {
    let mut o = Options::new(dir);
    o.maintenance_interval = std::time::Duration::from_secs(3600);
    o.ooo_window_ms = Some(OOO_WINDOW);
    o.partition_ms = PARTITION;
    o.retention_ms = RETENTION;
    o.block_samples_max = 7;
    o.block_grid_ms = HOUR / 4;
    o.compact_files_min = 2;
    o.wal_segment_bytes = 4096;
    o
}

struct Model {
    store: MemStore,
    newest: HashMap<u8, i64>,
    newest_ever: i64,
}

fn check(db: &Db, model: &MemStore) {
    let snap = db.snapshot();
    let all = [Matcher::equal("__name__", "m")];
    let got: Vec<(Labels, Vec<Sample>)> = snap
        .select(&all, i64::MIN, i64::MAX)
        .unwrap()
        .into_iter()
        .map(|s| {
            let mut v = Vec::new();
            snap.samples(&s, i64::MIN, i64::MAX, &mut v).unwrap();
            (s.labels, v)
        })
        .collect();
    assert_eq!(got, model.dump());
    for s in snap.select(&all, i64::MIN, i64::MAX).unwrap() {
        for (lo, hi) in [(i64::MIN, i64::MAX), (BASE + HOUR / 2, BASE + 3 * HOUR)] {
            let (mut got, mut want): (Vec<HistogramSample>, Vec<HistogramSample>) = (Vec::new(), Vec::new());
            snap.histograms(&s, lo, hi, &mut got).unwrap();
            model.histograms(&s, lo, hi, &mut want).unwrap();
            assert_eq!(got, want, "histograms of {} in [{lo}, {hi}]", s.labels);
        }
    }
    // Start timestamps, over everything and over a narrower range.
    for (lo, hi) in [(i64::MIN, i64::MAX), (BASE + HOUR / 2, BASE + 3 * HOUR)] {
        for s in snap.select(&all, i64::MIN, i64::MAX).unwrap() {
            let (mut got, mut want): (Vec<StartTimestamp>, Vec<StartTimestamp>) = (Vec::new(), Vec::new());
            snap.start_timestamps(&s, lo, hi, &mut got).unwrap();
            model.start_timestamps(&s, lo, hi, &mut want).unwrap();
            assert_eq!(got, want, "start timestamps of {} in [{lo}, {hi}]", s.labels);
        }
    }
    // A narrower selection and time range agree too.
    let odd = [Matcher::new(MatchOp::Regex, "parity", "od.").unwrap(), Matcher::equal("__name__", "m")];
    let (lo, hi) = (BASE, BASE + 2 * HOUR);
    let got: Vec<Labels> = snap.select(&odd, lo, hi).unwrap().into_iter().map(|s| s.labels).collect();
    let want: Vec<Labels> = model.select(&odd, lo, hi).unwrap().into_iter().map(|s| s.labels).collect();
    assert_eq!(got, want);
}

fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let mut db = Some(Db::open(options(dir.path())).unwrap());
    let mut m = Model { store: MemStore::new(), newest: HashMap::new(), newest_ever: i64::MIN };
    let mut now = BASE;
    for op in ops {
        let d = db.as_ref().unwrap();
        match op {
            Op::Append(samples) => {
                let all_labels: Vec<Labels> = samples.iter().map(|(s, ..)| labels(*s)).collect();
                let mut batch = BatchRef::new();
                for ((_, dt, v, k), l) in samples.iter().zip(&all_labels) {
                    let mut b = batch.series();
                    for x in l.iter() {
                        b.label(&x.name, &x.value);
                    }
                    if *k >= 4 {
                        b.histogram(now + dt * 1000, histogram(*v, *k));
                    } else {
                        b.sample_with_start(Sample::new(now + dt * 1000, f64::from(*v)), start(*k));
                    }
                    b.finish();
                }
                d.append_ref(&batch).unwrap();
                for (s, dt, v, k) in samples {
                    let t = now + dt * 1000;
                    let newest = m.newest.get(&s).copied();
                    if newest.is_some_and(|n| t < n - OOO_WINDOW) {
                        continue; // rejected as too old, as the engine does
                    }
                    m.newest.insert(s, newest.map_or(t, |n| n.max(t)));
                    m.newest_ever = m.newest_ever.max(t);
                    if k >= 4 {
                        m.store.append_histograms(&labels(s), &[HistogramSample { t, h: histogram(v, k) }]);
                        continue;
                    }
                    m.store.append_with_start_timestamps(
                        &labels(s),
                        &[Sample::new(t, f64::from(v))],
                        &[start(k)],
                    );
                }
            }
            Op::Advance(min) => now += i64::from(min) * 60_000,
            Op::Flush => d.flush().unwrap(),
            Op::Compact => d.compact().unwrap(),
            Op::CleanTombstones => d.clean_tombstones().unwrap(),
            Op::Delete { series, from, len } => {
                let mint = now + from * 1000;
                // Keep each series' newest sample: the out-of-order window is measured from it,
                // and the engine learns it back from files after a restart.
                let newest = m.newest.get(&series).copied().unwrap_or(i64::MIN);
                let maxt = (mint + len * 1000).min(newest.saturating_sub(1));
                if maxt >= mint {
                    let ms = [Matcher::equal("s", series.to_string())];
                    d.delete(&ms, mint, maxt).unwrap();
                    m.store.delete(&ms, mint, maxt);
                }
            }
            Op::Retention => {
                d.apply_retention().unwrap();
                if m.newest_ever != i64::MIN {
                    let cutoff = m.newest_ever - RETENTION;
                    // Whole partitions that end before the cutoff go.
                    let first_kept = cutoff.div_euclid(PARTITION) * PARTITION;
                    m.store.drop_before(first_kept);
                }
            }
            Op::Restart => {
                db.take().unwrap().close().unwrap();
                db = Some(Db::open(options(dir.path())).unwrap());
            }
            Op::Crash => {
                drop(db.take());
                db = Some(Db::open(options(dir.path())).unwrap());
            }
        }
        check(db.as_ref().unwrap(), &m.store);
    }
}

fn cases() -> u32 {
    if std::env::var_os("STRATA_SLOW_TESTS").is_some() { 2000 } else { 64 }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_shrink_iters: 2000, ..ProptestConfig::default() })]
    #[test]
    fn engine_matches_model(ops in proptest::collection::vec(op(), 1..60)) {
        run(ops);
    }
}

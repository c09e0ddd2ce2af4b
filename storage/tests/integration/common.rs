//! The crash oracle shared by the SIGKILL (`crash.rs`), power-cut (`power_loss.rs`) and
//! disk-full (`disk_full.rs`) tests: which batches a reopened database holds, and whether any
//! file on disk is one the manifest does not account for; and the scratch directories and
//! seeded random numbers those tests and `out_of_order.rs` share.
//!
//! The writers of those tests write batches `b` of writer `w` as one sample per series at
//! [`batch_time`]`(b)` with value `w * 1e9 + b`, the same for every series of the batch, so a
//! batch is identified by the samples alone and a partial batch shows as a count below the
//! series count. Batch times mostly grow with `b`, but one batch in five lies 10 minutes and
//! one in five 2 hours behind the batches written around it: out-of-order writes, more than
//! an hour late too, go through the same crashes.
//!
//! Also the fixtures several modules build alike: [`copy_tree`] (golden databases are opened
//! from a copy) and [`histogram`] (a native histogram derived from a small integer).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use storage::manifest::Manifest;
use storage::{CounterResetHint, FloatHistogram, Matcher, Querier};

/// Timestamp of batch 0.
pub const BASE: i64 = 1_700_000_000_000;

/// How far behind its neighbours batch `b` lies, in seconds, and the millisecond offset that
/// tells the lateness apart (so no two batches share a timestamp): `b % 5 == 2` by 10 minutes,
/// `b % 5 == 4` by 2 hours, the rest on time.
fn lateness(b: u64) -> (i64, i64) {
    match b % 5 {
        2 => (600, 250),
        4 => (7200, 500),
        _ => (0, 0),
    }
}

/// The timestamp of every sample of batch `b` (the crash writer, `src/bin/crash_writer.rs`,
/// has its own copy of this mapping).
pub fn batch_time(b: u64) -> i64 {
    let (late, ms) = lateness(b);
    BASE + (b as i64 - late) * 1000 + ms
}

/// The batch whose samples lie at `t`: the inverse of [`batch_time`].
pub fn batch_at(t: i64) -> u64 {
    let (s, ms) = ((t - BASE).div_euclid(1000), (t - BASE).rem_euclid(1000));
    let late = match ms {
        0 => 0,
        250 => 600,
        500 => 7200,
        _ => panic!("no batch is written at {t}"),
    };
    let b = (s + late) as u64;
    assert_eq!(batch_time(b), t, "no batch is written at {t}");
    b
}

/// The value every sample of batch `b` of writer `w` carries.
pub fn batch_value(w: u64, b: u64) -> f64 {
    (w * 1_000_000_000 + b) as f64
}

/// How many series hold each `(writer, batch)` among the series of `metric` (each labelled
/// `writer`), panicking on a sample whose value is not its batch's. `context` starts every
/// message (e.g. which cut is being checked).
pub fn batches_present(q: &impl Querier, metric: &str, context: &str) -> BTreeMap<(u64, u64), u64> {
    let mut present = BTreeMap::new();
    for s in q.select(&[Matcher::equal("__name__", metric)], i64::MIN, i64::MAX).unwrap() {
        let w: u64 = s.labels.get("writer").unwrap().parse().unwrap();
        let mut v = Vec::new();
        q.samples(&s, i64::MIN, i64::MAX, &mut v).unwrap();
        for x in v {
            let b = batch_at(x.t);
            assert_eq!(x.v, batch_value(w, b), "{context}wrong value for writer {w} batch {b}");
            *present.entry((w, b)).or_default() += 1;
        }
    }
    present
}

/// Checks that no batch is partial (every present batch is in all `series` series) and that
/// every batch in `acked` is present.
pub fn assert_whole_and_acked<'a>(
    present: &BTreeMap<(u64, u64), u64>,
    acked: impl IntoIterator<Item = &'a (u64, u64)>,
    series: u64,
    context: &str,
) {
    for (wb, n) in present {
        assert_eq!(*n, series, "{context}batch {wb:?} is partial: {n} of {series} series");
    }
    for wb in acked {
        assert!(present.contains_key(wb), "{context}acknowledged batch {wb:?} lost");
    }
}

/// Every file under `dir` that the manifest does not account for: `.tmp` leftovers and
/// partition files it does not list (WAL segments, MANIFEST and LOCK are expected); and every
/// file it lists that is missing, so the caller sees both kinds of damage in one list.
pub fn strays(dir: &Path) -> Vec<PathBuf> {
    let m = Manifest::load(&dir.join("MANIFEST")).unwrap().unwrap_or_default();
    let listed: BTreeSet<PathBuf> =
        m.files.iter().map(|f| storage::filenames::partition_file(dir, f.partition, f.id)).collect();
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let ok = if name.ends_with(".tmp") {
                false
            } else if name.ends_with(".spf") {
                listed.contains(&p)
            } else {
                true
            };
            if !ok {
                out.push(p);
            }
        }
    }
    out.extend(listed.into_iter().filter(|p| !p.exists()));
    out
}

/// Panics, naming them, if [`strays`] finds any.
pub fn assert_no_strays(dir: &Path, context: &str) {
    let s = strays(dir);
    assert!(s.is_empty(), "{context}files the manifest does not account for (or lists but lacks): {s:?}");
}

/// A temporary directory, on tmpfs when there is one: what these tests check does not depend
/// on the fsyncs reaching a disk (power-cut tests decide what survives a cut themselves), and
/// on a disk they make the tests ten times slower.
pub fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(d) = tempfile::tempdir_in(shm)
    {
        return d;
    }
    tempfile::tempdir().unwrap()
}

/// A small deterministic PRNG (xorshift): kill times and shuffles reproducible from a seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Copies a directory tree (the golden databases are opened from a copy: opening writes).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A histogram derived from `v`: its layout changes with `v % 3`, `v % 5 == 0` makes it a
/// custom-bucket one; `fractional` adds 0.25 to its counts (integers otherwise), `gauge` makes
/// it a gauge histogram.
pub fn histogram(v: i16, fractional: bool, gauge: bool) -> FloatHistogram {
    let c = f64::from(v.unsigned_abs()) + if fractional { 0.25 } else { 0.0 };
    let n = i32::from(v.rem_euclid(3)) + 1;
    let nhcb = v.rem_euclid(5) == 0;
    FloatHistogram {
        counter_reset_hint: if gauge { CounterResetHint::Gauge } else { CounterResetHint::Unknown },
        schema: if nhcb { FloatHistogram::CUSTOM_BUCKETS_SCHEMA } else { i32::from(v.rem_euclid(4)) },
        zero_threshold: if nhcb { 0.0 } else { 0.001 },
        zero_count: if nhcb { 0.0 } else { c },
        count: c * f64::from(n + 1),
        sum: f64::from(v) * 1.5,
        positive: (0..n).map(|i| (i * 2 - 1, c + f64::from(i))).collect(),
        negative: if nhcb { Vec::new() } else { vec![(1, c)] },
        custom_values: if nhcb { vec![0.5, 1.0, 2.0] } else { Vec::new() },
    }
}

//! Power-loss tests: strata acknowledges a batch after an fsync, so a power cut at any moment
//! must keep every acknowledged batch. [`storage::powercut`] records, for a run with flushes,
//! compactions, WAL rotations, deletions and retention going on, the tree a power cut after
//! each fsync, rename or removal would leave (only synced bytes, only names whose directory was
//! synced); each cut is materialised into a fresh directory, opened, and checked: every batch
//! acknowledged before the cut is whole, no batch is partial, no stray file is left. Two
//! batches in five are written out of order, 10 minutes and 2 hours behind the batches around
//! them (`common::batch_time`), so cuts also fall while late data sits in the head and the WAL
//! and is being flushed into older partitions and compacted there.
//!
//! `STRATA_SLOW_TESTS=1` checks 20x more random cuts (over more runs).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use storage::powercut::{self, Recorder};
use storage::{Batch, Db, Labels, Matcher, Options, Sample};

use crate::common::{self, BASE, scratch};

fn slow() -> bool {
    std::env::var("STRATA_SLOW_TESTS").is_ok_and(|v| v == "1")
}

fn labels(w: u64, k: u64) -> Labels {
    Labels::from_pairs(&[("__name__", "power"), ("writer", &w.to_string()), ("k", &k.to_string())])
}

/// Batch `b` of writer `w`: one sample at `batch_time(b)` (`BASE + b s`, or out of order),
/// value `w * 1e9 + b`, in each of `series` series.
fn batch(w: u64, b: u64, series: u64) -> Batch {
    let mut batch = Batch::new();
    for k in 0..series {
        batch.push(labels(w, k), vec![Sample::new(common::batch_time(b), common::batch_value(w, b))]);
    }
    batch
}

/// Samples two days before the oracle's, in a metric it ignores: for retention to remove.
fn old_batch() -> Batch {
    let mut batch = Batch::new();
    let t = BASE - 2 * 24 * 3_600_000;
    batch.push(
        Labels::from_pairs(&[("__name__", "power_old")]),
        vec![Sample::new(t, 1.0), Sample::new(t + 1000, 2.0)],
    );
    batch
}

/// Tiny thresholds, so that flushes, compactions and WAL rotations happen all the time.
fn options(dir: &Path, maintenance: Duration) -> Options {
    let mut o = Options::new(dir);
    o.head_samples_max = 300;
    o.maintenance_interval = maintenance;
    o.compact_files_min = 2;
    o.wal_segment_bytes = 4 << 10;
    o.partition_ms = 60_000; // one-minute partitions: many of them, so compaction and retention run
    // One day: removes the `power_old` partition two days back (see `old_batch`), never a
    // batch of the oracle, which all lie within minutes (the late ones two hours) of `BASE`.
    o.retention_ms = 24 * 3_600_000;
    o.block_samples_max = 16;
    o
}

/// Acknowledged batches: (writer, batch) -> operations recorded when `append` returned.
type Acks = Arc<Mutex<BTreeMap<(u64, u64), u64>>>;

/// What one cut checked.
#[derive(Default)]
struct Checked {
    cuts: u64,
    /// Of which second cuts, during and after recovery from a first.
    double: u64,
    acked: u64,
}

/// Materialises the cut after operation `n`, opens it, and checks: every batch acknowledged at
/// or before `n` whole, no batch partial, no stray files. With `again`, part of an unsynced
/// WAL write also survives (a torn tail), and the power is cut a second time at a random moment of what follows (recovery itself, more appends, a flush):
/// everything acknowledged before either cut must survive both.
fn check_cut(
    rec: &Recorder,
    n: u64,
    acks: &BTreeMap<(u64, u64), u64>,
    series: u64,
    out: &mut Checked,
    mut again: Option<&mut Rng>,
) {
    let d = scratch();
    let dir = d.path().join("cut");
    rec.materialise(n, &dir).unwrap();
    if let Some(rng) = again.as_deref_mut() {
        tear_wal_tail(&dir, rng);
    }
    let rec2 = again.is_some().then(|| powercut::record(&dir).unwrap());
    let db = Db::open(options(&dir, Duration::from_secs(3600)))
        .unwrap_or_else(|e| panic!("cut at op {n}: reopen failed: {e}"));
    let acked = verify(&db, &dir, n, acks, series);
    out.cuts += 1;
    out.acked += acked;
    let (Some(rng), Some(rec2)) = (again, rec2) else {
        db.close().unwrap();
        return;
    };
    // Everything that survived counts as acknowledged at operation 0 of the second recording.
    let acks2: Acks =
        Arc::new(Mutex::new(acks.iter().filter(|(_, at)| **at <= n).map(|(k, _)| (*k, 0)).collect()));
    for b in 0..20 {
        append(&db, &rec2, &acks2, 9, b, series);
        if b == 10 {
            db.flush().unwrap();
        }
    }
    db.close().unwrap();
    let n2 = rng.next() % (rec2.ops() + 1);
    let acks2 = acks2.lock().clone();
    check_cut(&rec2, n2, &acks2, series, out, None);
    out.double += 1;
}

/// Part of an unsynced write may reach the disk before the power goes: appends up to 100 random
/// (or zero) bytes to the newest WAL segment, the only file with writes that were never synced
/// (older segments are synced whole before the next one is created; other files are renamed
/// into place only after their fsync).
fn tear_wal_tail(dir: &Path, rng: &mut Rng) {
    let wal = storage::filenames::wal_dir(dir);
    let Ok(rd) = std::fs::read_dir(&wal) else { return };
    let Some(newest) = rd.flatten().map(|e| e.path()).max() else { return };
    let len = (rng.next() % 101) as usize;
    let zeros = rng.next().is_multiple_of(2);
    let junk: Vec<u8> = (0..len).map(|_| if zeros { 0 } else { rng.next() as u8 }).collect();
    let mut f = std::fs::OpenOptions::new().append(true).open(&newest).unwrap();
    std::io::Write::write_all(&mut f, &junk).unwrap();
}

/// The oracle on an opened cut: returns how many acknowledged batches it checked.
fn verify(db: &Db, dir: &Path, n: u64, acks: &BTreeMap<(u64, u64), u64>, series: u64) -> u64 {
    let context = format!("cut at op {n}: ");
    let present = common::batches_present(&db.snapshot(), "power", &context);
    let acked: Vec<&(u64, u64)> = acks.iter().filter(|(_, at)| **at <= n).map(|(wb, _)| wb).collect();
    common::assert_whole_and_acked(&present, acked.iter().copied(), series, &context);
    common::assert_no_strays(dir, &context);
    acked.len() as u64
}

/// A small deterministic PRNG (xorshift).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Appends batch `b` of writer `w`, retrying while it is refused for a passing reason (the
/// flush backlog: writers outrun flushes on a tmpfs), and records the operation count at the
/// acknowledgement.
fn append(db: &Db, rec: &Recorder, acks: &Acks, w: u64, b: u64, series: u64) {
    let batch = batch(w, b, series);
    loop {
        match db.append(&batch) {
            Ok(_) => break,
            Err(e) if e.is_transient() => std::thread::sleep(Duration::from_millis(1)),
            Err(e) => panic!("writer {w} batch {b}: {e}"),
        }
    }
    let at = rec.ops();
    acks.lock().insert((w, b), at);
}

/// Three writers and the background maintenance thread (flushes, compactions, WAL rotations,
/// retention), then `cuts` random cuts of the recorded run.
fn concurrent_run(seed: u64, cuts: usize, out: &mut Checked) {
    let d = scratch();
    let root = d.path().join("db");
    std::fs::create_dir(&root).unwrap();
    let rec = Arc::new(powercut::record(&root).unwrap());
    let acks: Acks = Arc::default();
    let (writers, series, per_writer) = (3u64, 4u64, 300u64);
    {
        let db = Arc::new(Db::open(options(&root, Duration::from_millis(5))).unwrap());
        db.append(&old_batch()).unwrap();
        db.flush().unwrap();
        let threads: Vec<_> = (0..writers)
            .map(|w| {
                let (db, rec, acks) = (Arc::clone(&db), Arc::clone(&rec), Arc::clone(&acks));
                std::thread::spawn(move || {
                    for b in 0..per_writer {
                        append(&db, &rec, &acks, w, b, series);
                        if b % 50 == 49 {
                            let _ = db.compact();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let c = db.counters();
        eprintln!(
            "run {seed:#x}: {} flushes, {} compactions, {} partitions removed by retention, {} WAL segments, {} ops recorded",
            c.flushes.load(Ordering::Relaxed),
            c.compactions.load(Ordering::Relaxed),
            c.retention_partitions_removed.load(Ordering::Relaxed),
            db.wal_stats().current_segment,
            rec.ops()
        );
        db.close().unwrap();
    }
    let total = rec.ops();
    let acks = acks.lock().clone();
    assert_eq!(acks.len() as u64, writers * per_writer, "appends failed");
    let mut rng = Rng(seed);
    for _ in 0..cuts {
        let n = rng.next() % (total + 1);
        check_cut(&rec, n, &acks, series, out, Some(&mut rng));
    }
}

#[test]
fn random_power_cuts_lose_no_acknowledged_batch() {
    let (runs, cuts) = if slow() { (40, 100) } else { (5, 40) };
    let started = Instant::now();
    let mut out = Checked::default();
    for run in 0..runs {
        concurrent_run(0x9e37_79b9_7f4a_7c15 ^ (run + 1), cuts, &mut out);
    }
    eprintln!(
        "{} random power cuts over {runs} runs ({} of them second cuts after recovering from a first), {} acknowledged batches checked, {:.1} s",
        out.cuts,
        out.double,
        out.acked,
        started.elapsed().as_secs_f64()
    );
}

/// A fixed script (appends, flushes, a compaction, a WAL rotation, a deletion, tombstone
/// cleaning, retention, close), cut after every single operation it makes.
#[test]
fn a_power_cut_after_every_operation_of_a_script() {
    let d = scratch();
    let root = d.path().join("db");
    std::fs::create_dir(&root).unwrap();
    let rec = powercut::record(&root).unwrap();
    let acks: Acks = Arc::default();
    let series = 3;
    let started = Instant::now();
    {
        let db = Db::open(options(&root, Duration::from_secs(3600))).unwrap();
        db.append(&old_batch()).unwrap();
        let mut b = 0;
        let mut step = |db: &Db, n: u64| {
            for _ in 0..n {
                append(db, &rec, &acks, 0, b, series);
                b += 1;
            }
        };
        step(&db, 20);
        db.flush().unwrap();
        step(&db, 20);
        db.flush().unwrap();
        step(&db, 100); // crosses partition boundaries and WAL segments
        db.flush().unwrap();
        db.compact().unwrap();
        step(&db, 10);
        db.delete(&[Matcher::equal("__name__", "unrelated")], 0, BASE - 1).unwrap();
        db.clean_tombstones().unwrap();
        db.apply_retention().unwrap();
        let removed = db.counters().retention_partitions_removed.load(Ordering::Relaxed);
        assert!(removed > 0, "retention removed nothing");
        step(&db, 10);
        db.close().unwrap();
    }
    let total = rec.ops();
    let acks = acks.lock().clone();
    let mut out = Checked::default();
    let mut rng = Rng(0x0dd_ba11);
    for n in 0..=total {
        check_cut(&rec, n, &acks, series, &mut out, n.is_multiple_of(4).then_some(&mut rng));
    }
    eprintln!(
        "{} cuts (every operation of the script, and {} second cuts after recovering from a first), {} acknowledged batches checked, {:.1} s",
        out.cuts,
        out.double,
        out.acked,
        started.elapsed().as_secs_f64()
    );
    assert!(out.acked > 0);
}

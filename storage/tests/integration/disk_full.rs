//! A full disk and failing fsyncs, with injected errors ([`storage::fault`]): appends are refused
//! with a retryable error while nothing can be made durable, reads keep working, the database
//! becomes writable again by itself once the fault clears (no reopen), failed flushes and
//! compactions leave the previous files and no stray ones, and every acknowledged batch is there
//! after a reopen.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use storage::fault::{self, EIO, Fault, Op};
use storage::{Batch, Db, Labels, Matcher, Options, Querier, Sample};

use crate::common::strays;

const BASE: i64 = 1_700_000_000_000;

fn opts(dir: &Path) -> Options {
    let mut o = Options::new(dir);
    o.maintenance_interval = Duration::from_secs(3600);
    o
}

fn labels(writer: usize) -> Labels {
    Labels::from_pairs(&[("__name__", "disk_full_test"), ("writer", &writer.to_string())])
}

/// One acknowledged (or refused) batch: writer `w`'s `k`-th, one sample at `BASE + k s` = `k`.
fn batch(w: usize, k: i64) -> Batch {
    let mut b = Batch::new();
    b.push(labels(w), vec![Sample::new(BASE + k * 1000, k as f64)]);
    b
}

/// Every (writer, k) stored, read through a snapshot.
fn stored(db: &Db, writers: usize) -> BTreeSet<(usize, i64)> {
    let snap = db.snapshot();
    let mut out = BTreeSet::new();
    for w in 0..writers {
        let l = labels(w);
        let m: Vec<Matcher> = l.iter().map(|x| Matcher::equal(x.name.as_ref(), x.value.as_ref())).collect();
        for s in snap.select(&m, i64::MIN, i64::MAX).unwrap() {
            let mut samples = Vec::new();
            snap.samples(&s, i64::MIN, i64::MAX, &mut samples).unwrap();
            for x in samples {
                let k = (x.t - BASE) / 1000;
                assert_eq!(x.v, k as f64, "writer {w} sample {k} has a wrong value");
                out.insert((w, k));
            }
        }
    }
    out
}

fn assert_all_acked(db: &Db, acked: &BTreeSet<(usize, i64)>, writers: usize) {
    let got = stored(db, writers);
    let lost: Vec<_> = acked.difference(&got).take(10).collect();
    assert!(lost.is_empty(), "{} acknowledged samples lost, e.g. {lost:?}", acked.difference(&got).count());
}

fn wait_writable(db: &Db, within: Duration) -> Duration {
    let start = Instant::now();
    while !db.health().writable {
        assert!(start.elapsed() < within, "not writable again after {within:?}: {:?}", db.health());
        std::thread::sleep(Duration::from_millis(10));
    }
    start.elapsed()
}

#[test]
fn a_failed_wal_fsync_is_recovered_without_a_restart() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(opts(d.path())).unwrap();
    let mut acked = BTreeSet::new();
    for k in 0..50 {
        db.append(&batch(0, k)).unwrap();
        acked.insert((0, k));
    }
    let fault = fault::inject(d.path(), Fault::new(&[Op::Sync]).errno(EIO).paths_containing("wal").times(1));
    let err = db.append(&batch(0, 50)).unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert_eq!(fault.hits(), 1);
    // Reads go on while writes are refused.
    assert_all_acked(&db, &acked, 1);
    let took = wait_writable(&db, Duration::from_secs(10));
    eprintln!("writable again {took:?} after a failed fsync");
    // Counted just after the poison is cleared.
    let counted = Instant::now();
    while db.counters().recoveries.load(Ordering::Relaxed) == 0 {
        assert!(counted.elapsed() < Duration::from_secs(10), "recovery not counted");
        std::thread::yield_now();
    }
    for k in 51..100 {
        db.append(&batch(0, k)).unwrap();
        acked.insert((0, k));
    }
    assert_all_acked(&db, &acked, 1);
    // Dropped without close: like a crash, the new segment must replay.
    drop(db);
    let db = Db::open(opts(d.path())).unwrap();
    assert_all_acked(&db, &acked, 1);
}

/// With `--wal-sync` interval, a batch is acknowledged after its write(2) and synced later: when
/// that background fsync fails, the acknowledged batches exist only in the head and the poisoned
/// segment, and recovery must make them durable through partition files.
#[test]
fn interval_mode_batches_acknowledged_before_a_failed_background_fsync_survive() {
    let d = tempfile::tempdir().unwrap();
    let mut o = opts(d.path());
    o.wal_sync = storage::WalSync::Interval(Duration::from_millis(5));
    let db = Db::open(o.clone()).unwrap();
    let mut acked = BTreeSet::new();
    for k in 0..20 {
        db.append(&batch(0, k)).unwrap();
        acked.insert((0, k));
    }
    let fault = fault::inject(d.path(), Fault::new(&[Op::Sync]).errno(EIO).paths_containing("wal"));
    // Acknowledged at once; the syncer's next fsync fails and poisons the WAL.
    let mut k = 20;
    let start = Instant::now();
    while fault.hits() == 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "the background fsync never ran");
        if db.append(&batch(0, k)).is_ok() {
            acked.insert((0, k));
            k += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(fault);
    wait_writable(&db, Duration::from_secs(10));
    // Dropped without close: nothing but the recovery made those batches durable.
    drop(db);
    let db = Db::open(o).unwrap();
    assert_all_acked(&db, &acked, 1);
}

#[test]
fn a_full_disk_refuses_writes_keeps_reads_and_recovers_when_space_returns() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(opts(d.path())).unwrap();
    let mut acked = BTreeSet::new();
    for k in 0..100 {
        db.append(&batch(0, k)).unwrap();
        acked.insert((0, k));
        if k == 40 {
            db.flush().unwrap();
        }
    }
    // Files are written in full but nothing can be synced or renamed: every recovery attempt
    // gets far enough to leave partial files behind, which it must remove.
    let full = fault::inject(d.path(), Fault::new(&[Op::Write, Op::Sync, Op::Rename]));
    let err = db.append(&batch(0, 100)).unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert!(!db.health().writable);
    let start = Instant::now();
    while db.counters().recovery_failures.load(Ordering::Relaxed) < 3 {
        assert!(start.elapsed() < Duration::from_secs(10), "recovery was not retried");
        assert!(db.append(&batch(0, 100)).unwrap_err().is_transient());
        assert_all_acked(&db, &acked, 1);
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!db.health().writable);
    full.clear();
    let took = wait_writable(&db, Duration::from_secs(10));
    eprintln!("writable again {took:?} after space returned");
    for k in 101..150 {
        db.append(&batch(0, k)).unwrap();
        acked.insert((0, k));
    }
    assert_all_acked(&db, &acked, 1);
    db.close().unwrap();
    drop(db);
    assert_eq!(strays(d.path()), Vec::<PathBuf>::new());
    let db = Db::open(opts(d.path())).unwrap();
    assert_all_acked(&db, &acked, 1);
}

#[test]
fn failed_flushes_keep_the_previous_files_and_leave_no_strays() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(opts(d.path())).unwrap();
    let mut acked = BTreeSet::new();
    let mut k = 0;
    let mut write = |db: &Db, acked: &mut BTreeSet<(usize, i64)>, n: i64| {
        for _ in 0..n {
            db.append(&batch(0, k)).unwrap();
            acked.insert((0, k));
            k += 1;
        }
    };
    write(&db, &mut acked, 100);
    db.flush().unwrap();
    let manifest = || std::fs::read(d.path().join("MANIFEST")).unwrap();
    // Each kind of failure on the way to a committed flush: writing or syncing the new file,
    // renaming it, writing the new manifest, renaming it.
    let faults = [
        Fault::new(&[Op::Write]).paths_containing(".spf"),
        Fault::new(&[Op::Sync]).paths_containing(".spf"),
        Fault::new(&[Op::Rename]).paths_containing(".spf"),
        Fault::new(&[Op::Write]).paths_containing("MANIFEST"),
        Fault::new(&[Op::Rename]).paths_containing("MANIFEST"),
    ];
    for f in faults {
        write(&db, &mut acked, 50);
        let before = manifest();
        let guard = fault::inject(d.path(), f.clone());
        db.flush().expect_err("flush must fail");
        assert!(guard.hits() > 0, "{f:?} did not hit");
        assert_eq!(manifest(), before, "{f:?}: the manifest changed");
        assert_eq!(strays(d.path()), Vec::<PathBuf>::new(), "{f:?}");
        // The head is still readable and the WAL still takes writes.
        assert_all_acked(&db, &acked, 1);
        write(&db, &mut acked, 10);
        drop(guard);
        db.flush().unwrap();
        assert_all_acked(&db, &acked, 1);
    }
    drop(db);
    let db = Db::open(opts(d.path())).unwrap();
    assert_all_acked(&db, &acked, 1);
}

#[test]
fn an_uncertain_manifest_commit_keeps_both_versions_then_sweeps() {
    let d = tempfile::tempdir().unwrap();
    let mut o = opts(d.path());
    o.maintenance_interval = Duration::from_millis(20);
    let db = Db::open(o.clone()).unwrap();
    let mut acked = BTreeSet::new();
    for k in 0..100 {
        db.append(&batch(0, k)).unwrap();
        acked.insert((0, k));
    }
    // The manifest rename happens, syncing the data directory after it fails.
    let guard = fault::inject(d.path(), Fault::new(&[Op::Sync]).exact().times(1));
    db.flush().expect_err("flush must fail");
    assert_eq!(guard.hits(), 1);
    // The files that manifest lists are kept: a power loss now could leave either manifest.
    // (Only missing files count here: the maintenance thread retries the flush at once, so its
    // `.tmp` file, or a finished retry's not yet swept leftovers, may be on disk right now.)
    let missing: Vec<PathBuf> = strays(d.path()).into_iter().filter(|p| !p.exists()).collect();
    assert_eq!(missing, Vec::<PathBuf>::new());
    drop(guard);
    db.flush().unwrap();
    // The retry wrote the same head again; the sweep removes the first attempt's files.
    let start = Instant::now();
    while !strays(d.path()).is_empty() || storage_files(d.path()) != 1 {
        assert!(start.elapsed() < Duration::from_secs(10), "not swept: {:?}", strays(d.path()));
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_all_acked(&db, &acked, 1);
    drop(db);
    let db = Db::open(o).unwrap();
    assert_all_acked(&db, &acked, 1);
}

/// Partition files on disk.
fn storage_files(dir: &Path) -> usize {
    let mut n = 0;
    for p in std::fs::read_dir(dir.join("partitions")).unwrap() {
        for f in std::fs::read_dir(p.unwrap().path()).unwrap() {
            if f.unwrap().path().extension().is_some_and(|e| e == "spf") {
                n += 1;
            }
        }
    }
    n
}

#[test]
fn a_compaction_on_a_full_disk_leaves_its_inputs() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(opts(d.path())).unwrap();
    let mut acked = BTreeSet::new();
    for round in 0..4 {
        for k in round * 50..(round + 1) * 50 {
            db.append(&batch(0, k)).unwrap();
            acked.insert((0, k));
        }
        db.flush().unwrap();
    }
    assert_eq!(storage_files(d.path()), 4);
    let before = std::fs::read(d.path().join("MANIFEST")).unwrap();
    for f in [Fault::new(&[Op::Write]), Fault::new(&[Op::Sync]), Fault::new(&[Op::Rename])] {
        let guard = fault::inject(&d.path().join("partitions"), f.clone());
        db.compact().expect_err("compaction must fail");
        assert!(guard.hits() > 0, "{f:?} did not hit");
        assert_eq!(std::fs::read(d.path().join("MANIFEST")).unwrap(), before);
        assert_eq!(strays(d.path()), Vec::<PathBuf>::new(), "{f:?}");
        assert_eq!(storage_files(d.path()), 4);
        assert_all_acked(&db, &acked, 1);
    }
    db.compact().unwrap();
    assert_eq!(storage_files(d.path()), 1);
    assert_all_acked(&db, &acked, 1);
    drop(db);
    let db = Db::open(opts(d.path())).unwrap();
    assert_all_acked(&db, &acked, 1);
}

/// Writers keep appending while the disk fills up and empties again, with flushes running:
/// every acknowledged batch survives, and the database ends up writable by itself.
#[test]
fn concurrent_writers_through_repeated_full_disks() {
    const WRITERS: usize = 3;
    let d = tempfile::tempdir().unwrap();
    let mut o = opts(d.path());
    // Flushes run often, so faults also hit them (and rotations).
    o.head_samples_max = 300;
    o.maintenance_interval = Duration::from_millis(20);
    let db = Arc::new(Db::open(o.clone()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut acked = BTreeSet::new();
                let mut refused = 0u64;
                let mut k = 0;
                while !stop.load(Ordering::Relaxed) {
                    match db.append(&batch(w, k)) {
                        Ok(_) => {
                            acked.insert((w, k));
                            k += 1;
                        }
                        Err(e) => {
                            assert!(e.is_transient(), "{e}");
                            refused += 1;
                            // A sender retries the same batch later.
                            std::thread::sleep(Duration::from_millis(2));
                        }
                    }
                }
                (acked, refused)
            })
        })
        .collect();
    let kinds = [
        Fault::disk_full(),
        Fault::new(&[Op::Sync]).errno(EIO),
        Fault::new(&[Op::Write, Op::Create]),
        Fault::new(&[Op::Rename, Op::Sync]),
    ];
    // Short faults with long enough gaps for a recovery (backoff starts at 250 ms) in between.
    for round in 0..6 {
        std::thread::sleep(Duration::from_millis(300));
        let guard = fault::inject(d.path(), kinds[round % kinds.len()].clone());
        std::thread::sleep(Duration::from_millis(40));
        drop(guard);
        wait_writable(&db, Duration::from_secs(10));
    }
    wait_writable(&db, Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(50));
    stop.store(true, Ordering::Relaxed);
    let mut acked = BTreeSet::new();
    let mut refused = 0;
    for h in handles {
        let (a, r) = h.join().unwrap();
        acked.extend(a);
        refused += r;
    }
    let recoveries = db.counters().recoveries.load(Ordering::Relaxed);
    eprintln!("{} batches acknowledged, {refused} refused, {recoveries} recoveries", acked.len());
    assert!(recoveries >= 3, "only {recoveries} of 6 faults poisoned the WAL");
    assert!(db.health().writable);
    assert_all_acked(&db, &acked, WRITERS);
    let db = Arc::into_inner(db).unwrap();
    db.close().unwrap();
    drop(db);
    assert_eq!(strays(d.path()), Vec::<PathBuf>::new());
    let db = Db::open(o).unwrap();
    assert_all_acked(&db, &acked, WRITERS);
}

/// When flushes cannot keep up (here: they fail, the disk refusing partition files), the data
/// waiting in memory grows only to twice `head_samples_max`; then appends are refused with a
/// transient error until a flush catches up, which the refusals themselves trigger.
#[test]
fn appends_are_refused_while_the_flush_backlog_is_full_and_accepted_once_it_drains() {
    let d = tempfile::tempdir().unwrap();
    let mut o = opts(d.path());
    o.head_samples_max = 100;
    let db = Db::open(o).unwrap();
    let blocked = fault::inject(&d.path().join("partitions"), Fault::new(&Op::ALL));
    let mut acked = BTreeSet::new();
    let mut refusal = None;
    for k in 0..1000 {
        match db.append(&batch(0, k)) {
            Ok(_) => {
                acked.insert((0, k));
            }
            Err(e) => {
                refusal = Some(e);
                break;
            }
        }
    }
    let refusal = refusal.expect("appends are refused before 1,000 samples wait in memory");
    assert!(matches!(refusal, storage::Error::FlushBacklog { .. }), "{refusal}");
    assert!(refusal.is_transient());
    assert_eq!(acked.len(), 200, "refused exactly at twice head_samples_max");
    assert!(db.counters().appends_refused_backlog.load(Ordering::Relaxed) >= 1);
    assert_all_acked(&db, &acked, 1);

    drop(blocked);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut k = 1000;
    loop {
        match db.append(&batch(0, k)) {
            Ok(_) => {
                acked.insert((0, k));
                break;
            }
            Err(e) => assert!(e.is_transient(), "{e}"),
        }
        assert!(Instant::now() < deadline, "the backlog never drained");
        std::thread::sleep(Duration::from_millis(20));
        k += 1;
    }
    assert_all_acked(&db, &acked, 1);
    db.close().unwrap();
    drop(db);
    let db = Db::open(opts(d.path())).unwrap();
    assert_all_acked(&db, &acked, 1);
}

/// A disk that is full when the database opens (after a crash, so the acknowledged batches are
/// only in the WAL): opening succeeds and serves them, appends are refused with a retryable
/// error because no WAL segment can be created, and once space returns the database takes
/// writes again by itself, without a reopen; nothing acknowledged before or after is lost.
#[test]
fn a_database_opened_on_a_full_disk_serves_reads_and_recovers_by_itself() {
    let d = tempfile::tempdir().unwrap();
    let o = opts(d.path());
    let db = Db::open(o.clone()).unwrap();
    let mut acked = BTreeSet::new();
    for k in 0..10 {
        db.append(&batch(0, k)).unwrap();
        acked.insert((0, k));
    }
    // Dropped without close: like a crash, the batches are only in the WAL.
    drop(db);
    let full = fault::inject(d.path(), Fault::disk_full().paths_containing("wal"));
    let db = Db::open(o.clone()).expect("a full disk must not keep the database from opening");
    assert!(full.hits() > 0, "opening never tried to write");
    let health = db.health();
    assert!(!health.writable, "{health:?}");
    assert!(health.reason.as_deref().is_some_and(|r| r.contains("No space left")), "{health:?}");
    assert_all_acked(&db, &acked, 1);
    let refused = db.append(&batch(0, 10)).unwrap_err();
    assert!(refused.is_transient(), "{refused}");
    drop(full);
    let waited = wait_writable(&db, Duration::from_secs(10));
    println!("writable {waited:?} after space returned");
    db.append(&batch(0, 10)).unwrap();
    acked.insert((0, 10));
    assert_all_acked(&db, &acked, 1);
    drop(db);
    let db = Db::open(o).unwrap();
    assert_all_acked(&db, &acked, 1);
    assert_eq!(strays(d.path()), Vec::<PathBuf>::new());
}

//! A database mirrored to a bucket: uploads and commits, restore onto an empty disk, fencing
//! of an older writer, deletion of what no manifest lists after the delay, and faults.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use object_store::memory::InMemory;
use object_store::{ObjectStore, ObjectStoreExt};
use storage::faulty::FaultyStore;
use storage::{Batch, BucketOptions, Db, Error, Labels, Matcher, Options, Querier, Sample};

const BASE: i64 = 1_700_000_000_000;
/// The start of a UTC day (one partition holds the next 24 h).
const DAY: i64 = 19_676 * 86_400_000;

fn opts(dir: &std::path::Path, store: &Arc<FaultyStore>, delete_delay: Duration) -> Options {
    let mut o = Options::new(dir);
    o.maintenance_interval = Duration::from_secs(3600);
    o.compact_files_min = 2;
    o.bucket = Some(BucketOptions {
        url: "memory://w1".into(),
        delete_delay,
        store: Some(Arc::clone(store) as Arc<dyn ObjectStore>),
        ..BucketOptions::default()
    });
    o
}

fn write_round(db: &Db, round: i64) {
    let mut b = Batch::new();
    for h in 0..10 {
        let l = Labels::from_pairs(&[("__name__", "cpu"), ("host", &format!("h{h}"))]);
        b.push(
            l,
            (0..50).map(|i| Sample::new(BASE + (round * 50 + i) * 10_000, (h * 1000 + i) as f64)).collect(),
        );
    }
    db.append(&b).unwrap();
}

/// Every sample of `cpu`, by series, as (labels, t, value bits).
fn everything(db: &Db) -> Vec<(String, i64, u64)> {
    let snap = db.snapshot();
    let mut out = Vec::new();
    for s in snap.select(&[Matcher::equal("__name__", "cpu")], i64::MIN, i64::MAX).unwrap() {
        let mut v = Vec::new();
        snap.samples(&s, i64::MIN, i64::MAX, &mut v).unwrap();
        out.extend(v.iter().map(|x| (s.labels.to_string(), x.t, x.v.to_bits())));
    }
    out
}

fn objects(store: &InMemory) -> Vec<String> {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(async {
        use futures::TryStreamExt;
        let all: Vec<_> = store.list(None).try_collect().await.unwrap();
        let mut keys: Vec<String> = all.into_iter().map(|m| m.location.to_string()).collect();
        keys.sort();
        keys
    })
}

#[test]
fn an_empty_disk_serves_what_the_bucket_holds() {
    let mem = Arc::new(InMemory::new());
    let store = Arc::new(FaultyStore::new(Arc::clone(&mem) as _));
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let want = {
        let db = Db::open(opts(d1.path(), &store, Duration::from_secs(3600))).unwrap();
        for round in 0..3 {
            write_round(&db, round);
            db.flush().unwrap();
        }
        assert!(db.wait_mirrored(Duration::from_secs(30)));
        let status = db.mirror_status().unwrap();
        assert_eq!(status.uploads.load(Ordering::Relaxed), 3, "one upload per flushed file");
        let want = everything(&db);
        assert_eq!(want.len(), 3 * 10 * 50);
        db.close().unwrap();
        want
    };
    let keys = objects(&mem);
    assert_eq!(keys.iter().filter(|k| k.ends_with(".spf")).count(), 3, "{keys:?}");
    // No LIST was made by the writer.
    // One LIST, by the writer at start (its scan for leftovers); none by reads.
    assert_eq!(store.counts().list.load(Ordering::Relaxed), 1);

    let db = Db::open(opts(d2.path(), &store, Duration::from_secs(3600))).unwrap();
    assert_eq!(everything(&db), want, "the restored directory answers as the original");
    // A snapshot of the restored directory holds its files whole, read from the bucket: it
    // opens without the bucket and answers alike.
    let copy = tempfile::tempdir().unwrap();
    let stats = db.backup_to(&copy.path().join("snap"), false).unwrap();
    assert_eq!(stats.files, 3);
    let snap = Db::open(Options::new(copy.path().join("snap"))).unwrap();
    assert_eq!(everything(&snap), want, "the snapshot answers as the original");
    snap.close().unwrap();
    // The restored writer goes on where the first stopped, with file ids of its own epoch.
    write_round(&db, 3);
    db.flush().unwrap();
    assert!(db.wait_mirrored(Duration::from_secs(30)));
    assert_eq!(everything(&db).len(), 4 * 10 * 50);
    db.close().unwrap();
}

#[test]
fn an_older_writer_is_fenced_and_refuses_writes() {
    let mem = Arc::new(InMemory::new());
    let store = Arc::new(FaultyStore::new(Arc::clone(&mem) as _));
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let old = Db::open(opts(d1.path(), &store, Duration::from_secs(3600))).unwrap();
    write_round(&old, 0);
    old.flush().unwrap();
    assert!(old.wait_mirrored(Duration::from_secs(30)));
    // A second writer takes the prefix over (say, a replacement started while the first was
    // thought dead).
    let new = Db::open(opts(d2.path(), &store, Duration::from_secs(3600))).unwrap();
    write_round(&old, 1);
    old.flush().unwrap();
    assert!(old.wait_mirrored(Duration::from_secs(30)));
    let status = old.mirror_status().unwrap();
    assert!(status.fenced.load(Ordering::Acquire));
    assert!(!old.health().writable);
    let mut b = Batch::new();
    b.push(Labels::from_pairs(&[("__name__", "cpu"), ("host", "x")]), vec![Sample::new(BASE, 1.0)]);
    assert!(matches!(old.append(&b), Err(Error::Fenced { .. })));
    // The new writer holds round 0 (committed before it opened), not the fenced round 1.
    assert_eq!(everything(&new).len(), 10 * 50);
    write_round(&new, 2);
    new.flush().unwrap();
    assert!(new.wait_mirrored(Duration::from_secs(30)));
    assert!(!new.mirror_status().unwrap().fenced.load(Ordering::Acquire));
    new.close().unwrap();
}

#[test]
fn files_no_manifest_lists_are_deleted_after_the_delay() {
    let mem = Arc::new(InMemory::new());
    let store = Arc::new(FaultyStore::new(Arc::clone(&mem) as _));
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(opts(d.path(), &store, Duration::from_secs(2))).unwrap();
    for round in 0..3 {
        write_round(&db, round);
        db.flush().unwrap();
    }
    db.compact().unwrap();
    assert!(db.wait_mirrored(Duration::from_secs(30)));
    let spf = |keys: &[String]| keys.iter().filter(|k| k.ends_with(".spf")).count();
    // The compacted inputs wait out the delay (a reader may still hold an older manifest).
    let before = objects(&mem);
    assert_eq!(spf(&before), 4, "{before:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while spf(&objects(&mem)) > 1 {
        assert!(std::time::Instant::now() < deadline, "gone files were never deleted: {:?}", objects(&mem));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(db.mirror_status().unwrap().deleted.load(Ordering::Relaxed), 3);
    let want = everything(&db);
    db.close().unwrap();
    let d2 = tempfile::tempdir().unwrap();
    let db = Db::open(opts(d2.path(), &store, Duration::from_secs(2))).unwrap();
    assert_eq!(everything(&db), want);
}

/// A bucket answering with injected faults (unavailable, answers lost after the request was
/// applied, cut bodies) delays the mirror; the bucket ends up holding everything.
#[test]
fn a_bucket_that_fails_delays_the_mirror_and_loses_nothing() {
    let seeds: Vec<u64> =
        if std::env::var_os("STRATA_SLOW_TESTS").is_some() { (1..=40).collect() } else { vec![7, 8, 9] };
    let mut mirror_failures = 0;
    for seed in seeds {
        let mem = Arc::new(InMemory::new());
        let store = Arc::new(FaultyStore::new(Arc::clone(&mem) as _));
        let d = tempfile::tempdir().unwrap();
        let db = Db::open(opts(d.path(), &store, Duration::from_secs(3600))).unwrap();
        store.random_faults(Some((0.1, 0.05, 0.05)), seed);
        for round in 0..6 {
            write_round(&db, round);
            db.flush().unwrap();
        }
        let caught_up = db.wait_mirrored(Duration::from_secs(120));
        let status = db.mirror_status().unwrap();
        assert!(caught_up, "seed {seed}: the mirror never caught up: {status:?}");
        assert!(
            !status.fenced.load(Ordering::Relaxed),
            "seed {seed}: faults made the writer think it was fenced"
        );
        mirror_failures += status.failures.load(Ordering::Relaxed);
        let want = everything(&db);
        db.close().unwrap();
        drop(db);
        store.random_faults(None, 0);
        let d2 = tempfile::tempdir().unwrap();
        let db = Db::open(opts(d2.path(), &store, Duration::from_secs(3600))).unwrap();
        let got = everything(&db);
        assert!(got == want, "seed {seed}: restored {} samples, wrote {}", got.len(), want.len());
        assert_eq!(want.len(), 6 * 10 * 50);
    }
    assert!(mirror_failures > 0, "no attempt of the mirror met a fault");
}

#[test]
fn a_selective_read_fetches_ranges_not_whole_files() {
    let mem = Arc::new(InMemory::new());
    let store = Arc::new(FaultyStore::new(Arc::clone(&mem) as _));
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let series = |h: usize| Labels::from_pairs(&[("__name__", "cpu"), ("host", &format!("h{h:04}"))]);
    let file_bytes = {
        let db = Db::open(opts(d1.path(), &store, Duration::from_secs(3600))).unwrap();
        let mut b = Batch::new();
        for h in 0..2000 {
            // Values that do not compress to nothing: a few KiB per series.
            b.push(
                series(h),
                (0..720)
                    .map(|i| {
                        Sample::new(
                            DAY + 1_000 + i * 10_000,
                            ((i * 7919 + h as i64 * 104_729) % 1_000_003) as f64 / 7.0,
                        )
                    })
                    .collect(),
            );
        }
        db.append(&b).unwrap();
        db.flush().unwrap();
        assert!(db.wait_mirrored(Duration::from_secs(30)));
        db.close().unwrap();
        objects(&mem).iter().filter(|k| k.ends_with(".spf")).count()
    };
    assert_eq!(file_bytes, 1, "{:?}", objects(&mem));
    let size: u64 = std::fs::read_dir(d1.path().join("partitions"))
        .unwrap()
        .flat_map(|p| std::fs::read_dir(p.unwrap().path()).unwrap())
        .map(|f| f.unwrap().metadata().unwrap().len())
        .sum();
    assert!(size > 4 << 20, "the file should span many pages: {size} bytes");

    let counts = store.counts();
    let gets = |c: &storage::faulty::RequestCounts| c.get.load(Ordering::Relaxed);
    let (gets0, bytes0) = (gets(counts), counts.range_bytes.load(Ordering::Relaxed));
    let db = Db::open(opts(d2.path(), &store, Duration::from_secs(3600))).unwrap();
    let opened = gets(counts) - gets0;
    // The manifest (hint, record) and the file's header, footer and index.
    assert!(opened <= 4, "{opened} GETs to open");
    let snap = db.snapshot();
    let sel = snap.select(&[Matcher::equal("host", "h1234")], i64::MIN, i64::MAX).unwrap();
    let mut v = Vec::new();
    snap.samples(&sel[0], i64::MIN, i64::MAX, &mut v).unwrap();
    assert_eq!(v.len(), 720);
    let read = counts.range_bytes.load(Ordering::Relaxed) - bytes0;
    let index_and_one_series = gets(counts) - gets0 - opened;
    assert!(index_and_one_series <= 1, "{index_and_one_series} GETs for one series");
    assert!(read < size / 4, "read {read} of {size} bytes for one series of 2000");
    // Everything reads as it was written.
    let all = snap.select(&[Matcher::equal("__name__", "cpu")], i64::MIN, i64::MAX).unwrap();
    assert_eq!(all.len(), 2000);
    for s in &all {
        let mut v = Vec::new();
        snap.samples(s, i64::MIN, i64::MAX, &mut v).unwrap();
        assert_eq!(v.len(), 720, "{}", s.labels);
    }
}

/// Bytes the partition files take on the local disk (allocated blocks: cache files are sparse).
fn local_disk_bytes(dir: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(parts) = std::fs::read_dir(dir.join("partitions")) else { return 0 };
    parts
        .flat_map(|p| std::fs::read_dir(p.unwrap().path()).unwrap())
        .map(|f| f.unwrap().metadata().unwrap().blocks() * 512)
        .sum()
}

#[test]
fn the_local_disk_is_a_cache_bounded_by_its_size() {
    let mem = Arc::new(InMemory::new());
    let store = Arc::new(FaultyStore::new(Arc::clone(&mem) as _));
    let d = tempfile::tempdir().unwrap();
    let mut o = opts(d.path(), &store, Duration::from_secs(3600));
    let max = 1u64 << 20;
    if let Some(b) = o.bucket.as_mut() {
        b.cache_bytes_max = max;
    }
    let db = Db::open(o).unwrap();
    // Two days (two files) of 1,000 series whose values do not compress to nothing.
    for day in 0..2 {
        let mut b = Batch::new();
        for h in 0..1000i64 {
            let l = Labels::from_pairs(&[("__name__", "cpu"), ("host", &format!("h{h:04}"))]);
            let t0 = DAY + day * 86_400_000 + 1_000;
            b.push(
                l,
                (0..360)
                    .map(|i| {
                        Sample::new(t0 + i * 10_000, ((i * 7919 + h * 104_729) % 1_000_003) as f64 / 7.0)
                    })
                    .collect(),
            );
        }
        db.append(&b).unwrap();
        db.flush().unwrap();
    }
    assert!(db.wait_mirrored(Duration::from_secs(30)));
    let want = everything(&db);
    let before = local_disk_bytes(d.path());
    assert!(before > 2 * max, "{before} bytes local");
    let freed = db.trim_bucket_cache().unwrap();
    assert!(freed > 0);
    let after = local_disk_bytes(d.path());
    assert!(after <= max, "{after} bytes local after trimming to {max}");
    // Whatever was dropped is read from the bucket again, alike.
    assert_eq!(everything(&db), want);
    assert!(local_disk_bytes(d.path()) > max, "reading everything fetched it again");
    db.trim_bucket_cache().unwrap();
    assert!(local_disk_bytes(d.path()) <= max);
    db.close().unwrap();
    drop(db);
    // A restart reads from the bucket what is no longer local.
    let mut o = opts(d.path(), &store, Duration::from_secs(3600));
    if let Some(b) = o.bucket.as_mut() {
        b.cache_bytes_max = max;
    }
    let db = Db::open(o).unwrap();
    assert_eq!(everything(&db), want);
}

#[test]
fn uploads_that_no_manifest_lists_are_deleted_after_the_delay() {
    let mem = Arc::new(InMemory::new());
    let store = Arc::new(FaultyStore::new(Arc::clone(&mem) as _));
    // What a writer killed between an upload and its commit leaves behind.
    let orphan = object_store::path::Path::from("w1/partitions/0/00000042.spf");
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    rt.block_on(mem.put(&orphan, bytes::Bytes::from_static(b"leftover").into())).unwrap();
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(opts(d.path(), &store, Duration::from_millis(500))).unwrap();
    write_round(&db, 0);
    db.flush().unwrap();
    assert!(db.wait_mirrored(Duration::from_secs(30)));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while objects(&mem).contains(&orphan.to_string()) {
        assert!(std::time::Instant::now() < deadline, "the leftover was never deleted");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The live file stays.
    assert_eq!(objects(&mem).iter().filter(|k| k.ends_with(".spf")).count(), 1);
    assert_eq!(everything(&db).len(), 10 * 50);
}

/// On a query node over two writers' prefixes, a deletion on one writer hides that writer's
/// samples only: its tombstone is ordered against its own files' seqs, which say nothing about
/// another writer's files. The other writer's copy of the same series stays.
#[test]
fn a_deletion_hides_only_its_own_writers_data_on_a_query_node() {
    let store = Arc::new(FaultyStore::new(Arc::new(InMemory::new())));
    let at = |url: &str, dir: &std::path::Path| {
        let mut o = opts(dir, &store, Duration::from_secs(3600));
        if let Some(b) = o.bucket.as_mut() {
            b.url = url.into();
        }
        o
    };
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let writers: Vec<Db> = ["memory://root/a", "memory://root/b"]
        .iter()
        .zip(&dirs)
        .map(|(url, d)| Db::open(at(url, d.path())).unwrap())
        .collect();
    for (k, w) in writers.iter().enumerate() {
        // Writer b's seqs run ahead of a's, so that a's tombstone (made after) has a seq above
        // some of b's files and below others.
        for round in 0..(1 + 2 * k as i64) {
            write_round(w, round);
            w.flush().unwrap();
        }
    }
    writers[0].delete(&[Matcher::equal("host", "h3")], i64::MIN, i64::MAX).unwrap();
    writers[0].flush().unwrap();
    for w in &writers {
        assert!(w.wait_mirrored(Duration::from_secs(10)));
    }
    let mut q = at("memory://root", dirs[2].path());
    q.follow = Some(Duration::from_secs(3600));
    let q = Db::open(q).unwrap();
    let h3 = |db: &Db| {
        let snap = db.snapshot();
        let series = snap.select(&[Matcher::equal("host", "h3")], i64::MIN, i64::MAX).unwrap();
        let mut n = 0;
        for s in &series {
            let mut v = Vec::new();
            snap.samples(s, i64::MIN, i64::MAX, &mut v).unwrap();
            n += v.len();
        }
        n
    };
    assert_eq!(h3(&writers[0]), 0, "deleted on writer a");
    assert_eq!(h3(&writers[1]), 150, "writer b's three rounds");
    assert_eq!(h3(&q), 150, "the query node: writer b's copy, writer a's hidden");
    for db in writers.into_iter().chain([q]) {
        db.close().unwrap();
    }
}

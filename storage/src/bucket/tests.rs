//! The commit protocol against an in-memory store with injected faults.

use std::sync::Arc;
use std::time::Duration;

use object_store::memory::InMemory;

use super::Bucket;
use super::commit::{self, Commit};
use super::faulty::FaultyStore;
use super::record::Record;
use crate::manifest::Manifest;

fn bucket(store: &Arc<FaultyStore>) -> Bucket {
    let opts = super::BucketOptions {
        url: "memory://tenant-a".into(),
        delete_delay: Duration::ZERO,
        store: Some(Arc::clone(store) as _),
        ..super::BucketOptions::default()
    };
    Bucket::open(&opts).unwrap()
}

fn faulty() -> Arc<FaultyStore> {
    Arc::new(FaultyStore::new(Arc::new(InMemory::new())))
}

fn next(r: &Record) -> Record {
    let mut n = r.clone();
    n.seq += 1;
    n.manifest.next_seq += 1;
    n
}

#[test]
fn an_empty_prefix_has_no_latest_and_the_first_claim_is_epoch_one() {
    let store = faulty();
    let b = bucket(&store);
    assert!(commit::latest(&b).unwrap().is_none());
    let d = tempfile::tempdir().unwrap();
    let c = commit::claim(&b, d.path(), None, 7).unwrap();
    assert_eq!((c.record.seq, c.record.epoch, c.restore), (1, 1, false));
    let l = commit::latest(&b).unwrap().unwrap();
    assert_eq!((l.seq, l.epoch, l.writer), (1, 1, 7));
}

#[test]
fn a_put_whose_answer_was_lost_is_recognised_on_retry() {
    let store = faulty();
    let b = bucket(&store);
    let d = tempfile::tempdir().unwrap();
    let first = commit::claim(&b, d.path(), None, 1).unwrap().record;
    let rec = next(&first);
    store.lose_next_answers(1);
    assert!(commit::commit(&b, &rec).is_err(), "the lost answer surfaces as an error");
    assert!(matches!(commit::commit(&b, &rec).unwrap(), Commit::Done), "the retry finds its own record");
    assert_eq!(commit::latest(&b).unwrap().unwrap().seq, 2);
}

#[test]
fn a_newer_epoch_fences_the_writer_before_it() {
    let store = faulty();
    let b = bucket(&store);
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = commit::claim(&b, da.path(), None, 1).unwrap().record;
    let b2 = commit::claim(&b, db.path(), None, 2).unwrap();
    assert!(b2.restore, "a directory without a manifest restores from the prefix");
    assert_eq!((b2.record.seq, b2.record.epoch), (2, 2));
    match commit::commit(&b, &next(&a)).unwrap() {
        Commit::Fenced { theirs } => assert_eq!(theirs, 2),
        other => panic!("the older writer committed: {other:?}"),
    }
    // The newer writer goes on.
    assert!(matches!(commit::commit(&b, &next(&b2.record)).unwrap(), Commit::Done));
}

#[test]
fn a_directory_with_another_history_is_refused() {
    let store = faulty();
    let b = bucket(&store);
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    commit::claim(&b, da.path(), None, 1).unwrap();
    commit::claim(&b, db.path(), None, 2).unwrap();
    // `da` last committed epoch 1; the prefix has moved on to epoch 2.
    let local = Manifest::default();
    let err = commit::claim(&b, da.path(), Some(&local), 3).unwrap_err();
    assert!(err.to_string().contains("epoch 2"), "{err}");
    // A directory that never committed, with a manifest of its own, is refused too.
    let dc = tempfile::tempdir().unwrap();
    assert!(commit::claim(&b, dc.path(), Some(&local), 4).is_err());
}

#[test]
fn the_newest_record_is_found_without_listing() {
    let store = faulty();
    let b = bucket(&store);
    let d = tempfile::tempdir().unwrap();
    let mut r = commit::claim(&b, d.path(), None, 1).unwrap().record;
    for _ in 0..40 {
        r = next(&r);
        assert!(matches!(commit::commit(&b, &r).unwrap(), Commit::Done));
    }
    // A hint that lags (its put failed) costs HEADs, not a wrong answer.
    b.put(&b.hint_key(), bytes::Bytes::from("30")).unwrap();
    assert_eq!(commit::latest(&b).unwrap().unwrap().seq, 41);
    assert_eq!(store.counts().list.load(std::sync::atomic::Ordering::Relaxed), 0);
    // Old records are deleted once older than the delay (here 0): 16 kept behind the newest.
    assert_eq!(commit::prune_records(&b, &r).unwrap(), 41 - 16);
    assert!(!b.exists(&b.manifest_key(41 - 17)).unwrap());
    assert!(b.exists(&b.manifest_key(41 - 16)).unwrap());
}

#[test]
fn records_younger_than_the_delay_are_kept() {
    let store = faulty();
    let opts = super::BucketOptions {
        url: "memory://tenant-a".into(),
        delete_delay: Duration::from_secs(3600),
        store: Some(Arc::clone(&store) as _),
        ..super::BucketOptions::default()
    };
    let b = Bucket::open(&opts).unwrap();
    let d = tempfile::tempdir().unwrap();
    let mut r = commit::claim(&b, d.path(), None, 1).unwrap().record;
    for _ in 0..40 {
        r = next(&r);
        assert!(matches!(commit::commit(&b, &r).unwrap(), Commit::Done));
    }
    assert_eq!(commit::prune_records(&b, &r).unwrap(), 1);
    assert!(b.exists(&b.manifest_key(1)).unwrap());
}

/// A writer fenced while paused may find the number after its last record deleted, so free to
/// create again: the check it makes after a pause refuses it first.
#[test]
fn a_writer_waking_after_its_successors_records_were_deleted_is_refused() {
    let store = faulty();
    let b = bucket(&store);
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = commit::claim(&b, da.path(), None, 1).unwrap().record;
    let mut r = commit::claim(&b, db.path(), None, 2).unwrap().record;
    for _ in 0..30 {
        r = next(&r);
        assert!(matches!(commit::commit(&b, &r).unwrap(), Commit::Done));
    }
    commit::prune_records(&b, &r).unwrap();
    assert!(!b.exists(&b.manifest_key(a.seq + 1)).unwrap(), "the number after the old writer's is free");
    assert_eq!(commit::still_ours(&b, &a).unwrap(), Err(2));
    assert_eq!(commit::still_ours(&b, &r).unwrap(), Ok(()));
}

/// Writers racing to commit through injected faults: every number is committed once, epochs
/// never go back, and no writer commits after a newer epoch took a number before it.
///
/// Each round the four writers claim at once and meet at a barrier before committing, so that
/// at least three of them are fenced whatever the scheduler does; the slow writers' commits then
/// race the fast ones' claims of the next round.
#[test]
fn racing_writers_never_fork() {
    let rounds: usize = if std::env::var_os("STRATA_SLOW_TESTS").is_some() { 2_000 } else { 100 };
    const WRITERS: usize = 4;
    // Commits a writer makes before it claims anew, unless it is fenced first.
    const RUN: usize = 5;
    let store = faulty();
    store.random_faults(Some((0.05, 0.05, 0.02)), 42);
    // Records are deleted only after the delay, which outlasts the test (see
    // `commit::prune_records` for why deletion waits).
    let b = Arc::new(
        Bucket::open(&super::BucketOptions {
            url: "memory://tenant-a".into(),
            delete_delay: Duration::from_secs(3600),
            store: Some(Arc::clone(&store) as _),
            ..super::BucketOptions::default()
        })
        .unwrap(),
    );
    let done = Arc::new(parking_lot::Mutex::new(Vec::<(u64, u64, u64)>::new()));
    // A claim that fails may have been applied with its answer lost: its number then shows as
    // a gap in what the writers know they committed.
    let failed_claims = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let claimed = Arc::new(std::sync::Barrier::new(WRITERS));
    let threads: Vec<_> = (0..WRITERS as u64)
        .map(|w| {
            let (b, done, failed_claims, claimed) =
                (Arc::clone(&b), Arc::clone(&done), Arc::clone(&failed_claims), Arc::clone(&claimed));
            std::thread::spawn(move || {
                let mut fenced_epochs = Vec::new();
                for _ in 0..rounds {
                    let d = tempfile::tempdir().unwrap();
                    let claim = (0..100).find_map(|_| {
                        let c = commit::claim(&b, d.path(), None, w).ok();
                        if c.is_none() {
                            failed_claims.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        c
                    });
                    claimed.wait();
                    let claim = claim.expect("a claim succeeds within 100 attempts");
                    let mut rec = claim.record;
                    done.lock().push((rec.seq, rec.epoch, w));
                    // Commit until fenced; a failed request is retried with the same record.
                    let mut committed = 0;
                    while committed < RUN {
                        let n = next(&rec);
                        match commit::commit(&b, &n) {
                            Ok(Commit::Done) => {
                                done.lock().push((n.seq, n.epoch, w));
                                rec = n;
                                committed += 1;
                            }
                            Ok(Commit::Fenced { theirs }) => {
                                assert!(theirs > rec.epoch);
                                fenced_epochs.push(rec.epoch);
                                break;
                            }
                            Ok(Commit::Lost) => panic!("two writers held epoch {}", rec.epoch),
                            Err(_) => {}
                        }
                    }
                }
                fenced_epochs
            })
        })
        .collect();
    let fenced: usize = threads.into_iter().map(|t| t.join().unwrap().len()).sum();
    // Each round every writer but the newest claim's is fenced, and the newest may be fenced
    // too by a claim of the next round.
    assert!(fenced >= rounds * (WRITERS - 1), "only {fenced} writers fenced in {rounds} rounds");
    let mut done = done.lock().clone();
    done.sort();
    let mut gaps = 0;
    for w in done.windows(2) {
        assert_ne!(w[0].0, w[1].0, "number {} committed twice: {:?} and {:?}", w[0].0, w[0], w[1]);
        gaps += w[1].0 - w[0].0 - 1;
        assert!(w[0].1 <= w[1].1, "epochs went back: {:?} then {:?}", w[0], w[1]);
        if w[0].1 == w[1].1 {
            assert_eq!(w[0].2, w[1].2, "two writers committed under epoch {}", w[0].1);
        }
    }
    let epochs: std::collections::BTreeSet<u64> = done.iter().map(|d| d.1).collect();
    assert!(epochs.len() > 4, "only epochs {epochs:?}");
    let failed_claims = failed_claims.load(std::sync::atomic::Ordering::Relaxed);
    assert!(gaps <= failed_claims, "{gaps} numbers unaccounted for, {failed_claims} failed claims");
    assert!(store.counts().faults.load(std::sync::atomic::Ordering::Relaxed) > 0);
}

/// A query node follows two writers' prefixes under its own: it reads what each uploaded,
/// picks up a writer's later flush and compaction at a refresh, and refuses writes.
#[test]
fn a_query_node_serves_every_writers_prefix_and_follows_their_commits() {
    use crate::query::Querier;
    use crate::{Batch, Db, Labels, Matcher, Options, Sample};
    let store: Arc<dyn object_store::ObjectStore> = Arc::new(InMemory::new());
    let bucket = |url: &str| super::BucketOptions {
        url: url.into(),
        delete_delay: Duration::from_secs(3600),
        store: Some(Arc::clone(&store)),
        ..super::BucketOptions::default()
    };
    // 01:00 UTC yesterday: the five hours written from there lie in one day, one partition,
    // so that the files counted are the flushes' (from five hours ago they crossed midnight
    // between 01:40 and 05:00 UTC, and a writer's data became two files).
    let day = 24 * 3_600_000;
    let t0 = (crate::clock::now_ms().div_euclid(day) - 1) * day + 3_600_000;
    let open = |dir: &std::path::Path, url: &str, follow: Option<Duration>| {
        Db::open(Options { bucket: Some(bucket(url)), follow, ..Options::new(dir) }).unwrap()
    };
    let write = |db: &Db, writer: &str, from: i64, n: i64| {
        let mut b = Batch::new();
        let samples = (from..from + n).map(|i| Sample::new(t0 + i * 60_000, i as f64)).collect();
        b.push(Labels::from_pairs(&[("__name__", "m"), ("writer", writer)]), samples);
        db.append(&b).unwrap();
        db.flush().unwrap();
        assert!(db.wait_mirrored(Duration::from_secs(10)));
    };
    let read_snap = |snap: &crate::Snapshot| -> Vec<(String, Vec<(i64, f64)>)> {
        let mut out = Vec::new();
        for s in snap.select(&[Matcher::equal("__name__", "m")], i64::MIN, i64::MAX).unwrap() {
            let mut samples = Vec::new();
            snap.samples(&s, i64::MIN, i64::MAX, &mut samples).unwrap();
            out.push((s.labels.to_string(), samples.iter().map(|s| (s.t, s.v)).collect()));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    };
    let read = |db: &Db| read_snap(&db.snapshot());
    let (da, db_, dq) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = open(da.path(), "memory://root/a", None);
    let b = open(db_.path(), "memory://root/b", None);
    write(&a, "a", 0, 100);
    write(&b, "b", 0, 50);
    let q = open(dq.path(), "memory://root", Some(Duration::from_secs(3600)));
    let cached = || walk(dq.path()).iter().filter(|p| p.to_string_lossy().ends_with(".spf.cache")).count();
    assert_eq!(cached(), 0, "files open when a query first reaches them");
    let prefixes: Vec<String> = q.followed_prefixes().into_iter().map(|(n, _)| n).collect();
    assert_eq!(prefixes, ["a", "b"]);
    assert_eq!(read(&q), [read(&a), read(&b)].concat());
    assert_eq!(cached(), 2);

    // A later flush is seen at the next refresh; a refresh with nothing new changes nothing.
    write(&a, "a", 100, 100);
    assert!(q.refresh_bucket().unwrap());
    assert!(!q.refresh_bucket().unwrap());
    assert_eq!(read(&q), [read(&a), read(&b)].concat());
    assert_eq!(read(&q)[0].1.len(), 200);

    // Compaction replaces the writer's files; the answers stay.
    a.compact_all().unwrap();
    assert!(a.wait_mirrored(Duration::from_secs(10)));
    assert!(q.refresh_bucket().unwrap());
    assert_eq!(read(&q), [read(&a), read(&b)].concat());

    // What the query node cannot read from the bucket a writer answers from its head: once the
    // query node holds its newest record, only what is not uploaded.
    let mut batch = Batch::new();
    let head: Vec<Sample> = (300..310).map(|i| Sample::new(t0 + i * 60_000, i as f64)).collect();
    batch.push(Labels::from_pairs(&[("__name__", "m"), ("writer", "a")]), head.clone());
    a.append(&batch).unwrap();
    let unuploaded = read_snap(&a.snapshot_unuploaded(&q.followed_records()));
    assert_eq!(unuploaded.len(), 1);
    assert_eq!(unuploaded[0].1, head.iter().map(|s| (s.t, s.v)).collect::<Vec<_>>());
    assert_eq!(read_snap(&a.snapshot_unuploaded(&[])), read(&a), "no record held: everything");
    assert_eq!(read_snap(&b.snapshot_unuploaded(&q.followed_records())), []);

    let mut batch = Batch::new();
    batch.push(Labels::from_pairs(&[("__name__", "m")]), vec![Sample::new(t0, 1.0)]);
    assert!(matches!(q.append(&batch), Err(crate::Error::ReadOnly(_))));
    assert!(matches!(q.compact(), Err(crate::Error::ReadOnly(_))));
    for db in [q, a, b] {
        db.close().unwrap();
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Bucket options for `url` on `store`, with a delete delay of an hour.
fn on(store: &Arc<FaultyStore>, url: &str) -> super::BucketOptions {
    super::BucketOptions {
        url: url.into(),
        delete_delay: Duration::from_secs(3600),
        store: Some(Arc::clone(store) as _),
        ..super::BucketOptions::default()
    }
}

/// The start of the hour `n` hours before now: data written from there spans one
/// partition (up to an hour) whatever the time of the run, so a test counting requests per
/// file does not see a second file when its samples would cross an hour or day boundary.
fn hour_start_ago(n: i64) -> i64 {
    let hour = 3_600_000;
    (crate::clock::now_ms() - n * hour).div_euclid(hour) * hour
}

/// A writer on `memory://root/w` of `store` that has uploaded `b` in one flush, and a query
/// node on `memory://root`, each on a directory of its own (returned with them).
fn uploaded(store: &Arc<FaultyStore>, b: &crate::Batch) -> (crate::Db, crate::Db, [tempfile::TempDir; 2]) {
    use crate::{Db, Options};
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let w = Db::open(Options { bucket: Some(on(store, "memory://root/w")), ..Options::new(dirs[0].path()) })
        .unwrap();
    w.append(b).unwrap();
    w.flush().unwrap();
    assert!(w.wait_mirrored(Duration::from_secs(10)));
    let q = Db::open(Options {
        bucket: Some(on(store, "memory://root")),
        follow: Some(Duration::from_secs(3600)),
        ..Options::new(dirs[1].path())
    })
    .unwrap();
    (w, q, dirs)
}

/// A query node's selection of a few series of a cold file enters those into its index, and
/// the rest of the chunks it fetched later, off the query path; answers are the same before
/// and after.
#[test]
fn a_query_node_enters_the_rest_of_what_it_fetched_later() {
    use crate::query::Querier;
    use crate::{Batch, Labels, Matcher, Sample};
    let faulty = faulty();
    let t0 = hour_start_ago(2);
    let mut b = Batch::new();
    for h in 0..1000 {
        let samples = (0..10).map(|i| Sample::new(t0 + i * 1000, f64::from(h))).collect();
        b.push(Labels::from_pairs(&[("__name__", "m"), ("host", &format!("h{h}"))]), samples);
    }
    let (w, q, _dirs) = uploaded(&faulty, &b);
    let host = |h: &str| {
        let snap = q.snapshot();
        let series =
            snap.select(&[Matcher::equal("__name__", "m"), Matcher::equal("host", h)], i64::MIN, i64::MAX);
        let series = series.unwrap();
        assert_eq!(series.len(), 1, "{h}");
        let mut out = Vec::new();
        snap.samples(&series[0], i64::MIN, i64::MAX, &mut out).unwrap();
        out.iter().map(|s| s.v).collect::<Vec<f64>>()
    };
    assert_eq!(host("h7"), vec![7.0; 10]);
    let until = std::time::Instant::now() + Duration::from_secs(20);
    while q.series_count() < 1000 {
        assert!(std::time::Instant::now() < until, "{} series entered", q.series_count());
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(host("h7"), vec![7.0; 10]);
    assert_eq!(host("h999"), vec![999.0; 10]);
    for db in [q, w] {
        db.close().unwrap();
    }
}

/// A query node's cardinality statistics (`/api/v1/status/tsdb`) cover every series of the
/// bucket's files, not only those queries have selected: asking enters the rest first.
#[test]
fn a_query_node_counts_every_series_of_the_bucket() {
    use crate::{Batch, Labels, Sample};
    let faulty = faulty();
    let t0 = hour_start_ago(2);
    let mut b = Batch::new();
    for (metric, hosts) in [("m", 300), ("n", 200)] {
        for h in 0..hosts {
            let samples = (0..3).map(|i| Sample::new(t0 + i * 1000, 1.0)).collect();
            b.push(Labels::from_pairs(&[("__name__", metric), ("host", &format!("h{h}"))]), samples);
        }
    }
    let (w, q, _dirs) = uploaded(&faulty, &b);
    assert_eq!(q.series_count(), 0, "nothing entered before a query");
    let stats = q.snapshot().index_stats(10, &[]).unwrap();
    assert_eq!(stats.series, 500);
    let by_metric: Vec<(String, u64)> =
        stats.series_by_metric_name.iter().map(|s| (s.name.clone(), s.value)).collect();
    assert_eq!(by_metric, vec![("m".to_string(), 300), ("n".to_string(), 200)]);
    let gets = || faulty.counts().get.load(std::sync::atomic::Ordering::Relaxed);
    let before = gets();
    assert_eq!(q.snapshot().index_stats(10, &[]).unwrap().series, 500);
    assert_eq!(gets(), before, "the second call reads nothing");
    for db in [q, w] {
        db.close().unwrap();
    }
}

/// A query node reading many series of one file it has not read before makes two requests for
/// it (FaultyStore counts a `get_ranges` call as one): header and tail, whose index this small
/// file's tail holds, and then the blocks of every selected series at once (see
/// `crate::footprint`), not one per series.
#[test]
fn a_query_reads_a_cold_file_in_two_requests() {
    use crate::query::Querier;
    use crate::{Batch, Db, Labels, Matcher, Options, Sample};
    let faulty = faulty();
    let t0 = hour_start_ago(2);
    let mut b = Batch::new();
    let mut x = 1u64;
    for s in 0..100 {
        let samples = (0..3000)
            .map(|i| {
                // Values that do not compress, so that the file's data spans many pages.
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                Sample::new(t0 + i * 1000, f64::from_bits(x >> 12 | 0x3ff0_0000_0000_0000))
            })
            .collect();
        b.push(Labels::from_pairs(&[("__name__", "m"), ("s", &s.to_string())]), samples);
    }
    let (w, q, _dirs) = uploaded(&faulty, &b);
    let gets = || faulty.counts().get.load(std::sync::atomic::Ordering::Relaxed);
    let before = gets();
    let snap = q.snapshot();
    let series = snap.select(&[Matcher::equal("__name__", "m")], i64::MIN, i64::MAX).unwrap();
    assert_eq!(series.len(), 100);
    let mut n = 0;
    for s in &series {
        let mut out = Vec::new();
        snap.samples(s, i64::MIN, i64::MAX, &mut out).unwrap();
        n += out.len();
    }
    assert_eq!(n, 300_000);
    assert_eq!(gets() - before, 2, "open (header and tail, index included), then every block at once");
    let (reads, bytes) = snap.bucket_reads().get();
    assert!(reads >= 2 && bytes > 1 << 20, "{reads} {bytes}");
    drop(snap);

    // A query node's cache is trimmed to --storage.bucket-cache-size: the file it read goes
    // back to unopened, its cache file removed, and the next query reads it again alike.
    let dq2 = tempfile::tempdir().unwrap();
    let mut small = on(&faulty, "memory://root");
    small.cache_bytes_max = 64 << 10;
    let q2 = Db::open(Options {
        bucket: Some(small),
        follow: Some(Duration::from_secs(3600)),
        ..Options::new(dq2.path())
    })
    .unwrap();
    let read_all = |db: &Db| {
        let snap = db.snapshot();
        let mut all = Vec::new();
        for s in snap.select(&[Matcher::equal("__name__", "m")], i64::MIN, i64::MAX).unwrap() {
            snap.samples(&s, i64::MIN, i64::MAX, &mut all).unwrap();
        }
        all.iter().map(|s| (s.t, s.v.to_bits())).collect::<Vec<_>>()
    };
    let want = read_all(&q);
    assert_eq!(read_all(&q2), want);
    let cached = || walk(dq2.path()).iter().filter(|p| p.to_string_lossy().ends_with(".spf.cache")).count();
    assert_eq!(cached(), 1);
    assert!(q2.trim_bucket_cache().unwrap() > 1 << 20);
    assert_eq!(cached(), 0, "the trimmed file's cache file is removed");
    assert_eq!(q2.trim_bucket_cache().unwrap(), 0, "nothing open, nothing to trim");
    assert_eq!(read_all(&q2), want, "read again from the bucket");
    for db in [q2, q, w] {
        db.close().unwrap();
    }
}

/// A query node answers `sum_over_time`-like windows (exact sums) and `max_over_time`-like
/// ones over whole blocks of integers from the statistics in the file's index: after opening
/// the file, nothing more is fetched, and the answers are the writer's.
#[test]
fn sums_over_whole_blocks_fetch_no_block() {
    use crate::query::Querier;
    use crate::window_agg::{Need, ScanStats};
    use crate::{Batch, Db, Labels, Matcher, Sample};
    const HOUR: i64 = 3_600_000;
    let faulty = faulty();
    // Two hours of data from four hours ago, moved back where they would cross midnight UTC:
    // partitions are days, and a second file would add to the requests counted.
    let mut base = (crate::clock::now_ms() / HOUR - 4) * HOUR;
    if (base + 2 * HOUR) / (24 * HOUR) != base / (24 * HOUR) {
        base -= 2 * HOUR;
    }
    let mut b = Batch::new();
    let mut x = 1u64;
    for s in 0..300 {
        // Large random integers, so that the file is larger than the tail read at opening.
        let samples = (1..=240).map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            Sample::new(base + i * 30_000, (x >> 24) as f64)
        });
        b.push(Labels::from_pairs(&[("__name__", "m"), ("s", &s.to_string())]), samples.collect());
    }
    let (w, q, _dirs) = uploaded(&faulty, &b);
    let hourly: Vec<(i64, i64)> = (0..2).map(|h| (base + h * HOUR + 1, base + (h + 1) * HOUR)).collect();
    let answers = |db: &Db| {
        let snap = db.snapshot();
        let mut out = Vec::new();
        for s in snap.select(&[Matcher::equal("__name__", "m")], base, base + 2 * HOUR).unwrap() {
            for need in [Need::Sums, Need::Values] {
                let (mut got, mut st) = (Vec::new(), ScanStats::default());
                assert!(snap.window_aggregates(&s, &hourly, need, &mut got, &mut st).unwrap());
                assert_eq!(st.blocks_decoded, 0, "{st:?}");
                out.extend(got.iter().map(|w| match need {
                    Need::Sums => w.exact_sum().map(f64::to_bits),
                    _ => Some(w.max.to_bits()),
                }));
            }
        }
        out
    };
    let want = answers(&w);
    assert_eq!(want.len(), 300 * 2 * 2);
    assert!(want.iter().all(Option::is_some), "every window has an exact sum and a max");
    let gets = || faulty.counts().get.load(std::sync::atomic::Ordering::Relaxed);
    let before = gets();
    assert_eq!(answers(&q), want);
    assert_eq!(gets() - before, 1, "the file's header and tail, index included; no block");
    for db in [q, w] {
        db.close().unwrap();
    }
}

/// Ranges that share pages, in any order, fetch each missing page once.
#[test]
fn overlapping_ranges_fetch_each_page_once() {
    let store = faulty();
    let b = Arc::new(bucket(&store));
    let key = b.file_key(0, 1);
    b.put(&key, bytes::Bytes::from(vec![7u8; 5 * 65536])).unwrap();
    let d = tempfile::tempdir().unwrap();
    let c = super::cache::CachedObject::open(Arc::clone(&b), key, &d.path().join("1.spf.cache"), 5 * 65536)
        .unwrap();
    c.ensure(&[70_000..70_010, 0..10, 5..20, 3..65_600, 65_540..65_550]).unwrap();
    let fetched = store.counts().range_bytes.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(fetched, 2 * 65536, "pages 0 and 1, once each");
    assert_eq!(&c.bytes()[65_530..65_540], &[7u8; 10]);
    c.ensure(&[10..20, 65_536..65_540]).unwrap();
    assert_eq!(store.counts().range_bytes.load(std::sync::atomic::Ordering::Relaxed), fetched, "all present");
}

/// The pages between two ranges less than the S3 client's coalescing gap apart come in the
/// same request and are kept; the pages between ranges further apart are not fetched. (The
/// store counts a `get_ranges` call as one GET.)
#[test]
fn pages_the_client_fetches_along_are_kept() {
    use std::sync::atomic::Ordering::Relaxed;
    const PAGE: usize = 65536;
    let store = faulty();
    let b = Arc::new(bucket(&store));
    let key = b.file_key(0, 1);
    b.put(&key, bytes::Bytes::from((0..40 * PAGE).map(|i| (i / PAGE) as u8).collect::<Vec<u8>>())).unwrap();
    let d = tempfile::tempdir().unwrap();
    let c = super::cache::CachedObject::open(
        Arc::clone(&b),
        key,
        &d.path().join("1.spf.cache"),
        40 * PAGE as u64,
    )
    .unwrap();
    let gets = || store.counts().get.load(Relaxed);
    let bytes = || store.counts().range_bytes.load(Relaxed);
    c.ensure(&[10..20, 10 * PAGE..10 * PAGE + 5]).unwrap();
    assert_eq!((gets(), bytes()), (1, 11 * PAGE as u64), "pages 0 to 10 in one request");
    assert!(c.is_present(&(0..11 * PAGE)));
    assert_eq!(c.bytes()[5 * PAGE], 5);
    c.ensure(&[3 * PAGE..5 * PAGE, 5 * PAGE..7 * PAGE]).unwrap();
    assert_eq!(gets(), 1, "the gap's pages were kept");
    c.ensure(&[12 * PAGE..12 * PAGE + 1, 39 * PAGE..39 * PAGE + 1]).unwrap();
    assert_eq!((gets(), bytes()), (2, 13 * PAGE as u64), "pages 12 and 39 only: more than 1 MiB apart");
    assert!(!c.is_present(&(20 * PAGE..20 * PAGE + 1)));
    assert_eq!(c.local_bytes(), 13 * PAGE as u64);
}

/// `n` samples a second apart whose values hardly compress (8 bytes or so each): test files
/// whose data region puts their header and index tail more than the S3 client's coalescing
/// gap apart, so that opening does not fetch the whole file.
fn noisy(k: usize, n: usize) -> Vec<crate::Sample> {
    (0..n as u64)
        .map(|i| {
            let h = (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ i.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
            crate::Sample::new(1000 * i as i64, (h.rotate_left(17) >> 11) as f64 / 7.0)
        })
        .collect()
}

/// A partition file read in part from the bucket (what a query node does) holds, after
/// loading the chunks for some matchers, every series of the file those matchers select, with
/// the blocks the whole file has; it holds fewer where the matchers name metrics; its requests
/// are one to open and one per load; a chunk whose bytes changed is refused.
#[test]
fn a_file_read_in_part_answers_as_the_whole_file() {
    use crate::partition::{FileWriter, PartitionFile};
    use crate::{Labels, MatchOp, Matcher};
    use std::collections::HashMap;
    use std::sync::atomic::Ordering::Relaxed;
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("1.spf");
    let mut all: Vec<Labels> = Vec::new();
    const HOSTS: usize = 3000;
    for name in ["a", "b", "c", "d", "e", "f"] {
        for i in 0..HOSTS {
            let pairs = [("__name__", name), ("dc", "eu-west-1"), ("host", &format!("h{i}")), ("team", "x")];
            all.push(Labels::from_pairs(&pairs));
        }
    }
    // A label name sorting before `__name__`, and a series without a name.
    all.push(Labels::from_pairs(&[("Zone", "x"), ("__name__", "b"), ("host", "h1")]));
    all.push(Labels::from_pairs(&[("host", "h2"), ("job", "nameless")]));
    all.sort();
    let mut w = FileWriter::create(&path, 1024, 3_600_000).unwrap();
    for (k, l) in all.iter().enumerate() {
        let samples = noisy(k, 12);
        w.add_series(l, &samples).unwrap();
    }
    let size = w.finish().unwrap();
    let ids = Arc::new(parking_lot::Mutex::new(HashMap::<Labels, u32>::new()));
    let resolve = |ids: &Arc<parking_lot::Mutex<HashMap<Labels, u32>>>| {
        let ids = Arc::clone(ids);
        move |l: &Labels, _: i64| {
            let mut ids = ids.lock();
            let next = ids.len() as u32;
            *ids.entry(l.clone()).or_insert(next)
        }
    };
    let whole = PartitionFile::open(&path, resolve(&ids)).unwrap();
    let store = faulty();
    let b = Arc::new(bucket(&store));
    let key = b.file_key(0, 1);
    let bytes = std::fs::read(&path).unwrap();
    b.put(&key, bytes::Bytes::from(bytes.clone())).unwrap();
    let name = |op, v: &str| Matcher::new(op, "__name__", v).unwrap();
    let cases: Vec<Vec<Matcher>> = vec![
        vec![name(MatchOp::Equal, "a"), Matcher::equal("host", "h7")],
        vec![name(MatchOp::Equal, "b")],
        vec![name(MatchOp::Regex, "a|c")],
        vec![name(MatchOp::Regex, "c.*")],
        vec![name(MatchOp::NotRegex, "a")],
        vec![Matcher::equal("host", "h1")],
        vec![Matcher::equal("Zone", "x")],
        vec![Matcher::equal("job", "nameless")],
    ];
    for (n, matchers) in cases.iter().enumerate() {
        let (gets, bytes_before) =
            (store.counts().get.load(Relaxed), store.counts().range_bytes.load(Relaxed));
        let cache = d.path().join(format!("{n}.spf.cache"));
        let part = PartitionFile::open_cached_in_part(
            Arc::clone(&b),
            key.clone(),
            &cache,
            size,
            Box::new(resolve(&ids)),
        )
        .unwrap();
        assert!(part.series_ids().is_empty(), "nothing loaded at opening");
        part.load_for(&[matchers]).unwrap();
        part.load_for(&[matchers]).unwrap();
        assert_eq!(store.counts().get.load(Relaxed) - gets, 2, "{matchers:?}: open, then one load");
        let fetched = store.counts().range_bytes.load(Relaxed) - bytes_before;
        let held = part.series_ids().len();
        let ids = ids.lock();
        for l in all.iter().filter(|l| crate::matcher::matches_all(matchers, l)) {
            let id = ids[l];
            assert!(part.contains(id), "{matchers:?}: {l}");
            assert_eq!(part.blocks(id).unwrap(), whole.blocks(id).unwrap(), "{matchers:?}: {l}");
            let (mut a, mut b) = (Vec::new(), Vec::new());
            part.read(id, i64::MIN, i64::MAX, &mut a).unwrap();
            whole.read(id, i64::MIN, i64::MAX, &mut b).unwrap();
            assert_eq!(a, b);
        }
        let selected = all.iter().filter(|l| crate::matcher::matches_all(matchers, l)).count();
        assert_eq!(held, selected, "{matchers:?}: only the series selected enter the index");
        if n == 0 {
            // One metric of six, whose series are at the file's start, far from its tail:
            // well under what opening the file whole fetches (its whole index).
            let before = store.counts().range_bytes.load(Relaxed);
            let cache = d.path().join("whole.spf.cache");
            let whole_ids = resolve(&Arc::new(parking_lot::Mutex::new(HashMap::new())));
            drop(PartitionFile::open_cached(Arc::clone(&b), key.clone(), &cache, size, whole_ids).unwrap());
            let opening = store.counts().range_bytes.load(Relaxed) - before;
            assert!(fetched * 2 < opening, "{fetched} bytes fetched in part, {opening} whole");
        }
    }
    // A chunk whose bytes changed is refused when it loads, not before.
    let mut bad = bytes;
    // A byte of the first series entry: the series table starts at the footer's second offset.
    let footer = bad.len() - crate::partition::FOOTER_LEN;
    let series_offset = u64::from_le_bytes(bad[footer + 8..footer + 16].try_into().unwrap()) as usize;
    bad[series_offset + 3] ^= 0x40;
    let bad_key = b.file_key(0, 2);
    b.put(&bad_key, bytes::Bytes::from(bad)).unwrap();
    let part = PartitionFile::open_cached_in_part(
        b,
        bad_key,
        &d.path().join("bad.spf.cache"),
        size,
        Box::new(resolve(&ids)),
    )
    .unwrap();
    let err = part.load_for(&[&[Matcher::equal("host", "h1")]]).unwrap_err();
    assert!(err.to_string().contains("checksum"), "{err}");
}

/// Of a file read in part, a selection enters only the series it selects; the same selection
/// again scans nothing; a chunk scanned for as many selections as `WHOLE_AFTER_SCANS` is
/// entered whole at the next; a metric entered whole needs nothing more for any selection
/// naming it; a chunk failing its checksum fails the load and leaves the series entered before
/// it in the file's list once; `enter_fetched` enters the rest of the chunks fetched, and only
/// those.
#[test]
fn chunks_are_scanned_then_entered_whole() {
    use crate::partition::{FileWriter, PartitionFile};
    use crate::{Labels, MatchOp, Matcher};
    use std::sync::atomic::Ordering::Relaxed;
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("1.spf");
    let mut all: Vec<Labels> = ["m", "n"]
        .iter()
        .flat_map(|name| {
            (0..300).map(move |i| Labels::from_pairs(&[("__name__", *name), ("host", &format!("h{i}"))]))
        })
        .collect();
    all.sort();
    let mut w = FileWriter::create(&path, 1024, 0).unwrap();
    for (k, l) in all.iter().enumerate() {
        w.add_series(l, &noisy(k, 300)).unwrap();
    }
    let size = w.finish().unwrap();
    let store = faulty();
    let b = Arc::new(bucket(&store));
    let key = b.file_key(0, 1);
    b.put(&key, bytes::Bytes::from(std::fs::read(&path).unwrap())).unwrap();
    let all = Arc::new(all);
    let open = |n: usize| {
        let all = Arc::clone(&all);
        let resolve = Box::new(move |l: &Labels, _: i64| all.iter().position(|x| x == l).unwrap() as u32);
        PartitionFile::open_cached_in_part(
            Arc::clone(&b),
            key.clone(),
            &d.path().join(format!("{n}.c")),
            size,
            resolve,
        )
        .unwrap()
    };
    let gets = || store.counts().get.load(Relaxed);
    let m = |host: &str| vec![Matcher::equal("__name__", "m"), Matcher::equal("host", host)];
    let f = open(1);
    f.load_for(&[&m("h1")]).unwrap();
    assert_eq!(f.series_ids().len(), 1);
    let after_first = gets();
    assert!(!f.needs_load_for(&[&m("h1")]), "applied");
    f.load_for(&[&m("h1")]).unwrap();
    for h in 2..=crate::partition::WHOLE_AFTER_SCANS as usize {
        f.load_for(&[&m(&format!("h{h}"))]).unwrap();
        assert_eq!(f.series_ids().len(), h, "scan {h}");
    }
    assert_eq!(gets(), after_first, "the chunks are fetched once");
    f.load_for(&[&m("h100")]).unwrap();
    // m's 300 series are two chunks of 128 and 44 of a third, which holds 84 of n's too.
    assert_eq!(f.series_ids().len(), 384, "the next scan enters m's chunks whole");
    assert!(!f.needs_load_for(&[&m("h77")]), "m is entered whole");
    assert!(f.needs_load_for(&[&[Matcher::equal("__name__", "n"), Matcher::equal("host", "h1")]]));
    // A regex on the name over both metrics: m's chunks are done, n's scanned once.
    let both = [Matcher::new(MatchOp::Regex, "__name__", "m|n").unwrap(), Matcher::equal("host", "h9")];
    f.load_for(&[&both]).unwrap();
    assert_eq!(f.series_ids().len(), 385);
    // A chunk that fails its checksum fails the load; what the chunks before it entered is
    // in the file's list, once, and other selections go on.
    let mut bad = std::fs::read(&path).unwrap();
    let footer = bad.len() - crate::partition::FOOTER_LEN;
    let symbols_offset = u64::from_le_bytes(bad[footer..footer + 8].try_into().unwrap()) as usize;
    bad[symbols_offset - 2] ^= 0x40;
    let bad_key = b.file_key(0, 9);
    b.put(&bad_key, bytes::Bytes::from(bad)).unwrap();
    let resolve = {
        let all = Arc::clone(&all);
        Box::new(move |l: &Labels, _: i64| all.iter().position(|x| x == l).unwrap() as u32)
    };
    let f =
        PartitionFile::open_cached_in_part(Arc::clone(&b), bad_key, &d.path().join("bad.c"), size, resolve)
            .unwrap();
    assert!(f.load_for(&[&[]]).unwrap_err().to_string().contains("checksum"));
    let ids = f.series_ids();
    assert!(!ids.is_empty() && ids.len() < 600, "{}", ids.len());
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "each once");
    f.load_for(&[&m("h1")]).unwrap();
    assert!(f.contains(
        all.iter().position(|l| *l == Labels::from_pairs(&[("__name__", "m"), ("host", "h1")])).unwrap()
            as u32
    ));
    // What a selection fetched, entered later.
    let f = open(3);
    f.load_for(&[&m("h1")]).unwrap();
    assert!(f.queue_entering());
    assert!(!f.queue_entering(), "queued already");
    f.enter_fetched().unwrap();
    assert_eq!(f.series_ids().len(), 384, "m's chunks, not n's others");
    assert!(!f.queue_entering(), "nothing fetched left");
    assert!(!f.needs_load_for(&[&m("h2")]));
    // Selecting everything enters everything, and leaves nothing to do.
    let f = open(2);
    f.load_for(&[&[]]).unwrap();
    assert_eq!(f.series_ids().len(), 600);
    assert!(!f.needs_load_for(&[&m("h1"), &[]]));
}

/// A file read in part from the bucket with one bit flipped anywhere either fails (to open, to
/// load its chunks or to read) as corruption or answers exactly the original data.
#[test]
fn flipped_bytes_are_detected_in_part() {
    use crate::partition::{FileWriter, PartitionFile};
    use crate::{Labels, Sample};
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("1.spf");
    let series: Vec<(Labels, Vec<Sample>)> = (0..3)
        .map(|i| {
            let l = Labels::from_pairs(&[("__name__", "m"), ("i", &i.to_string())]);
            (l, (0..300).map(|k| Sample::new(k * 1000, ((k * 7 + i) % 13) as f64)).collect())
        })
        .collect();
    let mut w = FileWriter::create(&path, 64, 0).unwrap();
    for (l, s) in &series {
        w.add_series(l, s).unwrap();
    }
    let size = w.finish().unwrap();
    let orig = std::fs::read(&path).unwrap();
    let store = faulty();
    let b = Arc::new(bucket(&store));
    let labels: Arc<Vec<Labels>> = Arc::new(series.iter().map(|(l, _)| l.clone()).collect());
    for off in (0..orig.len()).step_by(5) {
        let mut bytes = orig.clone();
        bytes[off] ^= 0x10;
        let key = b.file_key(0, off as u64 + 1);
        b.put(&key, bytes::Bytes::from(bytes)).unwrap();
        let cache = d.path().join(format!("{off}.spf.cache"));
        let read = || -> crate::Result<Vec<Vec<Sample>>> {
            let f = PartitionFile::open_cached_in_part(Arc::clone(&b), key.clone(), &cache, size, {
                let labels = Arc::clone(&labels);
                Box::new(move |l, _| labels.iter().position(|s| s == l).map_or(u32::MAX, |i| i as u32))
            })?;
            f.load_for(&[&[]])?;
            (0..series.len() as u32)
                .map(|i| {
                    let mut out = Vec::new();
                    f.read(i, i64::MIN, i64::MAX, &mut out).map(|()| out)
                })
                .collect()
        };
        match read() {
            Ok(got) => {
                let want: Vec<Vec<Sample>> = series.iter().map(|(_, s)| s.clone()).collect();
                assert_eq!(got, want, "flip at {off} served wrong data");
            }
            Err(e) => assert!(e.to_string().contains("corrupt"), "flip at {off}: {e}"),
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
    /// Over random label sets (names sorting before `__name__`, series without a name, many
    /// series a metric) and random selections, a file read in part holds, after loading the
    /// chunks for a selection, every series of the file that the selection selects.
    #[test]
    fn a_file_read_in_part_holds_what_any_selection_selects(
        sets in proptest::collection::btree_set(
            (0usize..6, 0u8..3, 0u16..400),
            1..1200,
        ),
        selections in proptest::collection::vec((0usize..8, 0usize..6, 0usize..6), 1..6),
    ) {
        use crate::partition::{FileWriter, PartitionFile};
        use crate::{Labels, Matcher, MatchOp, Sample};
        const NAMES: [&str; 6] = ["", "a", "ab", "b", "cpu_x", "cpu_y"];
        let mut all: Vec<Labels> = sets
            .iter()
            .map(|&(n, extra, i)| {
                let mut pairs = vec![("i", i.to_string())];
                if !NAMES[n].is_empty() {
                    pairs.push(("__name__", NAMES[n].to_string()));
                }
                match extra {
                    1 => pairs.push(("Zone", "z".to_string())),
                    2 => pairs.push(("job", "j".to_string())),
                    _ => {}
                }
                let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
                Labels::from_pairs(&pairs)
            })
            .collect();
        all.sort();
        all.dedup();
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("1.spf");
        let mut w = FileWriter::create(&path, 1024, 0).unwrap();
        for l in &all {
            w.add_series(l, &[Sample::new(1, 1.0)]).unwrap();
        }
        let size = w.finish().unwrap();
        let store = faulty();
        let b = Arc::new(bucket(&store));
        let key = b.file_key(0, 1);
        b.put(&key, bytes::Bytes::from(std::fs::read(&path).unwrap())).unwrap();
        let index: std::collections::HashMap<Labels, u32> =
            all.iter().enumerate().map(|(k, l)| (l.clone(), k as u32)).collect();
        let part = PartitionFile::open_cached_in_part(
            Arc::clone(&b),
            key,
            &d.path().join("1.spf.cache"),
            size,
            Box::new(move |l, _| index[l]),
        )
        .unwrap();
        for (kind, x, y) in selections {
            let (lo, hi) = (NAMES[x.min(y)], NAMES[x.max(y)]);
            let name = |op, v: &str| Matcher::new(op, "__name__", v).unwrap();
            let matchers = match kind {
                0 => vec![name(MatchOp::Equal, lo)],
                1 => vec![name(MatchOp::Regex, &format!("{}|{}", lo.max("a"), hi.max("a")))],
                2 => vec![name(MatchOp::Regex, &format!("{lo}.*"))],
                3 => vec![name(MatchOp::NotEqual, lo), Matcher::equal("i", "1")],
                4 => vec![name(MatchOp::Regex, "a.|c.*")],
                5 => vec![Matcher::equal("Zone", "z")],
                // Two name matchers: the chunks loaded are fewer than the equality alone needs.
                6 => vec![name(MatchOp::Equal, lo), name(MatchOp::Regex, &format!("{hi}.*"))],
                _ => vec![name(MatchOp::Equal, hi), Matcher::equal("job", "j")],
            };
            part.load_for(&[&matchers]).unwrap();
            for (k, l) in all.iter().enumerate() {
                if crate::matcher::matches_all(&matchers, l) {
                    proptest::prop_assert!(part.contains(k as u32), "{:?} misses {}", matchers, l);
                }
            }
        }
    }
}

/// A file whose symbols and chunk directory outgrow the tail read at opening (long, distinct
/// label values) opens in part with one more request, and so does an empty file.
#[test]
fn a_large_index_tail_and_an_empty_file_open_in_part() {
    use crate::partition::{FileWriter, PartitionFile};
    use crate::{Labels, Matcher};
    use std::sync::atomic::Ordering::Relaxed;
    let d = tempfile::tempdir().unwrap();
    let store = faulty();
    let b = Arc::new(bucket(&store));
    for (n, count) in [(1u64, 3000usize), (2, 0)] {
        let path = d.path().join(format!("{n}.spf"));
        let mut all: Vec<Labels> = (0..count)
            .map(|i| Labels::from_pairs(&[("__name__", "m"), ("id", &format!("{i:08}-{}", "x".repeat(100)))]))
            .collect();
        all.sort();
        let mut w = FileWriter::create(&path, 1024, 0).unwrap();
        for l in &all {
            w.add_series(l, &noisy(1, 60)).unwrap();
        }
        let size = w.finish().unwrap();
        let key = b.file_key(0, n);
        b.put(&key, bytes::Bytes::from(std::fs::read(&path).unwrap())).unwrap();
        let ids: Arc<Vec<Labels>> = Arc::new(all);
        let resolve = {
            let ids = Arc::clone(&ids);
            Box::new(move |l: &Labels, _: i64| ids.iter().position(|x| x == l).unwrap() as u32)
        };
        let gets = store.counts().get.load(Relaxed);
        let cache = d.path().join(format!("{n}.spf.cache"));
        let part = PartitionFile::open_cached_in_part(Arc::clone(&b), key, &cache, size, resolve).unwrap();
        let opening = store.counts().get.load(Relaxed) - gets;
        part.load_for(&[&[Matcher::equal("__name__", "m")]]).unwrap();
        assert_eq!(part.series_ids().len(), count);
        if count > 0 {
            // 3,000 symbols of 108 bytes: more than the 256 KiB of the tail read.
            assert_eq!(opening, 2, "header and tail, then the rest of the symbols");
            let mut out = Vec::new();
            part.read(1234, i64::MIN, i64::MAX, &mut out).unwrap();
            assert_eq!(out, noisy(1, 60));
        }
    }
}

/// Positions noted before a flush reach the local manifest and the bucket's record with the
/// files that hold their data; one noted after it waits for the next flush; a writer that
/// restores the prefix onto an empty directory reads them back from the bucket.
#[test]
fn positions_travel_with_the_files_that_hold_their_data() {
    use crate::{Batch, Db, Labels, Options, Sample};
    let store = faulty();
    let dir = tempfile::tempdir().unwrap();
    let open = |dir: &std::path::Path| {
        Db::open(Options { bucket: Some(on(&store, "memory://root/w")), ..Options::new(dir) }).unwrap()
    };
    let w = open(dir.path());
    let mut b = Batch::new();
    b.push(Labels::from_pairs(&[("__name__", "m")]), vec![Sample::new(1_000, 1.0)]);
    w.append(&b).unwrap();
    w.note_position("log:x/0", 7);
    w.note_position("log:x/0", 5); // lower: ignored
    w.note_position("log:x/1", 3);
    assert!(w.positions_stored().is_empty(), "nothing flushed yet");
    w.flush().unwrap();
    assert!(w.wait_mirrored(Duration::from_secs(10)));
    let want: std::collections::BTreeMap<String, u64> = [("log:x/0".into(), 7), ("log:x/1".into(), 3)].into();
    assert_eq!(w.positions_stored(), want);
    w.note_position("log:x/1", 9);
    assert_eq!(w.positions_stored(), want, "noted after the flush: not in files yet");
    w.close().unwrap();
    // Closing flushed nothing new (an empty head), so the last record's positions stand.
    let restored = tempfile::tempdir().unwrap();
    let again = open(restored.path());
    assert_eq!(again.positions_stored(), want);
    again.close().unwrap();
}

/// A writer prefix that never uploaded a file (its only record is its claim, with no partition
/// width) neither sets the query node's width nor hides the prefixes that have files.
#[test]
fn an_empty_writer_prefix_hides_no_other() {
    use crate::query::Querier;
    use crate::{Batch, Db, Labels, Matcher, Options, Sample};
    let store = faulty();
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    // "a" sorts first, so a query node meets the empty prefix first.
    let empty =
        Db::open(Options { bucket: Some(on(&store, "memory://root/a")), ..Options::new(dirs[0].path()) })
            .unwrap();
    empty.close().unwrap();
    let w = Db::open(Options { bucket: Some(on(&store, "memory://root/b")), ..Options::new(dirs[1].path()) })
        .unwrap();
    let mut b = Batch::new();
    b.push(Labels::from_pairs(&[("__name__", "m")]), vec![Sample::new(crate::clock::now_ms() - 60_000, 1.0)]);
    w.append(&b).unwrap();
    w.flush().unwrap();
    assert!(w.wait_mirrored(Duration::from_secs(10)));
    let q = Db::open(Options {
        bucket: Some(on(&store, "memory://root")),
        follow: Some(Duration::from_secs(3600)),
        ..Options::new(dirs[2].path())
    })
    .unwrap();
    let snap = q.snapshot();
    let series = snap.select(&[Matcher::equal("__name__", "m")], i64::MIN, i64::MAX).unwrap();
    assert_eq!(series.len(), 1, "the prefix with files is served");
}

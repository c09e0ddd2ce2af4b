//! Crash tests on a real process: a writer child is SIGKILLed at random moments, or aborts at
//! a named crash point; then the database must reopen with every acknowledged batch present,
//! no partial batch, no stray files, and (under SIGKILL) samples rewritten again and again
//! holding the last value written. Two batches in five are written out of order (10 minutes
//! and 2 hours behind their series' newest sample, see `common::batch_time`), and half of the
//! rewritten samples lie 2 hours behind their series' newest: out-of-order data is in flight
//! (head, WAL, flushes into old partitions, compactions) at every kill.
//!
//! `STRATA_CRASH_KILLS=1000 cargo test -p storage --release --test integration crash::` runs 1,000
//! kills (default 50).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use storage::{Db, Matcher, Options, Querier};

use crate::common::{self, Rng};

const WRITER: &str = env!("CARGO_BIN_EXE_storage-crash-writer");

/// How many `crash_rewrite` series the writer's rewriting thread writes (its `REWRITE_SERIES`).
const REWRITE_SERIES: usize = 4;

/// Each rewrite series holds samples at `BASE + k s` and this much later (the writer's
/// `REWRITE_AHEAD_MS`): every rewrite of the first is 2 hours behind the series' newest sample.
const REWRITE_AHEAD_MS: i64 = 2 * 3_600_000;

/// Reads `ack W B` lines until the child's stdout closes; `rewrite R` lines raise
/// `rewrite_acked` to R.
fn collect_acks(child: &mut std::process::Child, acked: &mut BTreeSet<(u64, u64)>, rewrite_acked: &mut u64) {
    let Some(out) = child.stdout.take() else { return };
    for line in BufReader::new(out).lines() {
        let Ok(line) = line else { break };
        let mut w = line.split(' ');
        match (w.next(), w.next(), w.next()) {
            (Some("ack"), Some(a), Some(b)) => {
                acked.insert((a.parse().unwrap(), b.parse().unwrap()));
            }
            (Some("rewrite"), Some(r), None) => *rewrite_acked = (*rewrite_acked).max(r.parse().unwrap()),
            _ => {}
        }
    }
}

/// The value the rewriting thread's samples hold (0 if it never wrote), checking that the last
/// write won: every one of its series holds its two samples (`BASE + k s`, 2 hours behind the
/// other, and `BASE + k s + 2 h`), all the same value (a batch is applied whole, out-of-order
/// part included), and not older than the last acknowledged rewrite.
fn verify_rewrites(db: &Db, rewrite_acked: u64, context: &str) -> u64 {
    let snap = db.snapshot();
    let mut values = Vec::new();
    for s in snap.select(&[Matcher::equal("__name__", "crash_rewrite")], i64::MIN, i64::MAX).unwrap() {
        let mut v = Vec::new();
        snap.samples(&s, i64::MIN, i64::MAX, &mut v).unwrap();
        let k: i64 = s.labels.get("k").unwrap().parse().unwrap();
        let t = common::BASE + k * 1000;
        assert_eq!(v.len(), 2, "{context}{}: {v:?}", s.labels);
        assert_eq!((v[0].t, v[1].t), (t, t + REWRITE_AHEAD_MS), "{context}{}: {v:?}", s.labels);
        values.extend(v.iter().map(|x| x.v));
    }
    if values.is_empty() {
        assert_eq!(rewrite_acked, 0, "{context}acknowledged rewrites lost");
        return 0;
    }
    assert_eq!(values.len(), 2 * REWRITE_SERIES, "{context}rewrite series: {values:?}");
    assert!(values.iter().all(|v| *v == values[0]), "{context}a rewrite batch applied in part: {values:?}");
    let value = values[0] as u64;
    assert!(
        value >= rewrite_acked,
        "{context}an older value won: rewrite {value} read, rewrite {rewrite_acked} acknowledged"
    );
    value
}

/// Opens the database and checks every batch: acknowledged ones whole, none partial, and the
/// rewritten samples at their last value; then closes it, or with `crash` drops it unclosed (a
/// second crash, so the next writer also replays what this one left). Returns the highest
/// batch number present and the rewritten samples' value.
fn verify(
    dir: &Path,
    acked: &BTreeSet<(u64, u64)>,
    series: u64,
    rewrite_acked: u64,
    crash: bool,
) -> (u64, u64) {
    let db = Db::open(Options::new(dir)).unwrap_or_else(|e| panic!("reopen failed: {e}"));
    let present = common::batches_present(&db.snapshot(), "crash", "");
    common::assert_whole_and_acked(&present, acked, series, "");
    let rewritten = verify_rewrites(&db, rewrite_acked, "");
    common::assert_no_strays(dir, "");
    let max = present.keys().map(|(_, b)| *b).max().unwrap_or(0);
    if !crash {
        db.close().unwrap();
    }
    (max, rewritten)
}

#[test]
fn sigkill_at_random_moments_loses_no_acknowledged_batch() {
    let kills: usize = std::env::var("STRATA_CRASH_KILLS").ok().and_then(|s| s.parse().ok()).unwrap_or(50);
    let dir = tempfile::tempdir().unwrap();
    let series = 5;
    let mut rng = Rng(0x5eed_cafe);
    let mut acked = BTreeSet::new();
    let mut next = 0u64;
    // Rewrite values start at 1, so 0 means "never written".
    let (mut rewrite_acked, mut next_rewrite) = (0u64, 1u64);
    let started = Instant::now();
    for round in 0..kills {
        let mut child = Command::new(WRITER)
            .args([
                "write",
                dir.path().to_str().unwrap(),
                "3",
                &series.to_string(),
                &next.to_string(),
                &next_rewrite.to_string(),
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(5 + rng.next() % 300));
        child.kill().unwrap(); // SIGKILL
        collect_acks(&mut child, &mut acked, &mut rewrite_acked);
        let status = child.wait().unwrap();
        assert!(!status.success(), "round {round}: writer exited by itself: {status}");
        let (max, rewritten) = verify(dir.path(), &acked, series, rewrite_acked, round % 2 == 1);
        next = next.max(max + 1).max(acked.iter().map(|(_, b)| b + 1).max().unwrap_or(0));
        next_rewrite = next_rewrite.max(rewritten + 1).max(rewrite_acked + 1);
    }
    eprintln!(
        "{kills} kills, {} acknowledged batches verified, {} rewrites of the same {REWRITE_SERIES} \
         samples acknowledged (the last write read back after every kill), {:.1} s",
        acked.len(),
        rewrite_acked,
        started.elapsed().as_secs_f64()
    );
    assert!(acked.len() > kills, "the writer made too little progress to test anything");
    assert!(rewrite_acked > kills as u64, "the rewriter made too little progress to test anything");
}

/// Partition files as (partition, id).
type FileSet = BTreeSet<(i64, u64)>;

/// The newest record's number in the bucket at `url` (`file://DIR` or `s3://BUCKET/PREFIX`, the
/// latter through the `AWS_*` environment), the partition files it lists and the partition
/// files the bucket holds, as (partition, id). Two LISTs.
fn bucket_files(url: &str) -> (u64, FileSet, FileSet) {
    use object_store::{ObjectStore, ObjectStoreExt};
    let (store, prefix): (Box<dyn ObjectStore>, String) = match url.strip_prefix("s3://") {
        Some(rest) => {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            let s3 = object_store::aws::AmazonS3Builder::from_env().with_bucket_name(bucket).build().unwrap();
            (Box::new(s3), prefix.trim_end_matches('/').to_string())
        }
        None => {
            let dir = url.strip_prefix("file://").expect("a file:// or s3:// URL");
            (Box::new(object_store::local::LocalFileSystem::new_with_prefix(dir).unwrap()), String::new())
        }
    };
    let key = |rest: &str| {
        object_store::path::Path::from(if prefix.is_empty() {
            rest.to_string()
        } else {
            format!("{prefix}/{rest}")
        })
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        use futures::TryStreamExt;
        let names = |under: &str| {
            let under = key(under);
            let store = &store;
            async move {
                let all: Vec<_> = store.list(Some(&under)).try_collect().await.unwrap();
                let base = under.as_ref().len() + 1;
                all.into_iter().map(|m| m.location.as_ref()[base..].to_string()).collect::<Vec<String>>()
            }
        };
        let newest = names("manifest")
            .await
            .iter()
            .filter_map(|n| n.parse::<u64>().ok())
            .max()
            .expect("the bucket holds records");
        let record = store.get(&key(&format!("manifest/{newest:020}"))).await.unwrap().bytes().await.unwrap();
        let listed = String::from_utf8_lossy(&record)
            .lines()
            .filter_map(|l| {
                let mut w = l.strip_prefix("file ")?.split(' ');
                Some((w.next()?.parse().ok()?, w.next()?.parse().ok()?))
            })
            .collect();
        let held = names("partitions")
            .await
            .iter()
            .filter_map(|n| {
                let (partition, file) = n.split_once('/')?;
                Some((partition.parse().ok()?, file.strip_suffix(".spf")?.parse().ok()?))
            })
            .collect();
        (newest, listed, held)
    })
}

/// SIGKILL of a writer that mirrors to a bucket (`file://`), at random moments: among its
/// constant flushes and compactions, so among uploads, commits and deletions. After every kill
/// the data directory holds every acknowledged batch; at the end, once a clean writer has
/// uploaded what the last one left, a query node's view of the bucket holds exactly what the
/// data directory does, and the bucket holds no partition file its newest record does not list
/// (uploads a kill left uncommitted included). `STRATA_BUCKET_KILLS=200` for 200 kills
/// (default 20). `STRATA_CRASH_S3=s3://BUCKET/PREFIX` runs it against an S3 store instead (a
/// fresh prefix below that one; endpoint and credentials from the `AWS_*` environment, e.g.
/// the RADOS Gateway of `tests/ceph-rgw/run-rgw.sh`).
#[test]
fn sigkill_of_a_bucket_writer_loses_nothing_and_leaves_nothing() {
    let kills: usize = std::env::var("STRATA_BUCKET_KILLS").ok().and_then(|s| s.parse().ok()).unwrap_or(20);
    let (dir, bucket, qdir) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let url = match std::env::var("STRATA_CRASH_S3") {
        Ok(root) => {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
            format!("{}/crash-{now}", root.trim_end_matches('/'))
        }
        Err(_) => format!("file://{}", bucket.path().display()),
    };
    let series = 3;
    let mut rng = Rng(0xb0c_4e7);
    let mut acked = BTreeSet::new();
    let mut next = 0u64;
    for round in 0..kills {
        let mut child = Command::new(WRITER)
            .args(["write", dir.path().to_str().unwrap(), "2", &series.to_string(), &next.to_string()])
            .env("STRATA_CRASH_BUCKET", &url)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(20 + rng.next() % 400));
        child.kill().unwrap(); // SIGKILL
        let mut rewrites = 0;
        collect_acks(&mut child, &mut acked, &mut rewrites);
        assert!(!child.wait().unwrap().success(), "round {round}: writer exited by itself");
        let db = Db::open(Options::new(dir.path()))
            .unwrap_or_else(|e| panic!("round {round}: reopen failed: {e}"));
        let present = common::batches_present(&db.snapshot(), "crash", "");
        common::assert_whole_and_acked(&present, &acked, series, &format!("round {round}: "));
        next = next.max(present.keys().map(|(_, b)| b + 1).max().unwrap_or(0));
        db.close().unwrap();
    }
    assert!(acked.len() > kills, "the writer made too little progress to test anything");
    // A clean writer uploads what the last one left and collects what kills left behind: the
    // first commit records the uncommitted uploads it lists at start as gone, the next deletes
    // them (the delete delay is 0).
    let with_bucket = || Options {
        bucket: Some(storage::BucketOptions { url: url.clone(), ..storage::BucketOptions::default() }),
        ..Options::new(dir.path())
    };
    for _ in 0..2 {
        let db = Db::open(with_bucket()).unwrap();
        db.flush().unwrap();
        db.compact_all().unwrap();
        assert!(db.wait_mirrored(Duration::from_secs(60)));
        db.close().unwrap();
    }
    let local = Db::open(Options::new(dir.path())).unwrap();
    let want = common::batches_present(&local.snapshot(), "crash", "");
    common::assert_whole_and_acked(&want, &acked, series, "");
    local.close().unwrap();
    let q = Db::open(Options {
        bucket: Some(storage::BucketOptions { url: url.clone(), ..storage::BucketOptions::default() }),
        follow: Some(Duration::from_secs(3600)),
        ..Options::new(qdir.path())
    })
    .unwrap();
    assert_eq!(common::batches_present(&q.snapshot(), "crash", ""), want, "the query node's view");
    q.close().unwrap();
    let (records, listed, held) = bucket_files(&url);
    assert_eq!(held, listed, "partition files in the bucket against those its newest record lists");
    assert!(records > 2 * kills as u64, "{records} records: too few commits to test anything");
    eprintln!(
        "{kills} kills of a bucket writer, {} acknowledged batches verified, {records} records committed",
        acked.len()
    );
}

/// Every crash point the engine has, each hit at its first and a later occurrence.
const POINTS: &[&str] = &[
    "wal.before_write",
    "wal.mid_record",
    "wal.after_write_before_sync",
    "wal.after_sync_before_ack",
    "wal.segment_rotate.after_create",
    "flush.mid_file",
    "flush.before_rename",
    "flush.after_file",
    "manifest.before_replace",
    "manifest.after_replace",
    "flush.before_wal_remove",
    "compact.after_write",
    "compact.before_delete_inputs",
];

#[test]
fn crash_at_every_step_of_flush_and_compaction() {
    let mut hit = 0;
    for point in POINTS {
        for nth in [1, 2, 5] {
            let dir = tempfile::tempdir().unwrap();
            let mut acked = BTreeSet::new();
            let mut child = Command::new(WRITER)
                .args(["steps", dir.path().to_str().unwrap(), "0"])
                .env("STRATA_FAILPOINT", format!("{point}:{nth}"))
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            collect_acks(&mut child, &mut acked, &mut 0);
            let status = child.wait().unwrap();
            if !status.success() {
                hit += 1;
            }
            let (max, _) = verify(dir.path(), &acked, 3, 0, false);
            // The database keeps working after recovery: run the script again on top.
            let mut again = BTreeSet::new();
            let mut child = Command::new(WRITER)
                .args(["steps", dir.path().to_str().unwrap(), &(max + 1).to_string()])
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap();
            collect_acks(&mut child, &mut again, &mut 0);
            assert!(child.wait().unwrap().success(), "{point}:{nth}: second run failed");
            acked.extend(again);
            verify(dir.path(), &acked, 3, 0, false);
        }
    }
    assert!(hit >= POINTS.len(), "only {hit} crash points were reached");
}

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

//! A writer process for crash tests (`storage/tests/integration/crash.rs`); not part of strata's
//! interface.
//!
//! `storage-crash-writer write DIR WRITERS SERIES FIRST_BATCH [FIRST_REWRITE]` appends batches
//! from WRITERS threads forever, with tiny flush/compaction thresholds so that flushes,
//! compactions and WAL rotations happen constantly, and prints `ack W B` after batch B of
//! writer W is acknowledged.
//! Batch B of writer W holds one sample at `batch_time(B)` for each of SERIES series, value
//! `W * 1e9 + B`, so the checker can tell whole, partial and missing batches apart. Batch times
//! grow with B (a second apart) except that one batch in five lies 10 minutes and one in five
//! 2 hours behind: out-of-order writes, beyond the old one-hour window too.
//!
//! With a sixth argument R, one more thread rewrites the same samples again and again: its
//! batch R, R+1, ... sets the samples at `BASE + k s` and `BASE + 2 h + k s` of each series
//! `crash_rewrite{k="0".."3"}` to the batch number (the first of them 2 hours behind the
//! series' newest sample: an out-of-order rewrite), and prints `rewrite R` once acknowledged.
//! Values only grow, so after a crash the checker knows which value the last write left (at
//! least the last acknowledged one, the same in every sample: a batch is applied whole).
//!
//! With `STRATA_CRASH_BUCKET=URL` set, the database mirrors to that bucket (delete delay 0).
//!
//! `storage-crash-writer steps DIR` runs a fixed script (append, flush, append, compact, delete,
//! retention, close) for the crash-point tests, which set `STRATA_FAILPOINT`.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use storage::{Batch, Db, Labels, Matcher, Options, Sample};

/// Batch timestamps start here (a fixed past time).
const BASE: i64 = 1_700_000_000_000;

fn labels(w: u64, k: u64) -> Labels {
    Labels::from_pairs(&[("__name__", "crash"), ("writer", &w.to_string()), ("k", &k.to_string())])
}

/// The time of batch `b`'s samples: `BASE + b s`, but `b % 5 == 2` 10 minutes and `b % 5 == 4`
/// 2 hours earlier, with 250 and 500 ms added so no two batches share a timestamp. The same
/// mapping as `batch_time` in `storage/tests/integration/common.rs`, which inverts it.
fn batch_time(b: u64) -> i64 {
    let (late, ms) = match b % 5 {
        2 => (600, 250),
        4 => (7200, 500),
        _ => (0, 0),
    };
    BASE + (b as i64 - late) * 1000 + ms
}

fn batch(w: u64, b: u64, series: u64) -> Batch {
    let mut batch = Batch::new();
    for k in 0..series {
        batch.push(labels(w, k), vec![Sample::new(batch_time(b), (w * 1_000_000_000 + b) as f64)]);
    }
    batch
}

/// Series the rewriting thread writes (`crash_rewrite{k}`), each at `BASE + k s`; the checker
/// in `storage/tests/integration/crash.rs` expects this many.
const REWRITE_SERIES: u64 = 4;

/// How far the second rewritten sample of a series lies after the first (2 hours).
const REWRITE_AHEAD_MS: i64 = 2 * 3_600_000;

fn rewrite_batch(r: u64) -> Batch {
    let mut batch = Batch::new();
    for k in 0..REWRITE_SERIES {
        let labels = Labels::from_pairs(&[("__name__", "crash_rewrite"), ("k", &k.to_string())]);
        let t = BASE + k as i64 * 1000;
        batch.push(labels, vec![Sample::new(t, r as f64), Sample::new(t + REWRITE_AHEAD_MS, r as f64)]);
    }
    batch
}

fn options(dir: &str) -> Options {
    let mut o = Options::new(dir);
    o.head_samples_max = 2_000;
    o.maintenance_interval = Duration::from_millis(20);
    o.compact_files_min = 2;
    o.wal_segment_bytes = 16 << 10;
    o.partition_ms = 600_000; // 10 minutes: many partitions, so compaction and retention run
    // Long enough that retention never removes an acknowledged batch: in release builds a run
    // writes hours of one-second batches, and the checker expects every acknowledged one.
    o.retention_ms = 10 * 365 * 24 * 3_600_000;
    o.block_samples_max = 16;
    // A writer mirroring to a bucket (`crash::sigkill_of_a_bucket_writer...`): uploads and
    // commits follow every flush and compaction, so kills land among them too.
    if let Ok(url) = std::env::var("STRATA_CRASH_BUCKET") {
        o.bucket = Some(storage::BucketOptions { url, ..storage::BucketOptions::default() });
    }
    o
}

fn ack(w: u64, b: u64) {
    say(&format!("ack {w} {b}"));
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    // A failed write to stdout means the parent is gone; nothing useful left to do.
    if writeln!(out, "{line}").and_then(|_| out.flush()).is_err() {
        std::process::exit(0);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let num = |i: usize| arg(i).parse::<u64>().unwrap_or(0);
    match arg(1).as_str() {
        "write" => {
            let db = Arc::new(Db::open(options(&arg(2))).unwrap_or_else(|e| fail(e)));
            let (writers, series, first) = (num(3), num(4), num(5));
            let rewriter = (!arg(6).is_empty()).then(|| {
                let (db, from) = (db.clone(), num(6));
                std::thread::spawn(move || {
                    for r in from.. {
                        match db.append(&rewrite_batch(r)) {
                            Ok(_) => say(&format!("rewrite {r}")),
                            Err(e) => fail(e),
                        }
                    }
                })
            });
            let threads: Vec<_> = (0..writers)
                .map(|w| {
                    let db = db.clone();
                    std::thread::spawn(move || {
                        for b in first.. {
                            match db.append(&batch(w, b, series)) {
                                Ok(_) => ack(w, b),
                                Err(e) => fail(e),
                            }
                        }
                    })
                })
                .collect();
            for t in threads.into_iter().chain(rewriter) {
                let _ = t.join();
            }
        }
        "steps" => {
            let db = Db::open(options(&arg(2))).unwrap_or_else(|e| fail(e));
            let mut b = num(3);
            let mut step = |db: &Db, n: u64| {
                for _ in 0..n {
                    db.append(&batch(0, b, 3)).unwrap_or_else(|e| fail(e));
                    ack(0, b);
                    b += 1;
                }
            };
            step(&db, 50);
            db.flush().unwrap_or_else(|e| fail(e));
            step(&db, 50);
            db.flush().unwrap_or_else(|e| fail(e));
            step(&db, 700); // crosses a partition boundary
            db.flush().unwrap_or_else(|e| fail(e));
            db.compact().unwrap_or_else(|e| fail(e));
            step(&db, 10);
            // Before every batch, the late ones included: deletes nothing the checker counts.
            db.delete(&[Matcher::equal("k", "2")], 0, BASE - 3 * 3_600_000).unwrap_or_else(|e| fail(e));
            db.clean_tombstones().unwrap_or_else(|e| fail(e));
            db.apply_retention().unwrap_or_else(|e| fail(e));
            step(&db, 10);
            db.close().unwrap_or_else(|e| fail(e));
        }
        _ => {
            eprintln!(
                "usage: storage-crash-writer write DIR WRITERS SERIES FIRST_BATCH [FIRST_REWRITE] | steps DIR FIRST_BATCH"
            );
            std::process::exit(2);
        }
    }
}

fn fail(e: storage::Error) -> ! {
    eprintln!("storage-crash-writer: {e}");
    std::process::exit(1);
}

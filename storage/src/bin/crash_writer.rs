//! A writer process for crash tests (`storage/tests/crash.rs`); not part of strata's interface.
//!
//! `storage-crash-writer write DIR WRITERS SERIES FIRST_BATCH [FIRST_REWRITE]` appends batches
//! from WRITERS threads forever, with tiny flush/compaction thresholds so that flushes,
//! compactions and WAL rotations happen constantly, and prints `ack W B` after batch B of
//! writer W is acknowledged.
//! Batch B of writer W holds one sample at `BASE + B s` for each of SERIES series, value
//! `W * 1e9 + B`, so the checker can tell whole, partial and missing batches apart.
//!
//! With a sixth argument R, one more thread rewrites the same samples again and again: its
//! batch R, R+1, ... sets the sample at `BASE + k s` of each series `crash_rewrite{k="0".."3"}`
//! to the batch number, and prints `rewrite R` once acknowledged. Values only grow, so after a
//! crash the checker knows which value the last write left (at least the last acknowledged one,
//! the same in every series: a batch is applied whole).
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

fn batch(w: u64, b: u64, series: u64) -> Batch {
    let mut batch = Batch::new();
    for k in 0..series {
        batch.push(labels(w, k), vec![Sample::new(BASE + b as i64 * 1000, (w * 1_000_000_000 + b) as f64)]);
    }
    batch
}

/// Series the rewriting thread writes (`crash_rewrite{k}`), each at `BASE + k s`; the checker
/// in `storage/tests/crash.rs` expects this many.
const REWRITE_SERIES: u64 = 4;

fn rewrite_batch(r: u64) -> Batch {
    let mut batch = Batch::new();
    for k in 0..REWRITE_SERIES {
        let labels = Labels::from_pairs(&[("__name__", "crash_rewrite"), ("k", &k.to_string())]);
        batch.push(labels, vec![Sample::new(BASE + k as i64 * 1000, r as f64)]);
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
            db.delete(&[Matcher::equal("k", "2")], 0, BASE - 1).unwrap_or_else(|e| fail(e));
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

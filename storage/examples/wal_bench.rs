//! WAL append throughput: records/s, MB/s and fsyncs/s for 1 and 4 writer threads, 150 KB and
//! 2 KB records, fsync per batch (group commit) and every 100 ms.
//!
//! ```text
//! cargo run --release -p storage --example wal_bench                 # the whole matrix
//! cargo run --release -p storage --example wal_bench -- 4 150000 batch 5   # threads bytes sync secs
//! ```
//! The WAL lives in a temporary directory under `$TMPDIR` (default /tmp): put that on the disk
//! you want to measure. Flushed segments are deleted as the run goes, as the database would.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use storage::WalSync;
use storage::wal::{Wal, WalOptions};

/// Samples a 150 KB record stands for (about 15 bytes per sample in the batch encoding).
const SAMPLES_PER_150KB: f64 = 10_000.0;

struct Case {
    threads: usize,
    record_bytes: usize,
    sync: WalSync,
    seconds: f64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cases = if args.is_empty() {
        let mut cases = Vec::new();
        for sync in [WalSync::PerBatch, WalSync::Interval(Duration::from_millis(100))] {
            for record_bytes in [150_000, 2_000] {
                for threads in [1, 4] {
                    cases.push(Case { threads, record_bytes, sync, seconds: 4.0 });
                }
            }
        }
        cases
    } else {
        let [threads, bytes, sync, seconds] = args.as_slice() else {
            return Err("usage: wal_bench [THREADS RECORD_BYTES batch|interval SECONDS]".into());
        };
        let sync = match sync.as_str() {
            "batch" => WalSync::PerBatch,
            "interval" => WalSync::Interval(Duration::from_millis(100)),
            other => return Err(format!("unknown sync mode {other}").into()),
        };
        vec![Case {
            threads: threads.parse()?,
            record_bytes: bytes.parse()?,
            sync,
            seconds: seconds.parse()?,
        }]
    };
    println!(
        "{:>7} {:>8} {:>14} {:>11} {:>8} {:>9} {:>12} {:>10} {:>10}",
        "threads", "record", "sync", "records/s", "MB/s", "fsyncs/s", "recs/fsync", "fsync avg", "samples/s"
    );
    for case in cases {
        run(&case)?;
    }
    Ok(())
}

fn run(case: &Case) -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let mut opts = WalOptions::new(dir.path());
    opts.sync = case.sync;
    let (wal, _) = Wal::open(opts, 0, |_, _| Ok(()))?;
    // Incompressible-looking payload bytes; the encode closure copies them like a batch encoder.
    let payload: Vec<u8> =
        (0..case.record_bytes).map(|i| (i as u64).wrapping_mul(0x9E37_79B9) as u8).collect();
    let stop = AtomicBool::new(false);
    let failures = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..case.threads {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    if wal.append(|_, buf| buf.extend_from_slice(&payload)).is_err() {
                        failures.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                }
            });
        }
        // Meanwhile, keep the disk footprint bounded: drop segments as a flush would.
        while start.elapsed().as_secs_f64() < case.seconds {
            std::thread::sleep(Duration::from_millis(50));
            let _ = wal.remove_segments_before(wal.current_segment());
        }
        stop.store(true, Ordering::Relaxed);
    });
    let elapsed = start.elapsed().as_secs_f64();
    let st = wal.stats();
    wal.close()?;
    if failures.load(Ordering::Relaxed) > 0 {
        return Err(format!("appends failed: {:?}", wal.poisoned()).into());
    }
    let records_per_s = st.records as f64 / elapsed;
    let fsyncs = st.fsyncs.max(1) as f64;
    let sync = match case.sync {
        WalSync::PerBatch => "per-batch".to_string(),
        WalSync::Interval(d) => format!("interval {}ms", d.as_millis()),
    };
    println!(
        "{:>7} {:>7}B {:>14} {:>11.0} {:>8.1} {:>9.1} {:>12.1} {:>8.2}ms {:>10.2e}",
        case.threads,
        case.record_bytes,
        sync,
        records_per_s,
        st.bytes_written as f64 / elapsed / 1e6,
        st.fsyncs as f64 / elapsed,
        st.records as f64 / fsyncs,
        st.fsync_nanos_total as f64 / fsyncs / 1e6,
        records_per_s * SAMPLES_PER_150KB * case.record_bytes as f64 / 150_000.0,
    );
    Ok(())
}

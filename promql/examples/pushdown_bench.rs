//! Measures push-down of range aggregations: `max_over_time(x[1h])` stepped hourly over a day
//! of 15 s data, 1000 series, flushed into partition files, with `EngineOptions::pushdown` on
//! and off, on one snapshot.
//!
//! `cargo run --release -p promql --example pushdown_bench [series]`
//!
//! Two step alignments are timed: steps on whole hours (what dashboards send; the window
//! `(h - 1h, h]` is exactly one block, since blocks are cut on the same left-open hours) and
//! steps one millisecond before whole hours (no window contains a whole block: storage says so
//! and the engine reads samples as without push-down).

use std::time::{Duration, Instant};

use promql::{Engine, EngineOptions};
use storage::{Batch, Db, Labels, Options, Sample};

/// A whole hour (2023-11-14T22:00:00Z).
const BASE: i64 = 1_699_999_200_000;
const HOUR: i64 = 3_600_000;
const RUNS: usize = 7;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let series: u32 = std::env::args().nth(1).map(|s| s.parse()).transpose()?.unwrap_or(1000);
    let dir = tempfile::tempdir()?;
    let mut opts = Options::new(dir.path());
    opts.maintenance_interval = Duration::from_secs(3600);
    let db = Db::open(opts)?;
    let per_series = 24 * 240;
    for chunk in (0..series).collect::<Vec<_>>().chunks(50) {
        let mut batch = Batch::new();
        for &s in chunk {
            let labels = Labels::from_pairs(&[("__name__", "x"), ("host", &format!("h{s}"))]);
            let samples = (0..per_series)
                .map(|i| Sample::new(BASE + i * 15_000, ((i * 7 + i64::from(s)) % 1013) as f64 * 0.25))
                .collect();
            batch.push(labels, samples);
        }
        db.append(&batch)?;
    }
    db.flush()?;
    let snap = db.snapshot();
    println!("{series} series x {per_series} samples (15 s, one day), flushed; median of {RUNS} runs");
    for (what, start) in [("steps on whole hours", BASE + HOUR), ("steps at hour - 1 ms", BASE + HOUR - 1)] {
        let end = start + 23 * HOUR;
        let mut answers = Vec::new();
        for pushdown in [false, true] {
            let engine = Engine::new(EngineOptions { pushdown, ..EngineOptions::default() });
            let mut times = Vec::new();
            let mut result = None;
            for _ in 0..RUNS {
                let t = Instant::now();
                result = Some(engine.range(&snap, "max_over_time(x[1h])", start, end, HOUR)?);
                times.push(t.elapsed());
            }
            times.sort();
            let r = result.ok_or("no run")?;
            let s = &r.stats;
            println!(
                "{what:22} pushdown={pushdown:5}: {:8.2} ms  (blocks from stats {}, blocks decoded {}, \
                 samples decoded {}, samples read {})",
                times[RUNS / 2].as_secs_f64() * 1e3,
                s.blocks_from_stats,
                s.blocks_decoded,
                s.samples_decoded,
                s.samples_read
            );
            answers.push(format!("{:?}", r.value));
        }
        if answers[0] != answers[1] {
            return Err(format!("{what}: push-down changed the answer").into());
        }
    }
    Ok(())
}

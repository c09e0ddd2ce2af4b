//! Measures push-down of range aggregations and the block grid's trade-off (issue 7): for each
//! block grid (1 min, 5 min, 1 h), one day of 15 s data for 1000 series is flushed into
//! partition files; then `max_over_time(x[B])` stepped every B over the day, for query buckets
//! B of 1 min, 5 min and 1 h, is timed with `EngineOptions::pushdown` on and off, and the disk
//! bytes per sample of the partition files are reported.
//!
//! `cargo run --release -p promql --example pushdown_bench [series]`
//!
//! Steps fall on whole multiples of B, as Grafana aligns them; blocks are cut in left-open grid
//! cells `(k·grid, (k+1)·grid]`, so a window `(t - B, t]` covers whole blocks when B is a
//! multiple of the grid. Values are a TSBS-like clamped random walk of integers (the data shape
//! where statistics matter most: cheap to store, many samples per block). Every answer with
//! push-down is checked equal to the one without.

use std::path::Path;
use std::time::{Duration, Instant};

use promql::{Engine, EngineOptions};
use storage::{Batch, Db, Labels, Options, Sample};

/// A whole hour (2023-11-14T22:00:00Z).
const BASE: i64 = 1_699_999_200_000;
const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
const DAY: i64 = 24 * HOUR;
const INTERVAL: i64 = 15_000;
const RUNS: usize = 5;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let series: u32 = std::env::args().nth(1).map(|s| s.parse()).transpose()?.unwrap_or(1000);
    let per_series = DAY / INTERVAL;
    println!(
        "{series} series x {per_series} samples (15 s, one day), flushed; max_over_time(x[B]) stepped \
         every B over the day; median of {RUNS} runs\n"
    );
    println!(
        "| block grid | disk bytes/sample | bucket B | push-down off | push-down on | speed-up | blocks from statistics / decoded |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (grid_name, grid) in [("1 min", MINUTE), ("5 min", 5 * MINUTE), ("1 h", HOUR)] {
        let dir = tempfile::tempdir()?;
        let db = load(dir.path(), series, grid)?;
        let bytes = partition_bytes(dir.path())?;
        let per_sample = bytes as f64 / (f64::from(series) * per_series as f64);
        let snap = db.snapshot();
        for (bucket_name, bucket) in [("1 min", MINUTE), ("5 min", 5 * MINUTE), ("1 h", HOUR)] {
            let query = format!("max_over_time(x[{}s])", bucket / 1000);
            let (start, end) = (BASE + bucket, BASE + DAY);
            let mut times = [Duration::ZERO; 2];
            let mut answers = Vec::new();
            let mut stats = None;
            for (k, pushdown) in [false, true].into_iter().enumerate() {
                let engine = Engine::new(EngineOptions { pushdown, ..EngineOptions::default() });
                let mut runs = Vec::new();
                let mut result = None;
                for _ in 0..RUNS {
                    let t = Instant::now();
                    result = Some(engine.range(&snap, &query, start, end, bucket)?);
                    runs.push(t.elapsed());
                }
                runs.sort();
                times[k] = runs[RUNS / 2];
                let r = result.ok_or("no run")?;
                if pushdown {
                    stats = Some((r.stats.blocks_from_stats, r.stats.blocks_decoded));
                }
                answers.push(format!("{:?}", r.value));
            }
            if answers[0] != answers[1] {
                return Err(
                    format!("grid {grid_name}, bucket {bucket_name}: push-down changed the answer").into()
                );
            }
            let (from_stats, decoded) = stats.unwrap_or_default();
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            println!(
                "| {grid_name} | {per_sample:.3} | {bucket_name} | {:.1} ms | {:.1} ms | {:.1}× | {from_stats} / {decoded} |",
                ms(times[0]),
                ms(times[1]),
                ms(times[0]) / ms(times[1]),
            );
        }
    }
    Ok(())
}

/// A database in `dir` with `series` TSBS-like series over one day, flushed with block grid `grid`.
fn load(dir: &Path, series: u32, grid: i64) -> Result<Db, Box<dyn std::error::Error>> {
    let mut opts = Options::new(dir);
    opts.maintenance_interval = Duration::from_secs(3600);
    opts.block_grid_ms = grid;
    let db = Db::open(opts)?;
    let per_series = DAY / INTERVAL;
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for chunk in (0..series).collect::<Vec<_>>().chunks(50) {
        let mut batch = Batch::new();
        for &s in chunk {
            let labels = Labels::from_pairs(&[("__name__", "x"), ("host", &format!("h{s}"))]);
            let mut v = 50.0f64;
            let samples = (1..=per_series)
                .map(|i| {
                    // xorshift64: a step of -1, 0 or +1, clamped to [0, 100].
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    v = (v + (rng % 3) as f64 - 1.0).clamp(0.0, 100.0);
                    Sample::new(BASE + i * INTERVAL, v)
                })
                .collect();
            batch.push(labels, samples);
        }
        db.append(&batch)?;
    }
    db.flush()?;
    Ok(db)
}

/// Bytes of the partition files under `dir`.
fn partition_bytes(dir: &Path) -> std::io::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir.join("partitions"))? {
        for file in std::fs::read_dir(entry?.path())? {
            let file = file?;
            if file.path().extension().is_some_and(|x| x == "spf") {
                total += file.metadata()?.len();
            }
        }
    }
    Ok(total)
}

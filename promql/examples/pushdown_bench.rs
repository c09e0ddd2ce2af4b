//! Measures push-down of range aggregations and the block grid's trade-off: for each
//! block grid (1 min, 5 min, 1 h), one day of 15 s data for 1000 series is flushed into
//! partition files; then `max_over_time(x[B])` stepped every B over the day, for query buckets
//! B of 1 min, 5 min and 1 h, is timed with `EngineOptions::pushdown` on and off, and the disk
//! bytes per sample of the partition files are reported.
//!
//! `cargo run --release -p promql --example pushdown_bench [series]`
//!
//! `cargo run --release -p promql --example pushdown_bench counters [series]` measures `rate`,
//! `increase` and `delta` instead: counters of a day (15 s, hour blocks) whose values are
//! decimals (CPU seconds), each restarting once at a random sample, queried as dashboards do
//! (hourly increases, a day's increase, 5-minute rates).
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
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "counters") {
        let series: u32 = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(1000);
        return counters(series);
    }
    let series: u32 = args.first().map(|s| s.parse()).transpose()?.unwrap_or(1000);
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
            let c = compare(&snap, &query, start, end, bucket)
                .map_err(|e| format!("grid {grid_name}, bucket {bucket_name}: {e}"))?;
            println!("| {grid_name} | {per_sample:.3} | {bucket_name} | {c} |");
        }
    }
    Ok(())
}

/// Median times of a query with push-down off and on, and the push-down run's block counts.
struct Compared {
    off: Duration,
    on: Duration,
    from_stats: u64,
    decoded: u64,
}

impl std::fmt::Display for Compared {
    /// The table cells: both times, the speed-up, the block counts.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let (off, on) = (ms(self.off), ms(self.on));
        write!(f, "{off:.1} ms | {on:.1} ms | {:.1}× | {} / {}", off / on, self.from_stats, self.decoded)
    }
}

/// Runs `query` ([`RUNS`] times each way) over `[start, end]` every `step`, or as an instant
/// query at `start` if `step` is 0; fails if push-down changes the answer.
fn compare(
    snap: &storage::Snapshot,
    query: &str,
    start: i64,
    end: i64,
    step: i64,
) -> Result<Compared, Box<dyn std::error::Error>> {
    let mut c = Compared { off: Duration::ZERO, on: Duration::ZERO, from_stats: 0, decoded: 0 };
    let mut answers = Vec::new();
    for pushdown in [false, true] {
        let engine = Engine::new(EngineOptions { pushdown, ..EngineOptions::default() });
        let mut runs = Vec::new();
        let mut result = None;
        for _ in 0..RUNS {
            let t = Instant::now();
            result = Some(if step == 0 {
                engine.instant(snap, query, start)?
            } else {
                engine.range(snap, query, start, end, step)?
            });
            runs.push(t.elapsed());
        }
        runs.sort();
        let r = result.ok_or("no run")?;
        if pushdown {
            (c.on, c.from_stats, c.decoded) =
                (runs[RUNS / 2], r.stats.blocks_from_stats, r.stats.blocks_decoded);
        } else {
            c.off = runs[RUNS / 2];
        }
        answers.push(format!("{:?}", r.value));
    }
    if answers[0] != answers[1] {
        return Err("push-down changed the answer".into());
    }
    Ok(c)
}

/// The counters mode (see the module documentation): each query timed with push-down off and
/// on, answers compared.
fn counters(series: u32) -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let db = load_counters(dir.path(), series)?;
    let snap = db.snapshot();
    println!(
        "{series} counters x {} samples (15 s, one day, hour blocks), each restarting once; median of {RUNS} runs\n",
        DAY / INTERVAL
    );
    println!(
        "| query | steps | push-down off | push-down on | speed-up | blocks from statistics / decoded |"
    );
    println!("|---|---|---|---|---|---|");
    let end = BASE + DAY;
    let queries: [(&str, i64, i64); 5] = [
        ("sum by (host) (increase(c_total[1h]))", BASE + HOUR, HOUR),
        ("rate(c_total[1h])", BASE + HOUR, HOUR),
        ("delta(c_total[1h])", BASE + HOUR, HOUR),
        ("sum(increase(c_total[1d]))", end, 0),
        ("sum(rate(c_total[5m]))", BASE + HOUR, 5 * MINUTE),
    ];
    for (query, start, step) in queries {
        let c = compare(&snap, query, start, end, step).map_err(|e| format!("{query}: {e}"))?;
        let steps = if step == 0 { 1 } else { (end - start) / step + 1 };
        println!("| `{query}` | {steps} | {c} |");
    }
    Ok(())
}

/// A database in `dir` with `series` counters over one day, hour blocks: CPU seconds, rising by
/// 0.00 to 0.15 (two decimals) each 15 s, restarting from 0 once at a random sample.
fn load_counters(dir: &Path, series: u32) -> Result<Db, Box<dyn std::error::Error>> {
    let mut opts = Options::new(dir);
    opts.maintenance_interval = Duration::from_secs(3600);
    let db = Db::open(opts)?;
    let per_series = DAY / INTERVAL;
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for chunk in (0..series).collect::<Vec<_>>().chunks(50) {
        let mut batch = Batch::new();
        for &s in chunk {
            let labels = Labels::from_pairs(&[("__name__", "c_total"), ("host", &format!("h{s}"))]);
            let restart = (next() % per_series as u64) as i64 + 1;
            let mut hundredths = 0u64;
            let samples = (1..=per_series)
                .map(|i| {
                    hundredths = if i == restart { 0 } else { hundredths + next() % 16 };
                    Sample::new(BASE + i * INTERVAL, hundredths as f64 / 100.0)
                })
                .collect();
            batch.push(labels, samples);
        }
        db.append(&batch)?;
    }
    db.flush()?;
    Ok(db)
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

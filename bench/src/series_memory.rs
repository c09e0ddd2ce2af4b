//! `strata-bench series-memory`: resident memory per series, the number that decides how many
//! series a machine can hold (and what the cardinality limits should be set to).
//!
//! Each series count runs in a fresh child process (so allocator state and earlier runs do not
//! blur the numbers), which opens an empty database, creates N TSBS-like series (11 labels, as
//! `storage`'s benchmarks use) with a few samples each, in batches of 10,000 series as a sender
//! would, and reports the growth of its anonymous resident memory (`RssAnon` in
//! `/proc/self/status`: heap, not the page cache of WAL or partition files) with the series in
//! the head (what a live server holds). It then closes the database (which flushes the head to
//! partition files), and a second child opens it again and reports its growth: the memory of
//! series whose data is all on disk (index and per-series state; the memory-mapped files are not
//! counted). Storage's own estimates (`Db::memory_bytes`) are printed beside the first.

use std::path::Path;
use std::time::{Duration, Instant};

use storage::{Batch, Db, Labels, Options, Sample, WalSync};

/// Flags of `strata-bench series-memory`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Series counts to measure, comma-separated (each in its own process).
    #[arg(long, value_delimiter = ',', default_value = "1000000")]
    series: Vec<usize>,
    /// Samples per series (10 s apart).
    #[arg(long, default_value_t = 4)]
    samples: usize,
    /// Internal: create this many series in `--dir`, print the in-head columns, close.
    #[arg(long, hide = true)]
    child: Option<usize>,
    /// Internal: open the database in `--dir` and print the after-restart columns.
    #[arg(long, hide = true)]
    reopen: bool,
    /// Internal: the database directory of a child.
    #[arg(long, hide = true)]
    dir: Option<std::path::PathBuf>,
}

type Res = Result<(), String>;

const BASE: i64 = 1_700_000_000_000;
const BATCH_SERIES: usize = 10_000;

fn e(x: impl std::fmt::Display) -> String {
    x.to_string()
}

/// Series `i`: metric `i % 10`, host `i / 10`, and nine more labels derived from the host.
fn labels(i: usize) -> Labels {
    crate::tsbs::hosts::synthetic_host_labels(&format!("cpu_{}", crate::tsbs::FIELDS[i % 10]), i / 10)
}

/// Anonymous resident bytes of this process.
fn rss_anon() -> Result<u64, String> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(e)?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .ok_or("no RssAnon in /proc/self/status")?;
    Ok(kib * 1024)
}

/// Runs one child per series count and prints a Markdown table.
pub fn run(args: Args) -> Res {
    if let Some(dir) = &args.dir {
        return match args.child {
            Some(n) => create(dir, n, args.samples),
            None if args.reopen => reopen(dir),
            None => Err("--dir needs --child or --reopen".into()),
        };
    }
    println!("### Memory per series ({} samples each, 11 labels)\n", args.samples);
    println!(
        "| series | create time | RSS growth, in head | bytes/series, in head | estimate index + head | \
         RSS growth, reopened from files | bytes/series, reopened |"
    );
    println!("|---|---|---|---|---|---|---|");
    let exe = std::env::current_exe().map_err(e)?;
    let run_child = |extra: &[&str], dir: &std::path::Path| -> Result<String, String> {
        let out = std::process::Command::new(&exe)
            .args(["series-memory", "--samples", &args.samples.to_string(), "--dir"])
            .arg(dir)
            .args(extra)
            .output()
            .map_err(e)?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    for &n in &args.series {
        let dir = tempfile::tempdir().map_err(e)?;
        let created = run_child(&["--child", &n.to_string()], dir.path())?;
        let reopened = run_child(&["--reopen"], dir.path())?;
        println!("| {n} | {created} | {reopened} |");
    }
    println!();
    Ok(())
}

/// Options that keep the background worker from flushing during a measurement.
fn options(dir: &Path) -> Options {
    let mut o = Options::new(dir);
    o.maintenance_interval = Duration::from_secs(3600);
    o.head_samples_max = usize::MAX;
    o.head_flush_interval = Duration::from_secs(24 * 3600);
    o.wal_sync = WalSync::Interval(Duration::from_secs(1));
    o
}

/// Creates `n` series in `dir` and prints the in-head columns of the table row.
fn create(dir: &Path, n: usize, samples: usize) -> Res {
    let db = Db::open(options(dir)).map_err(e)?;
    let before = rss_anon()?;
    let started = Instant::now();
    let mut i = 0;
    while i < n {
        let mut b = Batch::new();
        for k in i..(i + BATCH_SERIES).min(n) {
            let s =
                (0..samples as i64).map(|j| Sample::new(BASE + j * 10_000, (k as f64) + j as f64)).collect();
            b.push(labels(k), s);
        }
        i += b.series.len();
        db.append(&b).map_err(e)?;
    }
    let took = started.elapsed();
    let in_head = rss_anon()?.saturating_sub(before);
    let (index_bytes, head_bytes) = db.memory_bytes();
    let per = |bytes: u64| bytes as f64 / n.max(1) as f64;
    println!(
        "{:.1} s | {:.0} MiB | {:.0} | {:.0} + {:.0}",
        took.as_secs_f64(),
        in_head as f64 / (1 << 20) as f64,
        per(in_head),
        per(index_bytes as u64),
        per(head_bytes as u64),
    );
    // Flushes the head to partition files for `reopen`.
    db.close().map_err(e)
}

/// Opens the database in `dir` (all data in partition files) and prints the reopened columns.
fn reopen(dir: &Path) -> Res {
    let before = rss_anon()?;
    let db = Db::open(options(dir)).map_err(e)?;
    let grown = rss_anon()?.saturating_sub(before);
    let n = db.series_count();
    println!("{:.0} MiB | {:.0}", grown as f64 / (1 << 20) as f64, grown as f64 / n.max(1) as f64);
    db.close().map_err(e)
}

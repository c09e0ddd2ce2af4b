//! `strata-bench storage`: measurements of the storage engine alone.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use storage::{Batch, Db, Labels, Options, Sample, WalSync};

use crate::datagen::{Rng, Shape};

/// Flags of `strata-bench storage`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// What to measure: disk, head, append, startup, or all.
    #[arg(long, default_value = "all")]
    what: String,
    /// Hosts for the disk/head measurements (10 metrics each).
    #[arg(long, default_value_t = 100)]
    hosts: usize,
    /// Hours of data per series for disk/head (10 s interval).
    #[arg(long, default_value_t = 24)]
    hours: usize,
    /// Block grid in minutes for the disk measurement (blocks never cross a multiple of it).
    #[arg(long, default_value_t = 60)]
    block_grid_min: i64,
    /// Series for the startup measurement.
    #[arg(long, default_value_t = 1_000_000)]
    startup_series: usize,
    /// Seconds per append-throughput run.
    #[arg(long, default_value_t = 5)]
    append_secs: u64,
    /// Scratch directory (default: a temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Internal: open the database in DIR, print timing and memory, exit.
    #[arg(long, hide = true)]
    open_only: Option<PathBuf>,
}

type Res = Result<(), String>;

const BASE: i64 = 1_700_000_000_000;
/// The TSBS cpu fields, one metric each.
const METRICS: [&str; 10] = crate::tsbs::FIELDS;

fn host_labels(metric: &str, h: usize) -> Labels {
    crate::tsbs::hosts::synthetic_host_labels(&format!("cpu_{metric}"), h)
}

fn e(x: impl std::fmt::Display) -> String {
    x.to_string()
}

fn scratch(args: &Args, name: &str) -> Result<(Option<tempfile::TempDir>, PathBuf), String> {
    match &args.dir {
        Some(d) => {
            let p = d.join(name);
            let _ = std::fs::remove_dir_all(&p);
            Ok((None, p))
        }
        None => {
            let t = tempfile::tempdir().map_err(e)?;
            let p = t.path().to_path_buf();
            Ok((Some(t), p))
        }
    }
}

fn quiet(dir: &Path) -> Options {
    let mut o = Options::new(dir);
    o.maintenance_interval = Duration::from_secs(3600);
    o.head_samples_max = usize::MAX;
    o
}

/// Runs the selected measurements and prints Markdown tables.
pub fn run(args: Args) -> Res {
    if let Some(dir) = &args.open_only {
        return open_only(dir);
    }
    let all = args.what == "all";
    if all || args.what == "disk" || args.what == "head" {
        disk_and_head(&args)?;
    }
    if all || args.what == "append" {
        append(&args)?;
    }
    if all || args.what == "startup" {
        startup(&args)?;
    }
    Ok(())
}

fn dir_bytes(p: &Path) -> u64 {
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let path = e.path();
            n += if path.is_dir() { dir_bytes(&path) } else { e.metadata().map(|m| m.len()).unwrap_or(0) };
        }
    }
    n
}

fn disk_and_head(args: &Args) -> Res {
    let n = args.hours * 360;
    println!("### Disk and head per data shape\n");
    println!(
        "{} series ({} hosts x 10 metrics), {} samples each at 10 s ({} h)\n",
        args.hosts * 10,
        args.hosts,
        n,
        args.hours
    );
    println!("| shape | samples | disk bytes/sample | head bytes/sample | head bytes/series (index) |");
    println!("|---|---|---|---|---|");
    for shape in Shape::ALL {
        let (_t, dir) = scratch(args, shape.name())?;
        let mut o = quiet(&dir);
        o.block_grid_ms = args.block_grid_min * 60_000;
        let db = Db::open(o).map_err(e)?;
        let mut rng = Rng::new(42);
        let mut total = 0u64;
        // One batch per host: its 10 series, as a sender batches them.
        for h in 0..args.hosts {
            let mut b = Batch::new();
            for m in METRICS {
                let s = shape.series(&mut rng, BASE, 10_000, n);
                total += s.len() as u64;
                b.push(host_labels(m, h), s.into_iter().map(|(t, v)| Sample::new(t, v)).collect());
            }
            db.append(&b).map_err(e)?;
        }
        let (index_bytes, head_bytes) = db.memory_bytes();
        let series = db.series_count() as f64;
        db.flush().map_err(e)?;
        db.compact().map_err(e)?;
        let disk = dir_bytes(&dir.join("partitions"));
        println!(
            "| {} | {} | {:.3} | {:.3} | {:.0} |",
            shape.name(),
            total,
            disk as f64 / total as f64,
            head_bytes as f64 / total as f64,
            index_bytes as f64 / series
        );
        db.close().map_err(e)?;
    }
    println!();
    Ok(())
}

fn append(args: &Args) -> Res {
    println!("### Append throughput\n");
    println!("| WAL sync | writers | batch samples | samples/s | batches/s | fsyncs/s |");
    println!("|---|---|---|---|---|---|");
    let modes =
        [("per batch", WalSync::PerBatch), ("interval 100ms", WalSync::Interval(Duration::from_millis(100)))];
    for (mode, sync) in modes {
        for writers in [1usize, 4] {
            let (_t, dir) = scratch(args, &format!("append{writers}"))?;
            let mut o = quiet(&dir);
            o.wal_sync = sync;
            let db = Arc::new(Db::open(o).map_err(e)?);
            let series_per_writer = 1000;
            let per_series = 10;
            let deadline = Instant::now() + std::time::Duration::from_secs(args.append_secs);
            let started = Instant::now();
            let threads: Vec<_> = (0..writers)
                .map(|w| {
                    let db = db.clone();
                    std::thread::spawn(move || -> Result<(u64, u64), String> {
                        let labels: Vec<Labels> = (0..series_per_writer)
                            .map(|i| host_labels(METRICS[i % 10], w * 100_000 + i / 10))
                            .collect();
                        let (mut samples, mut batches) = (0u64, 0u64);
                        let mut t = BASE;
                        let mut v = 0.0;
                        while Instant::now() < deadline {
                            let mut b = Batch::new();
                            for l in &labels {
                                let s: Vec<Sample> = (0..per_series)
                                    .map(|k| Sample::new(t + k * 10_000, v + k as f64))
                                    .collect();
                                b.push(l.clone(), s);
                            }
                            t += per_series * 10_000;
                            v += 1.0;
                            samples += db.append(&b).map_err(e)?.appended;
                            batches += 1;
                        }
                        Ok((samples, batches))
                    })
                })
                .collect();
            let (mut samples, mut batches) = (0, 0);
            for t in threads {
                let (s, b) = t.join().map_err(|_| "writer panicked".to_string())??;
                samples += s;
                batches += b;
            }
            let secs = started.elapsed().as_secs_f64();
            let fsyncs = db.wal_stats().fsyncs;
            println!(
                "| {mode} | {writers} | {} | {:.0} | {:.0} | {:.0} |",
                series_per_writer * per_series as usize,
                samples as f64 / secs,
                batches as f64 / secs,
                fsyncs as f64 / secs
            );
            db.close().map_err(e)?;
        }
    }
    println!();
    Ok(())
}

fn startup(args: &Args) -> Res {
    let n = args.startup_series;
    println!("### Startup with {n} series\n");
    let (_t, dir) = scratch(args, "startup")?;
    {
        let db = Db::open(quiet(&dir)).map_err(e)?;
        let mut b = Batch::new();
        for i in 0..n {
            b.push(
                host_labels(METRICS[i % 10], i / 10),
                vec![Sample::new(BASE, i as f64), Sample::new(BASE + 10_000, 1.0)],
            );
            if b.series.len() == 10_000 {
                db.append(&b).map_err(e)?;
                b = Batch::new();
            }
        }
        db.append(&b).map_err(e)?;
        // Dropped without close: the next open replays the WAL.
    }
    println!("| state on disk | open time | peak RSS after open |");
    println!("|---|---|---|");
    report_open(&dir, "all in WAL (replay)")?;
    {
        let db = Db::open(quiet(&dir)).map_err(e)?;
        db.close().map_err(e)?; // flushes to partition files
    }
    report_open(&dir, "all in partition files")?;
    println!();
    Ok(())
}

fn report_open(dir: &Path, what: &str) -> Res {
    let exe = std::env::current_exe().map_err(e)?;
    let out =
        std::process::Command::new(exe).args(["storage", "--open-only"]).arg(dir).output().map_err(e)?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    println!("| {what} | {} |", text.trim());
    Ok(())
}

fn open_only(dir: &Path) -> Res {
    let started = Instant::now();
    let db = Db::open(quiet(dir)).map_err(e)?;
    let took = started.elapsed();
    let hwm = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .map(|l| l.trim_start_matches("VmHWM:").trim().to_string())
        })
        .unwrap_or_else(|| "?".into());
    println!("{:.2} s | {} ({} series) |", took.as_secs_f64(), hwm, db.series_count());
    drop(db);
    Ok(())
}

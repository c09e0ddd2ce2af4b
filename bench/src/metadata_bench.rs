//! `strata-bench metadata`: latency of the lookups Grafana's metric and label browsers make
//! (`labels`, `label/<name>/values`, `series`, with and without one `match[]`), over a database
//! of TSBS-like series: `--metrics` metric names times `series / metrics` hosts, 11 labels each.
//!
//! Each lookup is timed two ways: in the storage layer (a fresh snapshot and one `Querier` call)
//! and end to end through the HTTP handler (strata's router, request to collected JSON body, no
//! socket). Both run while the data is in the head, then again after a flush put it in a
//! partition file, and each with all of time, the last hour, and a range ending in the middle
//! of every series' data (so the range test has to look inside chunks or blocks).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use storage::{Batch, Db, Labels, MatchOp, Matcher, Options, Querier, Sample, WalSync};
use strata::state::AppState;
use tower::ServiceExt;

/// Flags of `strata-bench metadata`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Series in the database.
    #[arg(long, default_value_t = 1_000_000)]
    series: usize,
    /// Distinct metric names (hosts = series / metrics).
    #[arg(long, default_value_t = 100)]
    metrics: usize,
    /// Samples per series (15 s apart).
    #[arg(long, default_value_t = 4)]
    samples: usize,
    /// Timed runs of each lookup (after one warm-up run).
    #[arg(long, default_value_t = 30)]
    iterations: usize,
    /// Only the lookup with this name, or if none has it, those whose name contains it.
    #[arg(long)]
    only: Option<String>,
    /// Only with the data in this place: `head` or `file` (after a flush). Default: both.
    #[arg(long, value_parser = ["head", "file"])]
    phase: Option<String>,
    /// Only the time ranges whose name contains this (`all time`, `last hour`,
    /// `ending mid-data`).
    #[arg(long)]
    range: Option<String>,
    /// Database directory (default: a temporary directory). Any previous content is removed.
    #[arg(long)]
    dir: Option<PathBuf>,
}

type Res = Result<(), String>;

const BASE: i64 = 1_700_000_000_000;
const INTERVAL: i64 = 15_000;
const MEASUREMENTS: [&str; 10] =
    ["cpu", "mem", "disk", "diskio", "net", "kernel", "nginx", "postgresql", "redis", "system"];
const FIELDS: [&str; 10] = [
    "usage_user",
    "usage_system",
    "usage_idle",
    "usage_nice",
    "usage_iowait",
    "bytes_in",
    "bytes_out",
    "errors",
    "latency",
    "count",
];

/// The `i`-th metric name: `cpu_usage_user`, `cpu_usage_system`, ..., `mem_usage_user`, ...
fn metric_name(i: usize) -> String {
    let m = MEASUREMENTS[(i / FIELDS.len()) % MEASUREMENTS.len()];
    let f = FIELDS[i % FIELDS.len()];
    let round = i / (FIELDS.len() * MEASUREMENTS.len());
    if round == 0 { format!("{m}_{f}") } else { format!("{m}_{f}_{round}") }
}

fn host_labels(metric: &str, h: usize) -> Labels {
    crate::tsbs::hosts::synthetic_host_labels(metric, h)
}

fn e(x: impl std::fmt::Display) -> String {
    x.to_string()
}

/// One lookup: how to run it on a snapshot, and the same as an API path.
struct Lookup {
    label: &'static str,
    path: &'static str,
    run: fn(&dyn Querier, i64, i64) -> storage::Result<usize>,
}

fn name_is(value: &str) -> Vec<Matcher> {
    vec![Matcher::equal("__name__", value)]
}

fn host_1() -> Vec<Matcher> {
    vec![Matcher::equal("hostname", "host_1")]
}

fn lookups() -> Vec<Lookup> {
    vec![
        Lookup {
            label: "labels",
            path: "/api/v1/labels",
            run: |q, a, b| Ok(q.label_names(&[], a, b)?.len()),
        },
        Lookup {
            label: "labels match[]=cpu_usage_user",
            path: "/api/v1/labels?match[]=cpu_usage_user",
            run: |q, a, b| Ok(q.label_names(&name_is("cpu_usage_user"), a, b)?.len()),
        },
        Lookup {
            label: "labels match[]={hostname=\"host_1\"}",
            path: "/api/v1/labels?match[]=%7Bhostname%3D%22host_1%22%7D",
            run: |q, a, b| Ok(q.label_names(&host_1(), a, b)?.len()),
        },
        Lookup {
            label: "label/__name__/values",
            path: "/api/v1/label/__name__/values",
            run: |q, a, b| Ok(q.label_values("__name__", &[], a, b)?.len()),
        },
        Lookup {
            label: "label/hostname/values",
            path: "/api/v1/label/hostname/values",
            run: |q, a, b| Ok(q.label_values("hostname", &[], a, b)?.len()),
        },
        Lookup {
            label: "label/hostname/values match[]=cpu_usage_user",
            path: "/api/v1/label/hostname/values?match[]=cpu_usage_user",
            run: |q, a, b| Ok(q.label_values("hostname", &name_is("cpu_usage_user"), a, b)?.len()),
        },
        Lookup {
            label: "label/__name__/values match[]={hostname=\"host_1\"}",
            path: "/api/v1/label/__name__/values?match[]=%7Bhostname%3D%22host_1%22%7D",
            run: |q, a, b| Ok(q.label_values("__name__", &host_1(), a, b)?.len()),
        },
        Lookup {
            label: "label/region/values match[]=cpu_usage_user",
            path: "/api/v1/label/region/values?match[]=cpu_usage_user",
            run: |q, a, b| Ok(q.label_values("region", &name_is("cpu_usage_user"), a, b)?.len()),
        },
        Lookup {
            label: "series match[]={hostname=\"host_1\"}",
            path: "/api/v1/series?match[]=%7Bhostname%3D%22host_1%22%7D",
            run: |q, a, b| Ok(q.select(&host_1(), a, b)?.len()),
        },
        Lookup {
            label: "series match[]=cpu_usage_user",
            path: "/api/v1/series?match[]=cpu_usage_user",
            run: |q, a, b| Ok(q.select(&name_is("cpu_usage_user"), a, b)?.len()),
        },
        Lookup {
            label: "series match[]={hostname=~\"host_1.*\"}",
            path: "/api/v1/series?match[]=%7Bhostname%3D~%22host_1.*%22%7D",
            run: |q, a, b| {
                let m = Matcher::new(MatchOp::Regex, "hostname", "host_1.*")?;
                Ok(q.select(&[m], a, b)?.len())
            },
        },
    ]
}

/// The lookups `--only` selects.
fn selected(args: &Args) -> Vec<Lookup> {
    let Some(only) = args.only.as_deref() else { return lookups() };
    if lookups().iter().any(|l| l.label == only) {
        lookups().into_iter().filter(|l| l.label == only).collect()
    } else {
        lookups().into_iter().filter(|l| l.label.contains(only)).collect()
    }
}

/// p50, p99 and max in milliseconds.
fn summary(mut times: Vec<Duration>) -> (f64, f64, f64) {
    times.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let at = |q: f64| times.get(((times.len() - 1) as f64 * q).round() as usize).copied().unwrap_or_default();
    (ms(at(0.5)), ms(at(0.99)), ms(times.last().copied().unwrap_or_default()))
}

fn time_n(n: usize, mut f: impl FnMut() -> Result<usize, String>) -> Result<(usize, Vec<Duration>), String> {
    let answer = f()?;
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed());
    }
    Ok((answer, times))
}

fn build(dir: &std::path::Path, args: &Args) -> Result<Db, String> {
    let mut o = Options::new(dir);
    o.maintenance_interval = Duration::from_secs(3600);
    o.head_samples_max = usize::MAX;
    o.wal_sync = WalSync::Interval(Duration::from_secs(1));
    let db = Db::open(o).map_err(e)?;
    let metrics: Vec<String> = (0..args.metrics).map(metric_name).collect();
    let hosts = args.series.div_ceil(args.metrics.max(1));
    let started = Instant::now();
    let mut batch = Batch::new();
    let mut made = 0;
    'hosts: for h in 0..hosts {
        for m in &metrics {
            if made == args.series {
                break 'hosts;
            }
            let samples =
                (0..args.samples).map(|i| Sample::new(BASE + i as i64 * INTERVAL, (h + i) as f64)).collect();
            batch.push(host_labels(m, h), samples);
            made += 1;
            if batch.series.len() == 10_000 {
                db.append(&batch).map_err(e)?;
                batch = Batch::new();
            }
        }
    }
    if !batch.series.is_empty() {
        db.append(&batch).map_err(e)?;
    }
    eprintln!(
        "built {made} series ({hosts} hosts x {} metrics) in {:.1} s",
        args.metrics,
        started.elapsed().as_secs_f64()
    );
    Ok(db)
}

/// Runs the measurements and prints Markdown tables.
pub fn run(args: Args) -> Res {
    let tmp;
    let dir = match &args.dir {
        Some(d) => {
            let _ = std::fs::remove_dir_all(d);
            d.clone()
        }
        None => {
            tmp = tempfile::tempdir().map_err(e)?;
            tmp.path().to_path_buf()
        }
    };
    let db = Arc::new(build(&dir, &args)?);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(e)?;
    let state = Arc::new(AppState::new());
    state.set_db(Arc::clone(&db));
    let router = strata::server::router(Arc::clone(&state));
    let last = BASE + (args.samples as i64 - 1) * INTERVAL;
    // Grafana's default "last 1 hour" ending just after the data, and a range ending in the
    // middle of every series' samples: there a series' newest timestamp proves nothing and the
    // heads or files are asked.
    let ranges = [
        ("all time", i64::MIN, i64::MAX),
        ("last hour", last + 60_000 - 3_600_000, last + 60_000),
        ("ending mid-data", BASE - 3_600_000, BASE + INTERVAL),
    ];
    println!("### Metadata lookups, {} series, {} metric names\n", args.series, args.metrics);
    for (phase, flag) in [("head", "head"), ("partition file", "file")] {
        if args.phase.as_deref().is_some_and(|p| p != flag) {
            continue;
        }
        if flag == "file" {
            db.flush().map_err(e)?;
        }
        for (range_name, mint, maxt) in ranges {
            if args.range.as_deref().is_some_and(|r| !range_name.contains(r)) {
                continue;
            }
            println!(
                "\nData in the {phase}; range: {range_name}; {} runs each, milliseconds\n",
                args.iterations
            );
            println!(
                "| lookup | answer size | storage p50 | storage p99 | storage max | HTTP p50 | HTTP p99 | HTTP max |"
            );
            println!("|---|---|---|---|---|---|---|---|");
            for l in selected(&args) {
                let (answer, storage_times) = time_n(args.iterations, || {
                    let snapshot = db.snapshot();
                    (l.run)(&snapshot, mint, maxt).map_err(e)
                })?;
                let uri = if mint == i64::MIN {
                    l.path.to_string()
                } else {
                    let sep = if l.path.contains('?') { '&' } else { '?' };
                    format!("{}{sep}start={}&end={}", l.path, mint as f64 / 1000.0, maxt as f64 / 1000.0)
                };
                let (_, http_times) = time_n(args.iterations, || {
                    runtime.block_on(async {
                        let request = Request::get(uri.as_str()).body(Body::empty()).map_err(e)?;
                        let response = router.clone().oneshot(request).await.map_err(e)?;
                        let status = response.status();
                        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.map_err(e)?;
                        if status != StatusCode::OK {
                            return Err(format!("{uri}: {status} {}", String::from_utf8_lossy(&body)));
                        }
                        Ok(body.len())
                    })
                })?;
                let (s50, s99, smax) = summary(storage_times);
                let (h50, h99, hmax) = summary(http_times);
                println!(
                    "| {} | {answer} | {s50:.2} | {s99:.2} | {smax:.2} | {h50:.2} | {h99:.2} | {hmax:.2} |",
                    l.label.replace('|', "\\|")
                );
            }
        }
    }
    db.close().map_err(e)
}

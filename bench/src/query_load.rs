//! `strata-bench query-load`: query throughput and latency with concurrent clients while ingest
//! runs, with parallel query evaluation off and on (`--query.max-parallelism`).
//!
//! A TSBS cpu-only database (`--hosts` hosts x 10 `cpu_usage_*` fields, `--hours` of history at
//! 10 s) is loaded through strata's router (remote write) and flushed into partition files.
//! Then, for each mode, writer threads keep remote-writing newer data at `--ingest-rate`
//! samples/s while `--clients` client threads send a mix of TSBS queries (plus a `rate` panel)
//! over the history through the router for `--secs` seconds, one after the other without pause.
//! Requests go through strata's own router without a socket (as `metadata` does), so HTTP
//! parsing and JSON encoding are measured, TCP is not. Printed: queries/s and p50/p99 latency
//! per query type, and the ingest rate achieved during the run.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use storage::{Db, Options, WalSync};
use strata::api::query::{QueryConfig, QueryService};
use strata::state::AppState;
use tower::ServiceExt;

use crate::tsbs::queries::{self, Api, Query};
use crate::tsbs::{Dataset, ValueModel, encode};

/// Flags of `strata-bench query-load`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Hosts (10 series each).
    #[arg(long, default_value_t = 1000)]
    hosts: usize,
    /// Hours of history, 10 s apart, loaded before the measurement.
    #[arg(long, default_value_t = 6)]
    hours: i64,
    /// Concurrent query clients.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// Ingest writer threads during the measurement.
    #[arg(long, default_value_t = 2)]
    writers: usize,
    /// Target ingest rate during the measurement, samples/s over all writers (0: no ingest).
    #[arg(long, default_value_t = 500_000)]
    ingest_rate: u64,
    /// Seconds each mode is measured.
    #[arg(long, default_value_t = 30)]
    secs: u64,
    /// Which modes to run: `off` (every query on one thread), `on` (the shared pool), `both`.
    #[arg(long, default_value = "both", value_parser = ["off", "on", "both"])]
    parallelism: String,
    /// Pool threads when parallelism is on (`--query.max-parallelism`; 0: one per core).
    #[arg(long, default_value_t = 0)]
    max_parallelism: usize,
    /// Only query types whose name contains this.
    #[arg(long)]
    only: Option<String>,
    /// Database directory (default: a temporary directory). Any previous content is removed.
    #[arg(long)]
    dir: Option<PathBuf>,
}

type Res = Result<(), String>;

fn e(x: impl std::fmt::Display) -> String {
    x.to_string()
}

/// The query mix: TSBS types from small dashboard panels to whole-fleet scans.
const TYPES: [&str; 7] = [
    "single-groupby-1-1-1",
    "single-groupby-5-8-1",
    "cpu-max-all-8",
    "double-groupby-1",
    "high-cpu-all",
    "lastpoint",
    "groupby-orderby-limit",
];

/// Different random hosts and windows per type.
const PER_TYPE: usize = 16;

/// Rows per remote-write request (as the TSBS loaders' batch size).
const BATCH_ROWS: usize = 5_000;

/// The queries of the mix, interleaved by type; plus `rate-all`, a Grafana-style panel over
/// every host: `sum by (region) (rate(cpu_usage_user[5m]))` over the last hour at 1 min.
fn mix(ds: &Dataset, only: Option<&str>) -> Result<Vec<Query>, String> {
    let types: Vec<&str> = TYPES.iter().copied().filter(|t| only.is_none_or(|o| t.contains(o))).collect();
    let generated = queries::generate(ds, &types, PER_TYPE)?;
    let mut by_type: Vec<Vec<Query>> =
        types.iter().map(|t| generated.iter().filter(|q| q.kind == *t).cloned().collect()).collect();
    if only.is_none_or(|o| "rate-all".contains(o)) {
        let end = ds.last_ms();
        by_type.push(
            (0..PER_TYPE as i64)
                .map(|i| Query {
                    kind: "rate-all",
                    promql: "sum by (region) (rate(cpu_usage_user[5m]))".into(),
                    api: Api::Range {
                        start_ms: end - 3_600_000 - i * 60_000,
                        end_ms: end - i * 60_000,
                        step_ms: 60_000,
                    },
                })
                .collect(),
        );
    }
    let mut out = Vec::new();
    for i in 0..PER_TYPE {
        out.extend(by_type.iter().filter_map(|qs| qs.get(i).cloned()));
    }
    if out.is_empty() {
        return Err("no query type matches --only".into());
    }
    Ok(out)
}

fn prw(router: &axum::Router, runtime: &tokio::runtime::Runtime, body: &[u8]) -> Res {
    runtime.block_on(async {
        let request = Request::post("/api/v1/write")
            .header("Content-Type", "application/x-protobuf")
            .header("Content-Encoding", "snappy")
            .header("X-Prometheus-Remote-Write-Version", "0.1.0")
            .body(Body::from(body.to_vec()))
            .map_err(e)?;
        let response = router.clone().oneshot(request).await.map_err(e)?;
        let status = response.status();
        if !status.is_success() {
            let body = axum::body::to_bytes(response.into_body(), 1 << 16).await.map_err(e)?;
            return Err(format!("remote write: {status} {}", String::from_utf8_lossy(&body)));
        }
        Ok(())
    })
}

fn query(router: &axum::Router, runtime: &tokio::runtime::Runtime, path: &str) -> Result<usize, String> {
    runtime.block_on(async {
        let request = Request::get(path).body(Body::empty()).map_err(e)?;
        let response = router.clone().oneshot(request).await.map_err(e)?;
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.map_err(e)?;
        if status != StatusCode::OK {
            return Err(format!("{path}: {status} {}", String::from_utf8_lossy(&body)));
        }
        Ok(body.len())
    })
}

/// Remote-write requests per writer, consumed in order across the modes.
struct Feed {
    requests: Vec<Vec<encode::Request>>,
    next: Vec<usize>,
}

/// What one mode measured.
struct Outcome {
    latencies: BTreeMap<&'static str, Vec<Duration>>,
    ingested: u64,
    ingest_ran_out: bool,
    elapsed: Duration,
}

#[allow(clippy::too_many_arguments)]
fn measure(
    args: &Args,
    db: &Arc<Db>,
    runtime: &tokio::runtime::Runtime,
    config: &QueryConfig,
    mix: &[Query],
    feed: &mut Feed,
) -> Result<Outcome, String> {
    let state = Arc::new(AppState::new().with_query(QueryService::new(config)));
    state.set_db(Arc::clone(db));
    let router = strata::server::router(Arc::clone(&state));
    let stop = AtomicBool::new(false);
    let ingested = AtomicU64::new(0);
    let ran_out = AtomicBool::new(false);
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.secs);
    let writers = feed.requests.len();
    let per_writer_rate = args.ingest_rate as f64 / writers.max(1) as f64;
    let results = std::thread::scope(|s| -> Result<Vec<Vec<(&'static str, Duration)>>, String> {
        let mut ingest = Vec::new();
        for (w, (requests, next)) in feed.requests.iter().zip(feed.next.iter_mut()).enumerate() {
            let (router, stop, ingested, ran_out) = (&router, &stop, &ingested, &ran_out);
            if args.ingest_rate == 0 {
                break;
            }
            ingest.push(s.spawn(move || -> Res {
                let mut sent = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let Some(req) = requests.get(*next) else {
                        ran_out.store(true, Ordering::Relaxed);
                        break;
                    };
                    // Paced: the next request goes when the ones before are due.
                    let due = started + Duration::from_secs_f64(sent as f64 / per_writer_rate);
                    if let Some(wait) = due.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait.min(Duration::from_millis(50)));
                        continue;
                    }
                    prw(router, runtime, &req.body).map_err(|m| format!("writer {w}: {m}"))?;
                    *next += 1;
                    sent += req.points;
                    ingested.fetch_add(req.points, Ordering::Relaxed);
                }
                Ok(())
            }));
        }
        let clients: Vec<_> = (0..args.clients)
            .map(|c| {
                let router = &router;
                s.spawn(move || -> Result<Vec<(&'static str, Duration)>, String> {
                    let mut times = Vec::new();
                    let mut i = c * mix.len() / args.clients.max(1);
                    while Instant::now() < deadline {
                        let q = &mix[i % mix.len()];
                        let t = Instant::now();
                        query(router, runtime, &q.path())?;
                        times.push((q.kind, t.elapsed()));
                        i += 1;
                    }
                    Ok(times)
                })
            })
            .collect();
        let mut out = Vec::new();
        let mut first_error = None;
        for c in clients {
            match c.join().map_err(|_| "query client panicked".to_string()).and_then(|r| r) {
                Ok(times) => out.push(times),
                Err(m) => first_error = first_error.or(Some(m)),
            }
        }
        stop.store(true, Ordering::Relaxed);
        for w in ingest {
            if let Err(m) = w.join().map_err(|_| "writer panicked".to_string()).and_then(|r| r) {
                first_error = first_error.or(Some(m));
            }
        }
        match first_error {
            Some(m) => Err(m),
            None => Ok(out),
        }
    })?;
    let elapsed = started.elapsed();
    let mut latencies: BTreeMap<&'static str, Vec<Duration>> = BTreeMap::new();
    for (kind, d) in results.into_iter().flatten() {
        latencies.entry(kind).or_default().push(d);
    }
    Ok(Outcome {
        latencies,
        ingested: ingested.load(Ordering::Relaxed),
        ingest_ran_out: ran_out.load(Ordering::Relaxed),
        elapsed,
    })
}

fn ms_at(sorted: &[Duration], q: f64) -> f64 {
    let i = ((sorted.len().saturating_sub(1)) as f64 * q).round() as usize;
    sorted.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

fn report(mode: &str, o: &mut Outcome) {
    let secs = o.elapsed.as_secs_f64();
    let total: usize = o.latencies.values().map(Vec::len).sum();
    println!("\n#### Parallelism {mode}\n");
    println!(
        "{total} queries in {secs:.1} s: **{:.1} queries/s**; ingest **{:.0} samples/s**{}\n",
        total as f64 / secs,
        o.ingested as f64 / secs,
        if o.ingest_ran_out { " (the prepared ingest data ran out before the end)" } else { "" }
    );
    println!("| query type | queries | queries/s | p50 ms | p99 ms |");
    println!("|---|---|---|---|---|");
    for (kind, times) in &mut o.latencies {
        times.sort_unstable();
        println!(
            "| {kind} | {} | {:.2} | {:.1} | {:.1} |",
            times.len(),
            times.len() as f64 / secs,
            ms_at(times, 0.5),
            ms_at(times, 0.99)
        );
    }
}

/// Runs the measurement and prints Markdown.
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
    let mut o = Options::new(&dir);
    o.maintenance_interval = Duration::from_secs(3600);
    o.wal_sync = WalSync::Interval(Duration::from_secs(1));
    let db = Arc::new(Db::open(o).map_err(e)?);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(e)?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    // History ending at a whole hour, as TSBS's default start is one.
    let interval_ms = 10_000;
    let epochs = (args.hours * 3_600_000 / interval_ms) as usize;
    let history = Dataset {
        hosts: args.hosts,
        start_ms: 1_700_000_000_000 / 3_600_000 * 3_600_000,
        interval_ms,
        epochs,
        model: ValueModel::Tsbs,
        seed: 1,
    };
    let started = Instant::now();
    let state = Arc::new(AppState::new());
    state.set_db(Arc::clone(&db));
    let loader = strata::server::router(Arc::clone(&state));
    for rounds in encode::prw_requests(&history, BATCH_ROWS, 1, threads) {
        for req in rounds {
            prw(&loader, &runtime, &req.body)?;
        }
    }
    db.flush().map_err(e)?;
    eprintln!(
        "loaded {} samples ({} series) in {:.1} s and flushed them",
        history.points(),
        args.hosts * 10,
        started.elapsed().as_secs_f64()
    );
    let modes: Vec<&str> = match args.parallelism.as_str() {
        "both" => vec!["off", "on"],
        m => vec![m],
    };
    // Newer data for the writers: enough for every mode at the target rate, plus a margin.
    let samples_needed =
        args.ingest_rate.saturating_mul(args.secs).saturating_mul(modes.len() as u64) * 5 / 4;
    let live_epochs = (samples_needed / (args.hosts as u64 * 10).max(1)) as usize + 1;
    let live = Dataset { start_ms: history.end_ms(), epochs: live_epochs, ..history };
    let started = Instant::now();
    let requests = if args.ingest_rate == 0 {
        Vec::new()
    } else {
        encode::prw_requests(&live, BATCH_ROWS / args.writers.max(1), args.writers.max(1), threads)
    };
    let mut feed = Feed { next: vec![0; requests.len()], requests };
    eprintln!("encoded {} samples for ingest in {:.1} s", live.points(), started.elapsed().as_secs_f64());
    let mix = mix(&history, args.only.as_deref())?;
    println!(
        "### Query load: {} hosts x 10 fields, {} h at 10 s ({} samples), {} clients, {} writers at {} samples/s, {} s per mode, {} cores\n",
        args.hosts,
        args.hours,
        history.points(),
        args.clients,
        args.writers,
        args.ingest_rate,
        args.secs,
        threads
    );
    println!("Query mix (round robin, {PER_TYPE} variants each):\n");
    for q in mix.iter().take(mix.len() / PER_TYPE) {
        println!("- {}: `{}`", q.kind, q.promql.replace('|', "\\|"));
    }
    for mode in modes {
        let config = QueryConfig {
            max_parallelism: if mode == "on" { args.max_parallelism } else { 1 },
            ..QueryConfig::default()
        };
        if mode == "on" && config.pool().is_none() {
            eprintln!("parallelism on: this machine has one core, so no pool is made");
        }
        let mut outcome = measure(&args, &db, &runtime, &config, &mix, &mut feed)?;
        report(mode, &mut outcome);
    }
    db.close().map_err(e)
}

//! `strata-bench compare`: the TSBS devops workload on strata and on whichever of
//! VictoriaMetrics, Prometheus and InfluxDB are installed, one system at a time.
//!
//! For every system and every write protocol it accepts: start it on loopback with a fresh data
//! directory and default settings, load the same pre-built requests ([`load`]), get it to flush
//! and merge ([`servers::Server::settle`]), run the queries on the remote-write-loaded instance
//! (strata's answers are the reference every peer is compared with, [`query_run`]), count the
//! points it stored by query ([`stored`]), stop it cleanly and measure its data on disk. Then
//! write `report.md` and SVG plots to the output directory. The harness installs nothing and
//! tunes nothing, with two exceptions the report states: Prometheus gets an out-of-order window
//! when the rows do not arrive in time order (`--arrival`), and strata gets any `--strata-arg`.

mod answers;
#[cfg(test)]
mod arrival;
pub mod client_floor;
mod http;
mod load;
mod plots;
mod procstat;
mod query_run;
mod report;
mod servers;
mod stored;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::tsbs::Dataset;
use crate::tsbs::encode::{self, Arrival, Schedule};
use crate::tsbs::gen_cmd::DatasetArgs;
use crate::tsbs::queries::{self, Query};
use http::Http;
use load::{LoadResult, Plan};
use query_run::{Mismatch, Timing};
use servers::{Found, Protocol, Server, System, WalBytes};

/// Flags of `strata-bench compare`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    dataset: DatasetArgs,
    /// Rows per write request, for both protocols (tsbs_load_influx's --batch-size); with
    /// `--arrival by-host`, fewer when a round of requests (one per worker) would cover more than
    /// 20 min of data.
    #[arg(long, default_value_t = 10_000)]
    batch_size: usize,
    /// The order rows reach each system (the same for both protocols). With any but by-host,
    /// Prometheus gets an out-of-order window covering the data.
    #[arg(long, value_enum, default_value_t = Arrival::ByHost)]
    arrival: Arrival,
    /// Concurrent writers (tsbs_load_influx's --workers).
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// gzip line-protocol bodies (tsbs_load_influx's default).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    gzip: bool,
    /// Ask for gzip-compressed query answers (`Accept-Encoding: gzip`), as Go's HTTP client does
    /// on every request unless told not to (TSBS's query runner, Grafana's data source): the
    /// timings then include each system's compression. `false` times uncompressed answers.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    gzip_answers: bool,
    /// Queries of each type (each type's queries differ in hosts and window).
    #[arg(long, default_value_t = 10)]
    queries_per_type: usize,
    /// Concurrent query clients of the timed passes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,8")]
    clients: Vec<usize>,
    /// Rounds of timed passes. 1: each system's passes run right after its load, on the loaded
    /// server. More: after every load, each round starts every PromQL system on its data at
    /// once and times every type once per system, the systems' passes of a type back to back
    /// (the order rotating from round to round); a type's figures pool all rounds, so a slow
    /// phase of a shared host falls on every system rather than on whichever ran then.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    query_rounds: u32,
    /// Query types to run, comma-separated (default: the fifteen TSBS types). The cardinality
    /// types (count-all, sum-by-region, label-values, label-names, series-one-host,
    /// series-regex) run only when named; `cardinality` names them all.
    #[arg(long, value_delimiter = ',')]
    query_types: Vec<String>,
    /// Load and measure disk only, no queries.
    #[arg(long)]
    no_queries: bool,
    /// Peers not to run, comma-separated: victoria-metrics, prometheus, influxdb.
    #[arg(long, value_delimiter = ',')]
    skip: Vec<String>,
    /// The strata binary (default: this workspace's target/release/strata; run.sh builds it).
    #[arg(long)]
    strata_bin: Option<PathBuf>,
    /// A flag for the strata server, added after the harness's own (repeat for more, e.g.
    /// `--strata-arg=--ooo-window=30d`). The report's command line shows it.
    #[arg(long, allow_hyphen_values = true)]
    strata_arg: Vec<String>,
    /// Directory for report.md and the plots (default: target/bench-compare/<UTC time>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Keep each system's data directory (under the output directory) instead of deleting it.
    #[arg(long)]
    keep_data: bool,
}

/// One load of one system over one protocol, and what was measured.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// The system.
    pub system: System,
    /// Its version.
    pub version: String,
    /// The protocol it was loaded with.
    pub protocol: Protocol,
    /// The load's figures.
    pub load: LoadResult,
    /// The write-ahead log on disk right after the load, before the flush and merge.
    pub wal_after_load: WalBytes,
    /// Points stored, counted by query after the load and settling ([`stored`]), or why they
    /// could not be counted.
    pub stored: Result<u64, String>,
    /// Bytes of the data directory after shutdown (see `System::disk_note`).
    pub disk_after_shutdown: u64,
    /// Bytes measured before shutdown where that is the system's figure (Prometheus snapshot).
    pub disk_settled: Option<u64>,
    /// Query timings (remote-write runs of PromQL systems).
    pub timings: Vec<Timing>,
    /// Why the run failed, if it did.
    pub error: Option<String>,
}

impl RunResult {
    /// "system (protocol)".
    pub fn label(&self) -> String {
        format!("{} ({})", self.system.name(), self.protocol.name())
    }

    /// The disk figure: the settled measurement where there is one, else the data after shutdown.
    pub fn disk_figure(&self) -> u64 {
        self.disk_settled.unwrap_or(self.disk_after_shutdown)
    }

    /// Disk bytes per acknowledged point.
    pub fn bytes_per_point(&self) -> f64 {
        self.disk_figure() as f64 / self.load.points.max(1) as f64
    }

    /// WAL bytes (right after the load) per acknowledged point, if the system has a WAL.
    pub fn wal_bytes_per_point(&self) -> Option<f64> {
        self.wal_after_load.wal.map(|b| b as f64 / self.load.points.max(1) as f64)
    }

    /// Whether the count of stored points is exactly the points generated.
    pub fn stored_all(&self, generated: u64) -> bool {
        self.stored == Ok(generated)
    }

    /// The timing of `kind` at `clients`, if measured.
    pub fn timing(&self, kind: &str, clients: usize) -> Option<&Timing> {
        self.timings.iter().find(|t| t.kind == kind && t.clients == clients)
    }
}

/// What the report needs besides the runs.
pub struct Context {
    /// When the comparison started, RFC 3339.
    pub started_utc: String,
    /// The exact command line.
    pub command: String,
    /// CPU, cores, memory, kernel.
    pub machine: String,
    /// 1-minute load average at start and end.
    pub load_start: f64,
    /// 1-minute load average at the end.
    pub load_end: f64,
    /// The dataset.
    pub dataset: Dataset,
    /// Loader settings.
    pub workers: usize,
    /// The order rows reach each system.
    pub arrival: Arrival,
    /// Rows per request: with `by-host`, per worker and round (after the round cut); else per
    /// batch of the shared queue.
    pub batch_rows: usize,
    /// Seconds of data per round of requests (`by-host`) or per batch (the others).
    pub round_secs: i64,
    /// Batches in the shared queue (0 with `by-host`).
    pub batches: usize,
    /// Prometheus' out-of-order window, seconds, if it was given one.
    pub prometheus_ooo_window_secs: Option<i64>,
    /// Flags added to strata's command line (`--strata-arg`).
    pub strata_args: Vec<String>,
    /// Whether line protocol was gzipped.
    pub gzip: bool,
    /// Whether query answers were asked for gzipped.
    pub gzip_answers: bool,
    /// Seconds spent building request bodies.
    pub generate_secs: f64,
    /// Queries per type.
    pub queries_per_type: usize,
    /// Query client counts.
    pub clients: Vec<usize>,
    /// Rounds of timed passes (see `--query-rounds`).
    pub query_rounds: u32,
    /// The query types run.
    pub query_types: Vec<&'static str>,
    /// Those of them answered by the metadata APIs (series, label names, label values).
    pub metadata_types: Vec<&'static str>,
    /// Peers not installed.
    pub absent: Vec<System>,
    /// Answer mismatches.
    pub mismatches: Vec<Mismatch>,
    /// Per query type, series (or metadata entries) and points in strata's answers (what the
    /// comparison covered).
    pub answer_sizes: Vec<(&'static str, usize, usize)>,
}

fn parse_skip(names: &[String]) -> Result<Vec<System>, String> {
    names
        .iter()
        .map(|n| match n.as_str() {
            "victoria-metrics" | "victoriametrics" | "vm" => Ok(System::VictoriaMetrics),
            "prometheus" => Ok(System::Prometheus),
            "influxdb" | "influxd" => Ok(System::InfluxDb),
            other => Err(format!("--skip: unknown system {other:?}")),
        })
        .collect()
}

fn shell_quote(arg: &str) -> String {
    if !arg.is_empty() && arg.chars().all(|c| c.is_ascii_alphanumeric() || "-_=.,/:".contains(c)) {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

/// The pre-built request bodies of both protocols.
struct Bodies {
    influx: Schedule,
    prw: Schedule,
}

fn build_bodies(args: &Args, ds: &Dataset, protocols: &[Protocol]) -> Bodies {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let spinner = ProgressBar::new_spinner().with_message("building request bodies");
    spinner.enable_steady_tick(Duration::from_millis(200));
    let influx = if protocols.contains(&Protocol::Influx) {
        encode::influx_schedule(ds, args.arrival, args.batch_size, args.workers, args.gzip, threads)
    } else {
        Schedule::Queue(Vec::new())
    };
    let prw = if protocols.contains(&Protocol::Prw) {
        encode::prw_schedule(ds, args.arrival, args.batch_size, args.workers, threads)
    } else {
        Schedule::Queue(Vec::new())
    };
    spinner.finish_with_message("request bodies built");
    Bodies { influx, prw }
}

/// Prometheus' out-of-order window for `arrival`: none in time order; else the data's whole
/// span plus an hour, so that it refuses nothing of the dataset.
fn prometheus_ooo_window_secs(arrival: Arrival, ds: &Dataset) -> Option<i64> {
    (arrival != Arrival::ByHost).then(|| (ds.end_ms() - ds.start_ms + 999) / 1000 + 3600)
}

/// Runs the comparison and writes the report; fails (after writing it) if a query answer differs
/// from strata's or any run failed, and at once if strata itself failed.
pub fn run(args: Args) -> Result<(), String> {
    let now = chrono::Utc::now();
    let ds = args.dataset.dataset(now.timestamp_millis())?;
    let skip = parse_skip(&args.skip)?;
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let strata_bin = args.strata_bin.clone().unwrap_or_else(|| workspace.join("target/release/strata"));
    let mut found = servers::find(&strata_bin, &skip)?;
    let ooo_window_secs = prometheus_ooo_window_secs(args.arrival, &ds);
    for f in &mut found {
        match f.system {
            System::Strata => f.extra_args.clone_from(&args.strata_arg),
            System::Prometheus => f.ooo_window_secs = ooo_window_secs,
            System::VictoriaMetrics | System::InfluxDb => {}
        }
    }
    let absent: Vec<System> = System::ALL
        .into_iter()
        .filter(|s| !skip.contains(s) && !found.iter().any(|f| f.system == *s))
        .collect();
    let out = args.out.clone().unwrap_or_else(|| {
        workspace.join("target/bench-compare").join(now.format("%Y%m%dT%H%M%SZ").to_string())
    });
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let query_types = queries::resolve_types(&args.query_types)?;
    let qs = if args.no_queries {
        Vec::new()
    } else {
        queries::generate(&ds, &query_types, args.queries_per_type)?
    };

    eprintln!(
        "compare: {} hosts × {} rows ({} points), arrival {}; systems: {}; output {}",
        ds.hosts,
        ds.epochs,
        ds.points(),
        args.arrival.name(),
        found.iter().map(|f| f.system.name()).collect::<Vec<_>>().join(", "),
        out.display()
    );
    let load_start = procstat::load_average();
    let protocols: Vec<Protocol> = {
        let mut p: Vec<Protocol> = found.iter().flat_map(|f| f.system.protocols().iter().copied()).collect();
        p.sort();
        p.dedup();
        p
    };
    let generating = Instant::now();
    let bodies = build_bodies(&args, &ds, &protocols);
    let generate_secs = generating.elapsed().as_secs_f64();

    let http = Http::new(
        args.workers.max(args.clients.iter().copied().max().unwrap_or(1)),
        Duration::from_secs(600),
    )
    .gzip_answers(args.gzip_answers);
    let mut runs = Vec::new();
    let mut kept: Vec<Kept<'_>> = Vec::new();
    let mut reference: Option<Vec<answers::Answer>> = None;
    let mut mismatches = Vec::new();
    for f in &found {
        for &protocol in f.system.protocols() {
            let with_queries = protocol == Protocol::Prw && f.system.speaks_promql() && !qs.is_empty();
            let scratch_name = format!("{}-{}", f.system.name(), protocol.name());
            let scratch = if args.keep_data {
                let d = out.join("data").join(&scratch_name);
                let _ = std::fs::remove_dir_all(&d);
                std::fs::create_dir_all(&d).map_err(|e| e.to_string())?;
                Scratch::Kept(d)
            } else {
                Scratch::Temp(
                    tempfile::Builder::new().prefix(&scratch_name).tempdir().map_err(|e| e.to_string())?,
                )
            };
            let schedule = match protocol {
                Protocol::Influx => &bodies.influx,
                Protocol::Prw => &bodies.prw,
            };
            let plan = Plan { protocol, schedule, workers: args.workers, gzip: args.gzip };
            let timed_in_run = args.query_rounds == 1;
            let ctx = RunCtx {
                http: &http,
                found: f,
                plan,
                queries: &qs,
                clients: &args.clients,
                with_queries,
                timed_in_run,
                dataset: &ds,
            };
            let outcome = one_run(&ctx, scratch.path());
            let _ = std::fs::copy(scratch.path().join("server.log"), out.join(format!("{scratch_name}.log")));
            match outcome {
                Ok((result, answers)) => {
                    if with_queries && !timed_in_run {
                        kept.push(Kept { run: runs.len(), found: f, scratch, log: scratch_name.clone() });
                    }
                    if let Some(answers) = answers {
                        match &reference {
                            None if f.system == System::Strata => reference = Some(answers),
                            Some(strata) => {
                                mismatches.extend(query_run::compare(f.system, &qs, strata, &answers))
                            }
                            None => {}
                        }
                    }
                    runs.push(result);
                }
                Err(e) => {
                    eprintln!("compare: {} over {}: {e}", f.system.name(), protocol.name());
                    if f.system == System::Strata {
                        return Err(format!("strata failed, nothing to compare with: {e}"));
                    }
                    runs.push(RunResult {
                        system: f.system,
                        version: f.version.clone(),
                        protocol,
                        load: LoadResult::default(),
                        wal_after_load: WalBytes::default(),
                        stored: Err("not counted: the run failed".into()),
                        disk_after_shutdown: 0,
                        disk_settled: None,
                        timings: Vec::new(),
                        error: Some(e),
                    });
                }
            }
        }
    }

    if !kept.is_empty() {
        query_rounds(&http, &qs, &args.clients, args.query_rounds, &kept, &mut runs, &out);
    }
    drop(kept);

    let answer_sizes = answer_sizes(&qs, reference.as_deref().unwrap_or_default());
    let command = std::env::args().map(|a| shell_quote(&a)).collect::<Vec<_>>().join(" ");
    let ctx = Context {
        started_utc: now.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        command,
        machine: procstat::machine(),
        load_start,
        load_end: procstat::load_average(),
        dataset: ds,
        workers: args.workers,
        arrival: args.arrival,
        batch_rows: match args.arrival {
            Arrival::ByHost => {
                encode::epochs_per_round(&ds, args.batch_size, args.workers)
                    * ds.hosts.div_ceil(args.workers.max(1))
            }
            Arrival::SharedQueue | Arrival::Shuffled => args.batch_size.max(1),
        },
        round_secs: match args.arrival {
            Arrival::ByHost => {
                encode::epochs_per_round(&ds, args.batch_size, args.workers) as i64 * ds.interval_ms / 1000
            }
            Arrival::SharedQueue | Arrival::Shuffled => {
                (args.batch_size.max(1) as f64 / ds.hosts.max(1) as f64 * ds.interval_ms as f64 / 1000.0)
                    .round() as i64
            }
        },
        batches: encode::queue_batches(ds.rows(), args.batch_size, args.arrival, ds.seed).len(),
        prometheus_ooo_window_secs: ooo_window_secs,
        strata_args: args.strata_arg.clone(),
        gzip: args.gzip,
        gzip_answers: args.gzip_answers,
        generate_secs,
        queries_per_type: args.queries_per_type,
        clients: args.clients.clone(),
        query_rounds: args.query_rounds,
        query_types: query_types.clone(),
        metadata_types: {
            let mut kinds: Vec<&'static str> =
                qs.iter().filter(|q| q.api.is_metadata()).map(|q| q.kind).collect();
            kinds.dedup();
            kinds
        },
        absent,
        mismatches,
        answer_sizes,
    };
    let text = report::render(&ctx, &runs);
    let report_path = out.join("report.md");
    std::fs::write(&report_path, &text).map_err(|e| format!("{}: {e}", report_path.display()))?;
    plots::ingest(&out.join("ingest.svg"), &runs)?;
    plots::bytes_per_point(&out.join("bytes_per_point.svg"), &runs)?;
    for &c in &args.clients {
        plots::query_latency(&out.join(format!("query_latency_{c}.svg")), &runs, &query_types, c)?;
    }
    println!("{text}");
    eprintln!("compare: report written to {}", report_path.display());
    if !ctx.mismatches.is_empty() {
        return Err(format!("{} query answers differ from strata's (see the report)", ctx.mismatches.len()));
    }
    let failed = runs.iter().filter(|r| r.error.is_some()).count();
    if failed > 0 {
        return Err(format!("{failed} runs failed (see the report)"));
    }
    let short: Vec<String> =
        runs.iter().filter(|r| !r.stored_all(ctx.dataset.points())).map(RunResult::label).collect();
    if !short.is_empty() {
        return Err(format!(
            "not every generated point was stored by {}: the comparison is void (see the report)",
            short.join(", ")
        ));
    }
    Ok(())
}

/// Per query type, the series (label sets, names or values of a metadata answer) and points of
/// strata's answers: shows what the comparison covered.
fn answer_sizes(queries: &[Query], answers: &[answers::Answer]) -> Vec<(&'static str, usize, usize)> {
    let mut sizes: Vec<(&'static str, usize, usize)> = Vec::new();
    for (q, a) in queries.iter().zip(answers) {
        match sizes.last_mut() {
            Some(last) if last.0 == q.kind => {
                last.1 += a.entries();
                last.2 += a.points();
            }
            _ => sizes.push((q.kind, a.entries(), a.points())),
        }
    }
    sizes
}

/// A system's scratch directory: deleted afterwards unless `--keep-data`.
enum Scratch {
    Temp(tempfile::TempDir),
    Kept(PathBuf),
}

impl Scratch {
    fn path(&self) -> &std::path::Path {
        match self {
            Scratch::Temp(t) => t.path(),
            Scratch::Kept(p) => p,
        }
    }
}

/// What one run needs.
struct RunCtx<'a> {
    http: &'a Http,
    found: &'a Found,
    plan: Plan<'a>,
    queries: &'a [Query],
    clients: &'a [usize],
    with_queries: bool,
    /// Time the queries in the run (one round); otherwise only the warm-up pass runs here and
    /// [`query_rounds`] times them later.
    timed_in_run: bool,
    /// The dataset, to count what the system stored.
    dataset: &'a Dataset,
}

/// A run whose server is restarted for the query rounds: its data is kept until they end.
struct Kept<'a> {
    /// Index of its result in the runs.
    run: usize,
    found: &'a Found,
    scratch: Scratch,
    /// Prefix of its log files in the output directory.
    log: String,
}

/// The timed passes in `rounds` rounds (see `--query-rounds`). Per round, every kept system is
/// started on its data (the start order rotating by round) and settled, the round waits until
/// each is idle ([`Server::wait_quiet`]), and each answers every query once untimed (warm-up).
/// Then the passes interleave: for each query type (and the request floor) and client count,
/// each system times one pass in turn, the order rotating by round. A system's pass of a type
/// and its peers' run seconds apart, so a slow phase of a shared host, which lasts minutes,
/// falls on all of them alike. Each run's timings pool its rounds; a system that fails in a
/// round gets the error and no timings.
fn query_rounds(
    http: &Http,
    queries: &[Query],
    clients: &[usize],
    rounds: u32,
    kept: &[Kept<'_>],
    runs: &mut [RunResult],
    out: &std::path::Path,
) {
    let floor = query_run::floor_queries(queries.first().map_or(0, Query::time_ms));
    let mut kinds: Vec<&'static str> = queries.iter().map(|q| q.kind).collect();
    kinds.dedup();
    let per_round = queries.len() as u64
        + clients.iter().map(|c| *c as u64 * (queries.len() + floor.len()) as u64).sum::<u64>();
    let bar =
        ProgressBar::new(per_round * u64::from(rounds) * kept.len() as u64).with_message("query rounds");
    bar.set_style(
        ProgressStyle::with_template("{msg:28} [{elapsed_precise}] {wide_bar} {pos}/{len} queries")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let of_kinds: Vec<(&'static str, Vec<Query>)> = kinds
        .iter()
        .map(|&kind| (kind, queries.iter().filter(|q| q.kind == kind).cloned().collect()))
        .chain(std::iter::once((query_run::FLOOR, floor)))
        .collect();
    // Passes per kept run, per (kind, clients).
    let mut passes: Vec<Vec<(&'static str, usize, Vec<query_run::Pass>)>> = vec![Vec::new(); kept.len()];
    let mut failed: Vec<Option<String>> = vec![None; kept.len()];
    let fail = |failed: &mut Vec<Option<String>>, k: usize, round: usize, e: String| {
        eprintln!("compare: {} query round {}: {e}", kept[k].found.system.name(), round + 1);
        failed[k] = Some(e);
    };
    for round in 0..rounds as usize {
        let order: Vec<usize> = (0..kept.len()).map(|i| (i + round) % kept.len()).collect();
        // Started in turn, so one's start-up work (WAL replay) does not slow another's.
        let mut servers: Vec<Option<Server>> = (0..kept.len()).map(|_| None).collect();
        for &k in &order {
            if failed[k].is_some() {
                continue;
            }
            let Kept { found, scratch, .. } = &kept[k];
            let started = (|| -> Result<Server, String> {
                let server = Server::start(found, scratch.path(), http, "server-queries.log")?;
                // A restart can leave merge work (strata's shutdown flush adds files to
                // compact): settle again, as after the load, except Prometheus, whose settling
                // is a snapshot.
                if found.system != System::Prometheus {
                    server.settle(http)?;
                }
                server.wait_quiet(QUIET_MAX);
                Ok(server)
            })();
            match started {
                Ok(server) => servers[k] = Some(server),
                Err(e) => fail(&mut failed, k, round, e),
            }
        }
        // Background work a start left (Prometheus compacting its head) is over before any
        // timing; the first queries load caches (VictoriaMetrics' index caches, the page
        // cache): an untimed pass, as after the load.
        for &k in &order {
            let Some(server) = &servers[k] else { continue };
            server.wait_quiet(QUIET_MAX);
            if let Err(e) = query_run::warm_up(http, server.system, &server.base, queries, &bar) {
                fail(&mut failed, k, round, e);
                servers[k] = None;
            }
        }
        for (kind, of_kind) in &of_kinds {
            for &c in clients {
                for &k in &order {
                    let Some(server) = &servers[k] else { continue };
                    match query_run::run_pass(http, server.system, &server.base, of_kind, c, &bar) {
                        Ok(pass) => match passes[k].iter_mut().find(|(k2, c2, _)| k2 == kind && *c2 == c) {
                            Some((_, _, list)) => list.push(pass),
                            None => passes[k].push((kind, c, vec![pass])),
                        },
                        Err(e) => {
                            fail(&mut failed, k, round, e);
                            servers[k] = None;
                        }
                    }
                }
            }
        }
        for &k in &order {
            if let Some(server) = servers[k].take()
                && let Err(e) = server.stop()
            {
                fail(&mut failed, k, round, e);
            }
            let Kept { scratch, log, .. } = &kept[k];
            let _ = std::fs::copy(
                scratch.path().join("server-queries.log"),
                out.join(format!("{log}-queries.log")),
            );
        }
    }
    bar.finish();
    for (k, kept) in kept.iter().enumerate() {
        let run = &mut runs[kept.run];
        match failed[k].take() {
            Some(e) => run.error = Some(format!("query rounds: {e}")),
            None => {
                run.timings =
                    passes[k].iter().map(|(kind, c, list)| query_run::summarize(kind, *c, list)).collect()
            }
        }
    }
}

/// Longest wait for a started server to go idle before the round goes on without it idle.
const QUIET_MAX: Duration = Duration::from_secs(120);

/// Start, load, settle, (query), stop, measure.
fn one_run(
    ctx: &RunCtx,
    scratch: &std::path::Path,
) -> Result<(RunResult, Option<Vec<answers::Answer>>), String> {
    let system = ctx.found.system;
    let protocol = ctx.plan.protocol;
    let server = Server::start(ctx.found, scratch, ctx.http, "server.log")?;
    if protocol == Protocol::Influx && system != System::VictoriaMetrics {
        load::create_database(ctx.http, &server.base)?;
    }
    let label = format!("{} {}", system.name(), protocol.name());
    let load = load::run(ctx.http, &server.base, server.pid(), &ctx.plan, &label)?;
    // Before anything asks the server to flush: the log as the load left it.
    let wal_after_load = Server::wal_bytes(system, &server.data_dir);
    let settle_bar = ProgressBar::new_spinner().with_message(format!("{label}: flush and merge"));
    settle_bar.enable_steady_tick(Duration::from_millis(200));
    let disk_settled = server.settle(ctx.http)?;
    settle_bar.finish_and_clear();

    let mut timings = Vec::new();
    let mut answers = None;
    if ctx.with_queries {
        let floor = query_run::floor_queries(ctx.queries.first().map_or(0, Query::time_ms));
        let n = ctx.queries.len() as u64;
        let per_pass = n + floor.len() as u64;
        let timed =
            if ctx.timed_in_run { ctx.clients.iter().map(|c| *c as u64 * per_pass).sum::<u64>() } else { 0 };
        let total = n + timed;
        let bar = ProgressBar::new(total).with_message(format!("{label} queries"));
        bar.set_style(
            ProgressStyle::with_template("{msg:28} [{elapsed_precise}] {wide_bar} {pos}/{len} queries")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        answers = Some(query_run::warm_up(ctx.http, system, &server.base, ctx.queries, &bar)?);
        let mut kinds: Vec<&'static str> = ctx.queries.iter().map(|q| q.kind).collect();
        kinds.dedup();
        if !ctx.timed_in_run {
            kinds.clear();
        }
        for kind in kinds {
            let of_kind: Vec<Query> = ctx.queries.iter().filter(|q| q.kind == kind).cloned().collect();
            for &clients in ctx.clients {
                timings.push(query_run::timed(ctx.http, system, &server.base, &of_kind, clients, &bar)?);
            }
        }
        for &clients in ctx.clients.iter().filter(|_| ctx.timed_in_run) {
            timings.push(query_run::timed(ctx.http, system, &server.base, &floor, clients, &bar)?);
        }
        bar.finish();
    }
    // After the flush and merge (and the queries, which this must not warm up): every point
    // generated must be there.
    let stored = stored::count(ctx.http, system, &server.base, ctx.dataset);
    match &stored {
        Ok(n) => eprintln!(
            "{label}: stored {n} of {} points generated ({:.6}){}",
            ctx.dataset.points(),
            *n as f64 / ctx.dataset.points().max(1) as f64,
            if *n == ctx.dataset.points() { "" } else { "  <-- NOT EVERY POINT STORED" }
        ),
        Err(e) => eprintln!("{label}: stored points could not be counted: {e}"),
    }
    let data_dir = server.data_dir.clone();
    let stop_bar = ProgressBar::new_spinner().with_message(format!("{label}: clean shutdown"));
    stop_bar.enable_steady_tick(Duration::from_millis(200));
    server.stop()?;
    stop_bar.finish_and_clear();
    let disk_after_shutdown = Server::disk_bytes(system, &data_dir);
    let result = RunResult {
        system,
        version: ctx.found.version.clone(),
        protocol,
        load,
        wal_after_load,
        stored,
        disk_after_shutdown,
        disk_settled,
        timings,
        error: None,
    };
    Ok((result, answers))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tsbs::ValueModel;

    fn run_result(system: System, protocol: Protocol, secs: f64, disk: u64, p50: f64) -> RunResult {
        RunResult {
            system,
            version: "v".into(),
            protocol,
            load: LoadResult {
                points: 1_000_000,
                requests: 10,
                secs,
                timeline: vec![(0.0, 0), (secs, 1_000_000)],
                ..Default::default()
            },
            wal_after_load: WalBytes { wal: Some(disk * 10), head_chunks: None },
            stored: Ok(1_000_000),
            disk_after_shutdown: disk,
            disk_settled: None,
            timings: vec![
                Timing { kind: "lastpoint", clients: 1, p50_ms: p50, p99_ms: p50 * 2.0, qps: 1000.0 / p50 },
                Timing {
                    kind: query_run::FLOOR,
                    clients: 1,
                    p50_ms: p50 / 10.0,
                    p99_ms: p50 / 5.0,
                    qps: 10_000.0 / p50,
                },
            ],
            error: None,
        }
    }

    /// 100 hosts × 1,000 rows, what the report tests describe.
    fn report_dataset() -> Dataset {
        Dataset {
            hosts: 100,
            start_ms: 0,
            interval_ms: 10_000,
            epochs: 1000,
            model: ValueModel::Tsbs,
            seed: 1,
        }
    }

    /// The context of a by-host run of [`report_dataset`] with one query client, every system
    /// present, started by `command`.
    fn report_context(command: &str) -> Context {
        Context {
            started_utc: "2026-12-01T00:00:00Z".into(),
            command: command.into(),
            machine: "test machine".into(),
            load_start: 0.1,
            load_end: 0.2,
            dataset: report_dataset(),
            workers: 4,
            arrival: Arrival::ByHost,
            batch_rows: 3000,
            round_secs: 1200,
            batches: 0,
            prometheus_ooo_window_secs: None,
            strata_args: Vec::new(),
            gzip: true,
            gzip_answers: true,
            generate_secs: 1.0,
            queries_per_type: 1,
            clients: vec![1],
            query_rounds: 1,
            query_types: vec!["lastpoint"],
            metadata_types: Vec::new(),
            absent: Vec::new(),
            mismatches: Vec::new(),
            answer_sizes: Vec::new(),
        }
    }

    #[test]
    fn report_shows_every_figure_with_its_ratio() {
        let runs = vec![
            run_result(System::Strata, Protocol::Prw, 0.5, 400_000, 2.0),
            run_result(System::VictoriaMetrics, Protocol::Prw, 1.0, 800_000, 4.0),
        ];
        let ctx = Context {
            absent: vec![System::InfluxDb],
            answer_sizes: vec![("lastpoint", 1000, 1000)],
            ..report_context("strata-bench compare --hosts 100")
        };
        let text = report::render(&ctx, &runs);
        assert!(text.contains("strata-bench compare --hosts 100"));
        assert!(text.contains("| InfluxDB | not installed: skipped |"));
        // Ingest: strata 2 M/s, VictoriaMetrics 1 M/s: ratio 2.00.
        assert!(
            text.contains("| VictoriaMetrics | remote-write | 1,000,000 | 10 | 1.00 | 1,000,000 | 2.00 |"),
            "{text}"
        );
        // Disk: 0.4 vs 0.8 bytes per point: ratio 0.50.
        assert!(text.contains("| VictoriaMetrics | remote-write | 800,000 | 0.800 | 0.50 |"), "{text}");
        // Queries: p50 2 ms vs 4 ms: ratio 0.50.
        assert!(
            text.contains("| lastpoint | 2.000 | 4.000 | 500.0 | 4.000 | 8.000 | 250.0 | 0.500 |"),
            "{text}"
        );
        // The request floor comes last, with its ratio like any type.
        assert!(
            text.contains(
                "| request floor (query=1) | 0.200 | 0.400 | 5000.0 | 0.400 | 0.800 | 2500.0 | 0.500 |\n\n"
            ),
            "{text}"
        );
        assert!(text.contains("equals strata's"));
        assert!(text.contains("Queries run right after the load"), "{text}");
        assert!(text.contains("Answers asked for gzipped (`Accept-Encoding: gzip`"), "{text}");
        // With rounds, the protocol and the caveats say the passes interleave on settled data.
        let rounds = Context { query_rounds: 3, ..ctx };
        let text = report::render(&rounds, &runs);
        assert!(
            text.contains("in 3 rounds") && text.contains("each system times one pass in turn"),
            "{text}"
        );
        assert!(
            text.contains("settled data") && !text.contains("Queries run right after the load"),
            "{text}"
        );
    }

    #[test]
    fn report_names_the_arrival_and_flags_a_system_that_stored_less() {
        let ds = report_dataset();
        let strata = run_result(System::Strata, Protocol::Prw, 0.5, 400_000, 2.0);
        let mut vm = run_result(System::VictoriaMetrics, Protocol::Prw, 1.0, 800_000, 4.0);
        vm.stored = Ok(999_000);
        vm.load.refused = 2;
        vm.load.refused_points = 1000;
        vm.load.first_refusal = Some("write answered 400: too old".into());
        let ctx = Context {
            arrival: Arrival::SharedQueue,
            batch_rows: 10_000,
            round_secs: 1000,
            batches: 10,
            prometheus_ooo_window_secs: prometheus_ooo_window_secs(Arrival::SharedQueue, &ds),
            strata_args: vec!["--ooo-window=30d".into()],
            ..report_context("strata-bench compare --arrival shared-queue")
        };
        let text = report::render(&ctx, &[strata.clone(), vm.clone()]);
        assert!(text.contains("Arrival order: `shared-queue`"), "{text}");
        assert!(text.contains("cut into 10 batches of 10000 rows"), "{text}");
        assert!(text.contains("out_of_order_time_window: 13600s"), "10,000 s of data plus 1 h: {text}");
        let with_prometheus =
            report::render(&ctx, &[run_result(System::Prometheus, Protocol::Prw, 1.0, 1, 1.0)]);
        assert!(with_prometheus.contains("Prometheus' disk figure leaves out its out-of-order head"));
        assert!(text.contains("strata runs with `--ooo-window=30d` added"), "{text}");
        assert!(
            text.contains("**VOID: not every generated point was stored.** VictoriaMetrics (remote-write)"),
            "{text}"
        );
        assert!(
            text.contains(
                "| strata | remote-write | 1,000,000 | 1,000,000 | 0 | 1,000,000 | 1.000000 | all stored |"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "| VictoriaMetrics | remote-write | 1,000,000 | 1,000,000 | 2 | 999,000 | 0.999000 | **NOT ALL STORED: void** |"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "refused 2 requests (1,000 points); the first answer: `write answered 400: too old`"
            )
        );
        // In time order: no window for Prometheus, no banner when everything is stored.
        let by_host = Context {
            arrival: Arrival::ByHost,
            prometheus_ooo_window_secs: None,
            strata_args: Vec::new(),
            ..ctx
        };
        let text = report::render(&by_host, &[strata]);
        assert!(
            text.contains("Arrival order: `by-host`") && text.contains("every series arrives in time order")
        );
        assert!(!text.contains("VOID") && !text.contains("out_of_order_time_window"), "{text}");
        assert_eq!(prometheus_ooo_window_secs(Arrival::ByHost, &ds), None);
    }

    #[test]
    fn report_says_how_metadata_answers_compare() {
        let runs = vec![
            run_result(System::Strata, Protocol::Prw, 0.5, 400_000, 2.0),
            run_result(System::VictoriaMetrics, Protocol::Prw, 1.0, 800_000, 4.0),
        ];
        let ctx = Context {
            query_types: vec!["label-values", "count-all"],
            metadata_types: vec!["label-values"],
            answer_sizes: vec![("label-values", 100, 0), ("count-all", 1, 1)],
            ..report_context("strata-bench compare --query-types cardinality")
        };
        let text = report::render(&ctx, &runs);
        assert!(text.contains("Metadata requests (`label-values`) are compared as multisets"), "{text}");
        assert!(text.contains("each as often, in any order"), "{text}");
        assert!(text.contains("| type | series or values | points |"), "{text}");
        assert!(text.contains("| label-values | 100 | 0 |"), "{text}");
        // Without metadata types no metadata note.
        let text = report::render(&report_context("strata-bench compare"), &runs);
        assert!(!text.contains("Metadata requests") && !text.contains("any order"), "{text}");
    }

    #[test]
    fn report_shows_the_wal_right_after_the_load() {
        let strata = run_result(System::Strata, Protocol::Prw, 0.5, 400_000, 2.0);
        let vm = RunResult {
            wal_after_load: WalBytes::default(),
            ..run_result(System::VictoriaMetrics, Protocol::Prw, 1.0, 800_000, 4.0)
        };
        let prometheus = RunResult {
            wal_after_load: WalBytes { wal: Some(8_000_000), head_chunks: Some(500_000) },
            ..run_result(System::Prometheus, Protocol::Prw, 1.0, 1_000_000, 4.0)
        };
        let ctx = report_context("strata-bench compare");
        let text = report::render(&ctx, &[strata.clone(), vm.clone(), prometheus]);
        assert!(text.contains("## Write-ahead log at the end of the load"), "{text}");
        // strata 4 MB (4 bytes/point) against Prometheus' 8 MB (8 bytes/point): ratio 0.50.
        assert!(text.contains("| strata | remote-write | 4,000,000 | 4.000 | 1.00 | – | – |"), "{text}");
        assert!(
            text.contains("| Prometheus | remote-write | 8,000,000 | 8.000 | 0.50 | 500,000 | 0.500 |"),
            "{text}"
        );
        assert!(
            text.contains("| VictoriaMetrics | remote-write | none (no WAL) | – | – | – | – |"),
            "{text}"
        );
        assert!(text.contains("- VictoriaMetrics: none: no WAL"), "{text}");
        // Without Prometheus no chunks_head column.
        let text = report::render(&ctx, &[strata, vm]);
        assert!(text.contains("| strata | remote-write | 4,000,000 | 4.000 | 1.00 |\n"), "{text}");
        assert!(!text.contains("chunks_head"), "{text}");
    }

    #[test]
    fn flags_parse_and_commands_quote() {
        assert_eq!(
            parse_skip(&["vm".into(), "influxdb".into()]),
            Ok(vec![System::VictoriaMetrics, System::InfluxDb])
        );
        assert!(parse_skip(&["mysql".into()]).is_err());
        assert_eq!(shell_quote("--hosts=10"), "--hosts=10");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }
}

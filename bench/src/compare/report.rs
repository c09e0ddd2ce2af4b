//! The Markdown report of a comparison: setup, then every figure with its strata/peer ratio.

use std::fmt::Write as _;

use super::servers::{Protocol, System};
use super::{Context, RunResult, query_run};
use crate::tsbs::encode::Arrival;
use crate::tsbs::gen_cmd::format_time_ms;

fn mib(b: u64) -> f64 {
    b as f64 / (1u64 << 20) as f64
}

fn ratio(a: f64, b: f64) -> String {
    ratio_digits(a, b, 2)
}

/// `a / b` with `digits` decimals, or a dash when it is not a number.
fn ratio_digits(a: f64, b: f64, digits: usize) -> String {
    if a.is_finite() && b.is_finite() && b > 0.0 { format!("{:.digits$}", a / b) } else { "–".to_owned() }
}

fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The "Write-ahead log" section: each system's log on disk right after its load.
fn wal_table(o: &mut String, runs: &[RunResult]) {
    let ok: Vec<&RunResult> = runs.iter().filter(|r| r.error.is_none()).collect();
    let strata = |p: Protocol| ok.iter().find(|r| r.system == System::Strata && r.protocol == p);
    let head_chunks = ok.iter().any(|r| r.wal_after_load.head_chunks.is_some());
    let _ = writeln!(o, "\n## Write-ahead log at the end of the load\n");
    let _ = writeln!(
        o,
        "The WAL on disk right after the load's last answer, before the harness asks for any flush, merge \
         or shutdown: what a crash at that moment would replay, as the lengths of its files (the bytes \
         written; `du` may count more while a file is being written, blocks reserved past its end). Bytes per point are \
         over the points acknowledged; strata/peer is strata's over the peer's on the same protocol \
         (below 1: strata's WAL smaller). What each figure covers:\n"
    );
    let mut seen = Vec::new();
    for r in &ok {
        if !seen.contains(&r.system) {
            seen.push(r.system);
            let _ = writeln!(o, "- {}: {}", r.system.name(), r.system.wal_note());
        }
    }
    let (extra_head, extra_rule) = if head_chunks {
        (" Prometheus `chunks_head/` bytes | chunks_head bytes/point |", "---|---|")
    } else {
        ("", "")
    };
    let _ = writeln!(
        o,
        "\n| system | protocol | WAL bytes | WAL bytes/point | strata/peer |{extra_head}\n|---|---|---|---|---|{extra_rule}"
    );
    for r in &ok {
        let points = r.load.points.max(1) as f64;
        let (bytes, per_point, rel) = match (r.wal_after_load.wal, r.wal_bytes_per_point()) {
            (Some(b), Some(pp)) => {
                let rel = strata(r.protocol)
                    .and_then(|s| s.wal_bytes_per_point())
                    .map_or("–".to_owned(), |s| ratio(s, pp));
                (thousands(b), format!("{pp:.3}"), rel)
            }
            _ => ("none (no WAL)".to_owned(), "–".to_owned(), "–".to_owned()),
        };
        let mut line =
            format!("| {} | {} | {bytes} | {per_point} | {rel} |", r.system.name(), r.protocol.name());
        if head_chunks {
            match r.wal_after_load.head_chunks {
                Some(b) => {
                    let _ = write!(line, " {} | {:.3} |", thousands(b), b as f64 / points);
                }
                None => line.push_str(" – | – |"),
            }
        }
        let _ = writeln!(o, "{line}");
    }
}

/// The report text.
pub fn render(ctx: &Context, runs: &[RunResult]) -> String {
    let mut o = String::new();
    let ds = &ctx.dataset;
    let _ = writeln!(o, "# TSBS devops (cpu-only): strata side by side\n");
    let _ = writeln!(o, "Run {} (UTC) with:\n\n```\n{}\n```\n", ctx.started_utc, ctx.command);
    let _ = writeln!(o, "Arrival order: `{}` (`--arrival`, see Setup).\n", ctx.arrival.name());
    let generated = ds.points();
    let short: Vec<&RunResult> =
        runs.iter().filter(|r| r.error.is_none() && !r.stored_all(generated)).collect();
    if !short.is_empty() {
        let _ = writeln!(
            o,
            "**VOID: not every generated point was stored.** {} did not store all {} points generated \
             (counted by query, see \"Stored points\"). A comparison in which one system keeps less data \
             than another compares different work; its ingest, disk and query figures do not stand.\n",
            short.iter().map(|r| r.label()).collect::<Vec<_>>().join(", "),
            thousands(generated)
        );
    }
    let _ = writeln!(o, "## Setup\n");
    let _ = writeln!(o, "- Machine: {}.", ctx.machine);
    let _ = writeln!(
        o,
        "- Load average (1 min) at start {:.2}, at end {:.2}. Everything (servers, loader, query clients) \
         shares these cores; other work on the machine shows up as noise in every figure.",
        ctx.load_start, ctx.load_end
    );
    let _ = writeln!(
        o,
        "- Data: {} hosts × {} rows every {} s from {} to {} = {} rows, {} points (values); value model `{}`, \
         seed {}.",
        ds.hosts,
        ds.epochs,
        ds.interval_ms / 1000,
        format_time_ms(ds.start_ms),
        format_time_ms(ds.end_ms()),
        thousands(ds.rows()),
        thousands(ds.points()),
        ds.model.name(),
        ds.seed
    );
    match ctx.arrival {
        Arrival::ByHost => {
            let _ = writeln!(
                o,
                "- Load (arrival `by-host`): {} workers, each owning the hosts `h % {} == w`, {} rows per request \
                 for both protocols, sent in rounds of {} s of data (no worker more than a round ahead of another, \
                 so Prometheus, which refuses samples 1 h older than its newest, takes the load): every series \
                 arrives in time order.",
                ctx.workers, ctx.workers, ctx.batch_rows, ctx.round_secs,
            );
        }
        Arrival::SharedQueue | Arrival::Shuffled => {
            let order = if ctx.arrival == Arrival::SharedQueue {
                "in generation order, as `tsbs_load_influx` sends by default (`--hash-workers=false`)"
                    .to_owned()
            } else {
                format!("in a random order drawn from seed {}", ds.seed)
            };
            let _ = writeln!(
                o,
                "- Load (arrival `{}`): the rows in generation order (every host at one time, then the next \
                 time) cut into {} batches of {} rows (about {} s of data each), the same batches for both \
                 protocols (remote write: a batch's rows grouped per series, each series' samples in time \
                 order); {} workers each take the next batch from one shared queue, {order}. Batches in flight \
                 at once arrive in any order, so a series' samples arrive out of order.",
                ctx.arrival.name(),
                ctx.batches,
                ctx.batch_rows,
                ctx.round_secs,
                ctx.workers,
            );
        }
    }
    let _ = writeln!(
        o,
        "- Influx line protocol{} to `/write?db=benchmark` after `CREATE DATABASE` (strata, InfluxDB; \
         VictoriaMetrics needs none); remote write 1.0, snappy. Bodies built before the clock starts ({:.1} s); \
         every answer checked; a refused request (4xx) is counted and the load goes on.",
        if ctx.gzip { ", gzip" } else { "" },
        ctx.generate_secs
    );
    if let Some(secs) = ctx.prometheus_ooo_window_secs {
        let _ = writeln!(
            o,
            "- Prometheus runs with `storage: tsdb: out_of_order_time_window: {secs}s` in its configuration file \
             (the data's span plus 1 h): by default it refuses every sample older than its series' newest. \
             VictoriaMetrics and InfluxDB take samples in any order with their defaults. Prometheus' snapshot \
             (its disk figure) holds its in-order head only, not the samples its out-of-order head keeps, so \
             its disk figure is a lower bound under this arrival (the data dir column includes them, with \
             the WAL)."
        );
    }
    if !ctx.strata_args.is_empty() {
        let _ = writeln!(
            o,
            "- strata runs with `{}` added to its command line (`--strata-arg`): not its defaults.",
            ctx.strata_args.join(" ")
        );
    }
    let clients = ctx.clients.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(" and ");
    let when = if ctx.query_rounds > 1 {
        format!(
            "then timed passes with {clients} concurrent client(s) in {} rounds: after all loads, each round \
             starts every PromQL system on its data, settles it again (not Prometheus), waits until each is idle \
             and sends every query once untimed; then, type by type, each system times one pass in turn (the \
             order rotating by round), so a slow phase of the host falls on all alike; a type's figures pool \
             its rounds",
            ctx.query_rounds
        )
    } else {
        format!(
            "then timed passes with {clients} concurrent client(s); run on the remote-write-loaded instance right \
             after its load"
        )
    };
    let _ = writeln!(
        o,
        "- Queries: {} per type (random hosts and windows from the seed), one warm-up pass (right after the load) \
         whose answers are compared with strata's, {when}. {}",
        ctx.queries_per_type,
        if ctx.gzip_answers {
            "Answers asked for gzipped (`Accept-Encoding: gzip`, as Go's HTTP client asks by default: TSBS's \
             query runner, Grafana), so the times include each system's compression and the client's decompression."
        } else {
            "Answers asked for uncompressed (`--gzip-answers false`)."
        }
    );
    let _ = writeln!(o, "\n| system | version | default durability | disk figure |\n|---|---|---|---|");
    let mut seen = Vec::new();
    for r in runs {
        if !seen.contains(&r.system) {
            seen.push(r.system);
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} |",
                r.system.name(),
                r.version,
                r.system.durability(),
                r.system.disk_note()
            );
        }
    }
    for s in &ctx.absent {
        let _ = writeln!(o, "| {} | not installed: skipped | | |", s.name());
    }

    let strata = |p: Protocol| {
        runs.iter().find(|r| r.system == System::Strata && r.protocol == p && r.error.is_none())
    };
    let _ = writeln!(o, "\n## Stored points\n");
    let _ = writeln!(
        o,
        "Counted by query after the load, the flush and merge and the queries (PromQL: \
         `sum(count_over_time(cpu_<field>[span]))` per metric at the data's end; InfluxDB: \
         `SELECT count(*) FROM cpu`), not from the write answers. Refused: requests answered with a 4xx \
         (a system may have stored part of one).\n"
    );
    let _ = writeln!(
        o,
        "| system | protocol | generated | acknowledged | refused requests | stored | stored/generated |  |\n|---|---|---|---|---|---|---|---|"
    );
    for r in runs.iter().filter(|r| r.error.is_none()) {
        let (stored, fraction) = match &r.stored {
            Ok(n) => (thousands(*n), format!("{:.6}", *n as f64 / generated.max(1) as f64)),
            Err(e) => (format!("not counted: {e}"), "–".to_owned()),
        };
        let verdict = if r.stored_all(generated) { "all stored" } else { "**NOT ALL STORED: void**" };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            r.system.name(),
            r.protocol.name(),
            thousands(generated),
            thousands(r.load.points),
            r.load.refused,
            stored,
            fraction,
            verdict
        );
    }
    for r in runs.iter().filter(|r| r.error.is_none()) {
        if let Some(why) = &r.load.first_refusal {
            let _ = writeln!(
                o,
                "\n{} ({}) refused {} requests ({} points); the first answer: `{}`",
                r.system.name(),
                r.protocol.name(),
                r.load.refused,
                thousands(r.load.refused_points),
                why.replace('`', "'").replace('\n', " ")
            );
        }
    }

    let _ = writeln!(o, "\n## Ingest\n");
    let _ = writeln!(
        o,
        "strata/peer is strata's points/s over the peer's on the same protocol (above 1: strata faster). Server CPU \
         is user+system seconds of the server process during the load; peak RSS is its VmHWM at the end of the load.\n"
    );
    let _ = writeln!(
        o,
        "| system | protocol | points | requests | seconds | points/s | strata/peer | server CPU s | CPU µs/point | peak RSS MiB | retries |\n|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for r in runs.iter().filter(|r| r.error.is_none()) {
        let l = &r.load;
        let rel = strata(r.protocol).map_or("–".to_owned(), |s| ratio(s.load.rate(), l.rate()));
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {:.2} | {} | {} | {:.1} | {:.2} | {:.0} | {} |",
            r.system.name(),
            r.protocol.name(),
            thousands(l.points),
            l.requests,
            l.secs,
            thousands(l.rate() as u64),
            rel,
            l.server_cpu_secs,
            l.server_cpu_secs * 1e6 / l.points.max(1) as f64,
            mib(l.server_peak_rss),
            l.retries
        );
    }

    wal_table(&mut o, runs);

    let _ = writeln!(o, "\n## Disk\n");
    let _ = writeln!(
        o,
        "strata/peer is strata's bytes per point over the peer's on the same protocol (below 1: strata smaller). \
         What each figure covers is in the setup table.\n"
    );
    let _ = writeln!(
        o,
        "| system | protocol | bytes | bytes/point | strata/peer | data dir after shutdown, bytes/point |\n|---|---|---|---|---|---|"
    );
    for r in runs.iter().filter(|r| r.error.is_none()) {
        let rel =
            strata(r.protocol).map_or("–".to_owned(), |s| ratio(s.bytes_per_point(), r.bytes_per_point()));
        let _ = writeln!(
            o,
            "| {} | {} | {} | {:.3} | {} | {:.3} |",
            r.system.name(),
            r.protocol.name(),
            thousands(r.disk_figure()),
            r.bytes_per_point(),
            rel,
            r.disk_after_shutdown as f64 / r.load.points.max(1) as f64
        );
    }

    if ctx.prometheus_ooo_window_secs.is_some() && runs.iter().any(|r| r.system == System::Prometheus) {
        let _ = writeln!(
            o,
            "\nPrometheus' disk figure leaves out its out-of-order head (see Setup): a lower bound, not comparable."
        );
    }

    let promql: Vec<&RunResult> = runs.iter().filter(|r| !r.timings.is_empty()).collect();
    if !promql.is_empty() {
        let _ = writeln!(o, "\n## Queries\n");
        let _ = writeln!(
            o,
            "Latencies in ms; strata/peer is strata's p50 over the peer's (below 1: strata faster). PromQL of each \
             type: see `bench/src/tsbs/queries.rs` (the cardinality types: `bench/src/tsbs/queries/cardinality.rs`). \
             The last row, `{}`, is the cheapest request there is \
             (the scalar `1`, {} requests per client): the round trip every query pays before any work.\n",
            query_run::FLOOR,
            query_run::floor_queries(0).len()
        );
        for &clients in &ctx.clients {
            let _ = writeln!(o, "### {clients} client(s)\n");
            let mut header = "| type |".to_owned();
            let mut rule = "|---|".to_owned();
            for r in &promql {
                let n = r.system.name();
                let _ = write!(header, " {n} p50 | {n} p99 | {n} q/s |");
                rule.push_str("---|---|---|");
                if r.system != System::Strata {
                    let _ = write!(header, " strata/{n} |");
                    rule.push_str("---|");
                }
            }
            let _ = writeln!(o, "{header}\n{rule}");
            for kind in ctx.query_types.iter().chain([&query_run::FLOOR]) {
                let mut line = format!("| {kind} |");
                let strata_p50 = promql
                    .iter()
                    .find(|r| r.system == System::Strata)
                    .and_then(|r| r.timing(kind, clients))
                    .map(|t| t.p50_ms);
                for r in &promql {
                    match r.timing(kind, clients) {
                        Some(t) => {
                            // Three decimals: sub-millisecond p50s and a ratio target of
                            // 0.5 need them to be read without rounding across it.
                            let _ = write!(line, " {:.3} | {:.3} | {:.1} |", t.p50_ms, t.p99_ms, t.qps);
                            if r.system != System::Strata {
                                let _ = write!(
                                    line,
                                    " {} |",
                                    strata_p50.map_or("–".into(), |s| ratio_digits(s, t.p50_ms, 3))
                                );
                            }
                        }
                        None => {
                            line.push_str(" – | – | – |");
                            if r.system != System::Strata {
                                line.push_str(" – |");
                            }
                        }
                    }
                }
                let _ = writeln!(o, "{line}");
            }
            let _ = writeln!(o);
        }
    }

    let _ = writeln!(o, "## Answer check\n");
    if !ctx.answer_sizes.is_empty() {
        let _ = writeln!(
            o,
            "What strata's answers held (all queries of the type together; for a metadata request, the label \
             sets, names or values it listed):\n"
        );
        let _ = writeln!(o, "| type | series or values | points |\n|---|---|---|");
        for (kind, series, points) in &ctx.answer_sizes {
            let _ = writeln!(o, "| {kind} | {series} | {points} |");
        }
        let _ = writeln!(o);
    }
    if ctx.mismatches.is_empty() {
        let peers: Vec<&str> =
            promql.iter().filter(|r| r.system != System::Strata).map(|r| r.system.name()).collect();
        if peers.is_empty() {
            let _ = writeln!(o, "No PromQL peer ran: nothing to compare.\n");
        } else {
            let metadata = if ctx.metadata_types.is_empty() {
                ""
            } else {
                "; metadata answers: the same label sets, names or values, each as often, in any order"
            };
            let _ = writeln!(
                o,
                "Every query's answer from {} equals strata's (same series, timestamps, values within 1e-9 \
                 relative{metadata}).\n",
                peers.join(" and ")
            );
        }
    } else {
        let _ = writeln!(o, "**{} mismatches: the run fails.**\n", ctx.mismatches.len());
        for m in &ctx.mismatches {
            let _ = writeln!(
                o,
                "- {} `{}`: `{}` — {}\n  `{}`",
                m.system.name(),
                m.kind,
                m.promql,
                m.what,
                m.path
            );
        }
        let _ = writeln!(o);
    }
    if !ctx.metadata_types.is_empty() {
        let _ = writeln!(
            o,
            "Metadata requests ({}) are compared as multisets: the order a system lists entries in carries no \
             meaning, a missing, extra or repeated entry does. Each request carries `start` and `end` covering the \
             whole data (its first row to one interval past its last): VictoriaMetrics answers for the last day \
             without them, and the systems apply a time range at different granularity (strata by the series' \
             samples, Prometheus by the blocks and head overlapping it, VictoriaMetrics by whole UTC days of its \
             per-day index), which select the same series only over a range that covers the data. \
             VictoriaMetrics 1.79 lists at most `-search.maxTagValues` label values (100,000 by default) and drops \
             the rest without an error or warning, and refuses a `/api/v1/series` answer of more than \
             `-search.maxSeries` series (30,000): above 100,000 hosts its label-values answer would lack hosts \
             and fail the comparison.\n",
            ctx.metadata_types.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ")
        );
    }
    let errors: Vec<&RunResult> = runs.iter().filter(|r| r.error.is_some()).collect();
    if !errors.is_empty() {
        let _ = writeln!(o, "## Errors\n");
        for r in errors {
            let _ = writeln!(
                o,
                "- {} {}: {}",
                r.system.name(),
                r.protocol.name(),
                r.error.as_deref().unwrap_or("")
            );
        }
        let _ = writeln!(o);
    }
    let _ = writeln!(o, "## Plots\n");
    let _ = writeln!(o, "![ingest rate](ingest.svg)\n\n![bytes per point](bytes_per_point.svg)\n");
    for c in &ctx.clients {
        let _ = writeln!(o, "![query latency, {c} clients](query_latency_{c}.svg)\n");
    }
    let _ = writeln!(o, "## Caveats\n");
    let (servers, state) = if ctx.query_rounds > 1 {
        (
            "servers load one at a time; in the query rounds the PromQL systems run side by side, idle but \
             for the queries they are sent",
            "The queries of the rounds run on each system's settled data, after a restart (strata's head \
             flushed at shutdown)",
        )
    } else {
        (
            "servers run one at a time",
            "Queries run right after the load, on data partly in memory (strata's head, Prometheus' head, \
             VictoriaMetrics' recent parts)",
        )
    };
    let tuned = match (ctx.prometheus_ooo_window_secs.is_some(), ctx.strata_args.is_empty()) {
        (false, true) => "Nothing is tuned.",
        (true, true) => "Nothing is tuned but Prometheus' out-of-order window (setup).",
        (false, false) => "Nothing is tuned but strata's added flags (setup).",
        (true, false) => {
            "Nothing is tuned but Prometheus' out-of-order window and strata's added flags (setup)."
        }
    };
    let _ = writeln!(
        o,
        "- One machine; {servers}, on loopback, sharing the cores with the loader and query clients.\n\
         - Each system runs with its default durability (setup table): strata and InfluxDB fsync before \
         acknowledging, VictoriaMetrics and Prometheus do not. {tuned}\n\
         - InfluxDB 1.x answers InfluxQL, not PromQL: it is measured for ingest and disk only.\n\
         - {state}.\n\
         - The timed passes repeat the warm-up's queries; VictoriaMetrics is asked with `nocache=1` so its \
         result cache does not answer them.\n\
         - Query windows longer than the dataset are cut to the dataset."
    );
    o
}

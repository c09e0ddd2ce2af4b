//! Running the queries against one system: a checked warm-up pass whose answers are compared
//! with strata's, then timed passes per query type with 1 and with N concurrent clients.

use std::time::Instant;

use indicatif::ProgressBar;

use super::answers::{self, Answer};
use super::http::Http;
use super::servers::System;
use crate::tsbs::queries::Query;

/// The URL of `query` on the system at `base`. VictoriaMetrics gets `nocache=1`: it caches
/// range-query results, and the timed passes repeat the warm-up's queries, which would be
/// answered from that cache (TSBS avoids it with distinct queries; strata and Prometheus have
/// no result cache).
pub(super) fn url(system: System, base: &str, query: &Query) -> String {
    let nocache = if system == System::VictoriaMetrics { "&nocache=1" } else { "" };
    format!("{base}{}{nocache}", query.path())
}

/// Sends one query; its answer if it succeeded.
fn send(http: &Http, system: System, base: &str, query: &Query) -> Result<Vec<u8>, String> {
    let (status, body) = http.get(&url(system, base, query))?;
    if status != 200 {
        return Err(format!(
            "{} answered {status} to {} ({}): {}",
            system.name(),
            query.kind,
            query.promql,
            String::from_utf8_lossy(&body[..body.len().min(400)])
        ));
    }
    Ok(body)
}

/// The warm-up pass: every query once, its answer parsed. Fails on the first error answer.
pub fn warm_up(
    http: &Http,
    system: System,
    base: &str,
    queries: &[Query],
    bar: &ProgressBar,
) -> Result<Vec<Answer>, String> {
    queries
        .iter()
        .map(|q| {
            let body = send(http, system, base, q)?;
            bar.inc(1);
            answers::parse_for(&q.api, &body).map_err(|e| format!("{} {}: {e}", system.name(), q.kind))
        })
        .collect()
}

/// The row of the request floor: the cheapest query, timed like the TSBS types, so that the
/// report shows how much of a sub-millisecond latency is the round trip itself (HTTP, the
/// loopback socket, waking the server and the client), which no query engine can save.
pub const FLOOR: &str = "request floor (query=1)";

/// Requests of the floor row per client.
const FLOOR_REQUESTS: usize = 200;

/// The floor row's requests: the scalar `1` at one instant, [`FLOOR_REQUESTS`] times.
pub fn floor_queries(time_ms: i64) -> Vec<Query> {
    let one = Query { kind: FLOOR, promql: "1".into(), api: crate::tsbs::queries::Api::Instant { time_ms } };
    vec![one; FLOOR_REQUESTS]
}

/// A mismatch between strata's answer and a peer's.
#[derive(Debug, Clone)]
pub struct Mismatch {
    /// The peer.
    pub system: System,
    /// The query type.
    pub kind: &'static str,
    /// The query.
    pub promql: String,
    /// The request path.
    pub path: String,
    /// What differs.
    pub what: String,
}

/// Compares a peer's warm-up answers with strata's.
pub fn compare(system: System, queries: &[Query], strata: &[Answer], peer: &[Answer]) -> Vec<Mismatch> {
    queries
        .iter()
        .zip(strata.iter().zip(peer))
        .filter_map(|(q, (s, p))| {
            answers::diff(s, p).map(|what| Mismatch {
                system,
                kind: q.kind,
                promql: q.promql.clone(),
                path: q.path(),
                what,
            })
        })
        .collect()
}

/// Latency figures of one query type at one concurrency.
#[derive(Debug, Clone)]
pub struct Timing {
    /// The query type.
    pub kind: &'static str,
    /// Concurrent clients.
    pub clients: usize,
    /// Median latency, milliseconds.
    pub p50_ms: f64,
    /// 99th percentile latency, milliseconds.
    pub p99_ms: f64,
    /// Queries answered per second over the pass.
    pub qps: f64,
}

/// The `q` quantile (0..=1) of sorted `values` (nearest rank).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The latencies of one timed pass.
#[derive(Debug, Clone, Default)]
pub struct Pass {
    /// Every query's latency, milliseconds.
    pub latencies_ms: Vec<f64>,
    /// Wall time of the pass, seconds.
    pub wall_secs: f64,
}

/// Times `queries` (all of one type) with `clients` concurrent clients, each sending every
/// query once (client `c` starts at query `c`, so clients do not move in lockstep).
pub fn timed(
    http: &Http,
    system: System,
    base: &str,
    queries: &[Query],
    clients: usize,
    bar: &ProgressBar,
) -> Result<Timing, String> {
    let pass = run_pass(http, system, base, queries, clients, bar)?;
    Ok(summarize(queries.first().map_or("", |q| q.kind), clients, &[pass]))
}

/// One timed pass of [`timed`], its latencies unsummarized (rounds pool them).
pub fn run_pass(
    http: &Http,
    system: System,
    base: &str,
    queries: &[Query],
    clients: usize,
    bar: &ProgressBar,
) -> Result<Pass, String> {
    let started = Instant::now();
    let per_client: Vec<Result<Vec<f64>, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients.max(1))
            .map(|c| {
                s.spawn(move || {
                    let mut lat = Vec::with_capacity(queries.len());
                    for i in 0..queries.len() {
                        let q = &queries[(i + c) % queries.len()];
                        let t = Instant::now();
                        send(http, system, base, q)?;
                        lat.push(t.elapsed().as_secs_f64() * 1000.0);
                        bar.inc(1);
                    }
                    Ok(lat)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a query client panicked".into())))
            .collect()
    });
    let wall_secs = started.elapsed().as_secs_f64();
    let mut latencies_ms = Vec::new();
    for r in per_client {
        latencies_ms.extend(r?);
    }
    Ok(Pass { latencies_ms, wall_secs })
}

/// The figures of `passes` of one type at one concurrency taken together: quantiles over all
/// their latencies, throughput over their summed wall time.
pub fn summarize(kind: &'static str, clients: usize, passes: &[Pass]) -> Timing {
    let mut all: Vec<f64> = passes.iter().flat_map(|p| p.latencies_ms.iter().copied()).collect();
    all.sort_by(f64::total_cmp);
    let wall: f64 = passes.iter().map(|p| p.wall_secs).sum();
    Timing {
        kind,
        clients,
        p50_ms: quantile(&all, 0.5),
        p99_ms: quantile(&all, 0.99),
        qps: if wall > 0.0 { all.len() as f64 / wall } else { 0.0 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_pool_their_latencies() {
        let a = Pass { latencies_ms: vec![1.0, 2.0, 3.0], wall_secs: 1.0 };
        let b = Pass { latencies_ms: vec![10.0, 20.0, 30.0], wall_secs: 2.0 };
        let t = summarize("lastpoint", 1, &[a, b]);
        assert_eq!((t.kind, t.clients), ("lastpoint", 1));
        assert_eq!(t.p50_ms, 3.0);
        assert_eq!(t.p99_ms, 30.0);
        assert_eq!(t.qps, 2.0);
    }

    #[test]
    fn nearest_rank_quantiles() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), 50.0);
        assert_eq!(quantile(&v, 0.99), 99.0);
        assert_eq!(quantile(&[7.0], 0.99), 7.0);
        assert!(quantile(&[], 0.5).is_nan());
    }

    #[test]
    fn victoria_metrics_gets_nocache() {
        let q = Query {
            kind: "lastpoint",
            promql: "up".into(),
            api: crate::tsbs::queries::Api::Instant { time_ms: 1000 },
        };
        assert!(url(System::VictoriaMetrics, "http://x", &q).ends_with("&nocache=1"));
        assert_eq!(url(System::Strata, "http://x", &q), "http://x/api/v1/query?query=up&time=1.000");
    }
}

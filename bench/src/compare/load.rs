//! Loaders: request bodies built beforehand are sent by W worker threads; every answer is
//! checked, acknowledged points are counted over time, and the server's CPU and memory are read
//! from /proc around the load.
//!
//! Both protocols send the same rows in the same batches ([`crate::tsbs::encode`]), in the
//! order `--arrival` chooses:
//!
//! * `by-host`: worker `w` owns the hosts `h % W == w` and sends its requests round by round, a
//!   round being a stretch of at most 20 minutes of data; no worker starts round `r + 1` before
//!   every worker has finished round `r - 1`. So every series arrives in time order and all data
//!   in flight is within 40 minutes, which Prometheus without an out-of-order window requires
//!   (it rejects samples older than its newest minus 1 h).
//! * `shared-queue` and `shuffled`: the batches form one queue; each of the W workers takes the
//!   next batch (an atomic index), sends it, and takes the next, as `tsbs_load_influx` does by
//!   default. Batches in flight at once arrive in any order.
//!
//! * Influx, as `tsbs_load_influx`: `CREATE DATABASE` through `/query`, then the line-protocol
//!   batches (gzip by default) POSTed to `/write?db=benchmark`. A 204 is success.
//! * Remote write 1.0, snappy protobuf, to `/api/v1/write`. Any 2xx is success.
//!
//! A 429 or 503 answer (a server asking to slow down) is retried after a second, as TSBS backs
//! off. Any other 4xx answer is a refused request: counted, its first answer kept, and the load
//! goes on (systems answer 400 also when they stored part of a request, e.g. samples outside an
//! out-of-order window: what was stored is counted by query afterwards, not from the status).
//! Any other answer (a 5xx, a broken connection) stops the load with an error.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use super::http::Http;
use super::procstat;
use super::servers::{INFLUX_DB, Protocol};
use crate::tsbs::encode::{Request, Schedule};

/// The requests of one load.
pub struct Plan<'a> {
    /// The protocol.
    pub protocol: Protocol,
    /// The requests, per worker or in one queue (an empty request is not sent).
    pub schedule: &'a Schedule,
    /// Workers taking requests from a [`Schedule::Queue`] (a [`Schedule::ByHost`] has one per
    /// shard).
    pub workers: usize,
    /// Whether line-protocol bodies are gzip-compressed.
    pub gzip: bool,
}

impl Plan<'_> {
    fn points(&self) -> u64 {
        self.schedule.requests().map(|r| r.points).sum()
    }
}

/// Rounds finished by each worker; a worker waits before a round until the others are close.
struct Rounds {
    done: Mutex<Vec<usize>>,
    changed: Condvar,
}

impl Rounds {
    /// Blocks until every worker has finished at least `round - 1` rounds, or `stop` is set.
    fn wait_for(&self, round: usize, stop: &AtomicBool) {
        let Ok(mut done) = self.done.lock() else { return };
        while done.iter().copied().min().unwrap_or(0) + 1 < round && !stop.load(Ordering::Relaxed) {
            done = match self.changed.wait_timeout(done, Duration::from_millis(100)) {
                Ok((guard, _)) => guard,
                Err(_) => return,
            };
        }
    }

    fn finished(&self, worker: usize, rounds: usize) {
        if let Ok(mut done) = self.done.lock() {
            done[worker] = rounds;
        }
        self.changed.notify_all();
    }
}

/// What a load measured.
#[derive(Debug, Clone, Default)]
pub struct LoadResult {
    /// Points (field values) acknowledged.
    pub points: u64,
    /// Requests sent and acknowledged.
    pub requests: u64,
    /// Retries after a 429/503 answer.
    pub retries: u64,
    /// Requests refused with another 4xx answer (the load went on without them).
    pub refused: u64,
    /// Points in the refused requests: at most this many were lost (a system may have stored
    /// part of a refused request).
    pub refused_points: u64,
    /// The first refusal: status and answer.
    pub first_refusal: Option<String>,
    /// Wall-clock seconds from the first request to the last answer.
    pub secs: f64,
    /// `(seconds since start, points acknowledged so far)`, about every 100 ms.
    pub timeline: Vec<(f64, u64)>,
    /// The server's CPU seconds spent during the load.
    pub server_cpu_secs: f64,
    /// The server's peak resident memory since it started, read at the end of the load, bytes.
    pub server_peak_rss: u64,
}

impl LoadResult {
    /// Points per second over the whole load.
    pub fn rate(&self) -> f64 {
        if self.secs > 0.0 { self.points as f64 / self.secs } else { 0.0 }
    }
}

/// Creates the Influx database as `tsbs_load_influx` does (`CREATE DATABASE` via `/query`).
pub fn create_database(http: &Http, base: &str) -> Result<(), String> {
    let url = format!("{base}/query");
    let body = format!("q=CREATE+DATABASE+{INFLUX_DB}");
    let (status, answer) = http.post(&url, body.as_bytes(), "application/x-www-form-urlencoded")?;
    if status != 200 {
        return Err(format!("CREATE DATABASE: status {status}: {}", String::from_utf8_lossy(&answer)));
    }
    Ok(())
}

/// What became of one request.
enum Sent {
    /// A success status.
    Acked,
    /// A 4xx answer other than 429: status and answer.
    Refused(String),
}

/// Sends `plan` to the server at `base` (process `pid`), one thread per worker.
pub fn run(http: &Http, base: &str, pid: u32, plan: &Plan, label: &str) -> Result<LoadResult, String> {
    let total = plan.points();
    let bar = ProgressBar::new(total).with_message(label.to_owned());
    bar.set_style(
        ProgressStyle::with_template(
            "{msg:28} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} points ({per_sec})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let acked = AtomicU64::new(0);
    let requests = AtomicU64::new(0);
    let retries = AtomicU64::new(0);
    let refused = AtomicU64::new(0);
    let refused_points = AtomicU64::new(0);
    let first_refusal: Mutex<Option<String>> = Mutex::new(None);
    let failed = AtomicBool::new(false);
    let error: Mutex<Option<String>> = Mutex::new(None);
    let done = AtomicBool::new(false);
    let before = procstat::sample(pid).ok_or("server process gone before the load")?;

    let started = Instant::now();
    let mut timeline = vec![(0.0, 0)];
    let mut finished = Duration::ZERO;
    let send = |req: &Request| -> Result<Sent, String> {
        let (url, headers): (String, Vec<(&str, &str)>) = match plan.protocol {
            Protocol::Influx => (
                format!("{base}/write?db={INFLUX_DB}"),
                vec![
                    ("Content-Type", "text/plain"),
                    ("Content-Encoding", if plan.gzip { "gzip" } else { "" }),
                ],
            ),
            Protocol::Prw => (
                format!("{base}/api/v1/write"),
                vec![
                    ("Content-Type", "application/x-protobuf"),
                    ("Content-Encoding", "snappy"),
                    ("X-Prometheus-Remote-Write-Version", "0.1.0"),
                ],
            ),
        };
        for _attempt in 0..120 {
            let (status, answer) = http.post_with(&url, &req.body, &headers)?;
            let ok = match plan.protocol {
                Protocol::Influx => status == 204,
                Protocol::Prw => (200..300).contains(&status),
            };
            if ok {
                return Ok(Sent::Acked);
            }
            if status == 429 || status == 503 {
                retries.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_secs(1));
                continue;
            }
            let answer = String::from_utf8_lossy(&answer[..answer.len().min(1000)]).trim().to_owned();
            let why = format!("write answered {status}: {answer}");
            return if (400..500).contains(&status) { Ok(Sent::Refused(why)) } else { Err(why) };
        }
        Err("write still refused after 120 retries".into())
    };
    let record = |req: &Request, result: Result<Sent, String>| match result {
        Ok(Sent::Acked) => {
            acked.fetch_add(req.points, Ordering::Relaxed);
            requests.fetch_add(1, Ordering::Relaxed);
            bar.inc(req.points);
            true
        }
        Ok(Sent::Refused(why)) => {
            refused.fetch_add(1, Ordering::Relaxed);
            refused_points.fetch_add(req.points, Ordering::Relaxed);
            bar.inc(req.points);
            if let Ok(mut slot) = first_refusal.lock() {
                slot.get_or_insert(why);
            }
            true
        }
        Err(e) => {
            failed.store(true, Ordering::Relaxed);
            if let Ok(mut slot) = error.lock() {
                slot.get_or_insert(e);
            }
            false
        }
    };

    let shards: &[Vec<Request>] = match plan.schedule {
        Schedule::ByHost(shards) => shards,
        Schedule::Queue(_) => &[],
    };
    let rounds = Rounds { done: Mutex::new(vec![0; shards.len()]), changed: Condvar::new() };
    // The shared queue's next batch.
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        match plan.schedule {
            Schedule::ByHost(shards) => {
                for (w, requests) in shards.iter().enumerate() {
                    let (send, record, failed, rounds) = (&send, &record, &failed, &rounds);
                    handles.push(s.spawn(move || {
                        for (round, req) in requests.iter().enumerate() {
                            rounds.wait_for(round, failed);
                            if failed.load(Ordering::Relaxed) || (req.rows > 0 && !record(req, send(req))) {
                                break;
                            }
                            rounds.finished(w, round + 1);
                        }
                        // A worker that stops early must not hold the others back.
                        rounds.finished(w, usize::MAX);
                    }));
                }
            }
            Schedule::Queue(queue) => {
                for _ in 0..plan.workers.max(1) {
                    let (send, record, failed, next) = (&send, &record, &failed, &next);
                    handles.push(s.spawn(move || {
                        while !failed.load(Ordering::Relaxed) {
                            let Some(req) = queue.get(next.fetch_add(1, Ordering::Relaxed)) else { break };
                            if req.rows > 0 && !record(req, send(req)) {
                                break;
                            }
                        }
                    }));
                }
            }
        }
        let sampler = s.spawn(|| {
            let mut points = Vec::new();
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                points.push((started.elapsed().as_secs_f64(), acked.load(Ordering::Relaxed)));
            }
            points
        });
        for h in handles {
            if h.join().is_err() {
                failed.store(true, Ordering::Relaxed);
            }
        }
        finished = started.elapsed();
        done.store(true, Ordering::Relaxed);
        if let Ok(points) = sampler.join() {
            timeline.extend(points);
        }
    });
    let secs = finished.as_secs_f64();
    bar.finish();
    let after = procstat::sample(pid).ok_or("server process gone during the load")?;
    if failed.load(Ordering::Relaxed) {
        let e = error.lock().ok().and_then(|mut e| e.take()).unwrap_or_else(|| "a worker panicked".into());
        return Err(format!("{label}: {e}"));
    }
    let points = acked.load(Ordering::Relaxed);
    timeline.retain(|(t, _)| *t < secs);
    timeline.push((secs, points));
    Ok(LoadResult {
        points,
        requests: requests.load(Ordering::Relaxed),
        retries: retries.load(Ordering::Relaxed),
        refused: refused.load(Ordering::Relaxed),
        refused_points: refused_points.load(Ordering::Relaxed),
        first_refusal: first_refusal.lock().ok().and_then(|mut f| f.take()),
        secs,
        timeline,
        server_cpu_secs: after.cpu_secs - before.cpu_secs,
        server_peak_rss: after.peak_rss,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::servers::System;
    use super::*;
    use crate::tsbs::{Dataset, ValueModel, encode};

    /// strata's own router on an ephemeral loopback port, over a database in a temp dir.
    struct InProcess {
        base: String,
        _runtime: tokio::runtime::Runtime,
        _dir: tempfile::TempDir,
    }

    fn strata() -> InProcess {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(storage::Db::open(storage::Options::new(dir.path())).unwrap());
        let state = Arc::new(strata::state::AppState::new());
        state.set_db(db);
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        runtime.spawn(async move { axum::serve(listener, strata::server::router(state)).await });
        InProcess { base, _runtime: runtime, _dir: dir }
    }

    fn dataset() -> Dataset {
        // Recent data: strata refuses samples too far in the future, not old ones.
        let start_ms = chrono::Utc::now().timestamp_millis() / 3_600_000 * 3_600_000 - 3_600_000;
        Dataset { hosts: 5, start_ms, interval_ms: 10_000, epochs: 90, model: ValueModel::Tsbs, seed: 9 }
    }

    /// Total samples stored, read back through the query API.
    fn stored(http: &Http, base: &str, ds: &Dataset) -> f64 {
        let q = crate::tsbs::queries::Query {
            kind: "lastpoint",
            // The raw samples (a range vector): `count_over_time` would drop the metric names and
            // make the fields of one host collide.
            promql: "{__name__=~\"cpu_.*\"}[1d]".into(),
            api: crate::tsbs::queries::Api::Instant { time_ms: ds.end_ms() },
        };
        let body = http.get_ok(&format!("{base}{}", q.path())).unwrap();
        let answer = super::super::answers::parse(&body).unwrap();
        assert_eq!(answer.series().len(), ds.hosts * 10, "one series per host and field");
        answer.points() as f64
    }

    #[test]
    fn both_loaders_store_every_point_and_count_them() {
        let ds = dataset();
        let http = Http::new(4, Duration::from_secs(30));
        let pid = std::process::id();
        let influx = Schedule::ByHost(encode::influx_requests(&ds, 40, 3, true, 2));
        let prw = Schedule::ByHost(encode::prw_requests(&ds, 40, 3, 2));
        for (protocol, schedule) in [(Protocol::Influx, &influx), (Protocol::Prw, &prw)] {
            let server = strata();
            if protocol == Protocol::Influx {
                create_database(&http, &server.base).unwrap();
            }
            let plan = Plan { protocol, schedule, workers: 3, gzip: true };
            let result = run(&http, &server.base, pid, &plan, "test").unwrap();
            assert_eq!(result.points, ds.points());
            assert_eq!(result.refused, 0);
            assert_eq!(result.requests, schedule.requests().filter(|r| r.rows > 0).count() as u64);
            assert_eq!(result.timeline.last().map(|p| p.1), Some(ds.points()));
            assert_eq!(stored(&http, &server.base, &ds), ds.points() as f64, "{protocol:?}");
            assert_eq!(
                super::super::stored::count(&http, System::Strata, &server.base, &ds),
                Ok(ds.points())
            );
        }
    }

    /// A refused request (4xx) is counted, its answer kept, and the load goes on; what was
    /// stored is counted by query afterwards.
    #[test]
    fn a_refused_request_is_counted_and_the_load_goes_on() {
        let server = strata();
        let http = Http::new(2, Duration::from_secs(30));
        let ds = dataset();
        let mut queue = encode::prw_requests(&ds, 1000, 1, 1).concat();
        let good = queue.len() as u64;
        queue.insert(0, Request { body: b"not snappy".to_vec(), rows: 1, points: 10 });
        let schedule = Schedule::Queue(queue);
        let plan = Plan { protocol: Protocol::Prw, schedule: &schedule, workers: 2, gzip: false };
        let result = run(&http, &server.base, std::process::id(), &plan, "garbage").unwrap();
        assert_eq!((result.refused, result.refused_points, result.requests), (1, 10, good));
        let why = result.first_refusal.unwrap();
        assert!(why.contains("answered 400"), "{why}");
        assert_eq!(result.points, ds.points());
    }

    /// A server error (5xx other than 503) still stops the load.
    #[test]
    fn a_server_error_fails_the_load() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            use std::io::{Read, Write};
            let (mut stream, _) = listener.accept().unwrap();
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf).unwrap();
            let _ = stream.write_all(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\nboom");
        });
        let http = Http::new(1, Duration::from_secs(30));
        let schedule = Schedule::Queue(vec![Request { body: b"x".to_vec(), rows: 1, points: 10 }]);
        let plan = Plan { protocol: Protocol::Prw, schedule: &schedule, workers: 1, gzip: false };
        let err = run(&http, &base, std::process::id(), &plan, "boom").unwrap_err();
        assert!(err.contains("answered 500"), "{err}");
        server.join().unwrap();
    }
}

//! TSBS's loader by default has its workers take batches from one shared queue
//! (`tsbs_load_influx --hash-workers=false`), so a series' samples reach the server out of
//! order. strata with its DEFAULT flags must store every one of them, in whichever order they
//! come, over both protocols: loaded here with `--arrival shared-queue` and `shuffled` through
//! the harness's own loader, then counted by query through the HTTP API (the harness's count,
//! and every raw sample compared with the generated ones).
//!
//! The server is strata's HTTP router in this process, on an ephemeral port, over a database in
//! a temp dir opened with exactly the options the `strata` binary derives from its flags
//! (parsed by its own parser), so a change of a default shows up here.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::http::Http;
use super::load::{self, Plan};
use super::servers::{Protocol, System};
use super::{answers, stored};
use crate::tsbs::encode::{self, Arrival};
use crate::tsbs::generate::Generator;
use crate::tsbs::queries::{Api, Query};
use crate::tsbs::{Dataset, FIELDS, MEASUREMENT, ValueModel};

/// Flags added to strata's defaults: none. (`["--ooo-window", "30d"]` makes the test pass
/// while strata still refuses samples further than 1 h behind their series' newest.)
const STRATA_FLAGS: &[&str] = &[];

/// Loader workers, as tsbs_load_influx's default.
const WORKERS: usize = 4;

/// Rows per batch: 30 minutes of the 4 hosts, so that 4 batches in flight span 2 h.
const BATCH_ROWS: usize = 720;

/// strata in this process: its router over a database opened with the options its flags give.
struct Strata {
    base: String,
    db: Arc<storage::Db>,
    runtime: Option<tokio::runtime::Runtime>,
    _dir: tempfile::TempDir,
}

impl Strata {
    fn start() -> Strata {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let mut argv = vec!["strata", "--listen", "127.0.0.1:0", "--data-dir", data.to_str().unwrap()];
        argv.extend_from_slice(STRATA_FLAGS);
        let (cli, _) = strata::config::Cli::parse_with_flags(argv).unwrap();
        let config = cli.server_config();
        let db = Arc::new(storage::Db::open(config.storage.clone()).unwrap());
        let state = Arc::new(
            strata::state::AppState::with_limits(config.limits.clone())
                .with_query(strata::api::query::QueryService::new(&config.query))
                .with_write_admission(config.write_admission.clone()),
        );
        state.set_db(Arc::clone(&db));
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        runtime.spawn(async move { axum::serve(listener, strata::server::router(state)).await });
        Strata { base, db, runtime: Some(runtime), _dir: dir }
    }
}

impl Drop for Strata {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_timeout(Duration::from_secs(10));
        }
        let _ = self.db.close();
    }
}

/// 4 hosts × 4 h at 10 s (5,760 rows, 57,600 points), ending an hour ago: inside strata's
/// retention and behind its future window.
fn dataset() -> Dataset {
    let hour = 3_600_000;
    let start_ms = chrono::Utc::now().timestamp_millis() / hour * hour - 5 * hour;
    Dataset { hosts: 4, start_ms, interval_ms: 10_000, epochs: 1440, model: ValueModel::Tsbs, seed: 35 }
}

/// Every sample stored, per (hostname, metric), read back raw through the query API.
fn stored_samples(http: &Http, base: &str, ds: &Dataset) -> BTreeMap<(String, String), Vec<(i64, f64)>> {
    let range_s = (ds.end_ms() - ds.start_ms) / 1000 + 10;
    let q = Query {
        kind: "raw",
        promql: format!("{{__name__=~\"{MEASUREMENT}_.*\"}}[{range_s}s]"),
        api: Api::Instant { time_ms: ds.end_ms() },
    };
    let body = http.get_ok(&format!("{base}{}", q.path())).unwrap();
    let answer = answers::parse(&body).unwrap();
    answer
        .series()
        .iter()
        .cloned()
        .map(|(labels, points)| ((labels["hostname"].clone(), labels["__name__"].clone()), points))
        .collect()
}

/// What the generator made, in the same shape.
fn generated_samples(ds: &Dataset) -> BTreeMap<(String, String), Vec<(i64, f64)>> {
    let mut out: BTreeMap<(String, String), Vec<(i64, f64)>> = BTreeMap::new();
    for row in Generator::new(*ds) {
        for (field, value) in FIELDS.iter().zip(row.values) {
            let key = (format!("host_{}", row.host), format!("{MEASUREMENT}_{field}"));
            out.entry(key).or_default().push((row.t_ms, value));
        }
    }
    out
}

fn load_and_count(arrival: Arrival) {
    let ds = dataset();
    let http = Http::new(WORKERS, Duration::from_secs(60));
    let generated = generated_samples(&ds);
    for protocol in [Protocol::Influx, Protocol::Prw] {
        let schedule = match protocol {
            Protocol::Influx => encode::influx_schedule(&ds, arrival, BATCH_ROWS, WORKERS, true, 2),
            Protocol::Prw => encode::prw_schedule(&ds, arrival, BATCH_ROWS, WORKERS, 2),
        };
        let server = Strata::start();
        if protocol == Protocol::Influx {
            load::create_database(&http, &server.base).unwrap();
        }
        let plan = Plan { protocol, schedule: &schedule, workers: WORKERS, gzip: true };
        let label = format!("{} {}", arrival.name(), protocol.name());
        let result = load::run(&http, &server.base, std::process::id(), &plan, &label).unwrap();
        let count = stored::count(&http, System::Strata, &server.base, &ds).unwrap();
        assert_eq!(
            count,
            ds.points(),
            "{label}: strata with its default flags stored {count} of {} points; {} requests refused, the first: {:?}",
            ds.points(),
            result.refused,
            result.first_refusal
        );
        assert_eq!((result.points, result.refused), (ds.points(), 0), "{label}");
        assert!(stored_samples(&http, &server.base, &ds) == generated, "{label}: stored samples differ");
    }
}

#[test]
fn shared_queue_arrival_is_stored_whole_with_default_flags() {
    load_and_count(Arrival::SharedQueue);
}

#[test]
fn shuffled_arrival_is_stored_whole_with_default_flags() {
    load_and_count(Arrival::Shuffled);
}

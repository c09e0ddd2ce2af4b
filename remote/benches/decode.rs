//! Decode throughput of each ingest format, per core (single-threaded).
//!
//! Run: `cargo bench -p remote --bench decode`. Payloads are generated, not recorded, but
//! shaped like real traffic: node-exporter series (5-7 labels, 60 distinct metric names, 50
//! instances) for remote write, TSBS `cpu-only` lines (10 tags, 10 integer fields) for line
//! protocol. Throughput is reported in samples (remote write) or field values (line protocol).
//! Each case decodes as the server does: into a `storage::BatchRef` whose label strings borrow
//! the (decompressed) request, ready for `Db::append_ref`; an iteration includes building and
//! dropping that batch. `prw_*/owned` decodes into an owned `storage::Batch` instead (every
//! label string allocated), for comparison.
//!
//! `STRATA_PROBE=<v1_1|v1_3|v1_5|v2_1|v2_5|line|line_new>` runs one case in a plain loop
//! instead (for `perf record`, or callgrind with `STRATA_PROBE_ROUNDS=1`). A remote-write case
//! with `+append` (`v1_1+append`) also appends each decoded batch to a database in a temporary
//! directory (WAL synced by interval), as the server does: the first batch creates the series,
//! later ones find them, so the cost of the whole ingest path of known series is measured.

// criterion_group! generates an undocumented function.
#![allow(missing_docs)]

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};

/// The allocator of the `strata` binary (src/main.rs): decoding is allocation-heavy, so the
/// numbers depend on it.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use remote::Limits;
use remote::line::{self, FieldValue, Point, Precision};
use remote::prw::{self, Version};
use storage::{Batch, Labels, Sample};

/// `series` node-exporter-like series with `per_series` samples each, 15 s apart.
fn node_exporter_batch(series: usize, per_series: usize) -> Batch {
    let modes = ["idle", "iowait", "irq", "nice", "softirq", "steal", "system", "user"];
    let mut batch = Batch::new();
    for i in 0..series {
        let instance = format!("node-{:03}.example.com:9100", i % 50);
        let kind = i % 3;
        let labels = match kind {
            0 => Labels::from_pairs(&[
                ("__name__", "node_cpu_seconds_total".to_string()),
                ("cpu", (i / 24 % 16).to_string()),
                ("instance", instance),
                ("job", "node".to_string()),
                ("mode", modes[i % modes.len()].to_string()),
            ]),
            1 => Labels::from_pairs(&[
                ("__name__", format!("node_filesystem_metric_{}_bytes", i % 20)),
                ("device", format!("/dev/nvme0n1p{}", i % 4)),
                ("fstype", "ext4".to_string()),
                ("instance", instance),
                ("job", "node".to_string()),
                ("mountpoint", format!("/mnt/data{}", i % 4)),
            ]),
            _ => Labels::from_pairs(&[
                ("__name__", format!("node_network_metric_{}_total", i % 40)),
                ("device", format!("eth{}", i % 2)),
                ("instance", instance),
                ("job", "node".to_string()),
            ]),
        };
        let samples = (0..per_series)
            .map(|j| Sample::new(1_700_000_000_000 + 15_000 * j as i64, (i * 1000 + j) as f64 * 1.37))
            .collect();
        batch.push(labels, samples);
    }
    batch
}

/// What the server does with a remote-write body before appending: decompress into the
/// thread's buffer, decode borrowing the decompressed bytes. Returns the sample count (and drops the batch).
fn decode_prw(version: Version, body: &[u8], limits: &Limits) -> usize {
    // The server reuses a decompression buffer per thread (src/ingest/remote_write.rs).
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUF.with_borrow_mut(|buf| {
        let raw = prw::decompress_into(body, limits, buf).unwrap();
        prw::decode_ref(version, raw, limits).unwrap().batch.sample_count()
    })
}

/// [`decode_prw`], then append the batch to `db` as the server does. Returns the samples
/// appended.
fn decode_and_append(version: Version, body: &[u8], limits: &Limits, db: &storage::Db) -> usize {
    thread_local! {
        static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    BUF.with_borrow_mut(|buf| {
        let raw = prw::decompress_into(body, limits, buf).unwrap();
        let decoded = prw::decode_ref(version, raw, limits).unwrap();
        db.append_ref(&decoded.batch).unwrap().appended as usize
    })
}

/// A database in a temporary directory for the `+append` probes, removed when dropped.
struct ProbeDb {
    db: storage::Db,
    dir: std::path::PathBuf,
}

impl ProbeDb {
    fn open() -> ProbeDb {
        let dir = std::env::temp_dir().join(format!("strata-decode-probe-{}", std::process::id()));
        let mut opts = storage::Options::new(&dir);
        opts.wal_sync = storage::WalSync::Interval(std::time::Duration::from_millis(100));
        ProbeDb { db: storage::Db::open(opts).unwrap(), dir }
    }
}

impl Drop for ProbeDb {
    fn drop(&mut self) {
        let _ = self.db.close();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// What the server does with a line-protocol body before appending: parse, then build the
/// borrowed batch. Returns the sample count.
fn parse_line(body: &[u8], limits: &Limits) -> usize {
    let parsed = line::parse_ref(body, Precision::Ns, 0, limits);
    parsed.batch().sample_count()
}

fn bench_prw(c: &mut Criterion) {
    let limits = Limits::default();
    for version in [Version::V1, Version::V2] {
        let mut group = c.benchmark_group(format!("prw_{version:?}").to_lowercase());
        for per_series in [1usize, 3, 5] {
            let batch = node_exporter_batch(2000, per_series);
            let body = prw::encode(version, &batch, &[]);
            let raw = snap::raw::Decoder::new().decompress_vec(&body).unwrap();
            group.throughput(Throughput::Elements(batch.sample_count() as u64));
            let id = format!("2000x{per_series}");
            group.bench_with_input(BenchmarkId::new("decode", &id), &body, |b, body| {
                b.iter(|| decode_prw(version, body, &limits))
            });
            group.bench_with_input(BenchmarkId::new("protobuf_only", &id), &raw, |b, raw| {
                b.iter(|| prw::decode_ref(version, raw, &limits).unwrap().batch.sample_count())
            });
            group.bench_with_input(BenchmarkId::new("owned", &id), &body, |b, body| {
                b.iter(|| prw::decode(version, body, &limits).unwrap())
            });
            group.bench_with_input(BenchmarkId::new("snappy_only", &id), &body, |b, body| {
                b.iter(|| snap::raw::Decoder::new().decompress_vec(body).unwrap())
            });
        }
        group.finish();
    }
}

/// TSBS `cpu-only` lines: `hosts` hosts, `rounds` timestamps 10 s apart.
fn tsbs_cpu(hosts: usize, rounds: usize) -> Vec<u8> {
    let regions = ["us-east-1", "us-west-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-southeast-1"];
    let fields = [
        "usage_user",
        "usage_system",
        "usage_idle",
        "usage_nice",
        "usage_iowait",
        "usage_irq",
        "usage_softirq",
        "usage_steal",
        "usage_guest",
        "usage_guest_nice",
    ];
    let mut body = Vec::new();
    for r in 0..rounds {
        for h in 0..hosts {
            let region = regions[h % regions.len()];
            let p = Point {
                measurement: "cpu".into(),
                tags: vec![
                    ("hostname".into(), format!("host_{h}")),
                    ("region".into(), region.into()),
                    ("datacenter".into(), format!("{region}{}", ["a", "b", "c"][h % 3])),
                    ("rack".into(), (h % 100).to_string()),
                    ("os".into(), ["Ubuntu16.04LTS", "Ubuntu15.10", "Ubuntu16.10"][h % 3].into()),
                    ("arch".into(), ["x64", "x86"][h % 2].into()),
                    ("team".into(), ["SF", "NYC", "LON", "CHI"][h % 4].into()),
                    ("service".into(), (h % 20).to_string()),
                    ("service_version".into(), (h % 2).to_string()),
                    ("service_environment".into(), ["production", "staging", "test"][h % 3].into()),
                ],
                fields: fields
                    .iter()
                    .enumerate()
                    .map(|(i, f)| (f.to_string(), FieldValue::Int(((h * 7 + r * 13 + i * 31) % 100) as i64)))
                    .collect(),
                timestamp: Some(1_451_606_400_000_000_000 + r as i64 * 10_000_000_000),
            };
            line::write_point(&mut body, &p).unwrap();
        }
    }
    body
}

fn bench_line(c: &mut Criterion) {
    let limits = Limits::default();
    let mut group = c.benchmark_group("line");
    for (hosts, rounds) in [(1000usize, 10usize), (10_000, 1)] {
        let body = tsbs_cpu(hosts, rounds);
        group.throughput(Throughput::Elements((hosts * rounds * 10) as u64));
        group.bench_with_input(
            BenchmarkId::new("tsbs_cpu", format!("{hosts}hosts_x{rounds}")),
            &body,
            |b, body| b.iter(|| parse_line(body, &limits)),
        );
    }
    group.finish();
}

fn config() -> Criterion {
    // Short runs: the machine is shared.
    Criterion::default()
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(3))
        .sample_size(20)
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_prw, bench_line
}

fn main() {
    if let Ok(what) = std::env::var("STRATA_PROBE") {
        probe(&what);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}

/// Runs one decoder in a plain loop and prints the best of several rounds: on a shared
/// machine the minimum is the least disturbed measurement.
fn probe(what: &str) {
    let (what, db) = match what.strip_suffix("+append") {
        Some(w) => (w, Some(ProbeDb::open())),
        None => (what, None),
    };
    let limits = Limits::default();
    let iters: usize = std::env::var("STRATA_PROBE_ITERS").ok().and_then(|s| s.parse().ok()).unwrap_or(20);
    let (body, version) = match what {
        "line" => (tsbs_cpu(1000, 10), None),
        "line_new" => (tsbs_cpu(10_000, 1), None),
        v => {
            let version = if v.starts_with("v1") { Version::V1 } else { Version::V2 };
            let per: usize = v.get(3..).and_then(|s| s.parse().ok()).unwrap_or(1);
            (prw::encode(version, &node_exporter_batch(2000, per), &[]), Some(version))
        }
    };
    let mut best = f64::INFINITY;
    let mut units = 0;
    let rounds: usize = std::env::var("STRATA_PROBE_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    for _ in 0..rounds {
        let start = std::time::Instant::now();
        units = 0;
        for _ in 0..iters {
            units += match version {
                None => parse_line(&body, &limits),
                Some(v) => match &db {
                    Some(db) => decode_and_append(v, &body, &limits, &db.db),
                    None => decode_prw(v, &body, &limits),
                },
            };
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    println!("{what}: {:.2} M/s (best of {rounds} rounds of {units} units)", units as f64 / best / 1e6);
}

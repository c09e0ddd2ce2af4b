//! Measures the series index on TSBS-like label sets: 10 `cpu_*` metric names x N hosts (default
//! 100,000, so 1 million series), 11 labels each. Prints insertion time, memory per series,
//! lookup time, select latencies, and the label-set hashing cost of std's SipHash vs foldhash.
//!
//! Run: `cargo run --release -p storage --example index_bench [-- HOSTS]`

use std::hash::BuildHasher;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use storage::index::Index;
use storage::{Label, Labels, MatchOp, Matcher};

const METRICS: [&str; 10] = [
    "cpu_usage_user",
    "cpu_usage_system",
    "cpu_usage_idle",
    "cpu_usage_nice",
    "cpu_usage_iowait",
    "cpu_usage_irq",
    "cpu_usage_softirq",
    "cpu_usage_steal",
    "cpu_usage_guest",
    "cpu_usage_guest_nice",
];
const REGIONS: [&str; 9] = [
    "us-east-1",
    "us-west-1",
    "us-west-2",
    "eu-west-1",
    "eu-central-1",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-northeast-1",
    "sa-east-1",
];
const OSES: [&str; 3] = ["Ubuntu16.10", "Ubuntu16.04LTS", "Ubuntu15.10"];
const ARCHES: [&str; 2] = ["x64", "x86"];
const TEAMS: [&str; 4] = ["SF", "NYC", "LON", "CHI"];
const ENVIRONMENTS: [&str; 3] = ["production", "staging", "test"];

/// Series generated (and dropped) at a time, so input label sets do not inflate the RSS.
const BATCH_HOSTS: usize = 1000;

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The label sets of host `h`, one per metric, as a decoder would produce them: fresh strings.
fn host_series(h: usize, out: &mut Vec<Labels>) {
    let r = splitmix(h as u64);
    let pick = |shift: u32, n: usize| (r >> shift) as usize % n;
    let region = REGIONS[pick(0, REGIONS.len())];
    let host = [
        ("hostname", format!("host_{h}")),
        ("region", region.to_string()),
        ("datacenter", format!("{region}{}", ["a", "b", "c"][pick(8, 3)])),
        ("rack", pick(12, 100).to_string()),
        ("os", OSES[pick(20, OSES.len())].to_string()),
        ("arch", ARCHES[pick(24, ARCHES.len())].to_string()),
        ("team", TEAMS[pick(28, TEAMS.len())].to_string()),
        ("service", pick(32, 20).to_string()),
        ("service_version", pick(40, 2).to_string()),
        ("service_environment", ENVIRONMENTS[pick(44, ENVIRONMENTS.len())].to_string()),
    ];
    for metric in METRICS {
        let mut labels: Vec<Label> = host.iter().map(|(n, v)| Label::new(*n, v.as_str())).collect();
        labels.push(Label::new("__name__", metric));
        out.push(Labels::new(labels));
    }
}

fn batches(hosts: std::ops::Range<usize>) -> impl Iterator<Item = Vec<Labels>> {
    hosts.clone().step_by(BATCH_HOSTS).map(move |start| {
        let mut out = Vec::with_capacity(BATCH_HOSTS * METRICS.len());
        for h in start..(start + BATCH_HOSTS).min(hosts.end) {
            host_series(h, &mut out);
        }
        out
    })
}

fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    statm.split_whitespace().nth(1).and_then(|p| p.parse::<usize>().ok()).unwrap_or(0) * 4096
}

/// CPU time of the calling thread (from /proc/thread-self/schedstat), so results stay meaningful
/// on a machine shared with other work.
fn thread_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    Duration::from_nanos(stat.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0))
}

fn ns_per(d: Duration, n: usize) -> f64 {
    d.as_nanos() as f64 / n as f64
}

/// Wall and CPU time spent inside the index.
#[derive(Default, Clone, Copy)]
struct Spent {
    wall: Duration,
    cpu: Duration,
}

impl std::fmt::Display for Spent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.2?} wall, {:.2?} CPU", self.wall, self.cpu)
    }
}

/// Calls `get_or_create` for every series of `hosts`; returns the time spent inside the index.
fn insert(index: &Index, hosts: std::ops::Range<usize>) -> Spent {
    let mut spent = Spent::default();
    for batch in batches(hosts) {
        let (t, c) = (Instant::now(), thread_cpu());
        for labels in &batch {
            index.get_or_create(labels);
        }
        spent.wall += t.elapsed();
        spent.cpu += thread_cpu() - c;
    }
    spent
}

fn time_select(index: &Index, name: &str, matchers: &[Matcher]) {
    let mut times = Vec::new();
    let mut n = 0;
    let deadline = Instant::now() + Duration::from_secs(2);
    while times.len() < 5 || (times.len() < 50 && Instant::now() < deadline) {
        let t = Instant::now();
        n = index.select(matchers).len();
        times.push(t.elapsed());
    }
    times.sort();
    println!("  {name:<62} {n:>8} series  median {:>10.3?}  min {:>10.3?}", times[times.len() / 2], times[0]);
}

fn main() {
    let hosts: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let series = hosts * METRICS.len();
    println!("index_bench: {hosts} hosts x {} metrics = {series} series, 11 labels each", METRICS.len());

    // Input generation alone, to separate it from index work below.
    let t = Instant::now();
    let mut generated = 0;
    for batch in batches(0..hosts) {
        generated += batch.len();
    }
    let gen_time = t.elapsed();
    println!(
        "generating input label sets: {gen_time:.2?} ({:.0} ns/series, not counted below)",
        ns_per(gen_time, generated)
    );

    let (mut sip, mut fold) = (Duration::ZERO, Duration::ZERO);
    let (std_hasher, fold_hasher) = (std::hash::RandomState::new(), hashbrown::DefaultHashBuilder::default());
    let mut sink = 0u64;
    for batch in batches(0..hosts) {
        let c = thread_cpu();
        sink ^= batch.iter().map(|l| std_hasher.hash_one(l)).fold(0, |a, h| a ^ h);
        sip += thread_cpu() - c;
        let c = thread_cpu();
        sink ^= batch.iter().map(|l| fold_hasher.hash_one(l)).fold(0, |a, h| a ^ h);
        fold += thread_cpu() - c;
    }
    println!(
        "hashing a label set (CPU): std SipHash {:.0} ns, foldhash {:.0} ns (checksum {})",
        ns_per(sip, series),
        ns_per(fold, series),
        sink % 10
    );

    let rss_before = rss_bytes();
    let index = Index::new();
    let created = insert(&index, 0..hosts);
    let rss_after = rss_bytes();
    let mem = index.memory_bytes();
    println!(
        "get_or_create (new), 1 thread: {created}; {:.0} ns/series CPU, {:.2} M series/s",
        ns_per(created.cpu, series),
        series as f64 / created.cpu.as_secs_f64() / 1e6
    );
    println!(
        "memory: RSS +{:.1} MiB = {:.0} B/series; memory_bytes() {:.1} MiB = {:.0} B/series",
        (rss_after.saturating_sub(rss_before)) as f64 / (1 << 20) as f64,
        rss_after.saturating_sub(rss_before) as f64 / series as f64,
        mem as f64 / (1 << 20) as f64,
        mem as f64 / series as f64
    );

    let existing = insert(&index, 0..hosts);
    println!(
        "get_or_create (existing), 1 thread: {existing}; {:.0} ns/series CPU",
        ns_per(existing.cpu, series)
    );
    assert_eq!(index.len(), series);

    println!("select:");
    let m = |op, n: &str, v: &str| Matcher::new(op, n, v).expect("valid matcher");
    use MatchOp::*;
    time_select(
        &index,
        r#"{__name__="cpu_usage_user", hostname="host_42"}"#,
        &[m(Equal, "__name__", "cpu_usage_user"), m(Equal, "hostname", "host_42")],
    );
    time_select(&index, r#"{hostname=~"host_4.*"}"#, &[m(Regex, "hostname", "host_4.*")]);
    time_select(
        &index,
        r#"{__name__="cpu_usage_user", hostname=~"host_4.*"}"#,
        &[m(Equal, "__name__", "cpu_usage_user"), m(Regex, "hostname", "host_4.*")],
    );
    time_select(&index, r#"{hostname=~".*99"} (no literal prefix)"#, &[m(Regex, "hostname", ".*99")]);
    time_select(
        &index,
        r#"{__name__="cpu_usage_user", hostname=~"host_(12|34)"}"#,
        &[m(Equal, "__name__", "cpu_usage_user"), m(Regex, "hostname", "host_(12|34)")],
    );
    time_select(&index, r#"{__name__=~"cpu_.*"}"#, &[m(Regex, "__name__", "cpu_.*")]);
    time_select(
        &index,
        r#"{__name__="cpu_usage_idle", region="eu-west-1", rack!~"1.*"}"#,
        &[
            m(Equal, "__name__", "cpu_usage_idle"),
            m(Equal, "region", "eu-west-1"),
            m(NotRegex, "rack", "1.*"),
        ],
    );
    time_select(&index, r#"{region!="us-east-1"}"#, &[m(NotEqual, "region", "us-east-1")]);

    let t = Instant::now();
    let n = index.label_values("hostname", None).len();
    println!("label_values(hostname): {n} values in {:.2?}", t.elapsed());
    let ids = index.select(&[m(Equal, "__name__", "cpu_usage_user"), m(Regex, "hostname", "host_4.*")]);
    let t = Instant::now();
    let n = index.label_values("rack", Some(&ids)).len();
    println!("label_values(rack, {} ids): {n} values in {:.2?}", ids.len(), t.elapsed());
    let t = Instant::now();
    let n = index.label_names(Some(&ids)).len();
    println!("label_names({} ids): {n} names in {:.2?}", ids.len(), t.elapsed());
    let t = Instant::now();
    let mem = index.memory_bytes();
    println!("memory_bytes() itself: {:.2?} ({mem} bytes)", t.elapsed());
    drop(index);

    // Two threads creating disjoint halves, as a parallel WAL replay would.
    let index = Arc::new(Index::new());
    let t = Instant::now();
    let workers: Vec<_> = [0..hosts / 2, hosts / 2..hosts]
        .into_iter()
        .map(|range| {
            let index = index.clone();
            thread::spawn(move || insert(&index, range))
        })
        .collect();
    let spent: Vec<Spent> = workers.into_iter().map(|w| w.join().expect("insert thread")).collect();
    let wall = t.elapsed();
    println!(
        "get_or_create (new), 2 threads on disjoint halves: {} and {} inside the index; \
         {wall:.2?} wall incl. input generation",
        spent[0], spent[1]
    );
    assert_eq!(index.len(), series);
}

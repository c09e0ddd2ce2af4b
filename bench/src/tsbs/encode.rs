//! Rows to request bodies: Influx line protocol (as `tsbs_load_influx` sends it) and Prometheus
//! remote write 1.0.
//!
//! All bodies are built before a load starts, so the loader's clock measures the server only.
//! A line is `cpu,hostname=host_0,region=...,service_environment=test usage_user=58i,...
//! 1451606400000000000`: tags in TSBS's order, integer fields with `i` (TSBS's model) or floats
//! in their shortest exact form (noisy model), nanosecond timestamps. In remote write each field
//! is its own series `cpu_<field>` with the host's ten tags as labels: the names InfluxDB line
//! protocol gets in Prometheus-compatible systems (VictoriaMetrics, strata).

use std::io::Write as _;

use storage::{Batch, Labels, Sample};

use super::generate::{Generator, Row};
use super::hosts::{Host, STREAM_ARRIVAL, stream};
use super::{Dataset, FIELDS, MEASUREMENT, ValueModel};

/// One request body ready to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The body as sent (gzip-compressed line protocol, or snappy-compressed protobuf).
    pub body: Vec<u8>,
    /// Rows in this request.
    pub rows: u64,
    /// Points (field values) in this request.
    pub points: u64,
}

/// The per-host line prefix `cpu,hostname=...,service_environment=... ` of every host.
fn line_prefixes(dataset: &Dataset) -> Vec<Vec<u8>> {
    (0..dataset.hosts)
        .map(|id| {
            let host = Host::new(dataset.seed, id);
            let mut p = MEASUREMENT.as_bytes().to_vec();
            for (k, v) in host.pairs() {
                p.push(b',');
                p.extend_from_slice(k.as_bytes());
                p.push(b'=');
                p.extend_from_slice(v.as_bytes());
            }
            p.push(b' ');
            p
        })
        .collect()
}

/// Appends `row` as one line of line protocol (with its `\n`).
fn write_line(out: &mut Vec<u8>, prefix: &[u8], row: &Row, model: ValueModel) {
    out.extend_from_slice(prefix);
    for (i, (name, value)) in FIELDS.iter().zip(row.values).enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(name.as_bytes());
        out.push(b'=');
        // Writing into a Vec cannot fail.
        let _ = match model {
            ValueModel::Tsbs => write!(out, "{}i", value as i64),
            ValueModel::Noisy => write!(out, "{value}"),
        };
    }
    let _ = writeln!(out, " {}", row.t_ms * 1_000_000);
}

/// The whole dataset as uncompressed line protocol, rows in TSBS's order (for `tsbs-gen`).
pub fn line_protocol(
    dataset: &Dataset,
    mut sink: impl FnMut(&[u8]) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let prefixes = line_prefixes(dataset);
    let mut buf = Vec::with_capacity(1 << 20);
    for row in Generator::new(*dataset) {
        write_line(&mut buf, &prefixes[row.host], &row, dataset.model);
        if buf.len() >= 1 << 20 {
            sink(&buf)?;
            buf.clear();
        }
    }
    sink(&buf)
}

/// The longest stretch of data time one round of requests covers. Prometheus accepts a sample
/// only if it is at most 1 h older than the newest sample it holds; with workers at most one
/// round apart, two rounds of 20 min stay inside that.
pub const ROUND_SPAN_MS_MAX: i64 = 20 * 60_000;

/// Epochs (rows per host) in one round: `batch_rows` rows per worker's request, cut to
/// [`ROUND_SPAN_MS_MAX`] of data time.
pub fn epochs_per_round(dataset: &Dataset, batch_rows: usize, workers: usize) -> usize {
    let by_rows = (batch_rows * workers.max(1)) / dataset.hosts.max(1);
    let by_time = (ROUND_SPAN_MS_MAX / dataset.interval_ms.max(1)) as usize;
    by_rows.min(by_time).max(1)
}

/// The rows of each worker in each round: `[worker][round]`, rows in TSBS's order. Host `h`
/// belongs to worker `h % workers`, so a series always goes through the same sender in time
/// order (as Prometheus' queue manager shards by series, and as `tsbs_load_influx
/// --hash-workers` does); a round is [`epochs_per_round`] consecutive epochs of every host.
fn split_rows(dataset: &Dataset, batch_rows: usize, workers: usize) -> Vec<Vec<Vec<Row>>> {
    let workers = workers.max(1);
    let per_round = epochs_per_round(dataset, batch_rows, workers);
    let rounds = dataset.epochs.div_ceil(per_round);
    let mut out = vec![vec![Vec::new(); rounds]; workers];
    for row in Generator::new(*dataset) {
        let epoch = ((row.t_ms - dataset.start_ms) / dataset.interval_ms) as usize;
        out[row.host % workers][epoch / per_round].push(row);
    }
    out
}

/// The order in which the rows reach a system (`strata-bench compare --arrival`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Arrival {
    /// Worker w owns the hosts h % W == w and sends them round by round, rounds of at most
    /// 20 min of data: every series arrives in time order, as from Prometheus' queue manager
    /// or `tsbs_load_influx --hash-workers`.
    ByHost,
    /// `tsbs_load_influx`'s default (`--hash-workers=false`): the rows in generation order
    /// (time-major, every host at one time) cut into batches of `--batch-size` rows, and W
    /// workers each take the next batch from one shared queue. Batches in flight at once
    /// arrive in any order, so a series' samples arrive out of order by up to about W batches.
    SharedQueue,
    /// The same batches as shared-queue in a random order drawn from the dataset's seed
    /// (`--seed`), taken from one shared queue: samples arrive out of order by up to the whole
    /// span.
    Shuffled,
}

impl Arrival {
    /// The flag value, for reports.
    pub fn name(self) -> &'static str {
        match self {
            Arrival::ByHost => "by-host",
            Arrival::SharedQueue => "shared-queue",
            Arrival::Shuffled => "shuffled",
        }
    }
}

/// What one load sends, in the shape its [`Arrival`] needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schedule {
    /// Each worker's requests by round, `[worker][round]` ([`Arrival::ByHost`]).
    ByHost(Vec<Vec<Request>>),
    /// Batches in the order the workers take them from one shared queue.
    Queue(Vec<Request>),
}

impl Schedule {
    /// Every request, in no particular order.
    pub fn requests(&self) -> Box<dyn Iterator<Item = &Request> + '_> {
        match self {
            Schedule::ByHost(shards) => Box::new(shards.iter().flatten()),
            Schedule::Queue(queue) => Box::new(queue.iter()),
        }
    }
}

/// The batches of a shared queue: `[start, end)` row indexes in generation order (the order of
/// [`Generator`]), each `batch_rows` rows (the last one fewer), listed in the order the queue
/// hands them out: generation order for [`Arrival::SharedQueue`], a permutation drawn from `seed`
/// for [`Arrival::Shuffled`]. Empty for [`Arrival::ByHost`], which has no shared queue.
pub fn queue_batches(rows: u64, batch_rows: usize, arrival: Arrival, seed: u64) -> Vec<std::ops::Range<u64>> {
    let batch_rows = batch_rows.max(1) as u64;
    let mut batches: Vec<std::ops::Range<u64>> =
        (0..rows.div_ceil(batch_rows)).map(|b| b * batch_rows..((b + 1) * batch_rows).min(rows)).collect();
    match arrival {
        Arrival::ByHost => Vec::new(),
        Arrival::SharedQueue => batches,
        Arrival::Shuffled => {
            // Fisher-Yates over a stream of its own, so the order does not move the data.
            let mut rng = stream(seed, 0, STREAM_ARRIVAL);
            for i in (1..batches.len()).rev() {
                let j = rng.range(0, i as i64) as usize;
                batches.swap(i, j);
            }
            batches
        }
    }
}

/// The rows of each batch of [`queue_batches`], in queue order.
fn queue_rows(dataset: &Dataset, batch_rows: usize, arrival: Arrival) -> Vec<Vec<Row>> {
    let order = queue_batches(dataset.rows(), batch_rows, arrival, dataset.seed);
    let batch_rows = batch_rows.max(1);
    let mut in_generation_order: Vec<Vec<Row>> = Vec::with_capacity(order.len());
    for row in Generator::new(*dataset) {
        match in_generation_order.last_mut() {
            Some(batch) if batch.len() < batch_rows => batch.push(row),
            _ => in_generation_order.push(vec![row]),
        }
    }
    let mut slots: Vec<Option<Vec<Row>>> = in_generation_order.into_iter().map(Some).collect();
    order
        .iter()
        .filter_map(|range| slots.get_mut((range.start / batch_rows as u64) as usize)?.take())
        .collect()
}

/// Line-protocol requests for `arrival`: by host ([`influx_requests`]) or one per batch of a
/// shared queue ([`queue_batches`]), the rows of a batch in generation order.
pub fn influx_schedule(
    dataset: &Dataset,
    arrival: Arrival,
    batch_rows: usize,
    workers: usize,
    gzip: bool,
    threads: usize,
) -> Schedule {
    if arrival == Arrival::ByHost {
        return Schedule::ByHost(influx_requests(dataset, batch_rows, workers, gzip, threads));
    }
    let prefixes = line_prefixes(dataset);
    let batches = queue_rows(dataset, batch_rows, arrival);
    Schedule::Queue(parallel_map(&batches, threads, |rows| {
        influx_request(rows, &prefixes, dataset.model, gzip)
    }))
}

/// Remote-write requests for `arrival`: by host ([`prw_requests`]) or one per batch of a shared
/// queue, holding the same rows as the line-protocol batch, grouped per series (a series'
/// samples in time order, as a sender sends them).
pub fn prw_schedule(
    dataset: &Dataset,
    arrival: Arrival,
    batch_rows: usize,
    workers: usize,
    threads: usize,
) -> Schedule {
    if arrival == Arrival::ByHost {
        return Schedule::ByHost(prw_requests(dataset, batch_rows, workers, threads));
    }
    let labels = host_labels(dataset);
    let batches = queue_rows(dataset, batch_rows, arrival);
    Schedule::Queue(parallel_map(&batches, threads, |rows| prw_request(rows, &labels)))
}

fn influx_request(rows: &[Row], prefixes: &[Vec<u8>], model: ValueModel, gzip: bool) -> Request {
    let mut text = Vec::with_capacity(rows.len() * 300);
    for row in rows {
        write_line(&mut text, &prefixes[row.host], row, model);
    }
    let body = if gzip && !rows.is_empty() { gzip_bytes(&text) } else { text };
    Request { body, rows: rows.len() as u64, points: (rows.len() * FIELDS.len()) as u64 }
}

/// Line-protocol requests `[worker][round]` (see [`split_rows`]), gzip-compressed if `gzip` (as
/// `tsbs_load_influx` does by default). Encoded on `threads` threads.
pub fn influx_requests(
    dataset: &Dataset,
    batch_rows: usize,
    workers: usize,
    gzip: bool,
    threads: usize,
) -> Vec<Vec<Request>> {
    let prefixes = line_prefixes(dataset);
    let split = split_rows(dataset, batch_rows, workers);
    split
        .iter()
        .map(|rounds| {
            parallel_map(rounds, threads, |rows| influx_request(rows, &prefixes, dataset.model, gzip))
        })
        .collect()
}

fn gzip_bytes(data: &[u8]) -> Vec<u8> {
    let mut enc =
        flate2::write::GzEncoder::new(Vec::with_capacity(data.len() / 8), flate2::Compression::default());
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(data);
    enc.finish().unwrap_or_default()
}

/// The ten label sets (`cpu_<field>` plus the host's tags) of every host.
fn host_labels(dataset: &Dataset) -> Vec<Vec<Labels>> {
    (0..dataset.hosts)
        .map(|id| {
            let host = Host::new(dataset.seed, id);
            FIELDS
                .iter()
                .map(|field| {
                    let name = format!("{MEASUREMENT}_{field}");
                    let mut pairs: Vec<(&str, &str)> = vec![("__name__", name.as_str())];
                    pairs.extend(host.pairs());
                    Labels::from_pairs(&pairs)
                })
                .collect()
        })
        .collect()
}

/// Remote-write 1.0 requests `[worker][round]` (see [`split_rows`]); a request holds one series
/// per host and field with all of that series' samples in the round.
pub fn prw_requests(
    dataset: &Dataset,
    batch_rows: usize,
    workers: usize,
    threads: usize,
) -> Vec<Vec<Request>> {
    let labels = host_labels(dataset);
    split_rows(dataset, batch_rows, workers)
        .iter()
        .map(|rounds| parallel_map(rounds, threads, |rows| prw_request(rows, &labels)))
        .collect()
}

fn prw_request(rows: &[Row], labels: &[Vec<Labels>]) -> Request {
    // Hosts in order of first appearance; each host's rows are already in time order.
    let mut hosts: Vec<usize> = Vec::new();
    let mut by_host: std::collections::HashMap<usize, Vec<&Row>> = std::collections::HashMap::new();
    for row in rows {
        by_host
            .entry(row.host)
            .or_insert_with(|| {
                hosts.push(row.host);
                Vec::new()
            })
            .push(row);
    }
    let mut batch = Batch::new();
    for host in hosts {
        let host_rows = &by_host[&host];
        for (field, series) in labels[host].iter().enumerate() {
            let samples = host_rows.iter().map(|r| Sample::new(r.t_ms, r.values[field])).collect();
            batch.push(series.clone(), samples);
        }
    }
    let body = remote::prw::encode(remote::prw::Version::V1, &batch, &[]);
    Request { body, rows: rows.len() as u64, points: (rows.len() * FIELDS.len()) as u64 }
}

/// `f` over `items` on up to `threads` threads, results in the order of `items`.
fn parallel_map<T: Sync, R: Send>(items: &[T], threads: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = threads.clamp(1, items.len().max(1));
    let per = items.len().div_ceil(threads);
    if per == 0 {
        return Vec::new();
    }
    std::thread::scope(|s| {
        let handles: Vec<_> =
            items.chunks(per).map(|part| s.spawn(|| part.iter().map(&f).collect::<Vec<R>>())).collect();
        // A panic in `f` is a bug in this module; re-raise it on the caller's thread.
        handles.into_iter().flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dataset(model: ValueModel) -> Dataset {
        Dataset { hosts: 3, start_ms: 1_451_606_400_000, interval_ms: 10_000, epochs: 40, model, seed: 1 }
    }

    fn text(ds: &Dataset) -> String {
        let mut out = Vec::new();
        line_protocol(ds, |b| {
            out.extend_from_slice(b);
            Ok(())
        })
        .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn golden_first_lines_for_seed_1() {
        let t = text(&dataset(ValueModel::Tsbs));
        let first: Vec<&str> = t.lines().take(4).collect();
        assert_eq!(first, GOLDEN, "the generator's output changed: same seed must give the same bytes");
    }

    const GOLDEN: [&str; 4] = [
        "cpu,hostname=host_0,region=ap-northeast-1,datacenter=ap-northeast-1a,rack=78,os=Ubuntu16.10,arch=x86,\
         team=SF,service=10,service_version=0,service_environment=staging usage_user=99i,usage_system=90i,\
         usage_idle=55i,usage_nice=94i,usage_iowait=63i,usage_irq=20i,usage_softirq=18i,usage_steal=89i,\
         usage_guest=99i,usage_guest_nice=11i 1451606400000000000",
        "cpu,hostname=host_1,region=us-west-1,datacenter=us-west-1b,rack=21,os=Ubuntu16.10,arch=x64,team=SF,\
         service=2,service_version=0,service_environment=staging usage_user=42i,usage_system=89i,usage_idle=62i,\
         usage_nice=79i,usage_iowait=19i,usage_irq=70i,usage_softirq=77i,usage_steal=38i,usage_guest=80i,\
         usage_guest_nice=27i 1451606400000000000",
        "cpu,hostname=host_2,region=ap-northeast-1,datacenter=ap-northeast-1c,rack=10,os=Ubuntu16.04LTS,arch=x86,\
         team=CHI,service=10,service_version=1,service_environment=staging usage_user=61i,usage_system=65i,\
         usage_idle=19i,usage_nice=5i,usage_iowait=39i,usage_irq=87i,usage_softirq=81i,usage_steal=54i,\
         usage_guest=32i,usage_guest_nice=2i 1451606400000000000",
        "cpu,hostname=host_0,region=ap-northeast-1,datacenter=ap-northeast-1a,rack=78,os=Ubuntu16.10,arch=x86,\
         team=SF,service=10,service_version=0,service_environment=staging usage_user=98i,usage_system=92i,\
         usage_idle=54i,usage_nice=94i,usage_iowait=63i,usage_irq=20i,usage_softirq=18i,usage_steal=90i,\
         usage_guest=100i,usage_guest_nice=11i 1451606410000000000",
    ];

    #[test]
    fn noisy_lines_carry_full_precision_floats() {
        let t = text(&dataset(ValueModel::Noisy));
        let first = t.lines().next().unwrap();
        assert!(first.starts_with("cpu,hostname=host_0,region="), "{first}");
        let fields = first.split(' ').nth(1).unwrap();
        assert!(!fields.split(',').any(|f| f.ends_with('i')), "no integer fields: {fields}");
        let v: f64 = fields.split(',').next().unwrap().trim_start_matches("usage_user=").parse().unwrap();
        assert!(v.fract() != 0.0 && (0.0..100.0).contains(&v));
    }

    /// Lines of `requests` in round order, worker by worker within a round.
    fn lines_by_round(requests: &[Vec<Request>], gzip: bool) -> Vec<String> {
        let mut out = Vec::new();
        for round in 0..requests[0].len() {
            for worker in requests {
                let mut plain = Vec::new();
                if gzip {
                    std::io::Read::read_to_end(
                        &mut flate2::read::GzDecoder::new(&worker[round].body[..]),
                        &mut plain,
                    )
                    .unwrap();
                } else {
                    plain = worker[round].body.clone();
                }
                out.extend(String::from_utf8(plain).unwrap().lines().map(str::to_owned));
            }
        }
        out
    }

    #[test]
    fn influx_requests_hold_every_row_once_sharded_by_host() {
        let ds = dataset(ValueModel::Tsbs);
        // 7 rows per request, 2 workers, 3 hosts: rounds of 7 * 2 / 3 = 4 epochs.
        assert_eq!(epochs_per_round(&ds, 7, 2), 4);
        let reqs = influx_requests(&ds, 7, 2, false, 3);
        assert_eq!(reqs.len(), 2);
        assert_eq!(reqs[0].len(), 10, "40 epochs in rounds of 4");
        assert_eq!(reqs.iter().flatten().map(|r| r.rows).sum::<u64>(), ds.rows());
        assert_eq!(reqs[0][0].rows, 8, "hosts 0 and 2 for 4 epochs");
        let all = text(&ds);
        let mut expected: Vec<&str> = all.lines().collect();
        let mut got = lines_by_round(&reqs, false);
        expected.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, expected);
        for r in &reqs[1] {
            assert!(String::from_utf8_lossy(&r.body).lines().all(|l| l.starts_with("cpu,hostname=host_1,")));
        }
        assert_eq!(lines_by_round(&influx_requests(&ds, 7, 2, true, 2), true), lines_by_round(&reqs, false));
    }

    #[test]
    fn rounds_never_span_more_than_20_minutes_of_data() {
        let ds = Dataset { hosts: 10, epochs: 1080, ..dataset(ValueModel::Tsbs) };
        assert_eq!(epochs_per_round(&ds, 10_000, 4), 120, "20 min at 10 s, not 4000 epochs");
        let big = Dataset { hosts: 100, ..ds };
        assert_eq!(epochs_per_round(&big, 1000, 4), 40);
    }

    #[test]
    fn prw_requests_decode_to_the_same_points_per_shard_in_time_order() {
        let ds = dataset(ValueModel::Noisy);
        let shards = prw_requests(&ds, 10, 2, 2);
        assert!(shards.iter().all(|s| s.len() == shards[0].len()), "every worker has every round");
        assert_eq!(shards.len(), 2);
        let limits = remote::Limits::default();
        let mut points = 0;
        for (s, reqs) in shards.iter().enumerate() {
            let mut last_t: std::collections::HashMap<String, i64> = Default::default();
            for r in reqs {
                let decoded = remote::prw::decode(remote::prw::Version::V1, &r.body, &limits).unwrap();
                for (labels, samples) in &decoded.batch.series {
                    let host: usize = labels.get("hostname").unwrap()[5..].parse().unwrap();
                    assert_eq!(host % 2, s, "a host stays on its shard");
                    assert!(labels.metric_name().unwrap().starts_with("cpu_usage_"));
                    assert_eq!(labels.len(), 11);
                    let key = format!("{labels:?}");
                    for smp in samples {
                        assert!(last_t.get(&key).is_none_or(|t| *t < smp.t), "time order within a series");
                        last_t.insert(key.clone(), smp.t);
                        points += 1;
                    }
                }
            }
        }
        assert_eq!(points, ds.points());
        // The values are the generator's.
        let row = Generator::new(ds).nth(4).unwrap();
        let decoded =
            remote::prw::decode(remote::prw::Version::V1, &shards[row.host % 2][0].body, &limits).unwrap();
        let series = decoded
            .batch
            .series
            .iter()
            .find(|(l, _)| {
                l.get("hostname") == Some(&format!("host_{}", row.host))
                    && l.metric_name() == Some("cpu_usage_idle")
            })
            .unwrap();
        assert!(series.1.iter().any(|s| s.t == row.t_ms && s.v == row.values[2]));
    }

    #[test]
    fn queue_batches_hold_every_row_once() {
        // 10 rows per batch over 123 rows: 12 full batches and one of 3.
        for arrival in [Arrival::SharedQueue, Arrival::Shuffled] {
            let batches = queue_batches(123, 10, arrival, 7);
            assert_eq!(batches.len(), 13);
            let mut sorted = batches.clone();
            sorted.sort_by_key(|r| r.start);
            let mut next = 0;
            for r in &sorted {
                assert_eq!(r.start, next, "{arrival:?}: no gap, no overlap");
                assert!(r.end - r.start == 10 || r.end == 123);
                next = r.end;
            }
            assert_eq!(next, 123);
        }
        assert!(queue_batches(123, 10, Arrival::ByHost, 7).is_empty(), "by host has no shared queue");
    }

    #[test]
    fn shared_queue_is_in_generation_order_and_shuffled_is_deterministic_per_seed() {
        let shared = queue_batches(1000, 10, Arrival::SharedQueue, 7);
        assert!(shared.windows(2).all(|w| w[0].end == w[1].start), "generation order");
        assert_eq!(queue_batches(1000, 10, Arrival::SharedQueue, 8), shared, "no seed in the shared queue");
        let shuffled = queue_batches(1000, 10, Arrival::Shuffled, 7);
        assert_eq!(queue_batches(1000, 10, Arrival::Shuffled, 7), shuffled, "same seed, same order");
        assert_ne!(shuffled, shared, "shuffled");
        assert_ne!(queue_batches(1000, 10, Arrival::Shuffled, 8), shuffled, "another seed, another order");
        // Pinned: the order is part of what a seed reproduces.
        let first: Vec<u64> = shuffled.iter().take(5).map(|r| r.start / 10).collect();
        assert_eq!(first, SHUFFLED_SEED_7);
    }

    const SHUFFLED_SEED_7: [u64; 5] = [64, 12, 61, 44, 10];

    /// The plain lines of one line-protocol request.
    fn lines_of(req: &Request, gzip: bool) -> Vec<String> {
        let mut plain = Vec::new();
        if gzip {
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&req.body[..]), &mut plain).unwrap();
        } else {
            plain = req.body.clone();
        }
        String::from_utf8(plain).unwrap().lines().map(str::to_owned).collect()
    }

    fn queue(schedule: Schedule) -> Vec<Request> {
        match schedule {
            Schedule::Queue(q) => q,
            Schedule::ByHost(_) => panic!("not a queue"),
        }
    }

    #[test]
    fn queued_line_protocol_batches_are_cuts_of_the_generated_text() {
        let ds = dataset(ValueModel::Tsbs);
        let all = text(&ds);
        let all: Vec<&str> = all.lines().collect();
        // 7 rows per batch over 120 rows: 18 batches (the last of 1 row).
        let shared = queue(influx_schedule(&ds, Arrival::SharedQueue, 7, 4, true, 3));
        assert_eq!(shared.len(), 18);
        let sent: Vec<String> = shared.iter().flat_map(|r| lines_of(r, true)).collect();
        assert_eq!(sent, all, "the shared queue sends the generated rows in order");
        assert_eq!(shared.iter().map(|r| r.points).sum::<u64>(), ds.points());

        let shuffled = queue(influx_schedule(&ds, Arrival::Shuffled, 7, 4, false, 2));
        let order = queue_batches(ds.rows(), 7, Arrival::Shuffled, ds.seed);
        assert_eq!(shuffled.len(), order.len());
        for (req, range) in shuffled.iter().zip(&order) {
            let expected = &all[range.start as usize..range.end as usize];
            assert_eq!(lines_of(req, false), expected, "batch {range:?}");
            assert_eq!(req.rows, range.end - range.start);
        }
        assert_eq!(shuffled, queue(influx_schedule(&ds, Arrival::Shuffled, 7, 2, false, 1)), "deterministic");
    }

    #[test]
    fn queued_remote_write_batches_hold_the_same_rows_grouped_per_series_in_time_order() {
        let ds = dataset(ValueModel::Noisy);
        let limits = remote::Limits::default();
        for arrival in [Arrival::SharedQueue, Arrival::Shuffled] {
            let prw = queue(prw_schedule(&ds, arrival, 25, 4, 2));
            let order = queue_batches(ds.rows(), 25, arrival, ds.seed);
            assert_eq!(prw.len(), order.len());
            let rows: Vec<Row> = Generator::new(ds).collect();
            let mut points = 0;
            for (req, range) in prw.iter().zip(&order) {
                let decoded = remote::prw::decode(remote::prw::Version::V1, &req.body, &limits).unwrap();
                let mut got: Vec<(String, i64, u64)> = Vec::new();
                for (labels, samples) in &decoded.batch.series {
                    assert!(samples.windows(2).all(|w| w[0].t < w[1].t), "a series' samples in time order");
                    let host = labels.get("hostname").unwrap().to_owned();
                    let field = labels.metric_name().unwrap().to_owned();
                    got.extend(samples.iter().map(|s| (format!("{host} {field}"), s.t, s.v.to_bits())));
                }
                let series: std::collections::HashSet<&String> = got.iter().map(|g| &g.0).collect();
                assert_eq!(series.len(), decoded.batch.series.len(), "one entry per series in a request");
                let mut expected: Vec<(String, i64, u64)> = rows[range.start as usize..range.end as usize]
                    .iter()
                    .flat_map(|r| {
                        FIELDS
                            .iter()
                            .zip(r.values)
                            .map(|(f, v)| (format!("host_{} {MEASUREMENT}_{f}", r.host), r.t_ms, v.to_bits()))
                    })
                    .collect();
                got.sort();
                expected.sort();
                assert_eq!(got, expected, "{arrival:?} batch {range:?}");
                points += got.len() as u64;
            }
            assert_eq!(points, ds.points());
        }
    }

    #[test]
    fn same_dataset_same_bytes() {
        let ds = dataset(ValueModel::Tsbs);
        assert_eq!(influx_requests(&ds, 16, 2, true, 1), influx_requests(&ds, 16, 2, true, 3));
        assert_eq!(prw_requests(&ds, 16, 3, 1), prw_requests(&ds, 16, 3, 2));
    }
}

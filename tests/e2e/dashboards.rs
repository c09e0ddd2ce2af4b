//! The Grafana dashboards in `dashboards/` against a real strata.
//!
//! Every target of every panel is evaluated the way Grafana 11's Prometheus data source would
//! send it: template variables are resolved through strata's label-values API and substituted
//! with Grafana's escaping, `$__interval`, `$__rate_interval`, `$__range` and friends are
//! computed with Grafana's own arithmetic (see [`grafana`]), the range is aligned to the step,
//! and the query goes to `/api/v1/query_range` (and also to `/api/v1/query` for instant
//! targets). Each must parse and return at least one finite value; legends may only name labels
//! the result has; heatmap targets must return `le` buckets.
//!
//! The data is real: the TSBS devops dashboard runs over TSBS-shaped `cpu` lines written as
//! InfluxDB line protocol; the strata health and node-exporter dashboards run over what a real
//! Prometheus (Debian's 2.42) scraped from a real node-exporter and from strata's own `/metrics`
//! and remote-wrote to strata. That second test is skipped with a notice when the two programs
//! are missing, and fails under `CI` (`.ci/run` installs them).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::Strata;
use crate::common::process::{
    Prometheus, free_port, get_text, highest_sent_ms, peer, start_node_exporter, wait_for,
};
use serde_json::Value;

/// The provisioned data source's uid, which every dashboard's `datasource` variable defaults to.
const DATASOURCE_UID: &str = "strata";

fn dashboards_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("dashboards")
}

fn load(name: &str) -> Value {
    let path = dashboards_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

// ------------------------------------------------------------------------------------------
// Static checks
// ------------------------------------------------------------------------------------------

/// Every dashboard is current-schema Grafana JSON that imports cleanly: unique uid and panel
/// ids, panels inside the 24-column grid without overlapping, every query on the `datasource`
/// variable, and the provisioning files agree with the dashboards.
#[test]
fn dashboards_are_well_formed() {
    let mut uids = BTreeSet::new();
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dashboards_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            names.push(path.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    names.sort();
    assert_eq!(names, ["node-exporter.json", "strata-health.json", "tsbs-devops.json"]);
    for name in &names {
        let dashboard = load(name);
        let problems = grafana::lint(&dashboard);
        assert!(problems.is_empty(), "{name}:\n  {}", problems.join("\n  "));
        let uid = dashboard["uid"].as_str().unwrap().to_owned();
        assert!(uids.insert(uid.clone()), "{name}: uid {uid} used twice");
    }

    let provisioning = dashboards_dir().join("provisioning");
    let datasource = std::fs::read_to_string(provisioning.join("datasources/strata.yaml")).unwrap();
    let setting = |text: &str, key: &str| -> Option<String> {
        text.lines()
            .map(str::trim)
            .find_map(|line| line.strip_prefix(key)?.strip_prefix(':').map(|v| v.trim().to_owned()))
    };
    assert_eq!(setting(&datasource, "type").as_deref(), Some("prometheus"));
    assert_eq!(setting(&datasource, "- name").as_deref(), Some("strata"));
    assert_eq!(setting(&datasource, "uid").as_deref(), Some(DATASOURCE_UID));
    assert_eq!(setting(&datasource, "url").as_deref(), Some("http://127.0.0.1:9201"));
    let time_interval = setting(&datasource, "timeInterval").expect("timeInterval");
    assert!(grafana::parse_interval_ms(&time_interval).is_some(), "timeInterval {time_interval}");
    let provider = std::fs::read_to_string(provisioning.join("dashboards/strata.yaml")).unwrap();
    assert_eq!(setting(&provider, "type").as_deref(), Some("file"));
    assert!(setting(&provider, "path").is_some_and(|p| p.starts_with('/')), "{provider}");
}

/// The TSBS dashboard opens where the README's tour puts its data: `strata-bench tsbs-gen`
/// ends the data at the last midnight UTC, so the default range is yesterday and today in UTC
/// (Grafana rounds `/d` in the dashboard's time zone), not the last hour, which is empty.
#[test]
fn tsbs_devops_dashboard_opens_on_the_tour_data() {
    let dashboard = load("tsbs-devops.json");
    assert_eq!(dashboard["time"]["from"], "now-1d/d");
    assert_eq!(dashboard["time"]["to"], "now/d");
    assert_eq!(dashboard["timezone"], "utc");
}

/// The interval arithmetic reproduces Grafana's: cases from Grafana's own
/// `pkg/promlib/models` tests and the frontend's `rangeutil`.
#[test]
fn interval_arithmetic_matches_grafana() {
    use grafana::{IntervalInputs, step_and_rate_interval};
    let h = 3_600_000;
    // (range, frontend intervalMs, maxDataPoints, target min step, ds scrape, expected step)
    let cases: [(i64, i64, i64, &str, &str, i64); 8] = [
        (48 * h, 300_000, 761, "10m", "", 600_000),
        (48 * h, 300_000, 761, "2m", "", 300_000),
        (12 * h, 0, 0, "", "15s", 30_000),
        (h, 0, 0, "", "15s", 15_000),
        (48 * h, 0, 0, "", "240s", 240_000),
        (48 * h, 60_000, 0, "$__interval", "15s", 120_000),
        (2 * 24 * h, 100_000, 12384, "$__rate_interval", "30s", 130_000),
        (h, 0, 10, "", "15s", 300_000),
    ];
    for (range_ms, interval_ms, max_data_points, min_step, scrape, want) in cases {
        let inputs = IntervalInputs {
            range_ms,
            interval_ms,
            max_data_points,
            min_step: min_step.to_owned(),
            scrape: scrape.to_owned(),
        };
        assert_eq!(step_and_rate_interval(&inputs).0, want, "{inputs:?}");
    }
    // $__rate_interval = max($__interval + scrape, 4 * scrape), from the frontend's interval.
    let rate = |interval_ms, scrape: &str| {
        let inputs = IntervalInputs {
            range_ms: h,
            interval_ms,
            max_data_points: 1000,
            min_step: String::new(),
            scrape: scrape.to_owned(),
        };
        step_and_rate_interval(&inputs).1
    };
    assert_eq!(rate(100_000, "30s"), 130_000);
    assert_eq!(rate(60_000, "30s"), 120_000);
    assert_eq!(rate(1_000, "1s"), 4_000);
    assert_eq!(rate(5_000, "1s"), 6_000);
    assert_eq!(rate(15_000, ""), 60_000);
    // The frontend rounds range / resolution, then applies the lower limit.
    assert_eq!(grafana::frontend_interval_ms(h, 960, 15_000), 15_000);
    assert_eq!(grafana::frontend_interval_ms(6 * h, 960, 1_000), 20_000);
    assert_eq!(grafana::frontend_interval_ms(300_000, 1920, 1), 200);
    // How Grafana prints durations: kbn style for $__interval, Go's Duration.String for
    // $__rate_interval.
    assert_eq!(grafana::kbn_interval(90_000), "1m");
    assert_eq!(grafana::kbn_interval(500), "500ms");
    assert_eq!(grafana::go_duration(4_000), "4s");
    assert_eq!(grafana::go_duration(90_000), "1m30s");
    assert_eq!(grafana::go_duration(3_600_000), "1h0m0s");
    assert_eq!(grafana::go_duration(1_500), "1.5s");
    // Grafana's escaping of variable values for Prometheus (classic behaviour).
    assert_eq!(grafana::regex_escape("127.0.0.1:9100"), r"127\\.0\\.0\\.1:9100");
    assert_eq!(grafana::regex_escape(r"a\b(c)"), r"a\\\\b\\(c\\)");
}

// ------------------------------------------------------------------------------------------
// TSBS devops
// ------------------------------------------------------------------------------------------

/// TSBS's devops `cpu` measurement for an hour, as its influx loader sends it, then every panel
/// of `tsbs-devops.json`.
#[test]
fn tsbs_devops_dashboard_panels_return_data() {
    let dir = tempfile::tempdir().unwrap();
    let mut strata = Strata::start(&dir.path().join("data"));
    strata.wait_ready();

    const HOSTS: usize = 12;
    const INTERVAL_S: i64 = 10;
    let to = now_ms() / 1000 / INTERVAL_S * INTERVAL_S;
    let from = to - 3600;
    let mut devops = Devops::new(HOSTS, 0x5eed);
    let mut batch = String::new();
    let mut written = 0;
    for t in (from..=to).step_by(INTERVAL_S as usize) {
        devops.lines(t * 1_000_000_000, &mut batch);
        if batch.len() > 256 * 1024 || t == to {
            let reply = strata.post("/write?db=benchmark", &[], batch.as_bytes());
            assert_eq!(reply.status, 204, "{}", reply.body);
            written += batch.lines().count();
            batch.clear();
        }
    }
    assert_eq!(written, HOSTS * 361);

    let source = grafana::DataSource { scrape: "10s".to_owned() };
    let range = grafana::TimeRange { from_ms: (to - 3600) * 1000, to_ms: now_ms() };
    let report = grafana::evaluate(&strata, &load("tsbs-devops.json"), &source, &range);
    report.assert_ok();
    eprintln!("tsbs-devops.json: {} queries, each returned data", report.queries);
    assert!(report.queries >= 20, "only {} queries evaluated", report.queries);
    assert_eq!(strata.terminate().code(), Some(0));
}

/// TSBS's devops generator, reduced to the `cpu` measurement: the same tag set and value
/// shape (ten integer percentages doing bounded random walks), deterministic from a seed.
struct Devops {
    hosts: Vec<(String, [f64; 10])>,
    seed: u64,
}

const CPU_FIELDS: [&str; 10] = [
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

impl Devops {
    fn new(hosts: usize, seed: u64) -> Devops {
        const REGIONS: [&str; 4] = ["us-east-1", "us-west-2", "eu-west-1", "ap-southeast-1"];
        const OS: [&str; 3] = ["Ubuntu16.10", "Ubuntu16.04LTS", "Ubuntu15.10"];
        const TEAMS: [&str; 4] = ["SF", "NYC", "LON", "CHI"];
        const ENVS: [&str; 3] = ["production", "staging", "test"];
        let mut devops = Devops { hosts: Vec::new(), seed };
        for i in 0..hosts {
            let region = REGIONS[i % REGIONS.len()];
            let tags = format!(
                "hostname=host_{i},region={region},datacenter={region}{dc},rack={rack},os={os},arch={arch},\
                 team={team},service={service},service_version={version},service_environment={env}",
                dc = ["a", "b", "c"][devops.next() as usize % 3],
                rack = devops.next() % 100,
                os = OS[devops.next() as usize % OS.len()],
                arch = ["x64", "x86"][devops.next() as usize % 2],
                team = TEAMS[devops.next() as usize % TEAMS.len()],
                service = devops.next() % 20,
                version = devops.next() % 2,
                env = ENVS[devops.next() as usize % ENVS.len()],
            );
            let start = std::array::from_fn(|_| (devops.next() % 100) as f64);
            devops.hosts.push((tags, start));
        }
        devops
    }

    /// xorshift64*: deterministic and good enough for test data.
    fn next(&mut self) -> u64 {
        self.seed ^= self.seed >> 12;
        self.seed ^= self.seed << 25;
        self.seed ^= self.seed >> 27;
        self.seed.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11
    }

    /// One `cpu` line per host at `t_ns`, each field stepped by up to ±5.
    fn lines(&mut self, t_ns: i64, out: &mut String) {
        for h in 0..self.hosts.len() {
            let mut fields = String::new();
            for (f, field) in CPU_FIELDS.iter().enumerate() {
                let step = (self.next() % 11) as f64 - 5.0;
                let value = (self.hosts[h].1[f] + step).clamp(0.0, 100.0);
                self.hosts[h].1[f] = value;
                if f > 0 {
                    fields.push(',');
                }
                fields.push_str(&format!("{field}={}i", value as i64));
            }
            out.push_str(&format!("cpu,{} {fields} {t_ns}\n", self.hosts[h].0));
        }
    }
}

// ------------------------------------------------------------------------------------------
// strata health and node-exporter, through a real Prometheus
// ------------------------------------------------------------------------------------------

/// Prometheus scrapes node-exporter and strata's `/metrics` every second and remote-writes
/// everything to strata, while clients query strata and one sends bad writes; strata flushes
/// and compacts often. Then every panel of `strata-health.json` and `node-exporter.json`.
#[test]
fn health_and_node_exporter_dashboards_panels_return_data() {
    let test = "health_and_node_exporter_dashboards_panels_return_data";
    let (Some(prometheus), Some(node_exporter)) = (
        peer("prometheus", "prometheus", test),
        peer("prometheus-node-exporter", "prometheus-node-exporter", test),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // Flush every couple of seconds and compact every second file, so the flush, compaction
    // and per-partition panels have something to show within a short run.
    let mut strata = Strata::start_with(
        &dir.path().join("strata"),
        &["--head-flush-interval", "2s", "--maintenance-interval", "1s", "--compact-files-min", "2"],
    );
    strata.wait_ready();

    // The collectors the dashboard reads (all of them are in node-exporter's defaults).
    let collectors = ["cpu", "diskstats", "filesystem", "loadavg", "meminfo", "netdev", "stat", "uname"];
    let (_node, node_addr) = start_node_exporter(&node_exporter, dir.path(), &collectors);
    let prom_addr = format!("127.0.0.1:{}", free_port());
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: node\n    \
         static_configs:\n      - targets: ['{node_addr}']\n  - job_name: strata\n    static_configs:\n      \
         - targets: ['{strata}']\nremote_write:\n  - url: {write}\n    queue_config:\n      \
         batch_send_deadline: 1s\n",
        strata = strata.addr(),
        write = strata.url("/api/v1/write"),
    );
    let mut prom = Prometheus::start(&prometheus, dir.path(), &prom_addr, &config, &[]);
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let prom_url = prom.url.clone();

    // Clients while Prometheus scrapes: Grafana-like reads, and one sender of bad writes.
    let stop = AtomicBool::new(false);
    let strata_url = strata.url("");
    let started = Instant::now();
    std::thread::scope(|scope| {
        scope.spawn(|| client_traffic(&strata_url, &stop));
        // Long enough for 4 s rate windows to fill, and until Prometheus has scraped several
        // flushes and a compaction, the last of them at least 3 s (3 scrapes) ago: a rate
        // window before the end of the run then holds a scrape from before and one from after.
        let scraped = "min_over_time(strata_storage_compactions_total[3s]) >= 1 \
                       and min_over_time(strata_storage_flushes_total[3s]) >= 3";
        let url = format!("{prom_url}/api/v1/query?{}", form(&[("query", scraped)]));
        wait_for(prom.log(), "Prometheus to scrape flushes and a compaction", || {
            let answer = get_text(&agent, &url).map(|(_, t)| t).unwrap_or_default();
            let found = serde_json::from_str::<Value>(&answer)
                .is_ok_and(|json| json["data"]["result"].as_array().is_some_and(|r| !r.is_empty()));
            started.elapsed() >= Duration::from_secs(12) && found
        });
        stop.store(true, Ordering::Relaxed);
    });
    let to = now_ms();
    // Everything scraped before `to` must have reached strata; 3 s past it also covers a
    // target whose scrape ended after the other target's later scrape started.
    wait_for(prom.log(), "remote write to send past the run", || {
        highest_sent_ms(&agent, &prom_url).is_some_and(|sent| sent >= to + 3000)
    });
    prom.terminate();

    // Grafana's "Last 5 minutes", with the data source's scrape interval set to Prometheus' 1 s.
    let source = grafana::DataSource { scrape: "1s".to_owned() };
    let range = grafana::TimeRange { from_ms: to - 300_000, to_ms: to };
    let mut failures = Vec::new();
    let mut queries = 0;
    for name in ["strata-health.json", "node-exporter.json"] {
        let report = grafana::evaluate(&strata, &load(name), &source, &range);
        queries += report.queries;
        failures.extend(report.failures.iter().map(|f| format!("{name}: {f}")));
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    eprintln!("strata-health.json, node-exporter.json: {queries} queries, each returned data");
    assert!(queries >= 80, "only {queries} queries evaluated");
    assert_eq!(strata.terminate().code(), Some(0), "log:\n{}", strata.log());
}

/// What Grafana users and a misconfigured sender do to strata while it is scraped: the read
/// endpoints a dashboard uses, an undecodable remote-write body and a bad line-protocol line.
fn client_traffic(base: &str, stop: &AtomicBool) {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let now = || (now_ms() / 1000).to_string();
    let mut round = 0;
    while !stop.load(Ordering::Relaxed) {
        let t = now();
        let start = (now_ms() / 1000 - 60).to_string();
        let reads = [
            format!("/api/v1/query?{}", form(&[("query", "up"), ("time", &t)])),
            format!(
                "/api/v1/query_range?{}",
                form(&[("query", "rate(up[1m])"), ("start", &start), ("end", &t), ("step", "1")])
            ),
            format!("/api/v1/series?{}", form(&[("match[]", "up"), ("start", &start)])),
            "/api/v1/labels".to_owned(),
            "/api/v1/label/job/values".to_owned(),
        ];
        for path in &reads {
            let _ = agent.get(format!("{base}{path}")).call();
        }
        if round % 10 == 0 {
            let _ = agent.post(format!("{base}/api/v1/write")).send(&b"not snappy"[..]);
            let _ =
                agent.post(format!("{base}/write?db=x")).send(&b"cpu,host=a usage_user=1\nnot a line\n"[..]);
        }
        round += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn form(pairs: &[(&str, &str)]) -> String {
    serde_urlencoded::to_string(pairs).unwrap()
}

// ------------------------------------------------------------------------------------------
// Grafana, as far as turning a dashboard into HTTP requests goes
// ------------------------------------------------------------------------------------------

/// What Grafana (11.x, Prometheus data source, server-side query path) does between a dashboard
/// JSON and the Prometheus API, transcribed from its source:
///
/// - frontend `rangeutil.calculateInterval`: `intervalMs` = round(range / maxDataPoints), at
///   least the panel's min interval or the data source's `timeInterval`; maxDataPoints is the
///   panel's setting or its width in pixels (taken here as a 1920 px wide dashboard);
/// - backend `pkg/promlib/models/query.go` `calculatePrometheusInterval`: the step, never below
///   range / 11000; `interpolateVariables`: `$__interval` (kbn format of the step),
///   `$__rate_interval` = max(intervalMs + scrape, 4 × scrape) (Go's Duration.String), `$__range`
///   (rounded seconds + "s"); `AlignTimeRange`: start and end rounded down to the step;
/// - frontend `templateSrv.replace` with the data source's `interpolateQueryExpr`: a single-value
///   variable is inserted with `\` and `'` escaped, a multi-value or include-all variable with
///   regex metacharacters escaped and several values as `(a|b)`, "All" as the variable's
///   `allValue` if set, else as every value;
/// - `metric_find_query.ts`: `label_values(selector, label)` is
///   `/api/v1/label/<label>/values?match[]=<selector>`.
mod grafana {
    use super::*;

    /// The data source's settings that change queries.
    pub struct DataSource {
        /// `jsonData.timeInterval`: the scrape interval of whatever writes the data.
        pub scrape: String,
    }

    /// The dashboard's time range, resolved.
    pub struct TimeRange {
        pub from_ms: i64,
        pub to_ms: i64,
    }

    /// The outcome of evaluating one dashboard.
    #[derive(Default)]
    pub struct Report {
        /// Requests made for panel targets.
        pub queries: usize,
        /// One line per target that did not parse or returned no usable data.
        pub failures: Vec<String>,
    }

    impl Report {
        pub fn assert_ok(&self) {
            assert!(
                self.failures.is_empty(),
                "{} failures:\n{}",
                self.failures.len(),
                self.failures.join("\n")
            );
        }
    }

    /// Grafana's unit thresholds for rounding an interval, in ms: (bound, rounded value).
    const ROUNDING: [(i64, i64); 29] = [
        (10, 1),
        (15, 10),
        (35, 20),
        (75, 50),
        (150, 100),
        (350, 200),
        (750, 500),
        (1_500, 1_000),
        (3_500, 2_000),
        (7_500, 5_000),
        (12_500, 10_000),
        (17_500, 15_000),
        (25_000, 20_000),
        (45_000, 30_000),
        (90_000, 60_000),
        (210_000, 120_000),
        (450_000, 300_000),
        (750_000, 600_000),
        (1_050_000, 900_000),
        (1_500_000, 1_200_000),
        (2_700_000, 1_800_000),
        (5_400_000, 3_600_000),
        (9_000_000, 7_200_000),
        (16_200_000, 10_800_000),
        (32_400_000, 21_600_000),
        (86_400_000, 43_200_000),
        (604_800_000, 86_400_000),
        (1_814_400_000, 604_800_000),
        (3_628_800_000, 2_592_000_000),
    ];

    /// `roundInterval`: the frontend compares with `<`, the backend (`gtime.RoundInterval`) with
    /// `<=` (except its last bound).
    fn round_interval(ms: i64, inclusive: bool) -> i64 {
        let last = ROUNDING.len() - 1;
        for (i, (bound, value)) in ROUNDING.iter().enumerate() {
            // The backend's 24h row returns 12h up to 1d and its 48h row 24h; both tables agree
            // on every value, so one table serves both with the comparison switched.
            let below = if inclusive && i != last { ms <= *bound } else { ms < *bound };
            if below {
                return *value;
            }
        }
        31_536_000_000
    }

    /// The frontend's `calculateInterval(range, resolution, lowLimit)`.
    pub fn frontend_interval_ms(range_ms: i64, resolution: i64, low_limit_ms: i64) -> i64 {
        round_interval(range_ms / resolution.max(1), false).max(low_limit_ms)
    }

    /// What the backend needs to compute a target's step.
    #[derive(Debug)]
    pub struct IntervalInputs {
        pub range_ms: i64,
        /// The frontend's `intervalMs` (0 if none was sent).
        pub interval_ms: i64,
        /// 0 means Grafana's default resolution, 1500.
        pub max_data_points: i64,
        /// The target's "Min step" (`interval`), possibly a variable.
        pub min_step: String,
        /// The data source's `timeInterval`.
        pub scrape: String,
    }

    /// The backend's (step, `$__rate_interval`) in ms.
    pub fn step_and_rate_interval(q: &IntervalInputs) -> (i64, i64) {
        let variable = q.min_step.starts_with("$__") || q.min_step.starts_with("${__");
        let is_rate = matches!(q.min_step.as_str(), "$__rate_interval" | "${__rate_interval}");
        let min_step = if variable { "" } else { q.min_step.as_str() };
        // gtime.GetIntervalFrom(dsScrape, minStep, intervalMs, 15s)
        let min_interval = match min_step {
            "" | "0s" if q.interval_ms != 0 => q.interval_ms,
            "" | "0s" if !q.scrape.is_empty() => parse_interval_ms(&q.scrape).unwrap_or(15_000),
            "" | "0s" => 15_000,
            other => parse_interval_ms(other).unwrap_or(15_000),
        };
        let resolution = if q.max_data_points == 0 { 1500 } else { q.max_data_points };
        let raw = q.range_ms / resolution;
        let calculated = if raw < min_interval { min_interval } else { round_interval(raw, true) };
        let safe = round_interval(q.range_ms / 11_000, true);
        let adjusted = calculated.max(safe);
        let scrape_ms = |s: &str| parse_interval_ms(if s.is_empty() { "15s" } else { s }).unwrap_or(15_000);
        let rate_of = |interval: i64, scrape: i64| (interval + scrape).max(4 * scrape);
        let step = if is_rate { rate_of(adjusted, scrape_ms(&q.scrape)) } else { adjusted };
        // interpolateVariables: the requested min step stands in for the scrape interval.
        let rate_interval = if is_rate {
            step
        } else {
            let requested = match q.min_step.as_str() {
                "$__interval" | "${__interval}" => kbn_interval(step),
                "" => q.scrape.clone(),
                other => other.to_owned(),
            };
            rate_of(q.interval_ms, scrape_ms(&requested))
        };
        (step, rate_interval)
    }

    /// A Grafana interval string (`15s`, `1m`, `500ms`, `2h`, bare seconds) in ms.
    pub fn parse_interval_ms(text: &str) -> Option<i64> {
        let text = text.trim().trim_start_matches(['<', '>']);
        if let Ok(seconds) = text.parse::<i64>() {
            return Some(seconds * 1000);
        }
        let split = text.find(|c: char| !c.is_ascii_digit())?;
        let (number, unit) = text.split_at(split);
        let n: i64 = number.parse().ok()?;
        let unit_ms = match unit {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 604_800_000,
            _ => return None,
        };
        Some(n * unit_ms)
    }

    /// `gtime.FormatInterval`: the largest whole unit.
    pub fn kbn_interval(ms: i64) -> String {
        const UNITS: [(i64, &str); 5] =
            [(31_536_000_000, "y"), (86_400_000, "d"), (3_600_000, "h"), (60_000, "m"), (1_000, "s")];
        for (size, unit) in UNITS {
            if ms >= size {
                return format!("{}{unit}", ms / size);
            }
        }
        format!("{}ms", ms.max(1))
    }

    /// Go's `time.Duration.String` for a whole number of ms.
    pub fn go_duration(ms: i64) -> String {
        if ms == 0 {
            return "0s".to_owned();
        }
        if ms < 1000 {
            return format!("{ms}ms");
        }
        let (h, m, s, frac) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
        let seconds = if frac == 0 {
            format!("{s}s")
        } else {
            format!("{s}.{}s", format!("{frac:03}").trim_end_matches('0'))
        };
        match (h, m) {
            (0, 0) => seconds,
            (0, m) => format!("{m}m{seconds}"),
            (h, m) => format!("{h}h{m}m{seconds}"),
        }
    }

    /// `prometheusRegularEscape` (classic): for single-value variables.
    fn regular_escape(value: &str) -> String {
        value.replace('\\', r"\\").replace('\'', r"\\'")
    }

    /// `prometheusSpecialRegexEscape` (classic): for multi-value and include-all variables.
    pub fn regex_escape(value: &str) -> String {
        let mut out = String::new();
        for c in value.chars() {
            match c {
                '\\' => out.push_str(r"\\\\"),
                '$' | '^' | '*' | '{' | '}' | '[' | ']' | '+' | '?' | '.' | '(' | ')' | '|' => {
                    out.push_str(r"\\");
                    out.push(c);
                }
                _ => out.push(c),
            }
        }
        out
    }

    /// A dashboard variable with its selected value(s).
    struct Variable {
        name: String,
        multi: bool,
        include_all: bool,
        /// The selection; `None` means "All".
        selected: Option<Vec<String>>,
        all_value: Option<String>,
        options: Vec<String>,
    }

    impl Variable {
        /// `interpolateQueryExpr` applied to the selection.
        fn format(&self) -> String {
            let values = match &self.selected {
                None => match &self.all_value {
                    Some(all) => return all.clone(),
                    None => self.options.clone(),
                },
                Some(values) => values.clone(),
            };
            if !self.multi && !self.include_all {
                return values.first().map(|v| regular_escape(v)).unwrap_or_default();
            }
            let escaped: Vec<String> = values.iter().map(|v| regex_escape(v)).collect();
            match escaped.len() {
                1 => escaped[0].clone(),
                _ => format!("({})", escaped.join("|")),
            }
        }
    }

    /// Which values the evaluation selects.
    #[derive(Clone, Copy, Debug)]
    enum Selection {
        /// What the dashboard opens with: its saved `current` ("All"), else the first value.
        Defaults,
        /// The first value of every variable.
        First,
    }

    /// `templateSrv.replace` for the dashboard's variables: `$name`, `${name}`, `${name:fmt}`
    /// and `[[name]]`; other `$` references are left for the backend.
    fn substitute(text: &str, variables: &[Variable]) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(at) = rest.find(['$', '[']) {
            out.push_str(&rest[..at]);
            rest = &rest[at..];
            let (name, len) = if let Some(inner) = rest.strip_prefix("${") {
                match inner.find('}') {
                    Some(end) => (inner[..end].split(':').next().unwrap_or(""), end + 3),
                    None => ("", 0),
                }
            } else if let Some(inner) = rest.strip_prefix("[[") {
                match inner.find("]]") {
                    Some(end) => (inner[..end].split(':').next().unwrap_or(""), end + 4),
                    None => ("", 0),
                }
            } else if let Some(inner) = rest.strip_prefix('$') {
                let end =
                    inner.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(inner.len());
                (&inner[..end], end + 1)
            } else {
                ("", 0)
            };
            match variables.iter().find(|v| !name.is_empty() && v.name == name) {
                Some(variable) => {
                    out.push_str(&variable.format());
                    rest = &rest[len..];
                }
                None => {
                    out.push_str(&rest[..1]);
                    rest = &rest[1..];
                }
            }
        }
        out.push_str(rest);
        out
    }

    /// Resolves the dashboard's variables in order (later ones may use earlier ones).
    fn resolve_variables(
        strata: &Strata,
        dashboard: &Value,
        range: &TimeRange,
        selection: Selection,
    ) -> Result<Vec<Variable>, String> {
        let mut variables: Vec<Variable> = Vec::new();
        for v in dashboard["templating"]["list"].as_array().into_iter().flatten() {
            let name = v["name"].as_str().unwrap_or_default().to_owned();
            match v["type"].as_str() {
                Some("datasource") => continue,
                Some("query") => {}
                other => return Err(format!("variable {name}: type {other:?} is not emulated")),
            }
            if !v["regex"].as_str().unwrap_or_default().is_empty() {
                return Err(format!("variable {name}: a regex filter is not emulated"));
            }
            let definition = match &v["query"] {
                Value::String(query) => query.clone(),
                query => query["query"].as_str().unwrap_or_default().to_owned(),
            };
            let query = substitute(&definition, &variables);
            let mut options =
                label_values(strata, &query, range).map_err(|e| format!("variable {name}: {e}"))?;
            if options.is_empty() {
                return Err(format!("variable {name}: {query} found no values"));
            }
            if v["sort"].as_i64().unwrap_or(0) != 0 {
                options.sort();
            }
            let saved_all = v["current"]["value"]
                .as_array()
                .map(|values| values.iter().any(|x| x == "$__all"))
                .unwrap_or(v["current"]["value"] == "$__all");
            let include_all = v["includeAll"].as_bool().unwrap_or(false);
            let selected = match selection {
                Selection::Defaults if include_all && saved_all => None,
                _ => Some(vec![options[0].clone()]),
            };
            variables.push(Variable {
                name,
                multi: v["multi"].as_bool().unwrap_or(false),
                include_all,
                selected,
                all_value: v["allValue"].as_str().filter(|s| !s.is_empty()).map(str::to_owned),
                options,
            });
        }
        Ok(variables)
    }

    /// `label_values([selector, ]label)` through strata's label-values endpoint.
    fn label_values(strata: &Strata, query: &str, range: &TimeRange) -> Result<Vec<String>, String> {
        let inner = query
            .trim()
            .strip_prefix("label_values(")
            .and_then(|q| q.strip_suffix(')'))
            .ok_or_else(|| format!("{query}: only label_values() is emulated"))?;
        let (selector, label) = match inner.rsplit_once(',') {
            Some((selector, label)) => (Some(selector.trim()), label.trim()),
            None => (None, inner.trim()),
        };
        let start = (range.from_ms / 1000).to_string();
        let end = ((range.to_ms + 999) / 1000).to_string();
        let mut params = vec![("start", start.as_str()), ("end", end.as_str())];
        if let Some(selector) = selector {
            params.push(("match[]", selector));
        }
        let reply = strata.get(&format!("/api/v1/label/{label}/values?{}", form(&params)));
        let json: Value =
            serde_json::from_str(&reply.body).map_err(|e| format!("{query}: {e}: {}", reply.body))?;
        if json["status"] != "success" {
            return Err(format!("{query}: {}", reply.body));
        }
        Ok(json["data"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect())
    }

    /// Panels in display order, rows' nested panels included; row panels themselves are left
    /// out.
    pub fn panels(dashboard: &Value) -> Vec<&Value> {
        let mut out = Vec::new();
        for panel in dashboard["panels"].as_array().into_iter().flatten() {
            if panel["type"] == "row" {
                out.extend(panel["panels"].as_array().into_iter().flatten());
            } else {
                out.push(panel);
            }
        }
        out
    }

    /// Evaluates every target of every panel, once with the dashboard's default variable values
    /// and once with every variable on its first value.
    pub fn evaluate(strata: &Strata, dashboard: &Value, source: &DataSource, range: &TimeRange) -> Report {
        let mut report = Report::default();
        for selection in [Selection::Defaults, Selection::First] {
            let variables = match resolve_variables(strata, dashboard, range, selection) {
                Ok(variables) => variables,
                Err(e) => {
                    report.failures.push(e);
                    continue;
                }
            };
            for panel in panels(dashboard) {
                for target in panel["targets"].as_array().into_iter().flatten() {
                    if target["hide"].as_bool() == Some(true) {
                        continue;
                    }
                    let label = format!(
                        "[{selection:?}] panel {:?} target {}",
                        panel["title"].as_str().unwrap_or_default(),
                        target["refId"].as_str().unwrap_or_default()
                    );
                    let outcomes = evaluate_target(strata, panel, target, &variables, source, range);
                    report.queries += outcomes.len();
                    for outcome in outcomes {
                        if let Err(e) = outcome {
                            report.failures.push(format!("{label}: {e}"));
                        }
                    }
                }
            }
        }
        report
    }

    /// The requests Grafana makes for one target, and what was wrong with each answer.
    fn evaluate_target(
        strata: &Strata,
        panel: &Value,
        target: &Value,
        variables: &[Variable],
        source: &DataSource,
        range: &TimeRange,
    ) -> Vec<Result<(), String>> {
        let range_ms = range.to_ms - range.from_ms;
        let width_px = panel["gridPos"]["w"].as_i64().unwrap_or(24) * 1920 / 24;
        let max_data_points = panel["maxDataPoints"].as_i64().unwrap_or(width_px);
        let low_limit = panel["interval"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(|s| substitute(s, variables))
            .unwrap_or_else(|| source.scrape.clone());
        let interval_ms =
            frontend_interval_ms(range_ms, max_data_points, parse_interval_ms(&low_limit).unwrap_or(1));
        let min_step = target["interval"].as_str().unwrap_or_default().to_owned();
        let (step, rate_interval) = step_and_rate_interval(&IntervalInputs {
            range_ms,
            interval_ms,
            max_data_points,
            min_step,
            scrape: source.scrape.clone(),
        });

        let expr = substitute(target["expr"].as_str().unwrap_or_default(), variables);
        let range_s = (range_ms as f64 / 1000.0).round() as i64;
        let mut expr = expr;
        for (from, to) in [
            ("$__interval_ms", step.to_string()),
            ("$__interval", kbn_interval(step)),
            ("$__range_ms", range_ms.to_string()),
            ("$__range_s", range_s.to_string()),
            ("$__range", format!("{range_s}s")),
            ("$__rate_interval_ms", rate_interval.to_string()),
            ("$__rate_interval", go_duration(rate_interval)),
        ] {
            expr = expr.replace(&format!("${{{}}}", &from[1..]), &to).replace(from, &to);
        }
        if let Some(at) = expr.find('$') {
            return vec![Err(format!("unresolved variable at {:?} in {expr}", &expr[at..]))];
        }

        let secs = |ms: i64| format!("{}", ms as f64 / 1000.0);
        let start = range.from_ms.div_euclid(step) * step;
        let end = range.to_ms.div_euclid(step) * step;
        let legend = target["legendFormat"].as_str().unwrap_or_default();
        let format = target["format"].as_str().unwrap_or("time_series");
        let mut outcomes = Vec::new();
        let range_body =
            form(&[("query", &expr), ("start", &secs(start)), ("end", &secs(end)), ("step", &secs(step))]);
        outcomes.push(check(strata, "/api/v1/query_range", &range_body, &expr, legend, format));
        if target["instant"].as_bool() == Some(true) {
            let body = form(&[("query", &expr), ("time", &secs(range.to_ms))]);
            outcomes.push(check(strata, "/api/v1/query", &body, &expr, legend, format));
        }
        outcomes
    }

    /// POSTs a query (Grafana's `httpMethod: POST`) and checks the answer has usable data.
    fn check(
        strata: &Strata,
        path: &str,
        body: &str,
        expr: &str,
        legend: &str,
        format: &str,
    ) -> Result<(), String> {
        let reply =
            strata.post(path, &[("Content-Type", "application/x-www-form-urlencoded")], body.as_bytes());
        let fail = |why: &str| Err(format!("{path} {expr}: {why}"));
        let json: Value = match serde_json::from_str(&reply.body) {
            Ok(json) => json,
            Err(_) => return fail(&format!("HTTP {} {}", reply.status, reply.body)),
        };
        if json["status"] != "success" {
            return fail(&format!("HTTP {} {}", reply.status, reply.body));
        }
        let data = &json["data"];
        let series: Vec<(&Value, Vec<&Value>)> = match data["resultType"].as_str() {
            Some("matrix") => data["result"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| {
                    (&s["metric"], s["values"].as_array().into_iter().flatten().map(|p| &p[1]).collect())
                })
                .collect(),
            Some("vector") => data["result"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|s| (&s["metric"], vec![&s["value"][1]]))
                .collect(),
            Some("scalar") => vec![(&Value::Null, vec![&data["result"][1]])],
            other => return fail(&format!("result type {other:?}")),
        };
        if series.is_empty() {
            return fail("no series");
        }
        let finite = series
            .iter()
            .flat_map(|(_, values)| values)
            .filter_map(|v| v.as_str()?.parse::<f64>().ok())
            .any(f64::is_finite);
        if !finite {
            return fail("no finite value");
        }
        for label in legend_labels(legend) {
            if let Some((metric, _)) = series.iter().find(|(metric, _)| metric.get(&label).is_none()) {
                return fail(&format!("legend names {{{{{label}}}}} but a series has only {metric}"));
            }
        }
        if format == "heatmap" && series.iter().any(|(metric, _)| metric.get("le").is_none()) {
            return fail("a heatmap series without an `le` label");
        }
        Ok(())
    }

    /// The label names a `legendFormat` uses (`{{hostname}}`).
    fn legend_labels(legend: &str) -> Vec<String> {
        if legend == "__auto" {
            return Vec::new();
        }
        legend
            .split("{{")
            .skip(1)
            .filter_map(|part| part.split_once("}}").map(|(name, _)| name.trim().to_owned()))
            .collect()
    }

    /// Problems that would make Grafana refuse or mangle the dashboard.
    pub fn lint(dashboard: &Value) -> Vec<String> {
        const TYPES: [&str; 8] =
            ["row", "timeseries", "stat", "gauge", "bargauge", "table", "heatmap", "text"];
        let mut problems = Vec::new();
        if dashboard["schemaVersion"].as_i64().unwrap_or(0) < 39 {
            problems.push(format!("schemaVersion {} < 39", dashboard["schemaVersion"]));
        }
        for key in ["uid", "title", "description"] {
            if dashboard[key].as_str().is_none_or(str::is_empty) {
                problems.push(format!("no {key}"));
            }
        }
        if dashboard["uid"].as_str().is_some_and(|uid| uid.len() > 40) {
            problems.push("uid longer than 40 characters".to_owned());
        }
        let variables = dashboard["templating"]["list"].as_array().cloned().unwrap_or_default();
        let datasource_var =
            variables.iter().find(|v| v["type"] == "datasource" && v["name"] == "datasource");
        match datasource_var {
            Some(v) if v["query"] == "prometheus" && v["current"]["value"] == DATASOURCE_UID => {}
            _ => problems
                .push(format!("no `datasource` variable of type prometheus defaulting to {DATASOURCE_UID}")),
        }
        let wanted_ds = |value: &Value| value["type"] == "prometheus" && value["uid"] == "${datasource}";
        for v in variables.iter().filter(|v| v["type"] == "query") {
            if !wanted_ds(&v["datasource"]) {
                problems.push(format!("variable {} does not use ${{datasource}}", v["name"]));
            }
        }

        let mut ids = BTreeSet::new();
        let mut cells: BTreeMap<(i64, i64), String> = BTreeMap::new();
        let top: Vec<&Value> = dashboard["panels"].as_array().into_iter().flatten().collect();
        let all = top.iter().copied().chain(panels(dashboard).into_iter().filter(|p| !top.contains(p)));
        for panel in all {
            let title = panel["title"].as_str().unwrap_or_default().to_owned();
            let kind = panel["type"].as_str().unwrap_or_default();
            if !TYPES.contains(&kind) {
                problems.push(format!("panel {title:?}: unknown type {kind:?}"));
            }
            if !ids.insert(panel["id"].as_i64().unwrap_or(-1)) {
                problems.push(format!("panel {title:?}: id {} missing or used twice", panel["id"]));
            }
            let pos = &panel["gridPos"];
            let (x, y, w, h) = (pos["x"].as_i64(), pos["y"].as_i64(), pos["w"].as_i64(), pos["h"].as_i64());
            let (Some(x), Some(y), Some(w), Some(h)) = (x, y, w, h) else {
                problems.push(format!("panel {title:?}: incomplete gridPos"));
                continue;
            };
            if x < 0 || y < 0 || w < 1 || h < 1 || x + w > 24 {
                problems.push(format!("panel {title:?}: gridPos {pos} outside the 24-column grid"));
            }
            for cx in x..x + w {
                for cy in y..y + h {
                    if let Some(other) = cells.insert((cx, cy), title.clone()) {
                        problems.push(format!("panel {title:?} overlaps {other:?} at ({cx}, {cy})"));
                    }
                }
            }
            if kind == "row" {
                continue;
            }
            if title.is_empty() || panel["description"].as_str().is_none_or(str::is_empty) {
                problems.push(format!("panel {title:?}: needs a title and a description"));
            }
            if !wanted_ds(&panel["datasource"]) {
                problems.push(format!("panel {title:?}: data source is not ${{datasource}}"));
            }
            let targets = panel["targets"].as_array().cloned().unwrap_or_default();
            if targets.is_empty() {
                problems.push(format!("panel {title:?}: no targets"));
            }
            let mut refs = BTreeSet::new();
            for target in &targets {
                let ref_id = target["refId"].as_str().unwrap_or_default();
                if ref_id.is_empty() || !refs.insert(ref_id.to_owned()) {
                    problems.push(format!("panel {title:?}: refId {ref_id:?} missing or repeated"));
                }
                if !wanted_ds(&target["datasource"]) {
                    problems.push(format!("panel {title:?} {ref_id}: data source is not ${{datasource}}"));
                }
                if target["expr"].as_str().is_none_or(|e| e.trim().is_empty()) {
                    problems.push(format!("panel {title:?} {ref_id}: empty expr"));
                }
            }
        }
        problems
    }
}

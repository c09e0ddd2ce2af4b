//! Differential test against a real Prometheus (Debian's 2.42 `prometheus` and `promtool`).
//!
//! The same generated data goes into a Prometheus TSDB (via `promtool tsdb create-blocks-from
//! openmetrics`) and into an in-memory store; every query runs on both, as instant and as range
//! query, and the answers are compared with the PromQL compliance tester's tolerance. The test
//! is skipped (with a message) when the binaries are not installed. By default a sample of the
//! queries runs; `STRATA_SLOW_TESTS=1` runs all of them.
//!
//! Prometheus 2.42 and 3.x differ in ways that this test steps around rather than papers over:
//! - 2.x range selectors and the look-back window include their left boundary, 3.x excludes it:
//!   evaluation times are offset by 7s from the 15s sample grid, so no sample ever sits exactly
//!   on a boundary;
//! - functions and modifiers added after 2.42 (`double_exponential_smoothing`, `sort_by_label`,
//!   `limitk`, duration expressions, ...) are not queried;
//! - 2.42 does not return warnings or infos, so annotations are not compared;
//! - where a counter starts inside a `rate`/`increase` window, 2.42 limits the extrapolation
//!   towards the counter's zero point before deciding whether to extrapolate to the window start
//!   at all, 3.x after; the results differ unless the counter starts at 0, so the generated
//!   counters do.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use promql::{Engine, EngineOptions, QueryResult, Value};
use storage::mem::MemStore;
use storage::{Labels, Sample};

/// Start of the data (2020-09-13), in seconds.
const T0: i64 = 1_600_000_000;
const SCRAPE_S: i64 = 15;
const SAMPLES: i64 = 2 * 3600 / SCRAPE_S;

/// One generated series.
struct Gen {
    name: &'static str,
    labels: Vec<(&'static str, String)>,
    values: Vec<f64>,
}

fn generate() -> Vec<Gen> {
    let mut out = Vec::new();
    for (j, job) in ["api", "db"].iter().enumerate() {
        for inst in 0..3 {
            let k = (j * 3 + inst) as f64;
            let base = vec![("job", job.to_string()), ("instance", format!("i{inst}"))];
            // A counter starting at 0 (see the module doc) with a reset every 37 minutes.
            let mut c = 0.0;
            let counter: Vec<f64> = (0..SAMPLES)
                .map(|i| {
                    let v = c;
                    if (i + inst as i64 * 40) % 148 == 0 && i > 0 {
                        c = 0.0;
                    } else {
                        c += 1.0 + ((i * 7 + k as i64) % 5) as f64;
                    }
                    v
                })
                .collect();
            out.push(Gen { name: "req_total", labels: base.clone(), values: counter });
            // A gauge with a smooth shape and two decimals.
            let gauge: Vec<f64> = (0..SAMPLES)
                .map(|i| ((50.0 + 40.0 * ((i as f64) / 30.0 + k).sin()) * 100.0).round() / 100.0)
                .collect();
            out.push(Gen { name: "temp", labels: base.clone(), values: gauge });
            // A classic histogram.
            let mut cum = [0.0f64; 4];
            let les = ["0.1", "0.5", "1", "+Inf"];
            let mut buckets: Vec<Vec<f64>> = vec![Vec::new(); 4];
            for i in 0..SAMPLES {
                let add =
                    if i == 0 { [0.0; 4] } else { [(i % 3) as f64, ((i + 1) % 4) as f64, 1.0 + k, 2.0] };
                let mut running = 0.0;
                for b in 0..4 {
                    running += add[b];
                    cum[b] += running;
                    buckets[b].push(cum[b]);
                }
            }
            for (b, le) in les.iter().enumerate() {
                let mut l = base.clone();
                l.push(("le", le.to_string()));
                out.push(Gen { name: "lat_bucket", labels: l, values: buckets[b].clone() });
            }
        }
    }
    out
}

fn openmetrics(series: &[Gen]) -> String {
    let mut s = String::new();
    for g in series {
        let labels: Vec<String> = g
            .labels
            .iter()
            .map(|(k, v)| {
                format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n"))
            })
            .collect();
        for (i, v) in g.values.iter().enumerate() {
            // OpenMetrics spells the infinities `+Inf` and `-Inf`; Rust prints `inf`.
            let v = match *v {
                f64::INFINITY => "+Inf".to_string(),
                f64::NEG_INFINITY => "-Inf".to_string(),
                v => v.to_string(),
            };
            s.push_str(&format!("{}{{{}}} {v} {}\n", g.name, labels.join(","), T0 + i as i64 * SCRAPE_S));
        }
    }
    s.push_str("# EOF\n");
    s
}

fn mem_store(series: &[Gen]) -> MemStore {
    let mut m = MemStore::new();
    for g in series {
        let mut pairs: Vec<(&str, &str)> = g.labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
        pairs.push(("__name__", g.name));
        let samples: Vec<Sample> = g
            .values
            .iter()
            .enumerate()
            .map(|(i, v)| Sample::new((T0 + i as i64 * SCRAPE_S) * 1000, *v))
            .collect();
        m.append(&Labels::from_pairs(&pairs), &samples);
    }
    m
}

/// A running Prometheus, stopped on drop.
struct Prometheus {
    child: Child,
    port: u16,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let status = buf.split_whitespace().nth(1)?.parse().ok()?;
    let body = buf.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Some((status, body))
}

/// Whether Debian's `prometheus` and `promtool` are there; says so when not.
fn prometheus_installed() -> bool {
    let installed =
        ["prometheus", "promtool"].iter().all(|b| Command::new(b).arg("--version").output().is_ok());
    if !installed {
        println!("skipped: prometheus/promtool are not installed");
    }
    installed
}

fn start_prometheus(dir: &Path, data: &str) -> Result<Prometheus, String> {
    let om = dir.join("data.om");
    std::fs::write(&om, data).map_err(|e| e.to_string())?;
    let tsdb = dir.join("tsdb");
    let out = Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&om)
        .arg(&tsdb)
        .output()
        .map_err(|e| format!("promtool: {e}"))?;
    if !out.status.success() {
        return Err(format!("promtool failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let cfg = dir.join("prometheus.yml");
    std::fs::write(&cfg, "global:\n  scrape_interval: 1h\n").map_err(|e| e.to_string())?;
    let port =
        TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(|e| e.to_string())?.port();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!("--storage.tsdb.path={}", tsdb.display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .args(["--storage.tsdb.retention.time=100y", "--log.level=error"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("prometheus: {e}"))?;
    let p = Prometheus { child, port };
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        if http_get(port, "/-/ready").is_some_and(|(s, _)| s == 200) {
            return Ok(p);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err("prometheus did not become ready".into())
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A result normalised for comparison: label set → points (ms, value).
type Normal = BTreeMap<String, Vec<(i64, f64)>>;

fn parse_point(p: &serde_json::Value) -> Option<(i64, f64)> {
    let t = p.get(0)?.as_f64()?;
    let v = match p.get(1)?.as_str()? {
        "NaN" => f64::NAN,
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        s => s.parse().ok()?,
    };
    Some(((t * 1000.0).round() as i64, v))
}

fn labels_key(m: &serde_json::Map<String, serde_json::Value>) -> String {
    let mut pairs: Vec<(String, String)> =
        m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect();
    pairs.sort();
    let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    Labels::from_pairs(&pairs).to_string()
}

fn prometheus_result(body: &str) -> Result<Normal, String> {
    let v: serde_json::Value = serde_json::from_str(body).map_err(|e| format!("bad JSON: {e}"))?;
    if v["status"] != "success" {
        return Err(v["error"].as_str().unwrap_or("error").to_string());
    }
    let data = &v["data"];
    let mut out = Normal::new();
    match data["resultType"].as_str() {
        Some("scalar") => {
            out.insert("scalar".into(), parse_point(&data["result"]).into_iter().collect());
        }
        Some("vector") => {
            for s in data["result"].as_array().into_iter().flatten() {
                let key = labels_key(s["metric"].as_object().ok_or("no metric")?);
                out.insert(key, parse_point(&s["value"]).into_iter().collect());
            }
        }
        Some("matrix") => {
            for s in data["result"].as_array().into_iter().flatten() {
                let key = labels_key(s["metric"].as_object().ok_or("no metric")?);
                out.insert(
                    key,
                    s["values"].as_array().into_iter().flatten().filter_map(parse_point).collect(),
                );
            }
        }
        other => return Err(format!("unexpected result type {other:?}")),
    }
    Ok(out)
}

fn our_result(v: &Value) -> Normal {
    let mut out = Normal::new();
    match v {
        Value::Scalar { t, v } => {
            out.insert("scalar".into(), vec![(*t, *v)]);
        }
        Value::String { .. } => {}
        Value::Vector(samples) => {
            for s in samples {
                out.insert(s.labels.to_string(), vec![(s.t, s.v)]);
            }
        }
        Value::Matrix(m) => {
            for s in m {
                out.insert(s.labels.to_string(), s.points.iter().map(|p| (p.t, p.v)).collect());
            }
        }
    }
    out
}

/// The compliance tester's tolerance: relative 1e-5 (plus a tiny absolute margin), NaN = NaN.
fn close(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-5 * a.abs().max(b.abs()) + 1e-10
}

fn same(a: &Normal, b: &Normal) -> Result<(), String> {
    if a.keys().ne(b.keys()) {
        return Err(format!(
            "series differ: {:?} vs {:?}",
            a.keys().collect::<Vec<_>>(),
            b.keys().collect::<Vec<_>>()
        ));
    }
    for (k, pa) in a {
        let pb = &b[k];
        if pa.len() != pb.len() || pa.iter().zip(pb).any(|(x, y)| x.0 != y.0 || !close(x.1, y.1)) {
            return Err(format!("{k}: {pa:?} vs {pb:?}"));
        }
    }
    Ok(())
}

/// Asks Prometheus `path` and compares its answer with strata's: `Ok(Some(non_empty))` when
/// they agree, `Ok(None)` when both refused the query, `Err` saying how they differ.
fn compare(prom: &Prometheus, path: &str, ours: promql::Result<QueryResult>) -> Result<Option<bool>, String> {
    let Some((_, body)) = http_get(prom.port, path) else {
        return Err(format!("{path}: no answer from prometheus"));
    };
    match (prometheus_result(&body), ours) {
        (Ok(want), Ok(got)) => {
            same(&want, &our_result(&got.value)).map_err(|why| format!("{path}: {why}"))?;
            Ok(Some(want.values().any(|p| !p.is_empty())))
        }
        (Err(_), Err(_)) => Ok(None),
        (Ok(_), Err(e)) => Err(format!("{path}: strata failed: {e}")),
        (Err(e), Ok(_)) => Err(format!("{path}: prometheus failed ({e}), strata succeeded")),
    }
}

fn queries() -> Vec<String> {
    let mut q: Vec<String> = Vec::new();
    for f in ["rate", "increase", "irate", "resets", "changes"] {
        for r in ["1m", "5m", "17m"] {
            q.push(format!("{f}(req_total[{r}])"));
        }
    }
    for f in [
        "delta",
        "idelta",
        "deriv",
        "avg_over_time",
        "sum_over_time",
        "min_over_time",
        "max_over_time",
        "count_over_time",
        "stddev_over_time",
        "stdvar_over_time",
        "last_over_time",
        "present_over_time",
    ] {
        for r in ["2m", "10m"] {
            q.push(format!("{f}(temp[{r}])"));
        }
    }
    q.extend(
        [
            "temp",
            "temp{job=\"api\"}",
            "temp{job=~\"a.*\", instance!=\"i1\"}",
            "req_total offset 5m",
            "req_total offset -5m",
            "temp @ 1600003007",
            "rate(req_total[5m] @ 1600003607)",
            "quantile_over_time(0.3, temp[10m])",
            "predict_linear(temp[10m], 600)",
            "absent_over_time(nonexistent[5m])",
            "absent(nonexistent{job=\"x\"})",
            "absent(temp)",
            "abs(temp - 50)",
            "ceil(temp)",
            "floor(temp)",
            "round(temp, 5)",
            "sqrt(temp)",
            "exp(temp / 100)",
            "ln(temp)",
            "log2(temp)",
            "log10(temp)",
            "clamp(temp, 30, 60)",
            "clamp_min(temp, 40)",
            "clamp_max(temp, 40)",
            "sgn(temp - 50)",
            "timestamp(temp)",
            "time()",
            "vector(1)",
            "scalar(sum(temp))",
            "sin(temp)",
            "atan2(temp, 10)",
            "label_replace(temp, \"dst\", \"x-$1\", \"instance\", \"i(.*)\")",
            "label_join(temp, \"dst\", \"/\", \"job\", \"instance\")",
            "hour(timestamp(temp))",
            "day_of_week()",
            "histogram_quantile(0.9, rate(lat_bucket[5m]))",
            "histogram_quantile(0.5, sum by (le) (rate(lat_bucket[5m])))",
            "histogram_quantile(0.99, sum by (job, le) (rate(lat_bucket[10m])))",
            "max_over_time(rate(req_total[1m])[10m:1m])",
            "avg_over_time(temp[30m:5m] offset 5m)",
            "min_over_time(sum by (job) (temp)[15m:])",
            "sum(rate(req_total[5m]))",
            "req_total / on(job, instance) group_left temp",
            "sum by (job) (req_total) / on(job) group_right sum by (job, instance) (req_total)",
            "temp > 50",
            "temp > bool 50",
            "50 < temp",
            "temp == temp",
            "temp and temp > 60",
            "temp or req_total",
            "temp unless temp > 60",
            "temp + ignoring(job) group_left temp{job=\"api\"}",
            "-temp",
            "2 ^ 3 + 1",
            "temp % 7",
            "temp @ start()",
            "sum_over_time(temp[5m] @ end())",
            "rate(req_total[5m] offset 10m)",
            "rate(req_total[5m] offset -1m)",
            "count by (job) (temp > 40)",
            "sum by (le) (lat_bucket)",
            "changes(temp[10m])",
            "resets(temp[10m])",
            "deriv(req_total[5m])",
            "irate(req_total[2m])",
            "idelta(req_total[2m])",
            "timestamp(temp offset 5m)",
            "minute(timestamp(temp))",
            "month()",
            "year()",
            "days_in_month()",
            "day_of_month()",
            "day_of_year()",
            "acos(temp / 100)",
            "deg(temp)",
            "rad(temp)",
            "tanh(temp / 100)",
            "asinh(temp)",
            "absent_over_time(temp[5m])",
            "present_over_time(nonexistent[5m])",
            "topk(3, rate(req_total[5m]) * temp)",
            "bottomk by (job) (1, temp)",
            "count_values(\"job\", round(temp / 20))",
            "sum(temp) by (job) * on(job) group_left temp",
            "max_over_time((temp * 2)[20m:2m] offset 1m)",
            "avg_over_time(rate(req_total[5m])[30m:1m] @ 1600004207)",
            "sum_over_time(temp[1h]) / count_over_time(temp[1h])",
            "histogram_quantile(0.75, rate(lat_bucket{job=\"db\"}[3m]))",
            "vector(time()) - timestamp(temp)",
            "scalar(temp)",
            "sort(temp)",
            "sort_desc(rate(req_total[5m]))",
            "-(temp offset 1h)",
            "1 - temp / 100 > 0.5",
            "temp != bool 50.5",
        ]
        .map(String::from),
    );
    for agg in ["sum", "avg", "min", "max", "count", "stddev", "stdvar", "group"] {
        q.push(format!("{agg}(temp)"));
        q.push(format!("{agg} by (job) (temp)"));
        q.push(format!("{agg} without (instance) (rate(req_total[5m]))"));
    }
    q.extend(
        [
            "topk(2, temp)",
            "bottomk(2, temp)",
            "topk by (job) (1, temp)",
            "quantile(0.9, temp)",
            "quantile by (job) (0.5, rate(req_total[5m]))",
            "count_values(\"v\", round(temp / 10))",
        ]
        .map(String::from),
    );
    q
}

#[test]
fn agrees_with_prometheus_2_42() {
    if !prometheus_installed() {
        return;
    }
    let slow = std::env::var("STRATA_SLOW_TESTS").is_ok_and(|v| v == "1");
    let series = generate();
    let dir = tempfile::tempdir().expect("temp dir");
    let prom = start_prometheus(dir.path(), &openmetrics(&series)).expect("start prometheus");
    let store = mem_store(&series);
    let engine = Engine::new(EngineOptions::default());
    // Off the 15s sample grid by 7s, so no sample sits on a window boundary (see the module doc).
    // Near the start of the data, in the middle, and after its end (within the look-back).
    let instant_times = [T0 + 67, T0 + 3607, T0 + 6007, T0 + 7387];
    // One range inside the data, one reaching over both ends.
    let ranges = [(T0 + 1807, T0 + 7187, 60), (T0 - 293, T0 + 7507, 60)];
    let mut failures = Vec::new();
    let mut non_empty = 0;
    let all = queries();
    let chosen: Vec<&String> = if slow { all.iter().collect() } else { all.iter().step_by(3).collect() };
    for q in &chosen {
        let mut checks = Vec::new();
        for t in instant_times {
            let path = format!("/api/v1/query?query={}&time={t}", urlencode(q));
            checks.push((path, engine.instant(&store, q, t * 1000)));
        }
        for (start, end, step) in ranges {
            let path =
                format!("/api/v1/query_range?query={}&start={start}&end={end}&step={step}", urlencode(q));
            checks.push((path, engine.range(&store, q, start * 1000, end * 1000, step * 1000)));
        }
        for (path, ours) in checks {
            match compare(&prom, &path, ours) {
                Ok(answered) => non_empty += usize::from(answered == Some(true)),
                Err(why) => failures.push(why),
            }
        }
    }
    assert!(failures.is_empty(), "{} differences:\n{}", failures.len(), failures.join("\n"));
    // Guard against comparing nothing with nothing (e.g. data that did not load).
    let checks = chosen.len() * (instant_times.len() + ranges.len());
    assert!(non_empty * 10 >= checks * 7, "only {non_empty} of {checks} answers are non-empty");
    println!(
        "{} queries agree with Prometheus 2.42 ({checks} comparisons: instant at {} times and {} ranges; \
         {non_empty} non-empty answers)",
        chosen.len(),
        instant_times.len(),
        ranges.len()
    );
}

/// Label values for the regex comparison: braces, digits and letters outside ASCII, white
/// space, class and set-operator characters. No newline: Prometheus 2.x's `.` does not match
/// one, 3.x's does.
const PROBE_VALUES: &[&str] = &[
    "/users/{id}",
    "/users/42",
    "a{b}",
    "ab",
    "a{,5}",
    "a{1, 2}",
    "a",
    "aa",
    "aaa",
    "x{",
    "a{01}",
    "{}",
    "",
    "5",
    "\u{663}",
    "abc_9",
    "é",
    "-",
    " ",
    "\t",
    "\u{b}",
    "\u{a0}",
    "éfoo",
    " foo",
    "afoo",
    "A",
    "<a>",
    ".*",
    ".**",
    "[",
    "]",
    "&",
    "~",
    "#",
    "!",
    "\\",
    "α",
    "αβ",
    "AB",
    "Ab",
    "ABC",
    "b",
    "x{start}",
    "1",
    "\0",
    "\u{7}",
    "xb",
    "ax",
    "a-b",
    "%",
];

/// Patterns in Go's syntax where the `regex` crate reads differently or not at all, and a few
/// where both agree; Prometheus is the oracle for what each matches or that it is refused.
const PROBE_PATTERNS: &[&str] = &[
    "/users/{id}",
    "/users/{id}|/users/[0-9]+",
    "a{b}",
    "a{,5}",
    "a{1, 2}",
    "x{",
    "a{01}",
    "{}",
    "a}",
    "a{2}",
    "a{0}",
    "a{2,}",
    "a{1,3}?",
    "a{1001}",
    "a{2,1}",
    "(a{100}){100}",
    "(a{10}){100}",
    "((a{10}){10}){11}",
    "a**",
    "a*??",
    "a{2}*",
    "a{1,2}{3}",
    "*a",
    "a|{2}",
    r"\d",
    r"\D",
    r"\w+",
    r"\W",
    r"\s",
    r"\S",
    r".\bfoo",
    r"\0",
    r"\101",
    r"\x41",
    r"\x{3b1}",
    r"\Q.*\E",
    r"\Q.*\E+",
    r"\<a\>",
    r"\%",
    r"\C",
    r"\e",
    r"\u0041",
    r"\1",
    r"a\",
    "[[]",
    "[]a]",
    "[^]a]",
    "[a&&b]",
    "[a~~b]",
    "[!--]",
    "[a-]",
    r"[\]]",
    "[[:alpha:]]+",
    "[[:^digit:]]",
    "[[:foo:]]",
    r"[\p{Greek}a]",
    r"\p{Greek}+",
    r"\PL",
    "(?i)abc",
    "(?ii)a",
    "(?i-i)a",
    "(?i:a)b",
    "(?U)a+",
    "(?x)a",
    "(?)a",
    "(?P<n>a)|b",
    "(?P<>a)",
    "a)|(b",
    "(a",
    "[a",
    "[z-a]",
    "^*a",
    r"[\d]",
    r"[^\d]",
    r"[\w-]+",
    r"\x{110000}",
    ".{1000}",
    ".{1001}",
    r"\pL+",
    r"\pl",
    r"\p{greek}",
    r"\p{Grek}",
    r"\p{^Greek}",
    r"[\P{^Greek}a]",
    r"\p{Cs}|a",
    r"[^\p{Cs}]",
    r"\p{Latin}+",
    r"\p{Lu}\p{Ll}",
];

#[test]
fn regex_matchers_agree_with_prometheus_2_42() {
    if !prometheus_installed() {
        return;
    }
    let series: Vec<Gen> = PROBE_VALUES
        .iter()
        .map(|v| Gen { name: "probe", labels: vec![("v", v.to_string())], values: vec![1.0; 8] })
        .collect();
    let dir = tempfile::tempdir().expect("temp dir");
    let prom = start_prometheus(dir.path(), &openmetrics(&series)).expect("start prometheus");
    let store = mem_store(&series);
    let engine = Engine::new(EngineOptions::default());
    let t = T0 + 67;
    let mut failures = Vec::new();
    let (mut matched, mut refused) = (0, 0);
    for pattern in PROBE_PATTERNS {
        assert!(!pattern.contains('`'), "{pattern}");
        let queries = [
            format!("probe{{v=~`{pattern}`}}"),
            format!("probe{{v!~`{pattern}`}}"),
            format!("label_replace(probe, \"out\", \"[$0]\", \"v\", `{pattern}`)"),
        ];
        for q in queries {
            let path = format!("/api/v1/query?query={}&time={t}", urlencode(&q));
            match compare(&prom, &path, engine.instant(&store, &q, t * 1000)) {
                Ok(Some(answered)) => matched += usize::from(answered),
                Ok(None) => refused += 1,
                Err(why) => failures.push(why),
            }
        }
    }
    assert!(failures.is_empty(), "{} differences:\n{}", failures.len(), failures.join("\n"));
    assert!(matched > PROBE_PATTERNS.len() && refused > 20, "{matched} answers, {refused} refusals");
    println!(
        "{} regex patterns agree with Prometheus 2.42 as matchers and in label_replace ({matched} non-empty \
         answers, {refused} refused by both)",
        PROBE_PATTERNS.len()
    );
}

/// Series whose values include NaN, the infinities, negative zero and extremes, for the
/// special-value comparison. Chosen around what Prometheus 2.42 and 3.x do differently: no
/// subnormal numbers (`promtool` loads them as the smallest normal one), no sums that overflow
/// (2.42's compensated sums turn an infinity into NaN), a counter that starts at 0 (see the
/// module doc).
fn special_series() -> Vec<Gen> {
    let shapes: [(&str, [f64; 8]); 6] = [
        ("nan", [0.0, f64::NAN, 3.0, f64::NAN, 5.0, 2.0, f64::NAN, 4.0]),
        ("inf", [1.0, f64::INFINITY, 2.0, f64::NEG_INFINITY, 3.0, f64::INFINITY, 0.5, 1.5]),
        ("zero", [0.0, -0.0, 0.0, -0.0, 1.0, -1.0, -0.0, 0.0]),
        ("big", [1e150, -1e150, 1e150, 1e-300, 2e-300, -1e-300, 1.5e150, 2.0]),
        ("neg", [-1.0, -2.5, -0.5, -3.0, -1.5, -2.0, -4.0, -0.25]),
        ("allnan", [f64::NAN; 8]),
    ];
    shapes
        .iter()
        .map(|(k, vals)| Gen {
            name: "sv",
            labels: vec![("k", k.to_string())],
            values: (0..SAMPLES).map(|i| vals[(i % 8) as usize]).collect(),
        })
        .collect()
}

/// Queries over special values: functions that Prometheus 2.42 has, with the same meaning in 3.x
/// (not `atan2`, which 3.x makes drop the metric name, nor `holt_winters`, renamed in 3.x).
fn special_queries() -> Vec<String> {
    let mut q: Vec<String> = Vec::new();
    for f in [
        "abs",
        "ceil",
        "floor",
        "round",
        "sqrt",
        "exp",
        "ln",
        "log2",
        "log10",
        "sgn",
        "sin",
        "cos",
        "tan",
        "asin",
        "acos",
        "atan",
        "sinh",
        "cosh",
        "tanh",
        "asinh",
        "acosh",
        "atanh",
        "deg",
        "rad",
        "timestamp",
    ] {
        q.push(format!("{f}(sv)"));
    }
    for f in [
        "min_over_time",
        "max_over_time",
        "sum_over_time",
        "avg_over_time",
        "count_over_time",
        "last_over_time",
        "stddev_over_time",
        "stdvar_over_time",
        "changes",
        "resets",
        "deriv",
        "delta",
        "idelta",
        "rate",
        "irate",
        "increase",
    ] {
        q.push(format!("{f}(sv[2m])"));
    }
    for agg in ["sum", "min", "max", "avg", "count", "stddev", "stdvar", "group"] {
        q.push(format!("{agg}(sv)"));
        // 2.42's stddev and stdvar of a lone NaN are 0; 3.x's (and strata's) NaN.
        if !agg.starts_with("std") {
            q.push(format!("{agg} by (k) (sv)"));
        }
    }
    q.extend(
        [
            "topk(3, sv)",
            "bottomk(3, sv)",
            "quantile(0.5, sv)",
            "quantile(0, sv)",
            "quantile(1, sv)",
            "quantile_over_time(0.5, sv[2m])",
            "quantile_over_time(0.9, sv[5m])",
            "sort(sv)",
            "sort_desc(sv)",
            "clamp(sv, -1, 1)",
            "clamp_min(sv, 0)",
            "clamp_max(sv, 0)",
            "round(sv, 0.3)",
            "sv > 0",
            "sv < 0",
            "sv == 0",
            "sv != sv",
            "sv == bool sv",
            "sv > bool 1",
            "-sv",
            "sv * -1",
            "sv / 0",
            "sv % 2",
            "sv ^ 2",
            "0 / sv",
            "count_values(\"v\", sv)",
            "histogram_quantile(0.5, sv)",
            "predict_linear(sv[5m], 60)",
            "scalar(sv{k=\"neg\"})",
            "vector(scalar(sv{k=\"nan\"}))",
            "sv and sv > 0",
            "sv or -sv",
            "sv unless sv < 0",
            "absent(sv{k=\"nan\"})",
            "min(sv) by (k) + 1",
            "sum(sv) / count(sv)",
            "max_over_time(sv[10m]) - min_over_time(sv[10m])",
        ]
        .map(String::from),
    );
    q
}

#[test]
fn special_values_agree_with_prometheus_2_42() {
    if !prometheus_installed() {
        return;
    }
    let series = special_series();
    let dir = tempfile::tempdir().expect("temp dir");
    let prom = start_prometheus(dir.path(), &openmetrics(&series)).expect("start prometheus");
    let store = mem_store(&series);
    let engine = Engine::new(EngineOptions::default());
    let mut failures = Vec::new();
    let (queries, mut non_empty) = (special_queries(), 0);
    for q in &queries {
        let mut checks = Vec::new();
        for t in [T0 + 67, T0 + 3607] {
            checks.push((
                format!("/api/v1/query?query={}&time={t}", urlencode(q)),
                engine.instant(&store, q, t * 1000),
            ));
        }
        let (start, end) = (T0 + 1807, T0 + 2407);
        checks.push((
            format!("/api/v1/query_range?query={}&start={start}&end={end}&step=60", urlencode(q)),
            engine.range(&store, q, start * 1000, end * 1000, 60_000),
        ));
        for (path, ours) in checks {
            match compare(&prom, &path, ours) {
                Ok(answered) => non_empty += usize::from(answered == Some(true)),
                Err(why) => failures.push(why),
            }
        }
    }
    assert!(failures.is_empty(), "{} differences:\n{}", failures.len(), failures.join("\n"));
    assert!(non_empty * 10 >= queries.len() * 3 * 8, "only {non_empty} non-empty answers");
    println!(
        "{} queries over NaN, infinities, negative zero and extremes agree with Prometheus 2.42 ({non_empty} \
         non-empty answers of {})",
        queries.len(),
        queries.len() * 3
    );
}

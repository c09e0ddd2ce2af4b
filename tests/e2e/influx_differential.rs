//! Line protocol against the real InfluxDB (Debian's `influxdb`, 1.6): each probe line is
//! written alone to `influxd` and to strata, and both must accept it or both refuse it; for an
//! accepted line, the numeric field values strata stores (booleans as 1 and 0) must be the ones
//! InfluxDB stores. The few places where strata deliberately differs are listed in
//! [`DEVIATIONS`] with the reason, and checked to still differ in that way.
//!
//! Skipped, with a message, when `influxd` is not installed and `CI` is not set; under CI its
//! absence is a failure (`.ci/run` installs it).

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::common::process::{Process, free_port, peer, wait_for};
use crate::common::{Strata, urlencode};

/// Probe lines; `{m}` stands for a measurement name unique to the line, so that no line sees
/// another's field types.
const PROBES: &[&str] = &[
    "{m} f=1",
    "{m} f=1i",
    "{m} f=-1i",
    "{m} f=+1",
    "{m} f=1.",
    "{m} f=.5",
    "{m} f=-.5",
    "{m} f=00.5",
    "{m} f=01",
    "{m} f=1e3",
    "{m} f=1E+3",
    "{m} f=1.e3",
    "{m} f=1.5e-3",
    "{m} f=1e-400",
    "{m} f=1.7976931348623157e308",
    "{m} f=1.8e308",
    "{m} f=-0",
    "{m} f=1e",
    "{m} f=1ee3",
    "{m} f=1.5.5",
    "{m} f=.",
    "{m} f=-",
    "{m} f=--1",
    "{m} f=inf",
    "{m} f=NaN",
    "{m} f=0x10",
    "{m} f=1_000",
    "{m} f=1i1",
    "{m} f=9223372036854775807i",
    "{m} f=9223372036854775808i",
    "{m} f=-9223372036854775808i",
    "{m} f=-1u",
    "{m} f=t",
    "{m} f=T",
    "{m} f=true",
    "{m} f=True",
    "{m} f=TRUE",
    "{m} f=f",
    "{m} f=F",
    "{m} f=false",
    "{m} f=tRUE",
    "{m} f=tr",
    "{m} f=fals",
    "{m} f=t1",
    "{m} f=true,g=1",
    "{m} f=\"s\"",
    "{m} f=\"a\\\"b\"",
    "{m} f=\"x\\\\\"",
    "{m} f=\"a\nb\",g=2",
    "{m} f=\"unterminated",
    "{m} f=\"x\"y",
    "{m} f=\\\"x\\\"",
    "{m},t=v f=1",
    "{m},t=v,a=b f=1",
    "{m},t= f=1",
    "{m},=v f=1",
    "{m},t=v,t=w f=1",
    "{m},t=a=b f=1",
    "{m},t=v,u f=1",
    "{m},t=v, f=1",
    "{m},t=\\ f=1",
    "{m},t=\\=x f=1",
    "{m},t\\=x=1 f=1",
    "{m},t\\,k=v f=1",
    "{m},t\\ =v f=1",
    "{m},t=a\\ b f=1",
    "{m},t=v\\,w f=1",
    "{m},t=\"q\" f=1",
    "{m},t=v\\ f=1",
    "{m} f=1,f=2",
    "{m} f=1,g=3,f=2",
    "{m} f=1,g=",
    "{m} f=1,",
    "{m} ,f=1",
    "{m} f=1,,g=2",
    "{m} =1",
    "{m} \"f\"=1",
    "{m} f\\ x=1",
    "{m} f\\,x=1",
    "{m} f\\=x=1",
    "{m}\\ x f=1",
    "{m}\\,x,t\\ k=v\\=w f=1",
    "{m}\\=x f=1",
    "{m}\tx f=1",
    "{m}  f=1",
    "{m} f=1   ",
    " {m} f=1",
    "{m} f",
    "{m}",
    "{m},t=v",
    "{m} f=1 1.5",
    "{m} f=1 1e3",
    "{m} f=1 0x10",
    "{m} f=1 +123",
    "{m} f=1 99999999999999999999",
    "{m} f=1 1,",
    "{m} f=1i 123 extra",
    "{m} f=1 {now}",
    "{m},t=v f=1,g=2i,h=true,s=\"x\" {now}",
    ",t=v f=1",
    "# a comment",
    "",
    "{m} f=1u",
    "{m} f=1\r",
    "{m} f=1 \t",
    "{m} f=\"a\",f=1",
    "{m} f=1,f=\"a\"",
    "{m} f=1i,f=2",
    "\u{fffd}{m} f=1",
];

/// Where strata deliberately answers otherwise: the probe, whether InfluxDB 1.6 accepts it,
/// whether strata does, and why.
const DEVIATIONS: &[(&str, bool, bool, &str)] = &[
    ("{m} f=1u", false, true, "unsigned integers arrived in InfluxDB 1.8; Telegraf sends them"),
    ("{m} f=1\r", false, true, "strata takes CRLF line ends"),
    ("{m} f=1 \t", true, false, "a tab is no separator for either; InfluxDB ignores this one"),
    ("{m} f=\"a\",f=1", false, true, "a field repeated with another type: strata keeps the last"),
    ("{m} f=1,f=\"a\"", false, true, "a field repeated with another type: strata keeps the last (skipped)"),
    ("{m} f=1i,f=2", false, true, "integers and floats are both float64 in strata: no type conflict"),
    (
        "{m} f=\"x\"y",
        true,
        false,
        "InfluxDB 1.6 stores the garbled string `x\"`; strata names the text after the quote",
    ),
];

/// Starts `influxd` with its data, ports and logs under `dir`; returns it and its HTTP address.
fn start_influxd(influxd: &Path, dir: &Path) -> (Process, String) {
    let defaults = std::process::Command::new(influxd).arg("config").output().expect("influxd config");
    let http = format!("127.0.0.1:{}", free_port());
    let mut config = String::new();
    let mut section = String::new();
    for line in String::from_utf8_lossy(&defaults.stdout).lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            section = trimmed.to_string();
        }
        let replaced = if let Some(rest) =
            trimmed.strip_prefix("dir = ").or(trimmed.strip_prefix("wal-dir = "))
        {
            let name =
                Path::new(rest.trim_matches('"')).file_name().map(|n| n.to_string_lossy().into_owned());
            let key = trimmed.split(' ').next().unwrap_or("dir");
            format!("  {key} = \"{}\"", dir.join(name.unwrap_or_default()).display())
        } else if trimmed.starts_with("bind-address = ") {
            let addr = if section == "[http]" { http.clone() } else { format!("127.0.0.1:{}", free_port()) };
            format!("  bind-address = \"{addr}\"")
        } else if trimmed.starts_with("store-enabled = ") || trimmed.starts_with("reporting-disabled = ") {
            let key = trimmed.split(' ').next().unwrap_or_default();
            format!("  {key} = {}", key == "reporting-disabled")
        } else {
            line.to_string()
        };
        config.push_str(&replaced);
        config.push('\n');
    }
    let path = dir.join("influxdb.conf");
    std::fs::write(&path, config).unwrap();
    let process = Process::spawn(influxd, &["-config", path.to_str().unwrap()], &dir.join("influxd.log"));
    let agent = ureq::Agent::new_with_defaults();
    wait_for(process.log(), "influxd", || agent.get(format!("http://{http}/ping")).call().is_ok());
    (process, http)
}

/// POSTs `body` to `url`: the status, 0 if there was no answer.
fn post(agent: &ureq::Agent, url: &str, body: &[u8]) -> u16 {
    match agent.post(url).send(body) {
        Ok(r) => r.status().as_u16(),
        Err(ureq::Error::StatusCode(code)) => code,
        Err(_) => 0,
    }
}

fn get_json(agent: &ureq::Agent, url: &str) -> serde_json::Value {
    let mut response = agent.get(url).call().unwrap_or_else(|e| panic!("{url}: {e}"));
    serde_json::from_str(&response.body_mut().read_to_string().unwrap()).unwrap()
}

/// The numeric field values InfluxDB stored for `measurement`, sorted (booleans as 1 and 0).
fn influx_values(agent: &ureq::Agent, http: &str, measurement: &str) -> Vec<f64> {
    let q = format!("SELECT *::field FROM \"{}\"", measurement.replace('\\', "\\\\").replace('"', "\\\""));
    let url = format!("http://{http}/query?db=db&q={}", urlencode(&q));
    let body = get_json(agent, &url);
    let mut out = Vec::new();
    for series in body["results"][0]["series"].as_array().into_iter().flatten() {
        for row in series["values"].as_array().into_iter().flatten() {
            for v in row.as_array().into_iter().flatten().skip(1) {
                match v {
                    serde_json::Value::Number(n) => out.extend(n.as_f64()),
                    serde_json::Value::Bool(b) => out.push(f64::from(u8::from(*b))),
                    _ => {}
                }
            }
        }
    }
    out.sort_by(f64::total_cmp);
    out
}

/// The latest value of every series strata stored under `metric` or `metric_<field>`, sorted.
fn strata_values(strata: &Strata, metric: &str) -> Vec<f64> {
    let query = format!("{{__name__=~\"{metric}|{metric}_.*\"}}");
    let reply = strata.get(&format!("/api/v1/query?query={}", urlencode(&query)));
    let body: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
    let mut out: Vec<f64> = body["data"]["result"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["value"][1].as_str()?.parse().ok())
        .collect();
    out.sort_by(f64::total_cmp);
    out
}

#[test]
fn line_protocol_agrees_with_influxdb_1_6() {
    let Some(influxd) = peer("influxd", "influxdb", "line_protocol_agrees_with_influxdb_1_6") else { return };
    let dir = tempfile::tempdir().unwrap();
    let (_influxd, http) = start_influxd(&influxd, dir.path());
    let agent = ureq::Agent::config_builder().http_status_as_error(true).build().new_agent();
    assert_eq!(post(&agent, &format!("http://{http}/query?q=CREATE%20DATABASE%20db"), b""), 200);
    let mut strata = Strata::start(&dir.path().join("strata"));
    strata.wait_ready();

    let now_ns = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos().to_string();
    let mut failures = Vec::new();
    let (mut accepted, mut compared) = (0, 0);
    for (i, probe) in PROBES.iter().enumerate() {
        let m = format!("p{i}");
        let line = probe.replace("{m}", &m).replace("{now}", &now_ns);
        let influx_ok = post(&agent, &format!("http://{http}/write?db=db"), line.as_bytes()) / 100 == 2;
        let strata_ok = strata.post("/write?db=db", &[], line.as_bytes()).status / 100 == 2;
        let deviation = DEVIATIONS.iter().find(|d| d.0 == *probe);
        match deviation {
            Some(&(_, influx, ours, why)) if (influx_ok, strata_ok) != (influx, ours) => failures.push(format!(
                "{line:?}: InfluxDB {influx_ok}, strata {strata_ok}; the listed deviation ({why}) no longer holds"
            )),
            Some(_) => {}
            None if influx_ok != strata_ok => {
                failures.push(format!("{line:?}: InfluxDB accepts: {influx_ok}, strata accepts: {strata_ok}"))
            }
            None => {}
        }
        if influx_ok && strata_ok && deviation.is_none() && line.contains(&m) {
            accepted += 1;
            // The measurement as InfluxDB stored it: the name up to the first unescaped space or
            // comma, unescaped; strata's metric names replace what Prometheus does not allow.
            let written = line.trim_start().split([' ', ',']).next().unwrap_or_default();
            let influx_name = if written.ends_with('\\') { None } else { Some(written.replace("\\=", "=")) };
            let metric: String = written
                .replace("\\ ", " ")
                .replace("\\,", ",")
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == ':' { c } else { '_' })
                .collect();
            let (Some(influx_name), true) = (influx_name, metric == m) else { continue };
            compared += 1;
            let want = influx_values(&agent, &http, &influx_name);
            let got = strata_values(&strata, &metric);
            if want.iter().map(|v| v.to_bits()).ne(got.iter().map(|v| v.to_bits())) {
                failures.push(format!("{line:?}: InfluxDB stored {want:?}, strata {got:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{} differences:\n{}", failures.len(), failures.join("\n"));
    assert!(accepted > 40 && compared > 40, "{accepted} accepted, {compared} compared");
    println!(
        "{} probe lines: accepted or refused alike by InfluxDB 1.6 and strata ({} listed deviations), the values \
         of {compared} accepted lines equal",
        PROBES.len(),
        DEVIATIONS.len()
    );
}

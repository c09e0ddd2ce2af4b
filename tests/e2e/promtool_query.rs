//! Prometheus' own API client against the real server: `promtool query` (Debian's `prometheus`
//! package) reads strata's answers as it reads Prometheus'. It is a Go client, so it asks for
//! gzip on every request, as Grafana's data source does: these answers come back gzipped
//! (src/api/gzip.rs), and must decode to what a plain request gets.

use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::common::Strata;
use serde_json::Value;

/// `promtool ARGS`: `None` if promtool is missing (allowed outside CI), else its stdout, after
/// asserting that it succeeded.
fn promtool(args: &[&str]) -> Option<String> {
    let out = match Command::new("promtool").args(args).output() {
        Ok(out) => out,
        Err(_) => {
            let message = "promtool is not on PATH (Debian package `prometheus`; .ci/run installs it)";
            crate::common::skip_outside_ci(
                "promtool_reads_gzipped_answers_as_plain_clients_read_them",
                message,
            );
            return None;
        }
    };
    assert!(out.status.success(), "promtool {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    Some(String::from_utf8(out.stdout).unwrap())
}

#[test]
fn promtool_reads_gzipped_answers_as_plain_clients_read_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut strata = Strata::start(dir.path());
    strata.wait_ready();
    // 2 series × 601 samples at 10 s from two hours ago (inside the default retention).
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
    let start = now / 10 * 10 - 7200;
    let lines: String = (0..=600)
        .flat_map(|i| {
            let t = (start + i * 10) * 1_000_000_000;
            [format!("load,host=a value={} {t}\n", i % 37), format!("load,host=b value={}.5 {t}\n", i % 11)]
        })
        .collect();
    let reply = strata.post("/write?db=test", &[], lines.as_bytes());
    assert_eq!(reply.status, 204, "{}", reply.body);

    let (from, to, at) = (start.to_string(), (start + 6000).to_string(), (start + 3000).to_string());
    let url = strata.url("");
    let path = format!("/api/v1/query_range?query=load&start={from}&end={to}&step=10");
    let plain = strata.get(&path);
    assert_eq!(plain.status, 200, "{}", plain.body);
    assert!(plain.header("content-encoding").is_none());
    let plain: Value = serde_json::from_str(&plain.body).unwrap();
    let want = &plain["data"]["result"];
    assert_eq!(want.as_array().map(Vec::len), Some(2), "{plain}");
    assert_eq!(want[0]["values"].as_array().map(Vec::len), Some(601));
    // The same request asking for gzip is answered gzipped (so promtool's reads below take
    // that path).
    let gzipped = strata.get_with(&path, &[("Accept-Encoding", "gzip")]);
    assert_eq!(gzipped.header("content-encoding"), Some("gzip"));

    let args =
        ["query", "range", "-o", "json", "--start", &from, "--end", &to, "--step", "10s", &url, "load"];
    let Some(out) = promtool(&args) else { return };
    let got: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert!(&got == want, "promtool read another answer than a plain GET: {out:.300}");

    let out = promtool(&["query", "instant", "-o", "json", "--time", &at, &url, "sort(load)"]).unwrap();
    let got: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(got.as_array().map(Vec::len), Some(2), "{got}");
    assert_eq!(got[0]["value"][1], "3.5");
    assert_eq!(got[1]["value"][1], "4");
    assert_eq!(strata.terminate().code(), Some(0), "log:\n{}", strata.log());
}

//! Recording and alerting rules evaluated by a real ruler, vmalert (Debian's `victoria-metrics`,
//! 1.79), with strata as its datasource (`/api/v1/query`), its remote-write target
//! (`/api/v1/write`) and its remote-read source (the `ALERTS_FOR_STATE` query it sends to
//! `/api/v1/query` on start). The setup docs/operations.md describes:
//!
//! * a recording rule's output series is stored in strata and queryable with the right value;
//! * an alerting rule passes through pending to firing, and its `ALERTS` and `ALERTS_FOR_STATE`
//!   series are written back to strata;
//! * after a restart, vmalert restores the alert from strata: it is firing at its first
//!   evaluation with its original `activeAt`, instead of starting again from pending.
//!
//! vmalert 1.79 refuses alerting rules without a notifier, so the test runs a stub Alertmanager
//! that accepts every request (and checks that the firing alert reached it).
//!
//! Skipped, with a message, when `vmalert` is not installed and `CI` is not set; under CI its
//! absence is a failure (`.ci/run` installs it).

use std::io::{BufRead, BufReader, Read, Write as _};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use remote::prw::{self, Version};
use serde_json::Value;
use storage::{Batch, Labels, Sample};

use super::now_ms;
use crate::common::process::{Process, free_port, get_text, peer, wait_for};
use crate::common::{Strata, urlencode};

const V1_HEADERS: [(&str, &str); 3] = [
    ("Content-Type", "application/x-protobuf"),
    ("Content-Encoding", "snappy"),
    ("X-Prometheus-Remote-Write-Version", "0.1.0"),
];

/// One group evaluated every second: a recording rule over both input series, and an alert on
/// one of them that stays pending for 3 evaluations before it fires.
const RULES: &str = "groups:
  - name: demo
    interval: 1s
    rules:
      - record: job:demo_requests:sum
        expr: sum by (job) (demo_requests)
      - alert: DemoHigh
        expr: demo_requests > 5
        for: 3s
        labels:
          severity: page
";

#[test]
fn vmalert_records_alerts_and_restores_its_state_through_strata() {
    let test = "vmalert_records_alerts_and_restores_its_state_through_strata";
    let Some(vmalert) = peer("vmalert", "victoria-metrics", test) else { return };
    let dir = tempfile::tempdir().unwrap();
    let mut strata = Strata::start(&dir.path().join("strata"));
    strata.wait_ready();

    // Two input series, 2 s in the past: vmalert aligns its query time down to the evaluation
    // interval, and the samples stay visible for the 5 m lookback, longer than the test runs.
    let t = now_ms() - 2_000;
    let mut batch = Batch::new();
    for (instance, value) in [("a", 3.0), ("b", 7.0)] {
        let labels = [("__name__", "demo_requests"), ("job", "api"), ("instance", instance)];
        batch.push(Labels::from_pairs(&labels), vec![Sample::new(t, value)]);
    }
    let reply = strata.post("/api/v1/write", &V1_HEADERS, &prw::encode(Version::V1, &batch, &[]));
    assert_eq!(reply.status, 204, "{}", reply.body);

    let rules = dir.path().join("rules.yml");
    std::fs::write(&rules, RULES).unwrap();
    let notifier = Notifier::start();
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();

    // First run: nothing to restore yet; the rules are evaluated and written back.
    let first = Vmalert::start(&vmalert, &rules, &strata, &notifier, &dir.path().join("vmalert-1.log"));

    // The recording rule's output: 3 + 7, with the one label the aggregation keeps.
    let recorded = poll_query(&strata, first.log(), "job:demo_requests:sum");
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(recorded[0]["metric"], serde_json::json!({"__name__": "job:demo_requests:sum", "job": "api"}));
    assert_eq!(recorded[0]["value"][1], "10", "{recorded:?}");

    // The alert fires for instance b only, after having been pending.
    let firing = poll_query(&strata, first.log(), "ALERTS{alertstate=\"firing\"}");
    let expected_alert = |state: &str| {
        serde_json::json!({
            "__name__": "ALERTS", "alertname": "DemoHigh", "alertstate": state, "alertgroup": "demo",
            "job": "api", "instance": "b", "severity": "page",
        })
    };
    assert_eq!(firing.len(), 1, "{firing:?}");
    assert_eq!(firing[0]["metric"], expected_alert("firing"));
    assert_eq!(firing[0]["value"][1], "1");
    let pending = query(&strata, "ALERTS{alertstate=\"pending\"}[1m]");
    assert_eq!(pending.len(), 1, "the alert was never pending: {pending:?}");
    assert_eq!(pending[0]["metric"], expected_alert("pending"));

    // vmalert's own view, and the activeAt it keeps in ALERTS_FOR_STATE (unix seconds).
    let alert = first.alert(&agent).expect("vmalert shows the firing alert");
    assert_eq!(alert["state"], "firing", "{alert}");
    assert_eq!(alert["restored"], false, "{alert}");
    let active_at = alert["activeAt"].as_str().unwrap().to_owned();
    let active_at_s = chrono::DateTime::parse_from_rfc3339(&active_at).unwrap().timestamp();
    let for_state = poll_query(&strata, first.log(), "ALERTS_FOR_STATE");
    assert_eq!(for_state.len(), 1, "{for_state:?}");
    assert_eq!(for_state[0]["metric"]["alertname"], "DemoHigh");
    assert_eq!(for_state[0]["metric"]["instance"], "b");
    assert_eq!(for_state[0]["value"][1], active_at_s.to_string(), "activeAt {active_at}");
    wait_for(first.log(), "the notifier to receive the firing alert", || notifier.received("DemoHigh"));
    first.stop();

    // Second run with the same flags: vmalert restores the alert from strata through
    // -remoteRead.url before its first evaluation (pending, marked restored, with the original
    // activeAt in whole seconds, as ALERTS_FOR_STATE holds it), and the first evaluation makes it
    // firing, as its `for` has long passed. Without the restore it would start again from
    // pending with a new activeAt.
    let second = Vmalert::start(&vmalert, &rules, &strata, &notifier, &dir.path().join("vmalert-2.log"));
    wait_for(second.log(), "the restored alert to fire", || {
        let Some(alert) = second.alert(&agent) else { return false };
        assert_eq!(alert["restored"], true, "not restored: {alert}");
        let restored_at = alert["activeAt"].as_str().unwrap();
        assert_eq!(
            chrono::DateTime::parse_from_rfc3339(restored_at).unwrap().timestamp(),
            active_at_s,
            "activeAt {restored_at} after the restart, {active_at} before"
        );
        alert["state"] == "firing"
    });
    let log = std::fs::read_to_string(second.log()).unwrap();
    assert!(log.contains("restored to state at"), "no restore logged:\n{log}");
    second.stop();
    assert_eq!(strata.terminate().code(), Some(0), "log:\n{}", strata.log());
}

/// A running vmalert evaluating `rules` against strata, with its HTTP API on a free port.
struct Vmalert {
    process: Process,
    url: String,
}

impl Vmalert {
    fn start(binary: &Path, rules: &Path, strata: &Strata, notifier: &Notifier, log: &Path) -> Vmalert {
        let strata_url = strata.url("");
        let listen = format!("127.0.0.1:{}", free_port());
        let process = Process::spawn(
            binary,
            &[
                &format!("-rule={}", rules.display()),
                &format!("-datasource.url={strata_url}"),
                &format!("-remoteWrite.url={strata_url}"),
                &format!("-remoteRead.url={strata_url}"),
                &format!("-notifier.url={}", notifier.url),
                "-evaluationInterval=1s",
                // Written back within the test's polling rather than every 5 s.
                "-remoteWrite.flushInterval=100ms",
                &format!("-httpListenAddr={listen}"),
            ],
            log,
        );
        let vmalert = Vmalert { process, url: format!("http://{listen}") };
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        wait_for(log, "vmalert to serve its API", || {
            get_text(&agent, &format!("{}/api/v1/alerts", vmalert.url))
                .is_some_and(|(status, _)| status == 200)
        });
        vmalert
    }

    fn log(&self) -> &Path {
        self.process.log()
    }

    /// The one alert vmalert holds, if any.
    fn alert(&self, agent: &ureq::Agent) -> Option<Value> {
        let (status, body) = get_text(agent, &format!("{}/api/v1/alerts", self.url))?;
        assert_eq!(status, 200, "{body}");
        let json: Value = serde_json::from_str(&body).unwrap();
        let alerts = json["data"]["alerts"].as_array()?;
        assert!(alerts.len() <= 1, "{body}");
        alerts.first().cloned()
    }

    /// SIGTERM: vmalert flushes what it has to write and exits 0.
    fn stop(mut self) {
        self.process.terminate();
    }
}

/// The `result` of an instant query at the current time.
fn query(strata: &Strata, promql: &str) -> Vec<Value> {
    let reply = strata.get(&format!("/api/v1/query?query={}", urlencode(promql)));
    assert_eq!(reply.status, 200, "{promql}: {}", reply.body);
    let json: Value = serde_json::from_str(&reply.body).unwrap();
    json["data"]["result"].as_array().unwrap().clone()
}

/// Polls [`query`] until it returns something.
fn poll_query(strata: &Strata, log: &Path, promql: &str) -> Vec<Value> {
    let mut result = Vec::new();
    wait_for(log, &format!("{promql} in strata"), || {
        result = query(strata, promql);
        !result.is_empty()
    });
    result
}

/// A stand-in Alertmanager: answers every request 200 and keeps the bodies.
struct Notifier {
    url: String,
    bodies: Arc<Mutex<Vec<String>>>,
}

impl Notifier {
    fn start() -> Notifier {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let keep = Arc::clone(&bodies);
        // Lives until the test process exits; one request per connection.
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
                if let Some(body) = read_request(&mut stream) {
                    keep.lock().unwrap().push(body);
                }
                let _ =
                    stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            }
        });
        Notifier { url, bodies }
    }

    /// Whether any request body received so far contains `needle`.
    fn received(&self, needle: &str) -> bool {
        self.bodies.lock().unwrap().iter().any(|b| b.contains(needle))
    }
}

/// The body of one HTTP/1.1 request with a `Content-Length`.
fn read_request(stream: &mut std::net::TcpStream) -> Option<String> {
    let mut reader = BufReader::new(stream);
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(String::from_utf8_lossy(&body).into_owned())
}

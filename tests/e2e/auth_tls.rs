//! Authentication and TLS against the real binary: every class of endpoint with no, wrong,
//! read and write credentials; HTTPS with a generated certificate, its reload on file change
//! and on SIGHUP, and graceful shutdown under TLS; Prometheus' `remote_write` with `basic_auth`
//! (the real Debian `prometheus`, skipped when absent outside CI) and Grafana's way of sending
//! basic auth to the query API.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::process::{Prometheus, free_port, peer};
use crate::common::{Reply, Strata};
use base64::Engine as _;
use nix::sys::signal::Signal;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, KeyUsagePurpose};

const READ_USER: &str = "grafana";
const READ_PASSWORD: &str = "read-secret";
const READ_TOKEN: &str = "read-token-123";
const WRITE_USER: &str = "prometheus";
const WRITE_PASSWORD: &str = "write:secret";
const WRITE_TOKEN: &str = "write-token-456";

/// Bound on waiting for an event (data arriving). Not a performance bound.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// Writes the secret files and returns the flags that configure both scopes with them.
fn auth_flags(dir: &Path) -> Vec<String> {
    let file = |name: &str, content: &str| {
        let path = dir.join(name);
        // A trailing newline, as `echo` writes it: strata must ignore it.
        std::fs::write(&path, format!("{content}\n")).unwrap();
        path.display().to_string()
    };
    vec![
        format!("--auth.read.basic-user={READ_USER}"),
        format!("--auth.read.basic-password-file={}", file("read-password", READ_PASSWORD)),
        format!("--auth.read.bearer-token-file={}", file("read-token", READ_TOKEN)),
        format!("--auth.write.basic-user={WRITE_USER}"),
        format!("--auth.write.basic-password-file={}", file("write-password", WRITE_PASSWORD)),
        format!("--auth.write.bearer-token-file={}", file("write-token", WRITE_TOKEN)),
    ]
}

fn basic(user: &str, password: &str) -> String {
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}")))
}

fn plain_agent() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).build().into()
}

/// `method url` with an optional `Authorization` header and a body for POST.
fn request(agent: &ureq::Agent, method: &str, url: &str, authorization: Option<&str>, body: &str) -> Reply {
    let result = if method == "GET" {
        let mut req = agent.get(url);
        if let Some(value) = authorization {
            req = req.header("Authorization", value);
        }
        req.call()
    } else {
        let mut req = agent.post(url);
        if let Some(value) = authorization {
            req = req.header("Authorization", value);
        }
        req.send(body.as_bytes())
    };
    let mut response = result.expect("HTTP request");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let body = response.body_mut().read_to_string().unwrap_or_default();
    Reply { status, content_type, headers, body }
}

fn start_with_auth(dir: &Path, extra: &[String]) -> Strata {
    let mut flags = auth_flags(dir);
    flags.extend(extra.iter().cloned());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut strata = Strata::start_with(&dir.join("data"), &flags);
    strata.wait_ready();
    strata
}

#[test]
fn each_class_of_endpoint_needs_its_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let strata = start_with_auth(dir.path(), &[]);
    let agent = plain_agent();
    let url = |path: &str| strata.url(path);
    let read = basic(READ_USER, READ_PASSWORD);
    let write = basic(WRITE_USER, WRITE_PASSWORD);
    let read_bearer = format!("Bearer {READ_TOKEN}");
    let write_bearer = format!("Bearer {WRITE_TOKEN}");

    // Health probes stay open.
    assert_eq!(request(&agent, "GET", &url("/-/healthy"), None, "").status, 200);
    assert_eq!(request(&agent, "GET", &url("/-/ready"), None, "").status, 200);
    assert_eq!(request(&agent, "GET", &url("/ping"), None, "").status, 204);

    // Writes: Influx v1 with basic auth, with u/p, v2 with `Token`; remote write.
    let line = "cpu,host=a usage=42\n";
    let v1 = url("/write?db=bench");
    assert_eq!(request(&agent, "POST", &v1, None, line).status, 401);
    assert_eq!(request(&agent, "POST", &v1, Some(&basic(WRITE_USER, "nope")), line).status, 401);
    let forbidden = request(&agent, "POST", &v1, Some(&read), line);
    assert_eq!(forbidden.status, 403, "{}", forbidden.body);
    assert!(forbidden.body.contains("\"error\""), "Influx dialect: {}", forbidden.body);
    assert_eq!(request(&agent, "POST", &v1, Some(&write), line).status, 204);
    let with_params = url("/write?db=bench&u=prometheus&p=write%3Asecret");
    assert_eq!(request(&agent, "POST", &with_params, None, line).status, 204);
    let v2 = url("/api/v2/write?bucket=bench&org=o");
    assert_eq!(request(&agent, "POST", &v2, Some(&format!("Token {WRITE_TOKEN}")), line).status, 204);
    assert_eq!(request(&agent, "POST", &v2, Some(&format!("Token {READ_TOKEN}")), line).status, 403);
    let create = url("/query?q=CREATE+DATABASE+telegraf");
    assert_eq!(request(&agent, "POST", &create, Some(&read_bearer), "").status, 403);
    assert_eq!(request(&agent, "POST", &create, Some(&write_bearer), "").status, 200);
    let remote_write = request(&agent, "POST", &url("/api/v1/write"), None, "");
    assert_eq!(remote_write.status, 401);
    assert!(remote_write.header("www-authenticate").is_some_and(|c| c.starts_with("Basic")));
    assert_eq!(request(&agent, "POST", &url("/api/v1/write"), Some(&read), "").status, 403);
    // Authenticated, the empty body reaches the decoder and is refused as a bad request.
    assert_eq!(request(&agent, "POST", &url("/api/v1/write"), Some(&write), "").status, 400);

    // Admin endpoints are writes; past authentication they are disabled (503) by default.
    let snapshot = url("/api/v1/admin/tsdb/snapshot");
    assert_eq!(request(&agent, "POST", &snapshot, Some(&read), "").status, 403);
    assert_eq!(request(&agent, "POST", &snapshot, Some(&write), "").status, 503);

    // Reads: the query API, metadata, /metrics, the UI, remote read.
    let query = url("/api/v1/query?query=cpu_usage");
    let refused = request(&agent, "GET", &query, None, "");
    assert_eq!(refused.status, 401);
    let envelope: serde_json::Value = serde_json::from_str(&refused.body).unwrap();
    assert_eq!(
        (envelope["status"].as_str(), envelope["errorType"].as_str()),
        (Some("error"), Some("unauthorized"))
    );
    let challenges: Vec<&str> =
        refused.headers.get_all("www-authenticate").iter().map(|v| v.to_str().unwrap()).collect();
    assert_eq!(challenges, ["Basic realm=\"strata\", charset=\"UTF-8\"", "Bearer realm=\"strata\""]);
    assert_eq!(request(&agent, "GET", &query, Some(&basic(READ_USER, WRITE_PASSWORD)), "").status, 401);
    assert_eq!(request(&agent, "GET", &query, Some("Bearer wrong"), "").status, 401);
    for credentials in [&read, &write, &read_bearer, &write_bearer] {
        let answer = request(&agent, "GET", &query, Some(credentials), "");
        assert_eq!(answer.status, 200, "{}", answer.body);
        // The two line-protocol writes and the v2 write all stored cpu_usage{host="a"}.
        assert!(answer.body.contains("\"cpu_usage\"") && answer.body.contains("\"42\""), "{}", answer.body);
    }
    for path in ["/api/v1/labels", "/metrics", "/", "/api/v1/status/buildinfo"] {
        assert_eq!(request(&agent, "GET", &url(path), None, "").status, 401, "{path}");
        assert_eq!(request(&agent, "GET", &url(path), Some(&read_bearer), "").status, 200, "{path}");
    }
    assert_eq!(request(&agent, "POST", &url("/api/v1/read"), None, "").status, 401);
    // Authenticated, the empty body reaches the remote-read decoder.
    assert_eq!(request(&agent, "POST", &url("/api/v1/read"), Some(&read), "").status, 400);

    // Secrets never reach the log; the flags endpoint shows file paths only.
    let flags = request(&agent, "GET", &url("/api/v1/status/flags"), Some(&read), "");
    for secret in [READ_PASSWORD, READ_TOKEN, WRITE_PASSWORD, WRITE_TOKEN] {
        assert!(!strata.log().contains(secret), "{secret} logged");
        assert!(!flags.body.contains(secret), "{secret} in flags");
    }
}

#[test]
fn grafana_style_basic_auth_queries_work() {
    let dir = tempfile::tempdir().unwrap();
    let strata = start_with_auth(dir.path(), &[]);
    let agent = plain_agent();
    let write = basic(WRITE_USER, WRITE_PASSWORD);
    let now_s = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let line = format!("room,site=lab temp=21.5 {now_s}\n");
    let stored = request(&agent, "POST", &strata.url("/write?db=x&precision=s"), Some(&write), &line);
    assert_eq!(stored.status, 204, "{}", stored.body);

    // Grafana's Prometheus data source with "Basic auth" on: the header on every request, the
    // query as a form POST, plus its buildinfo probe as a GET.
    let grafana = basic(READ_USER, READ_PASSWORD);
    let probe = request(&agent, "GET", &strata.url("/api/v1/status/buildinfo"), Some(&grafana), "");
    assert_eq!(probe.status, 200, "{}", probe.body);
    let form = format!("query=room_temp&start={}&end={}&step=15", now_s - 60, now_s + 60);
    let answer = agent
        .post(strata.url("/api/v1/query_range"))
        .header("Authorization", &grafana)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .send(form.as_bytes())
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    assert!(answer.contains("\"room_temp\"") && answer.contains("\"21.5\""), "{answer}");
    let instant = request(
        &agent,
        "GET",
        &strata.url(&format!("/api/v1/query?query=room_temp&time={now_s}")),
        Some(&grafana),
        "",
    );
    assert_eq!(instant.status, 200, "{}", instant.body);
    assert!(instant.body.contains("\"21.5\""), "{}", instant.body);
}

#[test]
fn a_missing_secret_file_stops_startup_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-token");
    let flag = format!("--auth.write.bearer-token-file={}", missing.display());
    let mut strata = Strata::spawn(&dir.path().join("data"), &[&flag]);
    let status = strata.wait_exit();
    assert!(!status.success());
    let log = strata.log();
    assert!(log.contains("--auth.write.bearer-token-file") && log.contains("no-such-token"), "{log}");

    // A user without a password file is refused by the flag parser.
    let output = crate::common::run_to_exit(&["--auth.read.basic-user=grafana"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--auth.read.basic-password-file"));
}

/// A CA and a server certificate for 127.0.0.1 it signed, as PEM files in `dir` named
/// `<name>.crt` and `<name>.key`. Returns the CA certificate (DER) for the client to trust.
fn issue(dir: &Path, name: &str) -> (PathBuf, PathBuf, Vec<u8>) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let params = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
    let cert = params.signed_by(&key, &ca).unwrap();
    let (cert_file, key_file) = (dir.join(format!("{name}.crt")), dir.join(format!("{name}.key")));
    std::fs::write(&cert_file, cert.pem()).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    (cert_file, key_file, ca.der().to_vec())
}

/// A client that trusts only `ca`.
fn tls_agent(ca: &[u8]) -> ureq::Agent {
    let roots =
        ureq::tls::RootCerts::Specific(Arc::new(vec![ureq::tls::Certificate::from_der(ca).to_owned()]));
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .tls_config(ureq::tls::TlsConfig::builder().root_certs(roots).build())
        .build()
        .into()
}

/// `GET path` over a new connection from a client that trusts only `ca` (a pooled connection
/// would keep the certificate it was opened with).
fn https_get(ca: &[u8], strata: &Strata, path: &str, authorization: Option<&str>) -> Result<u16, String> {
    let mut req = tls_agent(ca).get(format!("https://{}{path}", strata.addr()));
    if let Some(value) = authorization {
        req = req.header("Authorization", value);
    }
    req.call().map(|r| r.status().as_u16()).map_err(|e| e.to_string())
}

/// Replaces `to`'s content with `from`'s in one rename, as certificate tools do.
fn replace_file(from: &Path, to: &Path) {
    let staged = to.with_extension("tmp");
    std::fs::copy(from, &staged).unwrap();
    std::fs::rename(&staged, to).unwrap();
}

#[test]
fn tls_serves_reloads_and_shuts_down_gracefully() {
    let dir = tempfile::tempdir().unwrap();
    let (cert_a, key_a, ca_a) = issue(dir.path(), "a");
    let (cert_b, key_b, ca_b) = issue(dir.path(), "b");
    let (cert_c, key_c, ca_c) = issue(dir.path(), "c");
    let served_cert = dir.path().join("served.crt");
    let served_key = dir.path().join("served.key");
    std::fs::copy(&cert_a, &served_cert).unwrap();
    std::fs::copy(&key_a, &served_key).unwrap();
    let extra = [
        format!("--tls.cert-file={}", served_cert.display()),
        format!("--tls.key-file={}", served_key.display()),
        // Checked often, so a file change is seen soon; the test waits for the log line.
        "--tls.reload-interval=100ms".to_owned(),
    ];
    let mut strata = start_with_auth(dir.path(), &extra);
    let (trusts_a, trusts_b, trusts_c) = (&ca_a[..], &ca_b[..], &ca_c[..]);
    let read = basic(READ_USER, READ_PASSWORD);

    assert_eq!(https_get(trusts_a, &strata, "/-/healthy", None), Ok(200));
    assert_eq!(https_get(trusts_a, &strata, "/api/v1/query?query=1", None), Ok(401));
    assert_eq!(https_get(trusts_a, &strata, "/api/v1/query?query=1", Some(&read)), Ok(200));
    assert!(https_get(trusts_b, &strata, "/-/healthy", None).is_err(), "B is not served yet");
    // Plain HTTP to the TLS port gets no HTTP answer.
    assert!(plain_agent().get(strata.url("/-/healthy")).call().is_err());

    // A half-written update (new certificate, old key) is refused and A stays served.
    replace_file(&cert_b, &served_cert);
    let refused = strata.wait_for_log("TLS certificate not reloaded");
    assert!(refused.contains("--tls.key-file"), "{refused}");
    assert_eq!(https_get(trusts_a, &strata, "/-/healthy", None), Ok(200));
    // The key arrives: B is served.
    replace_file(&key_b, &served_key);
    strata.wait_for_log("TLS certificate reloaded");
    assert_eq!(https_get(trusts_b, &strata, "/-/healthy", None), Ok(200));
    assert!(https_get(trusts_a, &strata, "/-/healthy", None).is_err(), "A is no longer served");

    // SIGHUP reloads at once, without waiting for the interval, and does not stop strata.
    std::fs::copy(&cert_c, &served_cert).unwrap();
    std::fs::copy(&key_c, &served_key).unwrap();
    strata.signal(Signal::SIGHUP);
    // The interval may notice the copies first; the SIGHUP reload is the one marked forced.
    let forced = strata.wait_for_log("forced=true");
    assert!(forced.contains("TLS certificate reloaded"), "{forced}");
    assert_eq!(https_get(trusts_c, &strata, "/-/healthy", None), Ok(200));

    assert_eq!(strata.terminate().code(), Some(0), "log:\n{}", strata.log());
    assert!(strata.log().contains("strata stopped"), "{}", strata.log());
}

/// A refused write gets its status and error body on HTTP/1.1 and HTTP/2, whatever its body
/// size: strata reads out the body it refuses, so curl (nghttp2) sees the answer instead of
/// "Stream error in the HTTP/2 framing layer", which it reported for 9 of 10 refused uploads
/// when the body was left unread.
#[test]
fn refused_uploads_get_their_answer_on_http1_and_http2() {
    let Some(curl) = peer("curl", "curl", "refused_uploads_get_their_answer_on_http1_and_http2") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, _) = issue(dir.path(), "a");
    let extra = [
        format!("--tls.cert-file={}", cert.display()),
        format!("--tls.key-file={}", key.display()),
        "--write-body-bytes-max=4MiB".to_owned(),
    ];
    let strata = start_with_auth(dir.path(), &extra);
    let small = dir.path().join("small.bin");
    let large = dir.path().join("large.bin");
    let over = dir.path().join("over.bin");
    // Incompressible bytes, so no layer can shortcut them.
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    let mut bytes = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng as u8
            })
            .collect()
    };
    std::fs::write(&small, bytes(1000)).unwrap();
    std::fs::write(&large, bytes(3 << 20)).unwrap();
    std::fs::write(&over, bytes(5 << 20)).unwrap();
    let url = format!("https://{}/api/v1/write", strata.addr());
    let read_creds = format!("{READ_USER}:{READ_PASSWORD}");
    let write_creds = format!("{WRITE_USER}:{WRITE_PASSWORD}");
    let cases: [(&Path, Option<&str>, &str, &str); 5] = [
        (&small, None, "401", "authentication required"),
        (&large, None, "401", "authentication required"),
        (&large, Some("prometheus:wrong"), "401", "wrong credentials"),
        (&large, Some(&read_creds), "403", "may read but not write"),
        (&over, Some(&write_creds), "413", "raise --write-body-bytes-max"),
    ];
    for protocol in ["--http1.1", "--http2"] {
        for (body, creds, status, text) in cases {
            for attempt in 0..5 {
                let mut cmd = std::process::Command::new(&curl);
                // -k: the test checks HTTP behaviour, not certificate trust (covered above).
                cmd.args(["-sSk", protocol, "-w", "\n%{http_code} %{http_version}", "--data-binary"])
                    .arg(format!("@{}", body.display()))
                    .args(["-H", "Content-Type: application/x-protobuf", "-H", "Content-Encoding: snappy"]);
                if let Some(creds) = creds {
                    cmd.args(["-u", creds]);
                }
                let out = cmd.arg(&url).output().unwrap();
                let stdout = String::from_utf8_lossy(&out.stdout);
                let what = format!(
                    "{protocol} {} bytes, credentials {creds:?}, attempt {attempt}: exit {:?}, stdout {stdout:?}, stderr {:?}",
                    std::fs::metadata(body).unwrap().len(),
                    out.status.code(),
                    String::from_utf8_lossy(&out.stderr)
                );
                assert!(out.status.success(), "{what}");
                let (answer, code) = stdout.rsplit_once('\n').unwrap();
                let version = if protocol == "--http2" { "2" } else { "1.1" };
                assert_eq!(code, format!("{status} {version}"), "{what}");
                assert!(answer.contains(text), "{what}");
            }
        }
    }
}

#[test]
fn a_broken_certificate_stops_startup() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, _key, _) = issue(dir.path(), "a");
    let (_, other_key, _) = issue(dir.path(), "b");
    let cert_flag = format!("--tls.cert-file={}", cert.display());
    let key_flag = format!("--tls.key-file={}", other_key.display());
    let mut strata = Strata::spawn(&dir.path().join("data"), &[&cert_flag, &key_flag]);
    assert!(!strata.wait_exit().success());
    assert!(strata.log().contains("does not fit"), "{}", strata.log());
}

#[test]
fn prometheus_remote_writes_with_basic_auth() {
    let Some(prometheus) = peer("prometheus", "prometheus", "prometheus_remote_writes_with_basic_auth")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let strata = start_with_auth(dir.path(), &[]);
    let prom_addr = format!("127.0.0.1:{}", free_port());
    let config = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: prometheus\n    static_configs:\n      \
             - targets: ['{prom_addr}']\nremote_write:\n  - url: {url}\n    basic_auth:\n      username: {WRITE_USER}\n      \
             password_file: {password}\n    queue_config:\n      batch_send_deadline: 1s\n",
        url = strata.url("/api/v1/write"),
        password = dir.path().join("write-password").display(),
    );
    let prom = Prometheus::start(&prometheus, dir.path(), &prom_addr, &config, &[]);

    // Prometheus scrapes itself and sends the samples; they arrive only if strata took its
    // credentials. Read back with Grafana's read credentials.
    let agent = plain_agent();
    let grafana = basic(READ_USER, READ_PASSWORD);
    let query = strata.url("/api/v1/query?query=prometheus_build_info");
    let deadline = Instant::now() + HANG_GUARD;
    loop {
        let answer = request(&agent, "GET", &query, Some(&grafana), "");
        assert_eq!(answer.status, 200, "{}", answer.body);
        if answer.body.contains("\"job\":\"prometheus\"") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no samples from Prometheus; its log:\n{}\nstrata's log:\n{}",
            std::fs::read_to_string(prom.log()).unwrap_or_default(),
            strata.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let metrics = request(&agent, "GET", &strata.url("/metrics"), Some(&grafana), "").body;
    let refused = metrics
        .lines()
        .filter(|l| l.starts_with("strata_http_requests_total") && l.contains("code=\"401\""))
        .count();
    assert_eq!(refused, 0, "Prometheus' writes were refused:\n{metrics}");
}

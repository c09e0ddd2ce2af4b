//! Tenants on the real `strata` binary over HTTP: the `X-Scope-OrgID` header selects a tenant
//! on every write and read path (remote write, line protocol, queries, series and label APIs,
//! metadata, the TSDB status page, remote read, deletion); each tenant sees only its own
//! series, without the tenant label; series limits count per tenant; queries across tenants
//! need `--tenant.federation`.

use std::io::Read as _;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::common::{Strata, urlencode};
use remote::metadata::{MetricMetadata, MetricType};
use remote::prw::{self, Version};
use serde_json::Value;
use storage::{Batch, Labels, Matcher, Sample};

const ORG: &str = "X-Scope-OrgID";

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

fn start(args: &[&str]) -> (tempfile::TempDir, Strata) {
    let dir = tempfile::tempdir().unwrap();
    let mut strata = Strata::start_with(dir.path(), args);
    strata.wait_ready();
    (dir, strata)
}

/// The tenant header for `tenant` (none for the default tenant).
fn org(tenant: Option<&str>) -> Vec<(&str, &str)> {
    tenant.map(|t| (ORG, t)).into_iter().collect()
}

/// A remote-write 1.0 request to `tenant` with one sample at `t` for each label set, and
/// `metadata`.
fn remote_write(
    strata: &Strata,
    tenant: Option<&str>,
    series: &[&[(&str, &str)]],
    t: i64,
    metadata: &[MetricMetadata],
) -> crate::common::Reply {
    let mut batch = Batch::new();
    for pairs in series {
        batch.push(Labels::from_pairs(pairs), vec![Sample::new(t, 1.0)]);
    }
    let mut headers = vec![
        ("Content-Type", "application/x-protobuf"),
        ("Content-Encoding", "snappy"),
        ("X-Prometheus-Remote-Write-Version", "0.1.0"),
    ];
    headers.extend(org(tenant));
    strata.post("/api/v1/write", &headers, &prw::encode(Version::V1, &batch, metadata))
}

/// `data` of an API answer to `tenant`, which must succeed.
fn api(strata: &Strata, tenant: Option<&str>, path: &str) -> Value {
    let reply = strata.get_with(path, &org(tenant));
    assert_eq!(reply.status, 200, "{tenant:?} {path}: {}", reply.body);
    serde_json::from_str::<Value>(&reply.body).unwrap()["data"].clone()
}

/// The instant vector `query` answers `tenant` now, as sorted (labels, value) pairs.
fn query(strata: &Strata, tenant: Option<&str>, q: &str) -> Vec<(Value, String)> {
    let t = now_ms() as f64 / 1000.0 + 1.0;
    let data = api(strata, tenant, &format!("/api/v1/query?query={}&time={t}", urlencode(q)));
    let mut out: Vec<(Value, String)> = data["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["metric"].clone(), r["value"][1].as_str().unwrap().to_string()))
        .collect();
    out.sort_by_key(|(m, _)| m.to_string());
    out
}

/// The series `selector` selects for `tenant` in the last hour, as JSON label sets.
fn series(strata: &Strata, tenant: Option<&str>, selector: &str) -> Vec<Value> {
    let t = now_ms() as f64 / 1000.0;
    let path =
        format!("/api/v1/series?match[]={}&start={}&end={}", urlencode(selector), t - 3600.0, t + 60.0);
    api(strata, tenant, &path).as_array().unwrap().clone()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_string()).collect()
}

/// A remote read of `matchers` over the last hour, as `tenant`: each series' labels.
fn remote_read(strata: &Strata, tenant: Option<&str>, matchers: &[Matcher]) -> Vec<Labels> {
    let t = now_ms();
    let body = remote::read::client::request(matchers, t - 3_600_000, t + 60_000).unwrap();
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut request = agent
        .post(strata.url("/api/v1/read"))
        .header("Content-Type", "application/x-protobuf")
        .header("Content-Encoding", "snappy")
        .header("X-Prometheus-Remote-Read-Version", "0.1.0");
    if let Some(tenant) = tenant {
        request = request.header(ORG, tenant);
    }
    let response = request.send(&body[..]).unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let mut answer = Vec::new();
    response.into_body().into_reader().read_to_end(&mut answer).unwrap();
    let mut labels: Vec<Labels> =
        remote::read::client::series(&answer).unwrap().into_iter().map(|s| s.labels).collect();
    labels.sort();
    labels
}

fn counts(pairs: &[(Value, String)]) -> Vec<String> {
    pairs.iter().map(|(_, v)| v.clone()).collect()
}

#[test]
fn each_tenant_sees_only_its_own_series_on_every_path() {
    let (_dir, strata) = start(&["--series-max", "3", "--web.enable-admin-api"]);
    let t = now_ms() - 1000;
    let up =
        |job: &'static str| -> Vec<(&'static str, &'static str)> { vec![("__name__", "up"), ("job", job)] };
    // The default tenant: two series, one of which claims a tenant label (taken off).
    let spoofed: &[(&str, &str)] = &[("__name__", "up"), ("job", "d2"), ("__tenant__", "a")];
    let reply = remote_write(&strata, None, &[&up("d1"), spoofed], t, &[]);
    assert_eq!(reply.status, 204, "{}", reply.body);
    // Tenant a: three series and metadata, then a fourth over --series-max (counted per tenant).
    let meta = MetricMetadata {
        metric_family_name: "up".into(),
        metric_type: MetricType::Gauge,
        help: "a's help".into(),
        unit: String::new(),
    };
    let reply = remote_write(&strata, Some("a"), &[&up("a1"), &up("a2"), &up("a3")], t, &[meta]);
    assert_eq!(reply.status, 204, "{}", reply.body);
    let reply = remote_write(&strata, Some("a"), &[&up("a4")], t, &[]);
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(
        reply.body.contains("max_series (3)") && reply.body.contains("first refused: up{job=\"a4\"}"),
        "{}",
        reply.body
    );
    // Tenant b, by line protocol: its series are not held back by a's.
    let line = format!("up,job=b1 value=1 {}\n", t * 1_000_000);
    let reply = strata.post("/write?db=x", &[(ORG, "b")], line.as_bytes());
    assert_eq!(reply.status, 204, "{}", reply.body);

    // Queries: each tenant its own series, no tenant label anywhere.
    assert_eq!(counts(&query(&strata, None, "count(up)")), ["2"]);
    assert_eq!(counts(&query(&strata, Some("a"), "count(up)")), ["3"]);
    // (A line protocol field named `value` is the measurement's own series.)
    assert_eq!(counts(&query(&strata, Some("b"), "count(up)")), ["1"]);
    assert_eq!(query(&strata, Some("c"), "count(up)"), []);
    let a = query(&strata, Some("a"), "up");
    assert_eq!(a.len(), 3);
    assert!(a.iter().all(|(m, _)| m.get("__tenant__").is_none()), "{a:?}");
    // A matcher on the hidden label sees it absent.
    assert_eq!(query(&strata, Some("a"), "up{__tenant__=\"a\"}"), []);
    assert_eq!(query(&strata, Some("a"), "count(up{__tenant__=\"\"})").len(), 1);

    // Series, label names and values.
    let default_series = series(&strata, None, "up");
    assert_eq!(default_series.len(), 2);
    assert!(default_series.iter().all(|s| s.get("__tenant__").is_none()), "{default_series:?}");
    assert_eq!(series(&strata, Some("a"), "{job=~\"a.*|d.*\"}").len(), 3);
    for tenant in [None, Some("a"), Some("b")] {
        let names = strings(&api(&strata, tenant, "/api/v1/labels"));
        assert!(!names.contains(&"__tenant__".to_string()), "{tenant:?}: {names:?}");
        assert_eq!(strings(&api(&strata, tenant, "/api/v1/label/__tenant__/values")), Vec::<String>::new());
    }
    assert_eq!(strings(&api(&strata, Some("a"), "/api/v1/label/job/values")), ["a1", "a2", "a3"]);
    assert_eq!(strings(&api(&strata, None, "/api/v1/label/job/values")), ["d1", "d2"]);
    assert_eq!(strings(&api(&strata, Some("b"), "/api/v1/labels")), ["__name__", "job"]);

    // So are the InfluxDB databases it wrote to.
    let databases = |tenant: Option<&str>| -> String {
        let reply = strata.get_with("/query?q=SHOW+DATABASES", &org(tenant));
        assert_eq!(reply.status, 200, "{}", reply.body);
        let body: Value = serde_json::from_str(&reply.body).unwrap();
        body["results"][0]["series"][0]["values"].to_string()
    };
    assert_eq!(databases(Some("b")), r#"[["x"]]"#);
    assert_eq!(databases(None), "null");

    // Metadata is the tenant's own.
    assert_eq!(api(&strata, Some("a"), "/api/v1/metadata")["up"][0]["help"], "a's help");
    assert_eq!(api(&strata, None, "/api/v1/metadata"), serde_json::json!({}));

    // The TSDB status page: the tenant's series and refusals only.
    for (tenant, series, refused) in [(None, 2, 0), (Some("a"), 3, 1), (Some("b"), 1, 0)] {
        let status = api(&strata, tenant, "/api/v1/status/tsdb");
        assert_eq!(status["headStats"]["numSeries"], series, "{tenant:?}: {status}");
        assert_eq!(status["seriesLimits"]["seriesRejectedToday"], refused, "{tenant:?}");
        let pairs = status["seriesCountByLabelValuePair"].to_string();
        assert!(!pairs.contains("__tenant__"), "{tenant:?}: {pairs}");
    }

    // Remote read.
    let up_only = [Matcher::equal("__name__", "up")];
    let read_a = remote_read(&strata, Some("a"), &up_only);
    assert_eq!(read_a.len(), 3);
    assert!(read_a.iter().all(|l| l.get("__tenant__").is_none()));
    assert_eq!(remote_read(&strata, None, &up_only).len(), 2);
    assert_eq!(remote_read(&strata, Some("c"), &up_only), Vec::<Labels>::new());

    // Deletion: only the asking tenant's series go.
    let reply = strata.post(
        "/api/v1/admin/tsdb/delete_series",
        &[(ORG, "a"), ("Content-Type", "application/x-www-form-urlencoded")],
        b"match[]=up",
    );
    assert_eq!(reply.status, 204, "{}", reply.body);
    assert_eq!(query(&strata, Some("a"), "count(up)"), []);
    assert_eq!(counts(&query(&strata, None, "count(up)")), ["2"]);
}

#[test]
fn bad_tenant_headers_and_queries_across_tenants_without_federation_are_refused() {
    let (_dir, strata) = start(&[]);
    let t = now_ms() - 1000;
    let reply = remote_write(&strata, Some("a/b"), &[&[("__name__", "up")]], t, &[]);
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(reply.body.contains("X-Scope-OrgID"), "{}", reply.body);
    let reply = remote_write(&strata, Some("a|b"), &[&[("__name__", "up")]], t, &[]);
    assert_eq!(reply.status, 400, "{}", reply.body);
    let reply = strata.post("/api/v2/write?bucket=x", &[(ORG, "..")], b"up value=1\n");
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert!(reply.body.starts_with("{\"error\""), "{}", reply.body);

    let reply = strata.get_with("/api/v1/query?query=up", &[(ORG, "a|b")]);
    assert_eq!(reply.status, 400, "{}", reply.body);
    let body: Value = serde_json::from_str(&reply.body).unwrap();
    assert_eq!(body["errorType"], "bad_data");
    assert!(body["error"].as_str().unwrap().contains("--tenant.federation"), "{body}");
}

#[test]
fn federated_queries_label_each_series_with_its_tenant() {
    let (_dir, strata) = start(&["--tenant.federation"]);
    let t = now_ms() - 1000;
    for (tenant, jobs) in [(Some("a"), ["x", "y"]), (Some("b"), ["x", "z"]), (None, ["x", "w"])] {
        let series: Vec<Vec<(&str, &str)>> =
            jobs.iter().map(|j| vec![("__name__", "up"), ("job", *j)]).collect();
        let refs: Vec<&[(&str, &str)]> = series.iter().map(Vec::as_slice).collect();
        let reply = remote_write(&strata, tenant, &refs, t, &[]);
        assert_eq!(reply.status, 204, "{}", reply.body);
    }
    let both = Some("b|a");
    let by_tenant = query(&strata, both, "count by (__tenant_id__) (up)");
    let got: Vec<(String, String)> = by_tenant
        .iter()
        .map(|(m, v)| (m["__tenant_id__"].as_str().unwrap().to_string(), v.clone()))
        .collect();
    assert_eq!(got, [("a".to_string(), "2".to_string()), ("b".to_string(), "2".to_string())]);
    // The same job in two tenants stays two series.
    assert_eq!(query(&strata, both, "up{job=\"x\"}").len(), 2);
    assert_eq!(query(&strata, both, "up{__tenant_id__=\"b\"}").len(), 2);
    assert_eq!(strings(&api(&strata, both, "/api/v1/label/__tenant_id__/values")), ["a", "b"]);
    assert!(strings(&api(&strata, both, "/api/v1/labels")).contains(&"__tenant_id__".to_string()));
    let listed = series(&strata, both, "up");
    assert_eq!(listed.len(), 4);
    assert!(
        listed.iter().all(|s| s["__tenant_id__"].is_string() && s.get("__tenant__").is_none()),
        "{listed:?}"
    );
    // The default tenant is not among them.
    assert_eq!(strings(&api(&strata, both, "/api/v1/label/job/values")), ["x", "y", "z"]);
}

/// A query node asks its writers as the request's tenant (the header passed on): a tenant sees
/// its series from the writer's head and after the upload, once each and without the tenant
/// label; a deletion through the query node reaches only its series.
#[test]
fn a_query_node_reads_and_deletes_as_the_tenant() {
    let (bucket, dw, dq) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let root = format!("file://{}", bucket.path().display());
    let w_args = ["--role", "write", "--storage.bucket", &format!("{root}/w"), "--web.enable-admin-api"];
    let mut w = Strata::start_with(dw.path(), &w_args);
    w.wait_ready();
    let t = now_ms() - 1000;
    let up =
        |job: &'static str| -> Vec<(&'static str, &'static str)> { vec![("__name__", "up"), ("job", job)] };
    assert_eq!(remote_write(&w, Some("a"), &[&up("a1"), &up("a2")], t, &[]).status, 204);
    assert_eq!(remote_write(&w, None, &[&up("d1")], t, &[]).status, 204);
    let w_url = w.url("");
    let q_args = [
        "--role",
        "query",
        "--storage.bucket",
        &root,
        "--query.writer",
        w_url.trim_end_matches('/'),
        "--storage.bucket-refresh",
        "100ms",
        "--web.enable-admin-api",
    ];
    let mut q = Strata::start_with(dq.path(), &q_args);
    q.wait_ready();
    let check = |q: &Strata, when: &str| {
        assert_eq!(counts(&query(q, Some("a"), "count(up)")), ["2"], "{when}");
        assert_eq!(counts(&query(q, None, "count(up)")), ["1"], "{when}");
        let listed = series(q, Some("a"), "up");
        assert_eq!(listed.len(), 2, "{when}: {listed:?}");
        assert!(listed.iter().all(|s| s.get("__tenant__").is_none()), "{when}: {listed:?}");
        assert_eq!(strings(&api(q, Some("a"), "/api/v1/label/job/values")), ["a1", "a2"], "{when}");
        assert_eq!(strings(&api(q, None, "/api/v1/label/job/values")), ["d1"], "{when}");
    };
    check(&q, "from the writer's head");
    // SIGTERM uploads; the restarted writer's head is empty, and the query node reads the
    // files from the bucket or, until its next refresh, from the writer.
    assert_eq!(w.terminate().code(), Some(0), "{}", w.log());
    let mut w = Strata::start_at(dw.path(), w.addr(), &w_args);
    w.wait_ready();
    check(&q, "after the upload");

    let reply = q.post(
        "/api/v1/admin/tsdb/delete_series",
        &[(ORG, "a"), ("Content-Type", "application/x-www-form-urlencoded")],
        b"match[]=up",
    );
    assert_eq!(reply.status, 204, "{}", reply.body);
    assert_eq!(query(&q, Some("a"), "count(up)"), []);
    assert_eq!(counts(&query(&q, None, "count(up)")), ["1"]);
    assert_eq!(w.terminate().code(), Some(0), "{}", w.log());
}

//! The server with `--storage.bucket`: what one writer wrote, flushed and shut down, a second
//! server started on an empty data directory and the same bucket answers alike; a writer
//! started while another holds the prefix fences it; a query node answers over two writers'
//! prefixes as one server fed both writers' data does.

use crate::common::{Strata, urlencode};

const LINES: &str = "cpu,host=a usage=1 1700000000000000000\n\
                     cpu,host=a usage=2 1700000010000000000\n\
                     cpu,host=b usage=3 1700000000000000000\n";

/// A bucket directory and two data directories.
struct Dirs {
    bucket: tempfile::TempDir,
    d1: tempfile::TempDir,
    d2: tempfile::TempDir,
}

impl Dirs {
    fn new() -> Dirs {
        Dirs {
            bucket: tempfile::tempdir().unwrap(),
            d1: tempfile::tempdir().unwrap(),
            d2: tempfile::tempdir().unwrap(),
        }
    }

    fn args(&self) -> Vec<String> {
        let url = format!("file://{}", self.bucket.path().display());
        ["--storage.bucket", url.as_str(), "--retention", "100y"].map(String::from).to_vec()
    }
}

fn start(dir: &std::path::Path, args: &[String]) -> Strata {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut s = Strata::start_with(dir, &args);
    s.wait_ready();
    s
}

fn write(strata: &Strata, body: &str) -> u16 {
    strata.post("/write?db=test&precision=ns", &[], body.as_bytes()).status
}

fn query(strata: &Strata) -> String {
    let q = urlencode("cpu_usage");
    let r = strata.get(&format!("/api/v1/query_range?query={q}&start=1699999990&end=1700000020&step=5"));
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
}

/// One server on `d1` with the bucket flags `args` writes and stops (SIGTERM flushes and waits
/// for the bucket); `stopped` runs then (to look into the bucket); a second server on the empty
/// `d2` answers the same query alike. Shared with `s3.rs`, which runs it against RGW.
pub(crate) fn check_restore(
    args: &[String],
    d1: &std::path::Path,
    d2: &std::path::Path,
    stopped: impl FnOnce(),
) {
    let mut first = start(d1, args);
    assert_eq!(write(&first, LINES), 204);
    let want = query(&first);
    assert!(want.contains(r#""host":"b""#), "{want}");
    let metrics = first.get("/metrics").body;
    assert!(metrics.contains("strata_storage_bucket_fenced 0"), "{metrics}");
    assert_eq!(first.terminate().code(), Some(0), "{}", first.log());
    assert!(first.log().contains("opened the bucket prefix"), "{}", first.log());
    stopped();
    let mut second = start(d2, args);
    assert!(second.log().contains("restored the data directory from the bucket"), "{}", second.log());
    assert_eq!(query(&second), want);
    assert_eq!(second.terminate().code(), Some(0), "{}", second.log());
}

/// A second server on `d2` fences the first on `d1`: the first learns at its next commit (the
/// flush on SIGTERM), and its directory no longer opens with the bucket; the second goes on.
pub(crate) fn check_fencing(args: &[String], d1: &std::path::Path, d2: &std::path::Path) {
    let mut first = start(d1, args);
    let mut second = start(d2, args);
    assert_eq!(write(&first, LINES), 204);
    assert_eq!(first.terminate().code(), Some(0), "{}", first.log());
    assert!(first.log().contains("another writer opened this bucket prefix"), "{}", first.log());
    let refused = Strata::spawn(d1, &args.iter().map(String::as_str).collect::<Vec<_>>()).wait_exit();
    assert_ne!(refused.code(), Some(0));
    assert_eq!(write(&second, LINES), 204);
    assert_eq!(second.terminate().code(), Some(0), "{}", second.log());
}

/// Two writers (`--role write`) on `<root>/a` and `<root>/b` write and stop; a query node on
/// `<root>` answers as a single server fed the same lines, refuses writes with 503, and sees a
/// writer's later upload at its next refresh; a second query node reading from the running
/// writer (`--query.writer`) sees the writer's unuploaded samples at once. `root_args(prefix)` are the bucket flags for
/// `<root>/<prefix>` (`""`: the root) and a retention that keeps [`LINES`]. Shared with `s3.rs`.
pub(crate) fn check_query_node(root_args: impl Fn(&str) -> Vec<String>) {
    let dirs: Vec<tempfile::TempDir> = (0..5).map(|_| tempfile::tempdir().unwrap()).collect();
    let with = |prefix: &str, extra: &[&str]| {
        let mut a = root_args(prefix);
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let (lines_a, lines_b) = LINES.split_at(LINES.find("cpu,host=b").unwrap());
    let later = "cpu,host=a usage=4 1700000015000000000\ncpu,host=c usage=5 1700000015000000000\n";
    for (prefix, dir, lines) in [("a", &dirs[0], lines_a), ("b", &dirs[1], lines_b)] {
        let mut w = start(dir.path(), &with(prefix, &["--role", "write"]));
        assert_eq!(write(&w, lines), 204);
        assert_eq!(w.terminate().code(), Some(0), "{}", w.log());
    }
    let mut single =
        start(dirs[2].path(), &["--retention", "100y", "--web.enable-admin-api"].map(String::from));
    assert_eq!(write(&single, LINES), 204);
    // Every query first tries inline and is declined (`--query.inline-max-points 1`).
    let q_args = [
        "--role",
        "query",
        "--storage.bucket-refresh",
        "100ms",
        "--query.inline-max-points",
        "1",
        "--web.enable-admin-api",
    ];
    let mut q = start(dirs[3].path(), &with("", &q_args));
    // The first query opens the files (ranged reads, counted in its stats, also those of its
    // declined inline attempt); the same query again reads nothing from the bucket.
    let stats = |s: &Strata| {
        let path = format!("/api/v1/query?query={}&time=1700000010&stats=all", urlencode("cpu_usage"));
        let body = s.get(&path).body;
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        v["data"]["stats"]["samples"]["bucketRangeReads"].as_u64().unwrap()
    };
    assert!(stats(&q) > 0);
    assert_eq!(stats(&q), 0);
    assert_eq!(query(&q), query(&single));
    assert_eq!(q.get("/-/ready").status, 200);
    let metrics = q.get("/metrics").body;
    assert!(metrics.contains("strata_storage_bucket_prefixes 2"), "{metrics}");
    assert!(!metrics.contains("strata_storage_bucket_range_reads_total 0\n"), "{metrics}");
    let refused = q.post("/write?db=test&precision=ns", &[], later.as_bytes());
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert!(refused.body.contains("--role query"), "{}", refused.body);

    // A writer's unuploaded data: a query node reading from it (--query.writer) sees it at
    // once, one that does not sees it once uploaded.
    let mut w = start(dirs[0].path(), &with("a", &["--role", "write"]));
    let w_url = w.url("");
    let mut q2 =
        start(dirs[4].path(), &with("", &["--role", "query", "--query.writer", w_url.trim_end_matches('/')]));
    assert_eq!(query(&q2), query(&single));
    assert_eq!(write(&w, later), 204);
    assert_eq!(write(&single, later), 204);
    let want = query(&single);
    assert_eq!(query(&q2), want, "the writer's head, read at once");
    let hosts = "/api/v1/label/host/values?start=1699999990&end=1700000020";
    assert_eq!(q2.get(hosts).body, single.get(hosts).body);
    assert!(q2.get(hosts).body.contains(r#""c""#), "{}", q2.get(hosts).body);
    let series = format!("/api/v1/series?match[]={}&start=1699999990&end=1700000020", urlencode("cpu_usage"));
    assert_eq!(q2.get(&series).body, single.get(&series).body);
    assert_ne!(query(&q), want, "not uploaded yet");
    assert_eq!(w.terminate().code(), Some(0), "{}", w.log());
    let down = q2.get(&format!("/api/v1/query?query={}&time=1700000015", urlencode("cpu_usage")));
    assert_eq!(down.status, 503, "a writer that does not answer fails the query: {}", down.body);
    assert_eq!(q2.terminate().code(), Some(0), "{}", q2.log());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while query(&q) != want {
        assert!(std::time::Instant::now() < deadline, "the query node did not see the new upload");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    // A deletion sent to a query node goes to its writers (here writer a, which holds host a):
    // once it answers, the query node answers as the single server after the same deletion.
    // A query node without writers refuses it.
    let admin = ["--web.enable-admin-api"];
    let w = start(dirs[0].path(), &with("a", &[&["--role", "write"][..], &admin[..]].concat()));
    let w_url = w.url("");
    let q3_args =
        [&["--role", "query", "--query.writer", w_url.trim_end_matches('/')][..], &admin[..]].concat();
    let q3 = start(dirs[4].path(), &with("", &q3_args));
    let form = format!("match[]={}", urlencode(r#"cpu_usage{host="a"}"#));
    let form_header = [("Content-Type", "application/x-www-form-urlencoded")];
    let delete = "/api/v1/admin/tsdb/delete_series";
    let deleted = q3.post(delete, &form_header, form.as_bytes());
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    assert_eq!(single.post(delete, &form_header, form.as_bytes()).status, 204);
    let want = query(&single);
    assert!(!want.contains(r#""host":"a""#), "{want}");
    assert_eq!(query(&q3), want, "the deletion shows on the query node once it answers");
    let refused = q.post(delete, &form_header, form.as_bytes());
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert!(refused.body.contains("--role query"), "{}", refused.body);
    for s in [w, q3] {
        let mut s = s;
        assert_eq!(s.terminate().code(), Some(0), "{}", s.log());
    }
    assert_eq!(q.terminate().code(), Some(0), "{}", q.log());
    assert_eq!(single.terminate().code(), Some(0), "{}", single.log());
}

#[test]
fn a_query_node_answers_over_every_writers_prefix() {
    let bucket = tempfile::tempdir().unwrap();
    check_query_node(|prefix| {
        let url = format!("file://{}/{prefix}", bucket.path().display());
        ["--storage.bucket", url.trim_end_matches('/'), "--retention", "100y"].map(String::from).to_vec()
    });
}

#[test]
fn an_empty_data_directory_serves_what_the_bucket_holds() {
    let dirs = Dirs::new();
    check_restore(&dirs.args(), dirs.d1.path(), dirs.d2.path(), || {});
}

#[test]
fn a_second_writer_fences_the_first() {
    let dirs = Dirs::new();
    check_fencing(&dirs.args(), dirs.d1.path(), dirs.d2.path());
}

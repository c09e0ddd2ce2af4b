//! The server with `--storage.bucket`: what one writer wrote, flushed and shut down, a second
//! server started on an empty data directory and the same bucket answers alike; a writer
//! started while another holds the prefix fences it.

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

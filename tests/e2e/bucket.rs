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

#[test]
fn an_empty_data_directory_serves_what_the_bucket_holds() {
    let dirs = Dirs::new();
    let args = dirs.args();
    let mut first = start(dirs.d1.path(), &args);
    assert_eq!(write(&first, LINES), 204);
    let want = query(&first);
    assert!(want.contains(r#""host":"b""#), "{want}");
    let metrics = first.get("/metrics").body;
    assert!(metrics.contains("strata_storage_bucket_fenced 0"), "{metrics}");
    // SIGTERM flushes the head and waits for the bucket to hold the file.
    assert_eq!(first.terminate().code(), Some(0), "{}", first.log());
    assert!(first.log().contains("opened the bucket prefix"), "{}", first.log());

    let mut second = start(dirs.d2.path(), &args);
    assert!(second.log().contains("restored the data directory from the bucket"), "{}", second.log());
    assert_eq!(query(&second), want);
    assert_eq!(second.terminate().code(), Some(0));
}

#[test]
fn a_second_writer_fences_the_first() {
    let dirs = Dirs::new();
    let args = dirs.args();
    let mut first = start(dirs.d1.path(), &args);
    let mut second = start(dirs.d2.path(), &args);
    // The first learns at its next commit: a flush (here the admin endpoint would do; SIGTERM
    // flushes too). Its writes then get 503, which senders retry elsewhere.
    assert_eq!(write(&first, LINES), 204);
    assert_eq!(first.terminate().code(), Some(0));
    assert!(first.log().contains("another writer opened this bucket prefix"), "{}", first.log());
    // The first's directory no longer belongs to the prefix.
    let refused =
        Strata::spawn(dirs.d1.path(), &args.iter().map(String::as_str).collect::<Vec<_>>()).wait_exit();
    assert_ne!(refused.code(), Some(0));
    assert_eq!(write(&second, LINES), 204);
    assert_eq!(second.terminate().code(), Some(0));
}

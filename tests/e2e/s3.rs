//! The server with `--storage.bucket s3://...` against a real S3: Ceph's RADOS Gateway (Debian's
//! `radosgw`, Ceph 16) on a single-node cluster on loopback, started by
//! `tests/ceph-rgw/run-rgw.sh`. The same checks as `bucket.rs` makes with a `file://` bucket
//! (an empty data directory serves what the bucket holds; a second writer fences the first), and
//! the requests strata's bucket code rests on, made with `object_store` itself: conditional
//! creates raced by four clients, and multipart uploads read back with ranged GETs.
//!
//! One cluster serves every test of the process (a start takes about 2 s); each test works
//! under a prefix of its own in one bucket. The cluster is stopped, and its directory removed,
//! when the test process exits, however it exits (see [`Rgw::_hold`]).
//!
//! Skipped, with a message, when the Ceph programs are not installed and `CI` is not set; under
//! CI their absence is a failure (`.ci/run` installs them).

use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Arc, Barrier, OnceLock};
use std::time::Instant;

use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutPayload, WriteMultipart};

use crate::bucket::{check_fencing, check_query_node, check_restore};
use crate::common::process::peer;

/// The bucket every test writes to, under a prefix named after the test.
const BUCKET: &str = "strata-e2e";
/// The S3 user's keys (the cluster listens on loopback only and lives as long as the test
/// process).
const ACCESS_KEY: &str = "STRATAE2EACCESSKEY00";
const SECRET_KEY: &str = "strata-e2e-secret-key-for-a-throwaway-rgw";
/// RGW accepts any region name; strata's flag and object_store's signature need one.
const REGION: &str = "us-east-1";
/// Ports the start script takes from `BASE_PORT` on: the monitor's two (+0, +1), the range the
/// OSD binds in (+10..+29), and the gateway's, which the tests put at [`RGW_PORT_OFFSET`].
const CEPH_PORTS: u16 = 30;
/// Where in the block the gateway listens (the script leaves +2..+9 to it).
const RGW_PORT_OFFSET: u16 = 2;

/// The Ceph programs `start-rgw.sh` runs, with their Debian packages.
const PROGRAMS: &[(&str, &str)] = &[
    ("ceph-mon", "ceph-mon"),
    ("monmaptool", "ceph-base"),
    ("ceph-osd", "ceph-osd"),
    ("radosgw", "radosgw"),
    ("radosgw-admin", "ceph-common"),
    ("ceph", "ceph-common"),
    ("uuidgen", "uuid-runtime"),
    ("curl", "curl"),
];

/// A running cluster with a bucket.
pub(crate) struct Rgw {
    /// `http://127.0.0.1:PORT`.
    endpoint: String,
    /// A file holding [`SECRET_KEY`], for `--storage.bucket-secret-access-key-file`.
    secret_file: PathBuf,
    /// The write end of `run-rgw.sh`'s stdin. Never closed by the tests: the process-wide value
    /// holding it is never dropped, so the kernel closes it when the test process exits (or
    /// dies), and the script then stops the cluster and removes its directory. A Drop guard
    /// would never run for a process-wide value, nor on SIGKILL or an abort.
    _hold: ChildStdin,
}

static RGW: OnceLock<Result<Rgw, String>> = OnceLock::new();

/// The cluster, started on first use; `None` (after saying so) if Ceph is not installed.
pub(crate) fn rgw(test: &str) -> Option<&'static Rgw> {
    for (program, package) in PROGRAMS {
        peer(program, package, test)?;
    }
    match RGW.get_or_init(start) {
        Ok(rgw) => Some(rgw),
        Err(why) => panic!("{why}"),
    }
}

fn start() -> Result<Rgw, String> {
    let dir = tempfile::Builder::new()
        .prefix("strata-rgw-")
        .tempdir()
        .map_err(|e| format!("creating the cluster's directory: {e}"))?
        // run-rgw.sh removes it when it stops the cluster.
        .keep();
    let base = free_port_block()?;
    let port = base + RGW_PORT_OFFSET;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ceph-rgw/run-rgw.sh");
    let started = Instant::now();
    let mut child = Command::new("bash")
        .arg(&script)
        .arg(&dir)
        .arg(port.to_string())
        .env("BASE_PORT", base.to_string())
        .env("S3_BUCKETS", BUCKET)
        .env("S3_ACCESS_KEY", ACCESS_KEY)
        .env("S3_SECRET_KEY", SECRET_KEY)
        // The tests write a few MiB; the OSD's memory grows only with what it holds.
        .env("MEMSTORE_BYTES", (512u64 << 20).to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        // Its own process group: a Ctrl-C for the tests must not stop it before it stopped the
        // cluster.
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    let (Some(hold), Some(mut stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err("run-rgw.sh without its pipes".into());
    };
    // stdout reaches end of file when the start is over, whether it worked or not.
    let mut out = String::new();
    let read = stdout.read_to_string(&mut out);
    let ready = read.is_ok() && out.lines().any(|l| l.starts_with("READY_SECS="));
    let secret_file = dir.join("s3-secret");
    let written = std::fs::write(&secret_file, format!("{SECRET_KEY}\n"));
    if ready && written.is_ok() {
        // Straight to the handle, as a skip is: the harness would capture `eprintln!`.
        let secs = started.elapsed().as_secs_f64();
        let _ = writeln!(std::io::stderr(), "RGW ready on 127.0.0.1:{port} after {secs:.1} s");
        return Ok(Rgw { endpoint: format!("http://127.0.0.1:{port}"), secret_file, _hold: hold });
    }
    let logs = daemon_logs(&dir.join("log"));
    // Closing stdin makes the script stop whatever started and remove the directory.
    drop(hold);
    let _ = child.wait();
    Err(format!(
        "the Ceph cluster did not start ({read:?}, secret file: {written:?}); {} said:\n{out}\n{logs}",
        script.display()
    ))
}

/// The last lines of each daemon log in `dir`, for a failed start.
fn daemon_logs(dir: &Path) -> String {
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(dir).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    files.sort();
    let mut text = String::new();
    for f in files {
        let content = std::fs::read_to_string(&f).unwrap_or_default();
        let lines: Vec<&str> = content.lines().collect();
        text += &format!("== {}\n{}\n", f.display(), lines[lines.len().saturating_sub(20)..].join("\n"));
    }
    text
}

/// The first of [`CEPH_PORTS`] consecutive ports, all free a moment ago. The daemons bind them
/// seconds later, so they are taken below the kernel's ephemeral range, where no `bind(:0)` of
/// another test (strata's, a free port's) and no outgoing connection lands meanwhile; where in
/// that span depends on the process id and the time, so that test processes started together
/// try different blocks first.
fn free_port_block() -> Result<u16, String> {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let first = 10_000u16;
    let blocks = ephemeral_low.saturating_sub(first) / CEPH_PORTS;
    let seed = u64::from(std::process::id())
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
    for i in 0..u64::from(blocks) {
        let base = first + ((seed.wrapping_add(i) % u64::from(blocks)) as u16) * CEPH_PORTS;
        if (base..base + CEPH_PORTS).all(|p| TcpListener::bind(("127.0.0.1", p)).is_ok()) {
            return Ok(base);
        }
    }
    Err(format!("no {CEPH_PORTS} consecutive free ports between {first} and {ephemeral_low}"))
}

impl Rgw {
    /// strata's flags for `s3://BUCKET/prefix` on this cluster.
    pub(crate) fn args(&self, prefix: &str) -> Vec<String> {
        let url = format!("s3://{BUCKET}/{prefix}");
        [
            "--storage.bucket",
            url.as_str(),
            "--storage.bucket-endpoint",
            self.endpoint.as_str(),
            "--storage.bucket-region",
            REGION,
            "--storage.bucket-access-key-id",
            ACCESS_KEY,
            "--storage.bucket-secret-access-key-file",
            self.secret_file.to_str().unwrap(),
            "--retention",
            "100y",
        ]
        .map(String::from)
        .to_vec()
    }

    /// An `object_store` client of the bucket, configured as strata configures its own (path
    /// style, plain HTTP), but not from the `AWS_*` environment.
    fn store(&self) -> AmazonS3 {
        AmazonS3Builder::new()
            .with_endpoint(&self.endpoint)
            .with_allow_http(true)
            .with_region(REGION)
            .with_bucket_name(BUCKET)
            .with_access_key_id(ACCESS_KEY)
            .with_secret_access_key(SECRET_KEY)
            .build()
            .unwrap()
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
}

/// The objects under `prefix` (recursively), by key.
fn objects(store: &AmazonS3, prefix: &str) -> Vec<String> {
    block_on(async {
        let mut keys = Vec::new();
        let mut dirs = vec![Key::from(prefix)];
        while let Some(dir) = dirs.pop() {
            let listed = store.list_with_delimiter(Some(&dir)).await.unwrap();
            keys.extend(listed.objects.into_iter().map(|o| o.location.to_string()));
            dirs.extend(listed.common_prefixes);
        }
        keys.sort();
        keys
    })
}

#[test]
fn an_empty_data_directory_serves_what_rgw_holds() {
    let test = "an_empty_data_directory_serves_what_rgw_holds";
    let Some(rgw) = rgw(test) else { return };
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    check_restore(&rgw.args(test), d1.path(), d2.path(), || {
        // The layout of docs/format/bucket.md, in RGW.
        let keys = objects(&rgw.store(), test);
        assert!(keys.contains(&format!("{test}/manifest/latest")), "{keys:?}");
        assert!(keys.iter().any(|k| k.starts_with(&format!("{test}/manifest/0000"))), "{keys:?}");
        assert!(
            keys.iter().any(|k| k.starts_with(&format!("{test}/partitions/")) && k.ends_with(".spf")),
            "{keys:?}"
        );
    });
}

#[test]
fn a_second_writer_fences_the_first_on_rgw() {
    let test = "a_second_writer_fences_the_first_on_rgw";
    let Some(rgw) = rgw(test) else { return };
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    check_fencing(&rgw.args(test), d1.path(), d2.path());
}

#[test]
fn a_query_node_answers_over_every_writers_prefix_on_rgw() {
    let test = "a_query_node_answers_over_every_writers_prefix_on_rgw";
    let Some(rgw) = rgw(test) else { return };
    check_query_node(|prefix| match prefix {
        "" => rgw.args(test),
        p => rgw.args(&format!("{test}/{p}")),
    });
}

#[test]
fn racing_conditional_creates_have_one_winner_each() {
    let test = "racing_conditional_creates_have_one_winner_each";
    let Some(rgw) = rgw(test) else { return };
    const RACERS: usize = 4;
    const KEYS: usize = 50;
    let barrier = Arc::new(Barrier::new(RACERS));
    let racers: Vec<_> = (0..RACERS)
        .map(|racer| {
            let (store, barrier) = (rgw.store(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                block_on(async {
                    let mut won = Vec::new();
                    for k in 0..KEYS {
                        // All racers put key k at once.
                        barrier.wait();
                        let key = Key::from(format!("{test}/{k:020}"));
                        let payload = PutPayload::from(format!("racer {racer}"));
                        match store.put_opts(&key, payload, PutMode::Create.into()).await {
                            Ok(_) => won.push(k),
                            Err(object_store::Error::AlreadyExists { .. }) => {}
                            Err(e) => panic!("racer {racer}, key {k}: {e}"),
                        }
                    }
                    won
                })
            })
        })
        .collect();
    let mut winner = [None; KEYS];
    for (racer, handle) in racers.into_iter().enumerate() {
        for k in handle.join().unwrap() {
            assert_eq!(winner[k], None, "key {k} created by racers {:?} and {racer}", winner[k]);
            winner[k] = Some(racer);
        }
    }
    let store = rgw.store();
    for (k, w) in winner.iter().enumerate() {
        let Some(w) = w else { panic!("nobody created key {k}") };
        let key = Key::from(format!("{test}/{k:020}"));
        let got = block_on(async { store.get(&key).await.unwrap().bytes().await.unwrap() });
        assert_eq!(&got[..], format!("racer {w}").as_bytes(), "key {k}");
    }
}

/// A partition file above 16 MiB goes up as a multipart upload and is read back with ranged
/// GETs: both as `object_store` makes them against RGW, with parts of the smallest size S3
/// allows (5 MiB) to keep the test small.
#[test]
fn multipart_uploads_read_back_whole_and_by_ranges() {
    let test = "multipart_uploads_read_back_whole_and_by_ranges";
    let Some(rgw) = rgw(test) else { return };
    const PART: usize = 5 << 20;
    let data: Vec<u8> = (0..2 * PART + 12_345).map(|i| (i % 251) as u8).collect();
    let key = Key::from(format!("{test}/partitions/0/00000001.spf"));
    let store = rgw.store();
    block_on(async {
        let upload = store.put_multipart(&key).await.unwrap();
        let mut w = WriteMultipart::new_with_chunk_size(upload, PART);
        w.write(&data);
        // RGW answers CompleteMultipartUpload with an empty ETag, which object_store passes on
        // as `Some("")`; strata does not use it.
        w.finish().await.unwrap();
        assert_eq!(store.head(&key).await.unwrap().size, data.len() as u64);
        let len = data.len() as u64;
        let p = PART as u64;
        let ranges = [0..10, p - 3..p + 3, 2 * p - 1..2 * p + 1, len - 7..len];
        let got = store.get_ranges(&key, &ranges).await.unwrap();
        for (r, bytes) in ranges.iter().zip(&got) {
            assert_eq!(&bytes[..], &data[r.start as usize..r.end as usize], "range {r:?}");
        }
        let whole = store.get(&key).await.unwrap().bytes().await.unwrap();
        assert!(whole[..] == data[..], "the object differs from what was uploaded");
        store.delete(&key).await.unwrap();
        assert!(matches!(store.head(&key).await, Err(object_store::Error::NotFound { .. })));
    });
}

//! A really full disk: the real `strata` binary on a small tmpfs that a filler file fills up.
//! Remote writes get 503 with `Retry-After`, queries keep answering, `/-/ready` is 503; once
//! the filler is deleted strata takes writes again by itself, and after a restart every
//! acknowledged sample is queryable.
//!
//! Needs `mount -t tmpfs` (root, as in CI); without it the test prints why it is skipped. The
//! same recovery is tested with injected errors, always, in
//! `storage/tests/integration/disk_full.rs`.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::Strata;
use remote::prw::{self, Version};
use serde_json::Value;
use storage::{Batch, Labels, Sample};

const V1_HEADERS: [(&str, &str); 3] = [
    ("Content-Type", "application/x-protobuf"),
    ("Content-Encoding", "snappy"),
    ("X-Prometheus-Remote-Write-Version", "0.1.0"),
];

/// Size of the tmpfs: small enough to fill in a moment.
const TMPFS_MB: u64 = 16;

/// A tmpfs mounted on a temporary directory, unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size_mb: u64) -> Result<Tmpfs, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mb}m"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!("mount -t tmpfs failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// Fills the file system holding `path` by writing it until `ENOSPC`.
fn fill(path: &Path) -> u64 {
    let mut f = std::fs::File::create(path).unwrap();
    let chunk = vec![0xA5u8; 64 << 10];
    let mut written = 0u64;
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(n) => written += n as u64,
            Err(e) if e.raw_os_error() == Some(28) => break,
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
    written
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as i64
}

/// Remote-writes batch `k`: one sample of `disk_full_e2e` at `t0 + k s` with value `k`.
fn write(strata: &Strata, t0: i64, k: i64) -> crate::common::Reply {
    let mut b = Batch::new();
    b.push(Labels::from_pairs(&[("__name__", "disk_full_e2e")]), vec![Sample::new(t0 + k * 1000, k as f64)]);
    strata.post("/api/v1/write", &V1_HEADERS, &prw::encode(Version::V1, &b, &[]))
}

/// Every `k` the query API returns for `disk_full_e2e` (a range selector over all of them).
fn queried(strata: &Strata, t0: i64, last_k: i64) -> BTreeSet<i64> {
    let at = (t0 + last_k * 1000) as f64 / 1000.0;
    let range_s = last_k + 60;
    let reply = strata.get(&format!("/api/v1/query?query=disk_full_e2e%5B{range_s}s%5D&time={at}"));
    assert_eq!(reply.status, 200, "{}", reply.body);
    let v: Value = serde_json::from_str(&reply.body).unwrap();
    let mut out = BTreeSet::new();
    for series in v["data"]["result"].as_array().unwrap() {
        for pair in series["values"].as_array().unwrap() {
            let t = (pair[0].as_f64().unwrap() * 1000.0).round() as i64;
            let k = (t - t0) / 1000;
            assert_eq!(pair[1].as_str().unwrap(), k.to_string(), "sample {k} has a wrong value");
            out.insert(k);
        }
    }
    out
}

#[test]
fn a_full_disk_refuses_writes_keeps_queries_and_recovers_when_space_returns() {
    let fs = match Tmpfs::mount(TMPFS_MB) {
        Ok(fs) => fs,
        Err(why) => {
            eprintln!("SKIP a_full_disk_refuses_writes...: {why} (needs root to mount a tmpfs)");
            return;
        }
    };
    let started = Instant::now();
    let data: PathBuf = fs.path().join("data");
    let filler = fs.path().join("filler");
    let mut strata = Strata::start(&data);
    strata.wait_ready();
    let t0 = now_ms() - 3_600_000;
    let mut acked = BTreeSet::new();
    let mut k = 0;
    for _ in 0..50 {
        assert_eq!(write(&strata, t0, k).status, 204);
        acked.insert(k);
        k += 1;
    }

    let filled = fill(&filler);
    // The WAL's last page may still take a few records; then writes must be refused.
    let refused = loop {
        let reply = write(&strata, t0, k);
        match reply.status {
            204 => {
                acked.insert(k);
                k += 1;
                assert!(k < 100_000, "writes never refused on a full disk");
            }
            503 => break reply,
            other => panic!("unexpected {other} on a full disk: {}", reply.body),
        }
    };
    assert_eq!(refused.header("Retry-After"), Some("5"), "{:?}", refused.headers);
    let ready = strata.get("/-/ready");
    assert_eq!(ready.status, 503, "{}", ready.body);
    assert!(ready.body.contains("storage cannot take writes"), "{}", ready.body);
    assert!(strata.get("/metrics").body.contains("\nstrata_wal_poisoned 1\n"));
    // Queries still answer, with everything acknowledged.
    assert_eq!(queried(&strata, t0, k), acked);
    // Still full: recovery attempts fail, writes stay refused.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(write(&strata, t0, k).status, 503);

    std::fs::remove_file(&filler).unwrap();
    let freed = Instant::now();
    loop {
        let reply = write(&strata, t0, k);
        if reply.status == 204 {
            acked.insert(k);
            k += 1;
            break;
        }
        assert_eq!(reply.status, 503, "{}", reply.body);
        assert!(freed.elapsed() < Duration::from_secs(15), "no recovery: {}", strata.get("/-/ready").body);
        std::thread::sleep(Duration::from_millis(50));
    }
    let recovered_in = freed.elapsed();
    assert_eq!(strata.get("/-/ready").status, 200);
    for _ in 0..50 {
        assert_eq!(write(&strata, t0, k).status, 204);
        acked.insert(k);
        k += 1;
    }
    let metrics = strata.get("/metrics").body;
    assert!(metrics.contains("\nstrata_wal_poisoned 0\n"));
    assert!(metrics.contains("\nstrata_storage_recoveries_total 1\n"), "{metrics}");
    assert!(strata.terminate().success(), "{}", strata.log());

    let mut again = Strata::start(&data);
    again.wait_ready();
    let got = queried(&again, t0, k);
    let lost: Vec<_> = acked.difference(&got).collect();
    assert!(lost.is_empty(), "acknowledged samples lost after restart: {lost:?}");
    assert!(again.terminate().success());
    eprintln!(
        "disk full: filler {} MiB, {} batches acknowledged, writes accepted {} ms after space \
         returned; whole test {} ms",
        filled >> 20,
        acked.len(),
        recovered_in.as_millis(),
        started.elapsed().as_millis()
    );
}

/// Restarted after a crash onto a disk that is already full: strata opens, answers queries with
/// everything acknowledged (replayed from the WAL), refuses writes with 503 and reports itself
/// not ready; once space returns it takes writes again without another restart.
#[test]
fn a_restart_on_a_full_disk_serves_queries_and_recovers_when_space_returns() {
    let fs = match Tmpfs::mount(TMPFS_MB) {
        Ok(fs) => fs,
        Err(why) => {
            eprintln!("SKIP a_restart_on_a_full_disk...: {why} (needs root to mount a tmpfs)");
            return;
        }
    };
    let data: PathBuf = fs.path().join("data");
    let filler = fs.path().join("filler");
    let mut strata = Strata::start(&data);
    strata.wait_ready();
    let t0 = now_ms() - 3_600_000;
    let mut acked = BTreeSet::new();
    for k in 0..50 {
        assert_eq!(write(&strata, t0, k).status, 204);
        acked.insert(k);
    }
    // A crash: the acknowledged batches are only in the WAL.
    strata.signal(nix::sys::signal::Signal::SIGKILL);
    strata.wait_exit();
    fill(&filler);

    let mut again = Strata::start(&data);
    again.wait_ready();
    let ready = again.get("/-/ready");
    assert_eq!(ready.status, 503, "{}", ready.body);
    assert!(ready.body.contains("No space left on device"), "{}", ready.body);
    assert_eq!(queried(&again, t0, 50), acked);
    let refused = write(&again, t0, 50);
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert_eq!(refused.header("Retry-After"), Some("5"), "{:?}", refused.headers);

    std::fs::remove_file(&filler).unwrap();
    let freed = Instant::now();
    while write(&again, t0, 50).status != 204 {
        assert!(freed.elapsed() < Duration::from_secs(15), "no recovery: {}", again.get("/-/ready").body);
        std::thread::sleep(Duration::from_millis(50));
    }
    acked.insert(50);
    eprintln!(
        "restart on a full disk: writes accepted {} ms after space returned",
        freed.elapsed().as_millis()
    );
    assert_eq!(again.get("/-/ready").status, 200);
    assert!(again.terminate().success(), "{}", again.log());
    let mut third = Strata::start(&data);
    third.wait_ready();
    assert_eq!(queried(&third, t0, 50), acked);
    assert!(third.terminate().success());
}

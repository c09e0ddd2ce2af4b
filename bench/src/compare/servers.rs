//! The systems under test: finding their binaries, starting each on loopback with a fresh data
//! directory and its default durability, getting it to flush and merge, stopping it cleanly,
//! and measuring its data on disk.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::http::Http;

/// The database name the Influx loaders write to (`tsbs_load_influx`'s default).
pub const INFLUX_DB: &str = "benchmark";

/// A system the harness knows how to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum System {
    /// strata, built from this workspace.
    Strata,
    /// VictoriaMetrics single-node (Debian's `victoria-metrics`).
    VictoriaMetrics,
    /// Prometheus (Debian's `prometheus`), receiving remote write.
    Prometheus,
    /// InfluxDB 1.x (Debian's `influxdb`).
    InfluxDb,
}

/// A write protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// Influx line protocol to `/write`, like `tsbs_load_influx`.
    Influx,
    /// Prometheus remote write 1.0 to the system's receiver.
    Prw,
}

impl Protocol {
    /// Short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Influx => "influx",
            Protocol::Prw => "remote-write",
        }
    }
}

impl System {
    /// Every system, strata first (its query answers are the reference).
    pub const ALL: [System; 4] =
        [System::Strata, System::VictoriaMetrics, System::Prometheus, System::InfluxDb];

    /// Name for tables.
    pub fn name(self) -> &'static str {
        match self {
            System::Strata => "strata",
            System::VictoriaMetrics => "VictoriaMetrics",
            System::Prometheus => "Prometheus",
            System::InfluxDb => "InfluxDB",
        }
    }

    fn binary(self) -> &'static str {
        match self {
            System::Strata => "strata",
            System::VictoriaMetrics => "victoria-metrics",
            System::Prometheus => "prometheus",
            System::InfluxDb => "influxd",
        }
    }

    fn package(self) -> Option<&'static str> {
        match self {
            System::Strata => None,
            System::VictoriaMetrics => Some("victoria-metrics"),
            System::Prometheus => Some("prometheus"),
            System::InfluxDb => Some("influxdb"),
        }
    }

    /// The write protocols it accepts.
    pub fn protocols(self) -> &'static [Protocol] {
        match self {
            System::Strata | System::VictoriaMetrics => &[Protocol::Influx, Protocol::Prw],
            System::Prometheus => &[Protocol::Prw],
            System::InfluxDb => &[Protocol::Influx],
        }
    }

    /// Whether it answers PromQL on `/api/v1/query_range` (InfluxDB 1.x speaks InfluxQL only).
    pub fn speaks_promql(self) -> bool {
        self != System::InfluxDb
    }

    /// What its default durability is, for the report.
    pub fn durability(self) -> &'static str {
        match self {
            System::Strata => {
                "WAL fsync before every write is acknowledged (`--wal-sync batch`, the default)"
            }
            System::VictoriaMetrics => {
                "acknowledges from memory; buffered rows reach disk within about a second, no fsync per write"
            }
            System::Prometheus => {
                "WAL written per request, fsync only when a segment is cut; no fsync per write"
            }
            System::InfluxDb => "WAL fsync per write (`wal-fsync-delay = 0s`, the default)",
        }
    }

    /// What the WAL figure measures (see [`Server::wal_bytes`]), for the report.
    pub fn wal_note(self) -> &'static str {
        match self {
            System::Strata => {
                "`wal/` of the data dir (segments; partition files flushed during the load are not in it)"
            }
            System::VictoriaMetrics => {
                "none: no WAL (recent rows buffered in memory, flushed to parts about every second)"
            }
            System::Prometheus => {
                "`wal/` (segments and any checkpoint; records snappy-compressed, the default since 2.20); `chunks_head/` in its own column"
            }
            System::InfluxDb => "`wal/benchmark/` (the benchmark database's WAL)",
        }
    }

    /// What "disk" means for it, for the report.
    pub fn disk_note(self) -> &'static str {
        match self {
            System::Strata => {
                "whole data dir after /api/v1/admin/tsdb/compact (the head flushed and each partition merged into one file, like VictoriaMetrics' force_flush and force_merge) and a clean shutdown"
            }
            System::VictoriaMetrics => {
                "data/ + indexdb/ after /internal/force_flush, /internal/force_merge and a clean shutdown (cache/ excluded)"
            }
            System::Prometheus => {
                "a snapshot with the head (/api/v1/admin/tsdb/snapshot): every sample in 2 h blocks; the data dir with WAL is in the next column"
            }
            System::InfluxDb => {
                "the benchmark database's shard (TSM + index) and WAL dirs after a clean shutdown"
            }
        }
    }
}

/// A system's write-ahead log on disk at one moment (right after a load, before any flush or
/// shutdown the harness asks for): the lengths of its files, the bytes written, not what `du`
/// counts while they are open (see [`super::procstat::file_lengths`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WalBytes {
    /// Bytes of the WAL directory; `None` for a system without a WAL (VictoriaMetrics).
    pub wal: Option<u64>,
    /// Bytes of Prometheus' `chunks_head/`: head chunks written out of memory, which like the
    /// WAL hold data not yet in blocks (`None` for the other systems).
    pub head_chunks: Option<u64>,
}

/// An installed system.
#[derive(Debug, Clone)]
pub struct Found {
    /// Which one.
    pub system: System,
    /// Its binary.
    pub bin: PathBuf,
    /// Its version, from the binary or its Debian package.
    pub version: String,
    /// Flags added to its command line (strata's `--strata-arg`).
    pub extra_args: Vec<String>,
    /// Prometheus' `storage.tsdb.out_of_order_time_window`, seconds (none: Prometheus' default,
    /// which refuses every out-of-order sample).
    pub ooo_window_secs: Option<i64>,
}

/// The binary named `name` on `PATH`.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| p.is_file())
}

fn version_of(system: System, bin: &Path) -> String {
    let from_package = system.package().and_then(|pkg| {
        let out = Command::new("dpkg-query").args(["-W", "-f", "${Version}", pkg]).output().ok()?;
        let v = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        (out.status.success() && !v.is_empty()).then(|| format!("{v} (Debian package {pkg})"))
    });
    if let Some(v) = from_package {
        return v;
    }
    let out = Command::new(bin).arg("--version").output();
    out.ok()
        .map(|o| {
            let text = if o.stdout.is_empty() { o.stderr } else { o.stdout };
            String::from_utf8_lossy(&text).lines().next().unwrap_or("").trim().to_owned()
        })
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// `, git abc1234` (`+ local changes` if the tree differs), read-only git queries of this
/// workspace; empty outside a git checkout.
fn git_revision() -> String {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let git = |args: &[&str]| {
        Command::new("git").arg("-C").arg(dir).args(args).output().ok().filter(|o| o.status.success())
    };
    let Some(head) = git(&["rev-parse", "--short", "HEAD"]) else { return String::new() };
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|o| !o.stdout.is_empty());
    format!(
        ", git {}{}",
        String::from_utf8_lossy(&head.stdout).trim(),
        if dirty { " + local changes" } else { "" }
    )
}

/// strata at `strata_bin` (required) and each peer found on `PATH` and not in `skip`.
pub fn find(strata_bin: &Path, skip: &[System]) -> Result<Vec<Found>, String> {
    if !strata_bin.is_file() {
        return Err(format!(
            "no strata binary at {}: build it first (cargo build --release -p strata --bin strata) or pass --strata-bin",
            strata_bin.display()
        ));
    }
    let mut found = vec![Found {
        system: System::Strata,
        bin: strata_bin.to_path_buf(),
        version: format!("{}{}", version_of(System::Strata, strata_bin), git_revision()),
        extra_args: Vec::new(),
        ooo_window_secs: None,
    }];
    for system in System::ALL.into_iter().skip(1).filter(|s| !skip.contains(s)) {
        if let Some(bin) = which(system.binary()) {
            let version = version_of(system, &bin);
            found.push(Found { system, bin, version, extra_args: Vec::new(), ooo_window_secs: None });
        }
    }
    Ok(found)
}

/// A free TCP port on loopback (the kernel picks it; the server binds it right after).
fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port: {e}"))?;
    l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

/// Waits until process `pid` has been idle for a second (under 5 % of a core), at most `max`:
/// timed queries should not share the machine with a server's background work (Prometheus
/// compacting the head it replayed, a merge). Returns whether it went idle (false also when the
/// process is gone).
pub fn wait_quiet(pid: u32, max: Duration) -> bool {
    const WINDOW: Duration = Duration::from_secs(1);
    let started = Instant::now();
    let mut last = super::procstat::sample(pid).map(|s| s.cpu_secs);
    while started.elapsed() < max {
        std::thread::sleep(WINDOW);
        let now = super::procstat::sample(pid).map(|s| s.cpu_secs);
        match (last, now) {
            (Some(a), Some(b)) if b - a < 0.05 * WINDOW.as_secs_f64() => return true,
            (_, None) => return false,
            _ => last = now,
        }
    }
    false
}

/// Prometheus' configuration file: no scrape jobs (the only samples are the ones the loader
/// sends), and an out-of-order window of `ooo_window_secs` if given (Prometheus 2.39 and later;
/// without one it refuses every sample older than its series' newest).
pub fn prometheus_config(ooo_window_secs: Option<i64>) -> String {
    let mut text = "global:\n  scrape_interval: 15s\n".to_owned();
    if let Some(secs) = ooo_window_secs {
        text.push_str(&format!("storage:\n  tsdb:\n    out_of_order_time_window: {secs}s\n"));
    }
    text
}

/// A running server with its own fresh data directory.
pub struct Server {
    /// Which system.
    pub system: System,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// Its data directory (inside `scratch`).
    pub data_dir: PathBuf,
    child: Child,
}

impl Server {
    /// Starts `found` on the data directory `scratch/data` (created if missing: fresh for a
    /// load, kept for a restart), logs in `scratch/<log>`, and waits until it answers its
    /// readiness endpoint.
    pub fn start(found: &Found, scratch: &Path, http: &Http, log: &str) -> Result<Server, String> {
        let data_dir = scratch.join("data");
        std::fs::create_dir_all(&data_dir).map_err(|e| format!("{}: {e}", data_dir.display()))?;
        let port = free_port()?;
        let listen = format!("127.0.0.1:{port}");
        let mut cmd = Command::new(&found.bin);
        match found.system {
            System::Strata => {
                // The admin API for the compact call of `settle`.
                cmd.arg("--data-dir").arg(&data_dir).args(["--listen", &listen, "--web.enable-admin-api"]);
            }
            System::VictoriaMetrics => {
                cmd.arg(format!("-storageDataPath={}", data_dir.display()))
                    .arg(format!("-httpListenAddr={listen}"));
            }
            System::Prometheus => {
                let config = scratch.join("prometheus.yml");
                std::fs::write(&config, prometheus_config(found.ooo_window_secs))
                    .map_err(|e| e.to_string())?;
                cmd.arg(format!("--config.file={}", config.display()))
                    .arg(format!("--storage.tsdb.path={}", data_dir.display()))
                    .arg(format!("--web.listen-address={listen}"))
                    .arg("--web.enable-remote-write-receiver")
                    .arg("--web.enable-admin-api");
            }
            System::InfluxDb => {
                let config = scratch.join("influxdb.conf");
                let rpc = free_port()?;
                let d = data_dir.display();
                let text = format!(
                    "reporting-disabled = true\nbind-address = \"127.0.0.1:{rpc}\"\n[meta]\n  dir = \"{d}/meta\"\n\
                     [data]\n  dir = \"{d}/data\"\n  wal-dir = \"{d}/wal\"\n[http]\n  bind-address = \"{listen}\"\n"
                );
                std::fs::write(&config, text).map_err(|e| e.to_string())?;
                cmd.arg("run").arg("-config").arg(&config);
            }
        }
        cmd.args(&found.extra_args);
        let log = std::fs::File::create(scratch.join(log)).map_err(|e| e.to_string())?;
        let log2 = log.try_clone().map_err(|e| e.to_string())?;
        cmd.stdin(Stdio::null()).stdout(log).stderr(log2);
        let child = cmd.spawn().map_err(|e| format!("cannot start {}: {e}", found.bin.display()))?;
        let server = Server { system: found.system, base: format!("http://{listen}"), data_dir, child };
        server.wait_ready(http, Duration::from_secs(120))?;
        Ok(server)
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until the server has been idle for a second, at most `max` (see [`wait_quiet`]).
    pub fn wait_quiet(&self, max: Duration) -> bool {
        wait_quiet(self.pid(), max)
    }

    fn wait_ready(&self, http: &Http, timeout: Duration) -> Result<(), String> {
        let path = match self.system {
            System::Strata | System::Prometheus => "/-/ready",
            System::VictoriaMetrics => "/health",
            System::InfluxDb => "/ping",
        };
        let started = Instant::now();
        loop {
            if let Ok((200..=299, _)) = http.get(&format!("{}{path}", self.base)) {
                return Ok(());
            }
            if started.elapsed() > timeout {
                return Err(format!("{} not ready after {timeout:?}", self.system.name()));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// After a load: gets the system to flush and merge what it buffers, as far as it offers a
    /// way to. Returns bytes measured now that cannot be measured after shutdown (Prometheus'
    /// snapshot with the head).
    pub fn settle(&self, http: &Http) -> Result<Option<u64>, String> {
        match self.system {
            System::VictoriaMetrics => {
                http.get_ok(&format!("{}/internal/force_flush", self.base))?;
                http.get_ok(&format!("{}/internal/force_merge", self.base))?;
                // The merge runs in the background; vm_active_force_merges counts it.
                std::thread::sleep(Duration::from_secs(1));
                let started = Instant::now();
                while started.elapsed() < Duration::from_secs(1800) {
                    let (_, body) = http.get(&format!("{}/metrics", self.base))?;
                    let active = String::from_utf8_lossy(&body)
                        .lines()
                        .filter(|l| {
                            l.starts_with("vm_active_force_merges") || l.starts_with("vm_active_merges")
                        })
                        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                        .sum::<f64>();
                    if active == 0.0 {
                        return Ok(None);
                    }
                    std::thread::sleep(Duration::from_millis(500));
                }
                Err("VictoriaMetrics merges still running after 30 min".into())
            }
            System::Prometheus => {
                let url = format!("{}/api/v1/admin/tsdb/snapshot?skip_head=false", self.base);
                let (status, body) = http.post(&url, &[], "")?;
                if status != 200 {
                    return Err(format!(
                        "Prometheus snapshot: status {status}: {}",
                        String::from_utf8_lossy(&body)
                    ));
                }
                let v: serde_json::Value = serde_json::from_slice(&body).map_err(|e| e.to_string())?;
                let name = v["data"]["name"].as_str().ok_or("Prometheus snapshot: no name in answer")?;
                Ok(Some(super::procstat::dir_bytes(&self.data_dir.join("snapshots").join(name), &[])))
            }
            System::Strata => {
                // Merges each partition's files into one (after a flush the load made due).
                let (status, body) =
                    http.post(&format!("{}/api/v1/admin/tsdb/compact", self.base), &[], "")?;
                if status != 204 {
                    return Err(format!(
                        "strata compact: status {status}: {}",
                        String::from_utf8_lossy(&body)
                    ));
                }
                Ok(None)
            }
            System::InfluxDb => Ok(None),
        }
    }

    /// Stops the server with SIGTERM and waits for its clean shutdown (strata, VictoriaMetrics
    /// and InfluxDB flush what they buffer; Prometheus closes its WAL).
    pub fn stop(mut self) -> Result<(), String> {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).map_err(|e| e.to_string())?;
        let started = Instant::now();
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) if status.success() || status.code().is_none() => return Ok(()),
                Ok(Some(status)) => return Err(format!("{} exited with {status}", self.system.name())),
                Ok(None) if started.elapsed() > Duration::from_secs(900) => {
                    let _ = self.child.kill();
                    return Err(format!("{} did not stop within 15 min; killed", self.system.name()));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(100)),
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    /// This system's write-ahead log in `data_dir` now (see [`System::wal_note`]). Measured
    /// while the server runs, right after the load: what a crash at that moment would replay.
    pub fn wal_bytes(system: System, data_dir: &Path) -> WalBytes {
        use super::procstat::file_lengths;
        match system {
            System::Strata => WalBytes { wal: Some(file_lengths(&data_dir.join("wal"))), head_chunks: None },
            System::VictoriaMetrics => WalBytes { wal: None, head_chunks: None },
            System::Prometheus => WalBytes {
                wal: Some(file_lengths(&data_dir.join("wal"))),
                head_chunks: Some(file_lengths(&data_dir.join("chunks_head"))),
            },
            System::InfluxDb => {
                WalBytes { wal: Some(file_lengths(&data_dir.join("wal").join(INFLUX_DB))), head_chunks: None }
            }
        }
    }

    /// Bytes of this system's data in `data_dir` after shutdown (see [`System::disk_note`]).
    pub fn disk_bytes(system: System, data_dir: &Path) -> u64 {
        use super::procstat::dir_bytes;
        match system {
            System::Strata => dir_bytes(data_dir, &[]),
            System::VictoriaMetrics => dir_bytes(data_dir, &["cache", "snapshots"]),
            System::Prometheus => dir_bytes(data_dir, &["snapshots"]),
            System::InfluxDb => {
                dir_bytes(&data_dir.join("data").join(INFLUX_DB), &[])
                    + dir_bytes(&data_dir.join("wal").join(INFLUX_DB), &[])
            }
        }
    }
}

impl Drop for Server {
    /// A server left running (an error path) is killed, never leaked.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use super::{Server, System, WalBytes, prometheus_config, wait_quiet};

    #[test]
    fn wal_bytes_measure_each_systems_log_directory() {
        let d = tempfile::tempdir().unwrap();
        let file = |rel: &str, len: usize| {
            let path = d.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, vec![1u8; len]).unwrap();
        };
        file("wal/00000001", 40_000);
        file("wal/checkpoint.00000001/00000000", 8_000);
        file("chunks_head/000001", 20_000);
        file("partitions/0/00000001.spf", 100_000);
        file("wal/benchmark/1/_00001.wal", 4_000);
        // The test's tree holds every system's layout at once: strata's `wal/` holds all three.
        let strata = Server::wal_bytes(System::Strata, d.path());
        assert_eq!(strata, WalBytes { wal: Some(52_000), head_chunks: None });
        let prometheus = Server::wal_bytes(System::Prometheus, d.path());
        assert_eq!(prometheus, WalBytes { wal: Some(52_000), head_chunks: Some(20_000) });
        assert_eq!(Server::wal_bytes(System::VictoriaMetrics, d.path()), WalBytes::default());
        assert_eq!(Server::wal_bytes(System::InfluxDb, d.path()).wal, Some(4_000));
    }

    #[test]
    fn prometheus_gets_an_out_of_order_window_only_when_asked() {
        assert_eq!(prometheus_config(None), "global:\n  scrape_interval: 15s\n");
        assert_eq!(
            prometheus_config(Some(25_200)),
            "global:\n  scrape_interval: 15s\nstorage:\n  tsdb:\n    out_of_order_time_window: 25200s\n"
        );
    }

    /// A sleeping process is idle within the first window; a spinning one never is, so the
    /// wait ends at its limit; a process that is gone is not waited for.
    #[test]
    fn wait_quiet_tells_idle_from_busy() {
        let mut idle = Command::new("sleep").arg("30").stdout(Stdio::null()).spawn().unwrap();
        let t = Instant::now();
        assert!(wait_quiet(idle.id(), Duration::from_secs(10)));
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        idle.kill().unwrap();
        idle.wait().unwrap();
        assert!(!wait_quiet(idle.id(), Duration::from_secs(10)), "a reaped process is gone");

        let mut busy = Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap();
        let t = Instant::now();
        assert!(!wait_quiet(busy.id(), Duration::from_secs(3)));
        assert!(t.elapsed() >= Duration::from_secs(3));
        busy.kill().unwrap();
        busy.wait().unwrap();
    }
}

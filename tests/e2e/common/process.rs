//! Other programs the black-box tests run beside strata (Prometheus, node-exporter, vmalert,
//! InfluxDB): finding them, starting them with their output in a log file, and waiting on them.

use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// How long [`wait_for`] waits for an event. Not a performance bound.
const PROCESS_HANG_GUARD: Duration = Duration::from_secs(90);

/// A port that was free a moment ago (bound and released), for programs that cannot report
/// the port they picked.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The program `name` on `PATH`, if installed.
pub fn find_binary(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|candidate| candidate.is_file())
}

/// The program `name` of Debian package `package` on `PATH`; when it is missing, `None` after
/// [`skip_outside_ci`](super::skip_outside_ci) said so for `test` (under CI, a failure).
pub fn peer(name: &str, package: &str, test: &str) -> Option<PathBuf> {
    let found = find_binary(name);
    if found.is_none() {
        let message =
            format!("{name} must be on PATH for this test (Debian package `{package}`; .ci/run installs it)");
        super::skip_outside_ci(test, &message);
    }
    found
}

/// A child process with its output in a log file; killed on drop unless it was terminated.
pub struct Process {
    child: Child,
    log: PathBuf,
}

impl Process {
    /// Starts `program` with `args`, stdout and stderr into `log`.
    pub fn spawn(program: &Path, args: &[&str], log: &Path) -> Process {
        let out = File::create(log).unwrap();
        let err = out.try_clone().unwrap();
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
        Process { child, log: log.to_owned() }
    }

    /// The log file.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// SIGTERM, then wait for the exit, which must be a success.
    pub fn terminate(&mut self) {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        kill(pid, Signal::SIGTERM).unwrap();
        let status = self.child.wait().unwrap();
        assert!(
            status.success(),
            "{} exited with {status}; log:\n{}",
            self.log.display(),
            std::fs::read_to_string(&self.log).unwrap_or_default()
        );
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Polls `ready` every 100 ms until it holds, failing with the content of `log` after a
/// generous guard.
pub fn wait_for(log: &Path, what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + PROCESS_HANG_GUARD;
    while !ready() {
        assert!(
            Instant::now() < deadline,
            "gave up waiting for {what}; log {}:\n{}",
            log.display(),
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// GET `url`: status and body, or None if there was no answer.
pub fn get_text(agent: &ureq::Agent, url: &str) -> Option<(u16, String)> {
    let mut response = agent.get(url).call().ok()?;
    let status = response.status().as_u16();
    Some((status, response.body_mut().read_to_string().ok()?))
}

/// Prometheus' `prometheus_remote_storage_queue_highest_sent_timestamp_seconds`, in ms: the
/// newest sample timestamp its remote-write queue has sent.
pub fn highest_sent_ms(agent: &ureq::Agent, prometheus_url: &str) -> Option<i64> {
    let (status, text) = get_text(agent, &format!("{prometheus_url}/metrics"))?;
    if status != 200 {
        return None;
    }
    text.lines()
        .find(|l| l.starts_with("prometheus_remote_storage_queue_highest_sent_timestamp_seconds"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .map(|s| (s * 1000.0) as i64)
}

/// Starts node-exporter on a free port with only `collectors` (cheap, always-present ones
/// instead of the full default set); returns it and its address.
pub fn start_node_exporter(binary: &Path, dir: &Path, collectors: &[&str]) -> (Process, String) {
    let addr = format!("127.0.0.1:{}", free_port());
    let mut args = vec![format!("--web.listen-address={addr}"), "--collector.disable-defaults".to_owned()];
    args.extend(collectors.iter().map(|c| format!("--collector.{c}")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let process = Process::spawn(binary, &args, &dir.join("node-exporter.log"));
    (process, addr)
}

/// A running Prometheus with its config, data directory and log in one directory
/// (`prometheus.yml`, `prometheus-data/`, `prometheus.log`); ready to answer when [`start`]
/// returns, killed on drop.
///
/// [`start`]: Prometheus::start
pub struct Prometheus {
    process: Process,
    /// `http://` and the address it listens on.
    pub url: String,
    /// Its TSDB directory (snapshots land in `snapshots/` below it).
    pub data: PathBuf,
    agent: ureq::Agent,
}

impl Prometheus {
    /// Writes `config` to `dir/prometheus.yml` and starts `binary` on `addr` with `flags`.
    /// `addr` comes from the caller (a [`free_port`]) so that the config can name it, for
    /// Prometheus to scrape itself.
    pub fn start(binary: &Path, dir: &Path, addr: &str, config: &str, flags: &[&str]) -> Prometheus {
        let config_file = dir.join("prometheus.yml");
        std::fs::write(&config_file, config).unwrap();
        let data = dir.join("prometheus-data");
        let mut args = vec![
            format!("--config.file={}", config_file.display()),
            format!("--storage.tsdb.path={}", data.display()),
            format!("--web.listen-address={addr}"),
        ];
        args.extend(flags.iter().map(|f| (*f).to_owned()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let process = Process::spawn(binary, &args, &dir.join("prometheus.log"));
        let agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let prometheus = Prometheus { process, url: format!("http://{addr}"), data, agent };
        wait_for(prometheus.log(), "Prometheus to become ready", || {
            get_text(&prometheus.agent, &format!("{}/-/ready", prometheus.url))
                .is_some_and(|(status, _)| status == 200)
        });
        prometheus
    }

    /// Its log file.
    pub fn log(&self) -> &Path {
        self.process.log()
    }

    /// SIGTERM, then wait for the exit, which must be a success.
    pub fn terminate(&mut self) {
        self.process.terminate();
    }

    /// `GET /api/v1/query` with `params`; the answer must be a success.
    pub fn query(&self, params: &[(&str, &str)]) -> serde_json::Value {
        let mut request = self.agent.get(format!("{}/api/v1/query", self.url));
        for (name, value) in params {
            request = request.query(*name, *value);
        }
        let text = request.call().unwrap().body_mut().read_to_string().unwrap();
        self.success(&text)
    }

    /// `POST path` with an empty body; the answer must be a success.
    pub fn post_json(&self, path: &str) -> serde_json::Value {
        let text = self
            .agent
            .post(format!("{}{path}", self.url))
            .send_empty()
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap();
        self.success(&text)
    }

    fn success(&self, text: &str) -> serde_json::Value {
        let json: serde_json::Value = serde_json::from_str(text).unwrap();
        if json["status"] != "success" {
            let log = std::fs::read_to_string(self.log()).unwrap_or_default();
            panic!("Prometheus answered {text}; log:\n{log}");
        }
        json
    }
}

//! Other programs the black-box tests run beside strata (Prometheus, node-exporter): finding
//! them, starting them with their output in a log file, and waiting on them.

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

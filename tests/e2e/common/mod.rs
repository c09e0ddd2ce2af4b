//! Shared helpers for black-box tests: start the real `strata` binary on an ephemeral port with
//! its own data directory, talk HTTP to it, signal it, and read its log.
//!
//! Every wait here is for an event (a log line, the process exiting), bounded by a generous
//! guard so a hung server fails the test with its log instead of hanging CI.

pub mod process;

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Write as _};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// How long to wait for an event before declaring the server hung. Not a performance bound.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// The log line that carries the bound address.
const LISTENING: &str = "strata listening on ";

/// A running `strata` process. Killed on drop if a test did not stop it.
pub struct Strata {
    child: Child,
    addr: SocketAddr,
    lines: Receiver<String>,
    log: Arc<Mutex<Vec<String>>>,
    agent: ureq::Agent,
}

/// An HTTP answer, whatever its status.
#[derive(Debug)]
pub struct Reply {
    /// The HTTP status code.
    pub status: u16,
    /// The `Content-Type` header, if any.
    pub content_type: Option<String>,
    /// Every header.
    pub headers: ureq::http::HeaderMap,
    /// The body as text.
    pub body: String,
}

impl Reply {
    /// The value of header `name`, if present and text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// For a test whose outside tool is missing: fails under CI (`CI` set, not `false`/`0`), where
/// `.ci/run` installs every tool, and otherwise prints `SKIPPED <test>: <message>` so a developer
/// without the tool sees what did not run. The line goes straight to the stderr handle: the
/// test harness captures `eprintln!` of passing tests, and a skip must show.
pub fn skip_outside_ci(test: &str, message: &str) {
    let under_ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    assert!(!under_ci, "{message}");
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {message}");
}

/// Runs `strata` with `args` to completion (for flags that stop it before it serves).
pub fn run_to_exit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("run strata")
}

impl Strata {
    /// Starts strata on `127.0.0.1:0` with `data_dir` and waits until it has logged the address
    /// it listens on. The database may still be opening; see [`Strata::wait_ready`].
    pub fn start(data_dir: &Path) -> Strata {
        Strata::start_with(data_dir, &[])
    }

    /// Like [`Strata::start`] with extra flags.
    pub fn start_with(data_dir: &Path, args: &[&str]) -> Strata {
        let mut strata = Strata::spawn(data_dir, args);
        let line = strata.wait_for_log(LISTENING);
        let addr = line
            .split(LISTENING)
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|addr| addr.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        strata.addr = addr;
        strata
    }

    /// Starts strata on `addr` with `data_dir` and `args`, and waits until it listens: a
    /// restart on the address other servers know it by.
    pub fn start_at(data_dir: &Path, addr: SocketAddr, args: &[&str]) -> Strata {
        let mut all =
            vec![OsString::from("--data-dir"), data_dir.into(), "--listen".into(), addr.to_string().into()];
        all.extend(args.iter().map(OsString::from));
        let mut strata = Strata::launch(all);
        strata.wait_for_log(LISTENING);
        strata.addr = addr;
        strata
    }

    /// Starts strata on `127.0.0.1:0` with `data_dir` without waiting for anything, for tests
    /// that expect it to fail early.
    pub fn spawn(data_dir: &Path, args: &[&str]) -> Strata {
        let mut all =
            vec![OsString::from("--data-dir"), data_dir.into(), "--listen".into(), "127.0.0.1:0".into()];
        all.extend(args.iter().map(OsString::from));
        Strata::launch(all)
    }

    /// Starts strata with exactly `args`, waiting for nothing.
    pub fn launch<I, S>(args: I) -> Strata
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
            .args(args)
            // A developer's RUST_LOG must not hide the lines these helpers wait for.
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn strata");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, lines) = mpsc::channel();
        let log = Arc::new(Mutex::new(Vec::new()));
        let keep = Arc::clone(&log);
        // Drain stderr continuously so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                keep.lock().unwrap().push(line.clone());
                if tx.send(line).is_err() {
                    // The test stopped listening; keep draining into `log`.
                    continue;
                }
            }
        });
        let agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        Strata { child, addr: SocketAddr::from(([127, 0, 0, 1], 0)), lines, log, agent }
    }

    /// The address the server is bound to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Everything the server logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// Waits for the next log line containing `needle` and returns it.
    pub fn wait_for_log(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + HANG_GUARD;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("strata exited before logging {needle:?}; log:\n{}", self.log())
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!("no {needle:?} after {HANG_GUARD:?}; log:\n{}", self.log())
                }
            }
        }
    }

    /// Waits until the database is open (the server logs `strata is ready`).
    pub fn wait_ready(&mut self) {
        self.wait_for_log("strata is ready");
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> Reply {
        reply(self.agent.get(self.url(path)).call())
    }

    /// `GET path` with `headers`. A body that is not UTF-8 (gzip, say) reads as empty.
    pub fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        let mut request = self.agent.get(self.url(path));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        reply(request.call())
    }

    /// `HEAD path`.
    pub fn head(&self, path: &str) -> Reply {
        reply(self.agent.head(self.url(path)).call())
    }

    /// `POST path` with `headers` and `body`.
    pub fn post(&self, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
        let mut request = self.agent.post(self.url(path));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        reply(request.send(body))
    }

    /// Sends `signal` to the process.
    pub fn signal(&self, signal: Signal) {
        let pid = Pid::from_raw(i32::try_from(self.child.id()).expect("pid fits i32"));
        kill(pid, signal).expect("send signal");
    }

    /// Sends SIGTERM and waits for the process to exit.
    pub fn terminate(&mut self) -> ExitStatus {
        self.signal(Signal::SIGTERM);
        self.wait_exit()
    }

    /// Waits for the process to exit on its own (its stderr closes), then reaps it.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + HANG_GUARD;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(_) => {}
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("strata did not exit within {HANG_GUARD:?}; log:\n{}", self.log())
                }
            }
        }
        self.child.wait().expect("wait for strata")
    }
}

impl Drop for Strata {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn reply(result: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Reply {
    let mut response = result.expect("HTTP request");
    let status = response.status().as_u16();
    let content_type =
        response.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let headers = response.headers().clone();
    let body = response.body_mut().read_to_string().unwrap_or_default();
    Reply { status, content_type, headers, body }
}

/// Every series in a stopped server's data directory with its samples in `[mint, maxt]`, read
/// through the storage crate (the query API does not exist yet). Series without samples in the
/// range are left out.
pub fn stored_series(data_dir: &Path, mint: i64, maxt: i64) -> Vec<(storage::Labels, Vec<storage::Sample>)> {
    use storage::Querier;
    let db = storage::Db::open(storage::Options::new(data_dir)).expect("open strata's data directory");
    let snapshot = db.snapshot();
    let all = [storage::Matcher::new(storage::MatchOp::Regex, "__name__", ".+").expect("matcher")];
    let mut out = Vec::new();
    for series in snapshot.select(&all, mint, maxt).expect("select") {
        let mut samples = Vec::new();
        snapshot.samples(&series, mint, maxt, &mut samples).expect("samples");
        if !samples.is_empty() {
            out.push((series.labels, samples));
        }
    }
    drop(snapshot);
    db.close().expect("close the database");
    out
}

/// Every series' native histogram samples in `[mint, maxt]` in a stopped server's data
/// directory (series without any left out).
pub fn stored_histograms(
    data_dir: &Path,
    mint: i64,
    maxt: i64,
) -> Vec<(storage::Labels, Vec<storage::HistogramSample>)> {
    use storage::Querier;
    let db = storage::Db::open(storage::Options::new(data_dir)).expect("open strata's data directory");
    let snapshot = db.snapshot();
    let all = [storage::Matcher::new(storage::MatchOp::Regex, "__name__", ".+").expect("matcher")];
    let mut out = Vec::new();
    for series in snapshot.select(&all, mint, maxt).expect("select") {
        let mut hs = Vec::new();
        snapshot.histograms(&series, mint, maxt, &mut hs).expect("histograms");
        if !hs.is_empty() {
            out.push((series.labels, hs));
        }
    }
    drop(snapshot);
    db.close().expect("close the database");
    out
}

/// `s` percent-encoded for a query string or a form body (unreserved characters kept).
pub fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A series as the tests compare them: label pairs sorted by name, samples as (ms, value bits).
pub type FlatSeries = (Vec<(String, String)>, Vec<(i64, u64)>);

/// The series of a `matrix` query answer (strata's or Prometheus'), in answer order, with values
/// parsed back from Go's shortest float text (`NaN`, `+Inf`, `-Inf` included) to their bits.
pub fn matrix_series(answer: &serde_json::Value) -> Vec<FlatSeries> {
    assert_eq!(answer["status"], "success", "{answer}");
    assert_eq!(answer["data"]["resultType"], "matrix", "{answer}");
    let parse = |text: &str| -> f64 {
        match text {
            "NaN" => f64::NAN,
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            other => other.parse().unwrap(),
        }
    };
    answer["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|series| {
            let mut labels: Vec<(String, String)> = series["metric"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                .collect();
            labels.sort();
            let samples = series["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|pair| {
                    (
                        (pair[0].as_f64().unwrap() * 1000.0).round() as i64,
                        parse(pair[1].as_str().unwrap()).to_bits(),
                    )
                })
                .collect();
            (labels, samples)
        })
        .collect()
}

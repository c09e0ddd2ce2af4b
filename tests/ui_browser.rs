//! The query UI at `/` in a real browser: headless Chromium (Debian's `chromium`) opens pages
//! of a strata that holds known data, with the query in the URL so nothing needs clicking, and
//! the test reads the DOM Chromium dumps after the page's scripts ran: the query ran, the chart
//! drew one line per series, the table has one row per series, the stats are shown, the history
//! kept the query, errors are shown, and the cardinality page agrees with the API. A screenshot
//! of the graph is saved in the test's temporary directory and copied to
//! `target/ui-screenshot.png` for people to look at.
//!
//! Skipped, with a notice, when `chromium` is not installed and `CI` is not set; under CI its
//! absence is a failure (`.ci/run` installs it).

mod common;

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::Strata;
use common::process::find_binary;

/// Bound on one Chromium run. Not a performance bound: a page that hangs fails the test.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// Hosts of the test data; each is one series of `demo_load`.
const HOSTS: [&str; 5] = ["a", "b", "c", "d", "e"];

/// The flags this machine needs (see the environment notes): no sandbox as root, no GPU, and
/// no background connections, which a closed network refuses.
const CHROMIUM_FLAGS: [&str; 8] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
];

#[test]
fn query_ui_renders_in_headless_chromium() {
    let Some(chromium) = find_binary("chromium") else {
        let message =
            "chromium must be on PATH for the browser test (Debian package `chromium`; .ci/run installs it)";
        common::skip_outside_ci("query_ui_renders_in_headless_chromium", message);
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut strata = Strata::start(&dir.path().join("data"));
    strata.wait_ready();
    load_demo_data(&strata);
    // One profile for every run, so localStorage (the query history) carries over.
    let browser = Browser { binary: chromium, profile: dir.path().join("chromium-profile") };

    // A range query from the URL: chart and table.
    let page = browser.dump_dom(&strata.url("/?q=demo_load&range=1h"));
    let status = page.element("status");
    assert_eq!(status.attr("data-state"), Some("done"), "{}", page.excerpt("status"));
    let graph = page.element("graph");
    assert_eq!(graph.attr("data-series"), Some("5"), "{}", page.excerpt("graph"));
    // 1 h at the automatic step (3600 / 250 → 14 s) is 258 steps, each with a value per series.
    let points: usize = graph.attr("data-points").unwrap().parse().unwrap();
    assert!(points >= 5 * 250, "{points} points plotted");
    assert_eq!(graph.attr("data-drawn"), Some("5"), "uPlot did not draw every series");
    assert!(page.html.contains("class=\"u-over\""), "no uPlot plot area");
    assert_eq!(page.html.matches("<canvas").count(), 1, "one chart canvas");
    for host in HOSTS {
        let name = format!("demo_load{{host=\"{host}\"}}");
        assert!(page.html.contains(&name), "{name} is missing from the legend and table");
    }
    assert_eq!(page.element("result-table").attr("data-rows"), Some("5"));
    assert_eq!(page.count_in("result-table", "<tr class=\"series\">"), 5);
    for stat in [
        "samples.totalQueryableSamples",
        "samples.blocksFromStats",
        "samples.blocksDecoded",
        "timings.execTotalTime",
        "client.elapsed",
    ] {
        assert!(page.html.contains(&format!("data-stat=\"{stat}\"")), "stat {stat} is not shown");
    }

    // The same view as a picture for people; the page must have drawn before the shot.
    let screenshot = dir.path().join("ui-screenshot.png");
    browser.screenshot(&strata.url("/?q=demo_load&range=1h"), &screenshot);
    let png = std::fs::read(&screenshot).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(png.len() > 20_000, "a {} byte screenshot is too small to show a chart", png.len());
    let target_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().unwrap();
    std::fs::copy(&screenshot, target_dir.join("ui-screenshot.png")).unwrap();

    // An instant query: a table of the latest values, no chart; the history remembered the
    // first query.
    let page = browser.dump_dom(&strata.url("/?q=demo_load%20%3E%200&mode=instant"));
    assert_eq!(page.element("status").attr("data-state"), Some("done"), "{}", page.excerpt("status"));
    assert_eq!(page.element("result-table").attr("data-rows"), Some("5"));
    assert_eq!(page.element("graph").attr("data-series"), Some("0"));
    assert!(
        page.element("view-graph").attr("hidden").is_some(),
        "the graph tab is shown for an instant query"
    );
    assert!(page.html.contains("<option value=\"demo_load\">"), "the history lost the first query");

    // A query that does not parse shows strata's error.
    let page = browser.dump_dom(&strata.url("/?q=rate(demo_load"));
    let status = page.element("status");
    assert_eq!(status.attr("data-state"), Some("error"), "{}", page.excerpt("status"));
    assert!(page.excerpt("status").contains("bad_data"), "{}", page.excerpt("status"));

    // The cardinality page shows what /api/v1/status/tsdb says.
    let api: serde_json::Value = serde_json::from_str(&strata.get("/api/v1/status/tsdb").body).unwrap();
    let series = api["data"]["headStats"]["numSeries"].as_u64().unwrap();
    assert_eq!(series, HOSTS.len() as u64);
    let page = browser.dump_dom(&strata.url("/?page=tsdb"));
    assert_eq!(
        page.element("tsdb-status").attr("data-state"),
        Some("done"),
        "{}",
        page.excerpt("tsdb-status")
    );
    assert_eq!(page.element("head-stats").attr("data-series"), Some(series.to_string().as_str()));
    assert_eq!(page.element("tsdb-metrics").attr("data-rows"), Some("1"));
    assert!(page.excerpt("tsdb-metrics").contains("demo_load"), "{}", page.excerpt("tsdb-metrics"));
    assert!(page.element("page-query").attr("hidden").is_some());

    assert_eq!(strata.terminate().code(), Some(0), "log:\n{}", strata.log());
}

/// `demo_load{host=...}`: one hour at 15 s, written as line protocol (measurement `demo`,
/// field `load`).
fn load_demo_data(strata: &Strata) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64 / 15 * 15;
    let mut lines = String::new();
    for t in (now - 3600..=now).step_by(15) {
        for (i, host) in HOSTS.iter().enumerate() {
            let value = 50.0 + 30.0 * ((t as f64) / 300.0 + i as f64).sin() + 5.0 * i as f64;
            lines.push_str(&format!("demo,host={host} load={value:.3} {t}\n"));
        }
    }
    let reply = strata.post("/write?db=ui&precision=s", &[], lines.as_bytes());
    assert_eq!(reply.status, 204, "{}", reply.body);
}

/// Headless Chromium runs against one profile directory.
struct Browser {
    binary: PathBuf,
    profile: PathBuf,
}

impl Browser {
    /// The DOM after the page's scripts ran. The virtual-time budget lets timers and network
    /// requests finish before Chromium dumps; it is virtual time, not a wall-clock wait.
    fn dump_dom(&self, url: &str) -> Page {
        let html = self.run(&["--virtual-time-budget=10000", "--dump-dom", url]);
        assert!(html.contains("</html>"), "Chromium printed no page for {url}: {html}");
        Page { html }
    }

    fn screenshot(&self, url: &str, path: &Path) {
        self.run(&[
            "--virtual-time-budget=10000",
            "--hide-scrollbars",
            "--window-size=1280,1000",
            &format!("--screenshot={}", path.display()),
            url,
        ]);
        assert!(path.is_file(), "Chromium wrote no screenshot to {}", path.display());
    }

    /// Runs Chromium to completion and returns its standard output.
    fn run(&self, args: &[&str]) -> String {
        let mut child = Command::new(&self.binary)
            .args(CHROMIUM_FLAGS)
            .arg(format!("--user-data-dir={}", self.profile.display()))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.binary.display()));
        let mut stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let out = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stdout.read_to_string(&mut text);
            text
        });
        let err = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        let deadline = Instant::now() + HANG_GUARD;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("Chromium did not finish within {HANG_GUARD:?}: {args:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let (out, err) = (out.join().unwrap(), err.join().unwrap());
        assert!(status.success(), "Chromium failed ({status}) on {args:?}:\n{err}");
        out
    }
}

/// A dumped DOM, searched as text (the page's elements carry ids and data-* attributes for
/// exactly this).
struct Page {
    html: String,
}

/// The opening tag of one element.
struct Tag<'a>(&'a str);

impl Page {
    /// The opening tag of the element with `id`.
    fn element(&self, id: &str) -> Tag<'_> {
        let needle = format!(" id=\"{id}\"");
        let at = self.html.find(&needle).unwrap_or_else(|| panic!("no element #{id} in the page"));
        let start = self.html[..at].rfind('<').unwrap();
        let end = at + self.html[at..].find('>').unwrap();
        Tag(&self.html[start..=end])
    }

    /// The element with `id` and what follows it, for messages and text checks.
    fn excerpt(&self, id: &str) -> String {
        let needle = format!(" id=\"{id}\"");
        let at = self.html.find(&needle).unwrap_or(0);
        self.html[at..].chars().take(600).collect()
    }

    /// How often `needle` occurs inside the element with `id` (up to its closing tag).
    fn count_in(&self, id: &str, needle: &str) -> usize {
        let at = self.html.find(&format!(" id=\"{id}\"")).unwrap();
        let tag = self.html[..at].rfind('<').unwrap();
        let name: String = self.html[tag + 1..].chars().take_while(char::is_ascii_alphanumeric).collect();
        let end = self.html[at..].find(&format!("</{name}>")).map_or(self.html.len(), |e| at + e);
        self.html[at..end].matches(needle).count()
    }
}

impl Tag<'_> {
    /// The value of attribute `name`, `Some("")` for a bare attribute such as `hidden`.
    fn attr(&self, name: &str) -> Option<&str> {
        let quoted = format!(" {name}=\"");
        if let Some(at) = self.0.find(&quoted) {
            let rest = &self.0[at + quoted.len()..];
            return rest.split('"').next();
        }
        let bare = format!(" {name}");
        self.0
            .match_indices(&bare)
            .any(|(at, _)| matches!(self.0[at + bare.len()..].chars().next(), Some(' ' | '>' | '/')))
            .then_some("")
    }
}

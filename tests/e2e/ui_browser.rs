//! The query UI at `/` in a real browser: headless Chromium (Debian's `chromium`) opens pages
//! of a strata that holds known data, with the query in the URL so nothing needs clicking, and
//! the test reads the DOM Chromium dumps after the page's scripts ran: the query ran, the chart
//! drew one line per series, the table has one row per series, the stats are shown, the history
//! kept the query, errors are shown, and the cardinality page agrees with the API. A screenshot
//! of the graph is saved in the test's temporary directory and copied to
//! `target/ui-screenshot.png` for people to look at.
//!
//! The PromQL editor is tested by typing into it: Chromium is driven over the DevTools protocol
//! on `--remote-debugging-pipe` (JSON messages separated by NUL bytes on file descriptors 3 and
//! 4, which `sh` maps from the child's stdin and stdout, so no WebSocket client is needed), and
//! key events go through Chromium's input pipeline as a person's would.
//!
//! Skipped, with a notice, when `chromium` is not installed and `CI` is not set; under CI its
//! absence is a failure (`.ci/run` installs it).

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::common::Strata;
use crate::common::process::peer;

/// Bound on one Chromium run. Not a performance bound: a page that hangs fails the test.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// Bound on waiting for a page to get somewhere (the editor loaded, a completion list, an
/// underline): seconds on a loaded machine, so a page that never gets there fails in time.
const PAGE_WAIT: Duration = Duration::from_secs(30);

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
    let Some(chromium) = peer("chromium", "chromium", "query_ui_renders_in_headless_chromium") else {
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

#[test]
fn query_editor_completes_metric_names_and_underlines_syntax_errors() {
    let Some(chromium) =
        peer("chromium", "chromium", "query_editor_completes_metric_names_and_underlines_syntax_errors")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut strata = Strata::start(&dir.path().join("data"));
    strata.wait_ready();
    load_demo_data(&strata);
    load_node_data(&strata);
    let browser = Browser { binary: chromium, profile: dir.path().join("chromium-profile") };
    let mut tab = DevTools::open(&browser, &strata.url("/"));
    tab.wait_until("the editor is on the page", "!!document.querySelector('#expr .cm-content')");

    // Typing `rate(node_` offers the metric names strata holds that start so; they come from
    // strata's API (/api/v1/label/__name__/values), not from a built-in list.
    tab.eval("document.querySelector('#expr .cm-content').focus()");
    tab.type_text("rate(node_");
    let options = tab.wait_until(
        "the completion list offers node_cpu_seconds_total",
        "(() => { const items = [...document.querySelectorAll('.cm-tooltip-autocomplete li')]
             .map((li) => li.textContent);
           return items.some((t) => t.startsWith('node_cpu_seconds_total')) && items.join('\\n'); })()",
    );
    let options = options.as_str().unwrap();
    for name in ["node_cpu_seconds_total", "node_load1", "node_memory_MemAvailable_bytes"] {
        assert!(options.lines().any(|o| o.starts_with(name)), "{name} is not offered:\n{options}");
    }
    assert!(!options.contains("demo_load"), "a metric not matching `node_` is offered:\n{options}");
    // Enter picks the entry (it runs the query only when no list is open). CodeMirror ignores
    // Enter on a list younger than its `interactionDelay` (75 ms), so that an Enter meant to run
    // the query does not pick an entry that popped up just before; a loaded machine can find
    // the list sooner than that, so wait it out.
    std::thread::sleep(Duration::from_millis(300));
    tab.press("Enter", 0);
    let text = tab.wait_until(
        "the picked metric name is in the expression",
        "(() => { const t = document.querySelector('#expr .cm-content').innerText;
           return t.startsWith('rate(node_cpu_seconds_total') && t; })()",
    );
    assert_eq!(text.as_str(), Some("rate(node_cpu_seconds_total)"), "{text}");
    assert_eq!(tab.eval("document.getElementById('status').dataset.state"), "idle", "Enter ran the query");

    // A syntax error is underlined by the editor's own linter (codemirror-promql parses in the
    // browser; strata is not asked). Typing `sum(` gives `sum()` (the editor closes brackets),
    // an aggregation without its argument.
    tab.press("a", CTRL);
    tab.press("Backspace", 0);
    tab.type_text("sum(");
    let underlined = tab.wait_until(
        "the syntax error is underlined",
        "(() => { const e = document.querySelector('#expr .cm-lintRange-error');
           return e && e.textContent; })()",
    );
    assert_eq!(underlined.as_str(), Some("sum()"), "{underlined}");
    // Ctrl+Shift+M lists the diagnostics with their messages.
    tab.press("M", CTRL | SHIFT);
    let diagnostics = tab.wait_until(
        "the lint panel lists the error",
        "[...document.querySelectorAll('.cm-panel-lint li')].map((li) => li.textContent).join('\\n')",
    );
    assert!(!diagnostics.as_str().unwrap().contains("No diagnostics"), "{diagnostics}");
    tab.press("Escape", 0);
    // Typing the argument removes the underline; then Enter runs the query.
    tab.type_text("node_load1");
    tab.wait_until(
        "the underline is gone once the expression parses",
        "document.querySelector('#expr .cm-content').innerText === 'sum(node_load1)' \
         && document.querySelectorAll('#expr .cm-lintRange-error, #expr .cm-lintPoint').length === 0",
    );
    tab.press("Escape", 0);
    tab.press("Enter", 0);
    tab.wait_until("the query ran", "document.getElementById('status').dataset.state === 'done'");
    assert_eq!(tab.eval("document.getElementById('result-table').dataset.rows"), "1");
    let url = tab.eval("decodeURIComponent(location.search)");
    assert!(url.as_str().unwrap().contains("q=sum(node_load1)"), "{url}");
    tab.close();
    assert_eq!(strata.terminate().code(), Some(0), "log:\n{}", strata.log());
}

/// Metrics named like node_exporter's, for completion: `node_cpu_seconds_total`, `node_load1`
/// and `node_memory_MemAvailable_bytes`.
fn load_node_data(strata: &Strata) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let lines = format!(
        "node_cpu,cpu=0,mode=idle seconds_total=100 {now}\n\
         node load1=0.5 {now}\n\
         node_memory MemAvailable_bytes=1e9 {now}\n"
    );
    let reply = strata.post("/write?db=ui&precision=s", &[], lines.as_bytes());
    assert_eq!(reply.status, 204, "{}", reply.body);
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

/// `modifiers` of a CDP key event.
const CTRL: u8 = 2;
const SHIFT: u8 = 8;

/// One page of a headless Chromium driven over the DevTools protocol (CDP) on
/// `--remote-debugging-pipe`: requests are JSON objects ended by a NUL byte on Chromium's file
/// descriptor 3, answers and events come the same way on descriptor 4.
struct DevTools {
    child: Child,
    requests: ChildStdin,
    messages: mpsc::Receiver<serde_json::Value>,
    next_id: u64,
    session: String,
}

impl DevTools {
    /// Starts Chromium, opens a page and navigates it to `url`.
    fn open(browser: &Browser, url: &str) -> DevTools {
        // `sh` moves the pipes Rust can give a child (stdin, stdout) to the descriptors
        // Chromium reads and writes the protocol on.
        let mut child = Command::new("/bin/sh")
            .arg("-c")
            .arg(r#"exec "$0" "$@" 3<&0 4>&1 </dev/null >/dev/null"#)
            .arg(&browser.binary)
            .args(CHROMIUM_FLAGS)
            .arg(format!("--user-data-dir={}", browser.profile.display()))
            .arg("--remote-debugging-pipe")
            .arg("--window-size=1280,1000")
            .arg("about:blank")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", browser.binary.display()));
        let requests = child.stdin.take().unwrap();
        let mut replies = BufReader::new(child.stdout.take().unwrap());
        let (tx, messages) = mpsc::channel();
        std::thread::spawn(move || {
            let mut message = Vec::new();
            while replies.read_until(0, &mut message).is_ok_and(|n| n > 0) {
                if message.last() == Some(&0) {
                    message.pop();
                }
                let parsed: Option<serde_json::Value> = serde_json::from_slice(&message).ok();
                message.clear();
                if parsed.is_some_and(|parsed| tx.send(parsed).is_err()) {
                    break;
                }
            }
        });
        let mut tab = DevTools { child, requests, messages, next_id: 0, session: String::new() };
        let target = tab.call("Target.createTarget", serde_json::json!({"url": "about:blank"}));
        let attached = tab.call(
            "Target.attachToTarget",
            serde_json::json!({"targetId": target["targetId"], "flatten": true}),
        );
        tab.session = attached["sessionId"].as_str().unwrap().to_owned();
        tab.call("Page.navigate", serde_json::json!({"url": url}));
        tab.wait_until("the page loaded", "document.readyState === 'complete'");
        tab
    }

    /// Sends one command (to the page once attached) and answers its result.
    fn call(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut request = serde_json::json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            request["sessionId"] = self.session.clone().into();
        }
        let mut bytes = serde_json::to_vec(&request).unwrap();
        bytes.push(0);
        self.requests.write_all(&bytes).and_then(|()| self.requests.flush()).expect("write to Chromium");
        let deadline = Instant::now() + HANG_GUARD;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self
                .messages
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no answer from Chromium to {method} ({e})"));
            if message["id"] == id {
                assert!(message.get("error").is_none(), "{method} failed: {message}");
                return message["result"].clone();
            }
        }
    }

    /// The value of a JavaScript expression in the page.
    fn eval(&mut self, expression: &str) -> serde_json::Value {
        let result = self.call(
            "Runtime.evaluate",
            serde_json::json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(result.get("exceptionDetails").is_none(), "{expression} threw: {result}");
        result["result"]["value"].clone()
    }

    /// Evaluates `expression` until it is truthy and answers that value. Polling a page that
    /// runs timers (the linter waits 750 ms after the last change) and network requests; the
    /// bound only stops a page that never gets there.
    fn wait_until(&mut self, what: &str, expression: &str) -> serde_json::Value {
        let deadline = Instant::now() + PAGE_WAIT;
        loop {
            let value = self.eval(expression);
            let truthy = match &value {
                serde_json::Value::Null => false,
                serde_json::Value::Bool(b) => *b,
                serde_json::Value::String(s) => !s.is_empty(),
                serde_json::Value::Number(n) => n.as_f64() != Some(0.0),
                _ => true,
            };
            if truthy {
                return value;
            }
            if Instant::now() > deadline {
                let dom = self.eval("document.getElementById('query-form').outerHTML");
                panic!("timed out waiting until {what}; the form is:\n{dom}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Types `text` into the focused element, one key press per character.
    fn type_text(&mut self, text: &str) {
        for c in text.chars() {
            let key = c.to_string();
            self.key_event(&key, Some(&key), 0, 0);
        }
    }

    /// Presses a key that inserts nothing, or a shortcut: `key` as in `KeyboardEvent.key`,
    /// `modifiers` a sum of [`CTRL`] and [`SHIFT`].
    fn press(&mut self, key: &str, modifiers: u8) {
        let code = match key {
            "Backspace" => 8,
            "Enter" => 13,
            "Escape" => 27,
            letter if letter.len() == 1 => u32::from(letter.to_ascii_uppercase().as_bytes()[0]),
            other => panic!("no key code for {other}"),
        };
        // Enter has a text of its own; the editor's keymap decides what it does.
        let text = (key == "Enter" && modifiers == 0).then_some("\r");
        self.key_event(key, text, modifiers, code);
    }

    fn key_event(&mut self, key: &str, text: Option<&str>, modifiers: u8, code: u32) {
        let mut down = serde_json::json!({
            "type": "keyDown", "key": key, "modifiers": modifiers, "windowsVirtualKeyCode": code,
        });
        if let Some(text) = text {
            down["text"] = text.into();
        }
        self.call("Input.dispatchKeyEvent", down);
        let up = serde_json::json!({
            "type": "keyUp", "key": key, "modifiers": modifiers, "windowsVirtualKeyCode": code,
        });
        self.call("Input.dispatchKeyEvent", up);
    }

    /// Closes the browser and waits for it to exit.
    fn close(mut self) {
        self.session.clear();
        self.next_id += 1;
        let request = serde_json::json!({"id": self.next_id, "method": "Browser.close"});
        let mut bytes = serde_json::to_vec(&request).unwrap();
        bytes.push(0);
        let _ = self.requests.write_all(&bytes);
        let deadline = Instant::now() + HANG_GUARD;
        while self.child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.wait();
    }
}

impl Drop for DevTools {
    /// A failed assertion must not leave Chromium running.
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
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

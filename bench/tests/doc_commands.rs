//! Every command that README.md and docs/*.md show is run here, or checked against what it
//! names, so that the docs cannot rot.
//!
//! Commands are taken from fenced `sh` blocks and from inline code spans that start with a
//! command (`cargo`, `curl`, `strata`, `strata-bench`, `bench/run.sh`, `.ci/run`, `cd`, with
//! optional `NAME=value` environment prefixes). Then, in document order, README first:
//! - `curl` commands run for real against a strata served by this test, with the documented
//!   address replaced by the test's; they must succeed, and a query must return data;
//! - `strata-bench tsbs-gen` (also through `cargo run -p bench --`) runs for real, so the
//!   README tour loads its data before it queries it;
//! - other `strata-bench` and `bench/run.sh` commands are parsed by the real binary (their
//!   flags with `--help` appended), since running them takes minutes;
//! - `strata` and `cargo run` flags are parsed by the server's own flag parser;
//! - `bench/scripts/*.py` scripts must exist and answer `--help`;
//! - `cargo test`, `cargo bench` and `cargo run --example` must name packages, test targets,
//!   test functions, benches, examples and environment variables that exist;
//! - `cargo test --workspace`, `cargo fmt`, `cargo clippy` must be what `.ci/run` runs.
//!
//! A command of any other shape fails the test, so a new kind of command in the docs comes with
//! a way to check it.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Where a command was found.
#[derive(Debug)]
struct Found {
    file: String,
    line: usize,
    command: String,
}

/// Words a code span or shell line must start with (after `NAME=value` prefixes) to count as a
/// command.
const COMMAND_WORDS: [&str; 7] = ["cargo", "curl", "strata", "strata-bench", "bench/run.sh", ".ci/run", "cd"];

#[test]
fn every_command_in_the_docs_runs_or_names_what_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf();
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("docs entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    files.extend(docs);

    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read doc");
        let name = file.strip_prefix(&root).unwrap_or(file).display().to_string();
        found.extend(commands(&name, &text));
    }
    assert!(
        found.iter().any(|f| f.command.starts_with("curl")),
        "the docs show no curl command; did the extraction break?"
    );

    let work = tempfile::tempdir().expect("temp dir");
    let server = Server::start(work.path());
    // What the README's "From Prometheus" step would have sent by now: the series its query
    // examples ask for, over the last two hours.
    server.write_prometheus_like_data();
    let ctx = Ctx {
        root: root.clone(),
        work: work.path().to_path_buf(),
        addr: server.addr.clone(),
        bench: PathBuf::from(env!("CARGO_BIN_EXE_strata-bench")),
        ci: std::fs::read_to_string(root.join(".ci/run")).expect(".ci/run"),
    };
    let mut failures = Vec::new();
    for f in &found {
        if let Err(why) = check(&ctx, &f.command) {
            failures.push(format!("{}:{}: `{}`: {why}", f.file, f.line, f.command));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} doc commands fail:\n{}",
        failures.len(),
        found.len(),
        failures.join("\n")
    );
    eprintln!("{} commands in the docs checked", found.len());
}

/// The commands in one Markdown text: lines of fenced shell blocks (with `\` continuations
/// joined) and inline code spans that start with a command word (a span may run over a line
/// break, so spans are found in whole paragraphs).
fn commands(file: &str, text: &str) -> Vec<Found> {
    let mut out = Vec::new();
    let mut fence: Option<bool> = None; // Some(is_shell) inside a fence
    let mut pending = String::new();
    let mut pending_line = 0;
    let mut paragraph = String::new();
    let mut paragraph_line = 0;
    let flush_paragraph = |paragraph: &mut String, line: usize, out: &mut Vec<Found>| {
        for span in paragraph.split('`').skip(1).step_by(2) {
            if is_command(span) {
                out.push(Found { file: file.to_owned(), line, command: span.to_owned() });
            }
        }
        paragraph.clear();
    };
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if let Some(lang) = line.strip_prefix("```") {
            flush_paragraph(&mut paragraph, paragraph_line, &mut out);
            fence = match fence {
                Some(_) => None,
                None => Some(matches!(lang.trim(), "sh" | "bash" | "shell" | "console")),
            };
            continue;
        }
        match fence {
            Some(true) => {
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                if pending.is_empty() {
                    pending_line = i + 1;
                }
                let (part, continues) = match line.strip_suffix('\\') {
                    Some(p) => (p.trim_end(), true),
                    None => (line, false),
                };
                if !pending.is_empty() {
                    pending.push(' ');
                }
                pending.push_str(part.trim_start_matches("$ "));
                if !continues {
                    out.push(Found {
                        file: file.to_owned(),
                        line: pending_line,
                        command: std::mem::take(&mut pending),
                    });
                }
            }
            Some(false) => {}
            None if line.is_empty() || line.starts_with('|') || line.starts_with('#') => {
                flush_paragraph(&mut paragraph, paragraph_line, &mut out);
                // A table row or heading is a paragraph of its own.
                paragraph.push_str(line);
                flush_paragraph(&mut paragraph, i + 1, &mut out);
            }
            None => {
                if paragraph.is_empty() {
                    paragraph_line = i + 1;
                } else {
                    paragraph.push(' ');
                }
                paragraph.push_str(line);
            }
        }
    }
    flush_paragraph(&mut paragraph, paragraph_line, &mut out);
    out
}

fn is_command(span: &str) -> bool {
    let first = span.split_whitespace().find(|w| !is_env(w)).unwrap_or("");
    // A lone word (`curl`, `cargo`) names a tool, not a command; scripts run without arguments.
    let has_args = span.trim().contains(' ') || first.contains('/');
    COMMAND_WORDS.contains(&first) && has_args && (first != "strata" || span.contains(" -"))
}

/// A `NAME=value` environment prefix.
fn is_env(word: &str) -> bool {
    word.split_once('=')
        .is_some_and(|(k, _)| !k.is_empty() && k.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'))
}

struct Ctx {
    root: PathBuf,
    work: PathBuf,
    addr: String,
    bench: PathBuf,
    ci: String,
}

fn check(ctx: &Ctx, command: &str) -> Result<(), String> {
    if command.starts_with("curl ") {
        return curl(ctx, command);
    }
    // `cd DIR && rest`: the rest names things relative to DIR.
    let (dir, command) = match command.strip_prefix("cd ").and_then(|r| r.split_once("&&")) {
        Some((dir, rest)) => (ctx.root.join(dir.trim()), rest.trim()),
        None => (ctx.root.clone(), command),
    };
    let command = placeholders(command);
    let words: Vec<&str> = command.split_whitespace().collect();
    let env: Vec<&str> = words.iter().copied().take_while(|w| is_env(w)).collect();
    let words = &words[env.len()..];
    match words {
        [".ci/run", ..] => exists(&ctx.root.join(".ci/run")),
        ["bench/run.sh", args @ ..] => {
            exists(&ctx.root.join("bench/run.sh"))?;
            let script = std::fs::read_to_string(ctx.root.join("bench/run.sh")).map_err(|e| e.to_string())?;
            if !script.contains("strata-bench compare \"$@\"") {
                return Err("bench/run.sh no longer hands its flags to `strata-bench compare`".into());
            }
            let args: Vec<&str> = args.iter().copied().filter(|a| *a != "[flags]").collect();
            bench(ctx, &[&["compare"][..], &args].concat())
        }
        ["strata-bench", args @ ..] => bench(ctx, args),
        // A measuring script: it exists and answers `--help` (its flags are not checked).
        [script, ..] if script.starts_with("bench/scripts/") && script.ends_with(".py") => {
            let path = ctx.root.join(script);
            exists(&path)?;
            let out = Command::new("python3").arg(&path).arg("--help").output().map_err(|e| e.to_string())?;
            if !out.status.success() {
                return Err(format!("{script} --help failed: {}", String::from_utf8_lossy(&out.stderr)));
            }
            Ok(())
        }
        ["strata", args @ ..] => strata_flags(args),
        ["cargo", rest @ ..] => cargo(ctx, &dir, &env, rest),
        // The grown corpus a fuzz run writes to: `<fuzz dir>/corpus/<target>` of a real target.
        ["mkdir", "-p", path] => {
            let path = Path::new(path);
            let target = path.file_name().and_then(|n| n.to_str()).ok_or("mkdir without a name")?;
            match path.parent().and_then(Path::parent) {
                Some(fuzz_dir) if path.parent().is_some_and(|p| p.ends_with("corpus")) => {
                    exists(&dir.join(fuzz_dir).join(format!("fuzz_targets/{target}.rs")))
                }
                _ => Err("mkdir -p of something other than a fuzz corpus directory".into()),
            }
        }
        _ => Err("a command this test does not know how to check; teach bench/tests/doc_commands.rs".into()),
    }
}

/// What a `<placeholder>` in a documented command becomes: a plain word, valid as a path or a
/// name.
const PLACEHOLDER: &str = "placeholder";

/// Replaces each `<...>` in `command` by [`PLACEHOLDER`].
fn placeholders(command: &str) -> String {
    let mut out = String::new();
    let mut rest = command;
    while let Some((before, after)) = rest.split_once('<') {
        out.push_str(before);
        match after.split_once('>') {
            Some((_, tail)) => {
                out.push_str(PLACEHOLDER);
                rest = tail;
            }
            None => {
                out.push('<');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn cargo(ctx: &Ctx, dir: &Path, env: &[&str], words: &[&str]) -> Result<(), String> {
    let words: Vec<&str> = words.iter().copied().filter(|w| !w.starts_with('+')).collect();
    let (sub, rest) = words.split_first().ok_or("bare `cargo`")?;
    let (opts, after) = match rest.iter().position(|w| *w == "--") {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    let opt = |name: &str| opts.iter().position(|w| *w == name).and_then(|i| opts.get(i + 1)).copied();
    let package = match opt("-p") {
        None | Some("strata") => dir.to_path_buf(),
        Some(p) => dir.join(p),
    };
    exists(&package.join("Cargo.toml"))?;
    match *sub {
        "fmt" | "clippy" => ci_runs(ctx, &format!("cargo {sub}")),
        "fuzz" => match strip_fuzz_build_flags(opts).as_slice() {
            ["run" | "cmin" | "tmin", "--fuzz-dir", fuzz_dir, target, ..] => {
                exists(&dir.join(fuzz_dir).join(format!("fuzz_targets/{target}.rs")))
            }
            ["run" | "cmin", PLACEHOLDER, ..] => exists(&package.join("fuzz_targets")),
            ["run" | "cmin", target, ..] => exists(&package.join(format!("fuzz_targets/{target}.rs"))),
            _ => Err("unknown cargo fuzz use".into()),
        },
        "bench" => {
            let name = opt("--bench").ok_or("cargo bench without --bench")?;
            exists(&package.join(format!("benches/{name}.rs")))?;
            let manifest = std::fs::read_to_string(package.join("Cargo.toml")).map_err(|e| e.to_string())?;
            if manifest.contains(&format!("name = \"{name}\"")) {
                Ok(())
            } else {
                Err(format!("no [[bench]] {name}"))
            }
        }
        "run" => {
            if let Some(example) = opt("--example") {
                return exists(&package.join(format!("examples/{example}.rs")));
            }
            match opt("-p") {
                None | Some("strata") => strata_flags(after),
                Some("bench") => bench(ctx, after),
                Some(p) => Err(format!("cargo run -p {p}: unknown binary")),
            }
        }
        // The one tool a doc tells to install: the fuzz runner.
        "install" if rest == ["cargo-fuzz"] => Ok(()),
        "test" => {
            if opts.contains(&"--workspace") {
                return ci_runs(ctx, "cargo test --workspace");
            }
            cargo_test(&package, env, opts)
        }
        _ => Err(format!("cargo {sub}: not a subcommand this test checks")),
    }
}

/// `cargo test` options: the test target, the test-name filter and the environment variables
/// must all exist in the package.
fn cargo_test(package: &Path, env: &[&str], opts: &[&str]) -> Result<(), String> {
    let mut target_files = Vec::new();
    let mut filter = None;
    let mut i = 0;
    while let Some(w) = opts.get(i) {
        match *w {
            "-p" | "--features" | "--bin" => i += 1,
            "--test" => {
                let name = opts.get(i + 1).ok_or("--test without a name")?;
                let file = package.join(format!("tests/{name}.rs"));
                let dir = package.join(format!("tests/{name}"));
                if file.is_file() {
                    target_files.push(file);
                } else if dir.join("main.rs").is_file() {
                    target_files.extend(rust_files(&dir));
                } else {
                    return Err(format!("no test target {name} in {}", package.display()));
                }
                i += 1;
            }
            "--lib" => target_files.extend(rust_files(&package.join("src"))),
            w if !w.starts_with('-') => filter = Some(w),
            _ => {}
        }
        i += 1;
    }
    let all = rust_files(package);
    let search = if target_files.is_empty() { &all } else { &target_files };
    let text: String = search.iter().filter_map(|f| std::fs::read_to_string(f).ok()).collect();
    if let Some(filter) = filter {
        let last = filter.rsplit("::").next().unwrap_or(filter);
        let has_fn = text.split("fn ").skip(1).any(|rest| {
            let ident: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            ident.contains(last)
        });
        if !has_fn {
            return Err(format!("no test function matching `{filter}`"));
        }
        for module in filter.split("::").collect::<Vec<_>>().iter().rev().skip(1) {
            let named = text.contains(&format!("mod {module}"))
                || search.iter().any(|f| {
                    f.components()
                        .any(|c| c.as_os_str() == *module || c.as_os_str() == format!("{module}.rs").as_str())
                });
            if !named {
                return Err(format!("no module `{module}` for filter `{filter}`"));
            }
        }
    }
    let package_text: String = all.iter().filter_map(|f| std::fs::read_to_string(f).ok()).collect();
    for var in env {
        let name = var.split('=').next().unwrap_or(var);
        if !package_text.contains(&format!("\"{name}\"")) && !text.contains(&format!("\"{name}\"")) {
            return Err(format!("nothing in {} reads {name}", package.display()));
        }
    }
    Ok(())
}

/// The server's flags, parsed by the server's own parser (`--help` counts as parsed).
fn strata_flags(args: &[&str]) -> Result<(), String> {
    let argv = std::iter::once("strata").chain(args.iter().copied());
    match strata::config::Cli::parse_with_flags(argv) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

/// A `strata-bench` command: `tsbs-gen` runs (in the work directory, where the README tour
/// reads its output); anything else is parsed with `--help` appended. `a|b` in a flag value
/// (the docs' way to show alternatives) checks each alternative.
fn bench(ctx: &Ctx, args: &[&str]) -> Result<(), String> {
    if let Some(i) = args.iter().position(|a| a.contains('|')) {
        for alt in args[i].split('|') {
            let mut v = args.to_vec();
            v[i] = alt;
            bench(ctx, &v)?;
        }
        return Ok(());
    }
    let run_for_real = args.first() == Some(&"tsbs-gen");
    let mut command = Command::new(&ctx.bench);
    command.args(args).current_dir(&ctx.work);
    if !run_for_real {
        command.arg("--help");
    }
    let out = command.output().map_err(|e| e.to_string())?;
    if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
}

/// Runs a curl command against the test's server. It must succeed (HTTP < 400), and a query
/// answer must hold data.
fn curl(ctx: &Ctx, command: &str) -> Result<(), String> {
    let command = command
        .replace("http://127.0.0.1:9201", &format!("http://{}", ctx.addr))
        .replace("http://strata-host:9201", &format!("http://{}", ctx.addr));
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("{command} --fail-with-body -sS"))
        .current_dir(&ctx.work)
        .output()
        .map_err(|e| e.to_string())?;
    let body = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("curl failed: {}{body}", String::from_utf8_lossy(&out.stderr)));
    }
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(&body) {
        if json.get("status").is_some_and(|s| s != "success") {
            return Err(format!("answer: {body}"));
        }
        if json["data"]["result"].as_array().is_some_and(|r| r.is_empty()) {
            return Err(format!("the query returns no data: {body}"));
        }
    }
    Ok(())
}

fn ci_runs(ctx: &Ctx, what: &str) -> Result<(), String> {
    if ctx.ci.contains(what) { Ok(()) } else { Err(format!(".ci/run does not run `{what}`")) }
}

fn exists(path: &Path) -> Result<(), String> {
    if path.exists() { Ok(()) } else { Err(format!("{} does not exist", path.display())) }
}

/// The `.rs` files under `dir`, skipping build output.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if !path.ends_with("target") && !path.ends_with("fuzz") {
                out.extend(rust_files(&path));
            }
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
    out
}

impl Server {
    /// `up` and a counter, every 15 s over the last two hours, as a scraping Prometheus would
    /// remote-write them (sent as line protocol: the series are the same).
    fn write_prometheus_like_data(&self) {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock");
        let now = now.as_millis() as i64;
        let mut body = String::new();
        for (i, t) in (now - 7_200_000..=now).step_by(15_000).enumerate() {
            body.push_str(&format!("up,job=prometheus,instance=localhost:9090 value=1 {t}\n"));
            body.push_str(&format!(
                "prometheus_http_requests_total,job=prometheus,handler=/metrics value={} {t}\n",
                i * 3
            ));
        }
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let answer = agent
            .post(format!("http://{}/write?db=prometheus&precision=ms", self.addr))
            .send(body.as_bytes())
            .expect("write");
        assert_eq!(answer.status(), 204, "line protocol write");
    }
}

/// strata, served from this process on an ephemeral port with its data in a temp directory.
struct Server {
    addr: String,
}

impl Server {
    fn start(dir: &Path) -> Server {
        let port = TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("addr").port();
        let addr = format!("127.0.0.1:{port}");
        let data = dir.join("data");
        // The admin API is on: docs/operations.md shows taking a snapshot.
        let args = [
            "strata",
            "--listen",
            &addr,
            "--data-dir",
            data.to_str().expect("utf-8 path"),
            "--web.enable-admin-api",
        ];
        let (cli, _) = strata::config::Cli::parse_with_flags(args).expect("flags");
        let config = cli.server_config();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
            if let Err(e) = runtime.block_on(strata::server::run(config)) {
                eprintln!("strata stopped: {e}");
            }
        });
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ready = agent.get(format!("http://{addr}/-/ready")).call().is_ok_and(|r| r.status() == 200);
            if ready {
                return Server { addr };
            }
            assert!(Instant::now() < deadline, "strata did not become ready");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `cargo fuzz` arguments without the build flags that take no part in naming the target:
/// `-s <sanitizer>` and `-a` (debug assertions).
fn strip_fuzz_build_flags<'a>(opts: &[&'a str]) -> Vec<&'a str> {
    let mut out = Vec::with_capacity(opts.len());
    let mut i = 0;
    while i < opts.len() {
        match opts[i] {
            "-s" | "--sanitizer" => i += 2,
            "-a" | "--debug-assertions" => i += 1,
            w => {
                out.push(w);
                i += 1;
            }
        }
    }
    out
}

//! Runs Prometheus' PromQL conformance scripts (`shared/promql/testdata/*.test`) against the
//! engine, in place.
//!
//! Prints one line per file and `promqltest: N passed, M failed, K skipped`. Every eval is
//! attempted, including those that need native histograms (classified in
//! `shared/promql/eval_index.tsv`, see INVENTORY.md; their pass count is printed separately), so
//! none is skipped. `promql/testdata/passing.txt` lists the evals known to pass: the test fails
//! if one of them fails; evals not listed may fail without failing the test. `STRATA_BLESS=1` rewrites that list.
//! `STRATA_PROMQLTEST_VERBOSE=1` prints why each eval failed; `STRATA_PROMQLTEST_FILTER=<text>`
//! runs only evals whose `file:line` contains the text. `STRATA_PROMQLTEST_PARALLEL=1` evaluates
//! every selector's series on a pool of worker threads, however few they are (the answers must
//! not change).
//!
//! Like the reference runner, an instant eval is also checked as a range query around its time,
//! and with every selector pinned by `@` at other evaluation times (FORMAT.md §8.2).

mod check;
#[path = "../corpus/mod.rs"]
mod corpus;
mod nhcb;
mod script;
mod values;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use promql::{Engine, EngineOptions, QueryPool};
use storage::mem::MemStore;
use storage::{CounterResetHint, FloatHistogram, HistogramSample, Sample};

use script::Command;
use values::Slot;

fn passing_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/passing.txt")
}

/// The engine configuration Prometheus' own runner uses (FORMAT.md §9).
fn engine() -> Engine {
    let parallel = std::env::var_os("STRATA_PROMQLTEST_PARALLEL").is_some_and(|v| v == "1");
    Engine::new(EngineOptions {
        parallel: parallel.then(|| QueryPool::new(3)),
        parallel_min_series: 0,
        parallel_min_points: 0,
        parallel_min_work: std::time::Duration::ZERO,
        lookback_delta_ms: 5 * 60 * 1000,
        max_samples: 10_000,
        timeout: Duration::from_secs(100),
        default_subquery_step_ms: 60_000,
        experimental_functions: true,
        duration_expressions: true,
        extended_range_selectors: true,
        binop_fill_modifiers: true,
        delayed_name_removal: true,
        use_start_timestamps: true,
        ..EngineOptions::default()
    })
}

/// `file:line` → whether the eval needs native histograms.
fn classification(dir: &Path) -> Result<HashMap<String, bool>, String> {
    let path = dir.join("eval_index.tsv");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut out = HashMap::new();
    for line in text.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.len() < 5 {
            continue;
        }
        out.insert(format!("{}:{}", cols[0], cols[1]), cols[4] == "histogram");
    }
    Ok(out)
}

/// Stores a `load` block: sample `k` at `k * interval`, its start timestamp (if its `@st` line
/// gives one) at that time plus the offset; a start timestamp of 0 means unknown, as in
/// Prometheus. Histogram literals are stored as native histogram samples; with `nhcb`
/// (`load_with_nhcb`) classic histograms are also stored as custom-bucket histograms.
fn load(
    store: &mut MemStore,
    interval_ms: i64,
    nhcb: bool,
    series: &[script::LoadSeries],
) -> Result<(), String> {
    for s in series {
        let mut samples = Vec::new();
        let mut start_timestamps = Vec::new();
        let mut histograms: Vec<HistogramSample> = Vec::new();
        let mut histogram_sts = Vec::new();
        // The previous sample, if it was a histogram (for the counter-reset hint).
        let mut prev: Option<usize> = None;
        for (k, slot) in s.slots.iter().enumerate() {
            let t = k as i64 * interval_ms;
            match slot {
                Slot::Float(v) => {
                    samples.push(Sample::new(t, *v));
                    start_timestamps.push(s.start_offsets.get(k).copied().flatten().map_or(0, |o| t + o));
                    prev = None;
                }
                Slot::Histogram(lit) => {
                    let mut h = lit.h.clone();
                    if !lit.check_hint {
                        h.counter_reset_hint = tsdb_hint(&h, prev.map(|i| &histograms[i].h));
                    }
                    prev = Some(histograms.len());
                    histograms.push(HistogramSample { t, h });
                    histogram_sts.push(s.start_offsets.get(k).copied().flatten().map_or(0, |o| t + o));
                }
                Slot::Omitted => {}
            }
        }
        if !samples.is_empty() {
            store.append_with_start_timestamps(&s.labels, &samples, &start_timestamps);
        }
        if !histograms.is_empty() {
            store.append_histograms_with_start_timestamps(&s.labels, &histograms, &histogram_sts);
        }
    }
    if nhcb {
        for (labels, hs) in nhcb::convert(interval_ms, series)? {
            store.append_histograms(&labels, &hs);
        }
    }
    Ok(())
}

/// The counter-reset hint Prometheus' TSDB gives a histogram sample on the way in and out: a
/// gauge stays a gauge; a counter sample that continues the previous one (a histogram counter
/// with the same layout and no reset) is `not_reset`; any other (the first, one after a reset,
/// a float or a gauge, or a layout change, which all start a new chunk) is `unknown`.
fn tsdb_hint(h: &FloatHistogram, prev: Option<&FloatHistogram>) -> CounterResetHint {
    if h.counter_reset_hint == CounterResetHint::Gauge {
        return CounterResetHint::Gauge;
    }
    match prev {
        Some(p)
            if p.counter_reset_hint != CounterResetHint::Gauge
                && p.schema == h.schema
                && p.zero_threshold == h.zero_threshold
                && p.custom_values == h.custom_values
                && !promql::detect_histogram_reset(h, p) =>
        {
            CounterResetHint::NotReset
        }
        _ => CounterResetHint::Unknown,
    }
}

#[derive(Default)]
struct FileResult {
    passed: Vec<String>,
    failed: Vec<(String, String)>,
    /// Evals skipped; the engine now attempts every eval, so this stays empty.
    skipped: Vec<String>,
    /// Of the passed and failed evals, those INVENTORY.md classes as needing native histograms.
    histogram_passed: usize,
    histogram_failed: usize,
}

fn run_file(path: &Path, name: &str, class: &HashMap<String, bool>, filter: Option<&str>) -> FileResult {
    let mut r = FileResult::default();
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            r.failed.push((format!("{name}:0"), format!("cannot read: {e}")));
            return r;
        }
    };
    let commands = match script::parse_script(&text) {
        Ok(c) => c,
        Err(e) => {
            r.failed.push((format!("{name}:0"), format!("cannot parse script: {e}")));
            return r;
        }
    };
    let engine = engine();
    let mut store = MemStore::new();
    for (_, cmd) in &commands {
        match cmd {
            Command::Clear => store = MemStore::new(),
            Command::Load { interval_ms, nhcb, series } => {
                if let Err(e) = load(&mut store, *interval_ms, *nhcb, series) {
                    r.failed.push((format!("{name}:0"), format!("cannot load: {e}")));
                    return r;
                }
            }
            Command::Eval(e) => {
                let id = format!("{name}:{}", e.line);
                if filter.is_some_and(|f| !id.contains(f)) {
                    continue;
                }
                let histogram = class.get(&id).copied().unwrap_or(false);
                match check::run_eval(&engine, &store, e) {
                    Ok(()) => {
                        r.histogram_passed += usize::from(histogram);
                        r.passed.push(id);
                    }
                    Err(why) => {
                        r.histogram_failed += usize::from(histogram);
                        r.failed.push((id, format!("{}: {why}", e.expr)));
                    }
                }
            }
        }
    }
    r
}

fn main() {
    let Some(dir) = corpus::dir("promqltest (the PromQL conformance corpus)") else { return };
    let testdata = dir.join("testdata");
    let class = match classification(&dir) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("promqltest: {e}");
            std::process::exit(1);
        }
    };
    let filter = std::env::var("STRATA_PROMQLTEST_FILTER").ok();
    let verbose = std::env::var("STRATA_PROMQLTEST_VERBOSE").is_ok_and(|v| v == "1");
    let bless = std::env::var("STRATA_BLESS").is_ok_and(|v| v == "1");
    let known: BTreeSet<String> = std::fs::read_to_string(passing_file())
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect();

    let mut files: Vec<PathBuf> = std::fs::read_dir(&testdata)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "test"));
    files.sort();

    let (mut passed, mut failed, mut skipped) = (BTreeSet::new(), Vec::new(), 0usize);
    let (mut histogram_passed, mut histogram_failed) = (0usize, 0usize);
    for path in &files {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let r = run_file(path, &name, &class, filter.as_deref());
        println!("{name}: {} passed, {} failed, {} skipped", r.passed.len(), r.failed.len(), r.skipped.len());
        if !r.skipped.is_empty() {
            println!("  skipped (needs native histograms): {}", r.skipped.join(" "));
        }
        if verbose {
            for (id, why) in &r.failed {
                println!("  FAIL {id}: {why}");
            }
        }
        skipped += r.skipped.len();
        histogram_passed += r.histogram_passed;
        histogram_failed += r.histogram_failed;
        passed.extend(r.passed);
        failed.extend(r.failed);
    }

    let regressions: Vec<&(String, String)> = failed.iter().filter(|(id, _)| known.contains(id)).collect();
    let newly: Vec<&String> = passed.iter().filter(|id| !known.contains(*id)).collect();
    for (id, why) in &regressions {
        println!("REGRESSION {id}: {why}");
    }
    if !newly.is_empty() {
        println!("newly passing (not yet in promql/testdata/passing.txt): {}", newly.len());
        for id in &newly {
            println!("  {id}");
        }
    }
    println!("native-histogram evals: {histogram_passed} passed, {histogram_failed} failed");
    println!("promqltest: {} passed, {} failed, {} skipped", passed.len(), failed.len(), skipped);

    if bless && filter.is_none() {
        let mut text = String::from(
            "# Evals of shared/promql/testdata known to pass; a failure of any of them fails the test.\n\
             # Regenerate with: STRATA_BLESS=1 cargo test -p promql --test promqltest\n",
        );
        for id in &passed {
            text.push_str(id);
            text.push('\n');
        }
        if let Err(e) = std::fs::write(passing_file(), text) {
            eprintln!("promqltest: cannot write {}: {e}", passing_file().display());
            std::process::exit(1);
        }
        println!("promqltest: wrote {} entries to {}", passed.len(), passing_file().display());
    } else if !regressions.is_empty() {
        eprintln!("promqltest: {} eval(s) listed in passing.txt failed", regressions.len());
        std::process::exit(1);
    }
}

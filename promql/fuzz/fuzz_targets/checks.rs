//! The oracles of the PromQL fuzz targets, shared with `promql/tests/integration/fuzz_corpus.rs`,
//! which replays the named inputs (`fuzz/regressions/`) through them in every `cargo test`. Each
//! input starts with a mode byte (feature flags, grid), then the query text.

use std::sync::OnceLock;
use std::time::Duration;

use promql::parser::{self, ParseOptions};
use promql::{Engine, EngineOptions, Error, Value};
use storage::mem::MemStore;
use storage::{CounterResetHint, FloatHistogram, HistogramSample, Labels, Sample};

/// `promql_parse`: the parser as the query API feeds it (`query`, `match[]`) must never
/// panic, and whatever it accepts must print back as text that parses to a tree printing the
/// same way (the printer's promise, which `@`-pinning and `format_query` rely on).
pub fn parse(data: &[u8]) {
    // The first byte switches the optional language features on or off, one bit each.
    let Some((&mode, rest)) = data.split_first() else { return };
    let Ok(query) = std::str::from_utf8(rest) else { return };
    let opts = ParseOptions {
        experimental_functions: mode & 1 != 0,
        duration_expressions: mode & 2 != 0,
        extended_range_selectors: mode & 4 != 0,
        binop_fill_modifiers: mode & 8 != 0,
        ..ParseOptions::default()
    };
    // Run on a thread with the engine's stack, as the API does: the depth guard is sized for it.
    let query = query.to_owned();
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || parse_and_print(&query, &opts))
        .expect("spawn")
        .join()
        .expect("no panic");
}

fn parse_and_print(query: &str, opts: &ParseOptions) {
    if let Err(e) = parser::parse_metric_selector(query) {
        let _ = e.render(query);
    }
    let _ = parser::parse_metric(query);
    let expr = match parser::parse(query, opts) {
        Ok(expr) => expr,
        Err(e) => {
            let _ = e.render(query);
            return;
        }
    };
    let printed = expr.to_string();
    let again = match parser::parse(&printed, opts) {
        Ok(again) => again,
        Err(e) => panic!("{query:?} printed as {printed:?}, which does not parse: {}", e.render(&printed)),
    };
    assert_eq!(again.value_type(), expr.value_type(), "{query:?} printed as {printed:?}");
    assert_eq!(
        collapse_plus(&again.to_string()),
        collapse_plus(&printed),
        "{query:?} printed as {printed:?}"
    );
}

/// Collapses runs of `+`. Prometheus prints an infinite literal as `+Inf`, and so does strata
/// (`format_query` must match), but `+Inf ^ x` parses back as `+(Inf ^ x)`: each round trip
/// can add a unary plus, which changes nothing but the text (found by this target, the first
/// input was `+Inf ^ste % 3`).
fn collapse_plus(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if !(c == '+' && out.ends_with('+')) {
            out.push(c);
        }
    }
    out
}

/// A few series: two of one metric, a counter with a reset and a stale marker, classic
/// histogram buckets, and native histograms ([`native_histograms`]), all at a 15 s interval
/// from t = 0.
fn store() -> &'static MemStore {
    static STORE: OnceLock<MemStore> = OnceLock::new();
    STORE.get_or_init(|| {
        let mut s = MemStore::new();
        for (name, job, le) in [
            ("x", "a", ""),
            ("x", "b", ""),
            ("y_total", "a", ""),
            ("h_bucket", "a", "1"),
            ("h_bucket", "a", "+Inf"),
        ] {
            let mut pairs = vec![("__name__", name), ("job", job)];
            if !le.is_empty() {
                pairs.push(("le", le));
            }
            let samples: Vec<Sample> = (0..40i64)
                .map(|i| {
                    let v = match name {
                        "y_total" if i == 20 => storage::stale_nan(),
                        "y_total" => ((i % 25) * 10) as f64,
                        "h_bucket" if le == "1" => i as f64,
                        "h_bucket" => (2 * i) as f64,
                        _ => ((i * 3) % 7) as f64 - 2.0,
                    };
                    Sample::new(i * 15_000, v)
                })
                .collect();
            s.append(&Labels::from_pairs(&pairs), &samples);
        }
        native_histograms(&mut s);
        s
    })
}

/// Native histogram series, so the fuzzer reaches the engine's histogram code (a coverage
/// report of the corpus over floats alone left `range_hist.rs` and `float_histogram.rs`
/// unexecuted): `nh{job="a"}`, a counter at schema 0 with a reset at i = 25 and a stale marker
/// at i = 30; `nh{job="b"}`, a gauge at schema 3 with negative and zero buckets;
/// `nhcb{job="a"}`, custom buckets; `mixed{job="a"}`, floats up to i = 19, then histograms.
fn native_histograms(s: &mut MemStore) {
    // Buckets are sparse: empty ones are left out, as the engine keeps them.
    let sparse = |b: Vec<(i32, f64)>| b.into_iter().filter(|&(_, c)| c != 0.0).collect::<Vec<_>>();
    let counter = |n: f64| FloatHistogram {
        schema: 0,
        zero_threshold: 0.001,
        zero_count: n,
        count: 6.0 * n,
        sum: 10.5 * n,
        positive: sparse(vec![(0, n), (1, 2.0 * n), (3, n)]),
        negative: sparse(vec![(2, n)]),
        ..FloatHistogram::default()
    };
    let series = |name: &str| Labels::from_pairs(&[("__name__", name), ("job", "a")]);
    let steps = || (0..40i64).map(|i| (i, i * 15_000));

    let nh: Vec<HistogramSample> = steps()
        .map(|(i, t)| {
            let h = if i == 30 {
                FloatHistogram { sum: storage::stale_nan(), ..FloatHistogram::default() }
            } else {
                counter(if i >= 25 { i - 25 } else { i } as f64)
            };
            HistogramSample { t, h }
        })
        .collect();
    s.append_histograms(&series("nh"), &nh);

    let gauge: Vec<HistogramSample> = steps()
        .map(|(i, t)| {
            let n = ((i * 5) % 11) as f64;
            let h = FloatHistogram {
                counter_reset_hint: CounterResetHint::Gauge,
                schema: 3,
                zero_threshold: 0.5,
                zero_count: 1.0,
                count: 1.0 + 2.0 * n + 1.5,
                sum: n - 3.25,
                positive: sparse(vec![(-2, n), (7, 1.5)]),
                negative: sparse(vec![(1, n)]),
                ..FloatHistogram::default()
            };
            HistogramSample { t, h }
        })
        .collect();
    s.append_histograms(&Labels::from_pairs(&[("__name__", "nh"), ("job", "b")]), &gauge);

    let custom: Vec<HistogramSample> = steps()
        .map(|(i, t)| {
            let n = i as f64;
            let h = FloatHistogram {
                schema: FloatHistogram::CUSTOM_BUCKETS_SCHEMA,
                count: 3.0 * n + 1.0,
                sum: 7.0 * n,
                positive: sparse(vec![(0, n), (1, 2.0 * n), (3, 1.0)]),
                custom_values: vec![1.0, 5.0, 10.0],
                ..FloatHistogram::default()
            };
            HistogramSample { t, h }
        })
        .collect();
    s.append_histograms(&series("nhcb"), &custom);

    let floats: Vec<Sample> = steps().take(20).map(|(i, t)| Sample::new(t, i as f64)).collect();
    s.append(&series("mixed"), &floats);
    let hists: Vec<HistogramSample> =
        steps().skip(20).map(|(i, t)| HistogramSample { t, h: counter(i as f64) }).collect();
    s.append_histograms(&series("mixed"), &hists);
}

/// (start, end, step) of the grids; step 0 means an instant query at `start`.
const GRIDS: [(i64, i64, i64); 8] = [
    (300_000, 300_000, 0),
    (0, 600_000, 30_000),
    (-100_000, 100_000, 7_000),
    (585_000, 585_000, 0),
    (0, 5_000, 1),
    (i64::MAX - 1, i64::MAX - 1, 0),
    (i64::MIN + 1, i64::MIN + 1, 0),
    (i64::MAX - 100_000, i64::MAX - 1, 50_000),
];

/// `promql_eval`: any query text, with the feature flags and the time grid picked by the
/// first byte, over a small in-memory store. Evaluation must never panic (the engine turns a
/// panic on its thread into an error, which counts as a crash here); results must be
/// well-formed. Limits are small (10,000 samples, 250 ms) so the fuzzer explores the language
/// instead of finding slow queries.
pub fn eval(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    let Ok(query) = std::str::from_utf8(rest) else { return };
    let all = mode & 0x80 != 0;
    let engine = Engine::new(EngineOptions {
        experimental_functions: all,
        duration_expressions: all,
        extended_range_selectors: all,
        binop_fill_modifiers: all,
        delayed_name_removal: mode & 0x40 != 0,
        pushdown: mode & 0x20 == 0,
        max_samples: 10_000,
        timeout: Duration::from_millis(250),
        ..EngineOptions::default()
    });
    let (start, end, step) = GRIDS[usize::from(mode & 7)];
    let result = if step == 0 {
        engine.instant(store(), query, start)
    } else {
        engine.range(store(), query, start, end, step)
    };
    let result = match result {
        Ok(r) => r,
        Err(Error::Execution(msg)) if msg.contains("panicked") => panic!("{query:?}: {msg}"),
        Err(_) => return,
    };
    match result.value {
        Value::Matrix(series) if step > 0 => {
            assert!(
                series.windows(2).all(|w| w[0].labels < w[1].labels),
                "{query:?}: unsorted or duplicate series"
            );
            for s in &series {
                let floats: Vec<i64> = s.points.iter().map(|p| p.t).collect();
                let histograms: Vec<i64> = s.histograms.iter().map(|p| p.t).collect();
                assert!(floats.windows(2).all(|w| w[0] < w[1]), "{query:?}: points out of order");
                assert!(histograms.windows(2).all(|w| w[0] < w[1]), "{query:?}: histograms out of order");
                let mut steps = [floats, histograms].concat();
                assert!(!steps.is_empty(), "{query:?}: an empty series");
                steps.sort_unstable();
                // A step has a float or a histogram, never both.
                assert!(
                    steps.windows(2).all(|w| w[0] < w[1]),
                    "{query:?}: a float and a histogram at one step"
                );
                for t in steps {
                    assert!(
                        t >= start && t <= end && (t - start) % step == 0,
                        "{query:?}: point off the grid at {t}"
                    );
                }
            }
        }
        Value::Vector(samples) => {
            assert!(step == 0);
            assert!(samples.iter().all(|s| s.t == start));
        }
        Value::Scalar { t, .. } | Value::String { t, .. } => assert_eq!(t, start),
        Value::Matrix(_) => {}
    }
}

/// `regex_translate`: a matcher's or `label_replace`'s pattern, in Go's syntax, rewritten for
/// the `regex` crate (`storage::matcher::go_syntax`). Never panics, and whatever it accepts
/// compiles, on its own and anchored, except where its docs say the two crates' syntaxes still
/// differ (Unicode class and group names) and at the `regex` crate's own limits (nesting depth,
/// compiled size; the size limit is lowered here so large programs do not slow the search).
pub fn regex_translate(data: &[u8]) {
    let Ok(pattern) = std::str::from_utf8(data) else { return };
    let Ok(translated) = storage::matcher::go_syntax::translate(pattern) else { return };
    let names = ["\\p", "\\P", "(?P<", "(?<"].iter().any(|n| pattern.contains(n));
    for text in [translated.pattern.clone(), format!("^(?s:{})$", translated.pattern)] {
        match regex::RegexBuilder::new(&text).size_limit(1 << 20).build() {
            Ok(_) | Err(regex::Error::CompiledTooBig(_)) => {}
            Err(e) => assert!(
                names || e.to_string().contains("nest limit"),
                "{pattern:?} was accepted as {:?}, which does not compile: {e}",
                translated.pattern
            ),
        }
    }
}

/// A whole hour (2023-11-14T22:00:00Z), so hourly grids line up with the hour-grid blocks.
const BASE: i64 = 1_699_999_200_000;
const HOUR: i64 = 3_600_000;

/// A real `storage::Db` holding six hours of 15 s data, written so that block statistics are
/// used and also must be declined: hours 0-3 flushed into partition files (blocks of at most 60
/// samples on the hour grid, 3 h partitions); hours 3-5 flushed into a second file together with
/// out-of-order samples inside hour 1 (blocks that overlap another file, so their statistics alone
/// are not the answer); hour 5-6 left in the head. Series: `m{s="0".."5", h="a"|"b"}` floats
/// with ties, signed zeros, NaN payloads, infinities, stale markers, gaps and one series that
/// ends early; `c_total{s="0"|"1"}` counters with resets and a stale marker; `nh{s="0"}` a
/// native histogram counter.
///
/// The directory is removed once the data is written: the snapshot reads partition files
/// through memory maps and the head from memory, so queries never open a file, and the fuzzer
/// leaves nothing behind.
fn db_snapshot() -> &'static storage::Snapshot {
    static DB: OnceLock<(storage::Db, storage::Snapshot)> = OnceLock::new();
    &DB.get_or_init(|| {
        let dir = tempfile::Builder::new().prefix("strata-fuzz-pushdown").tempdir().expect("tempdir");
        let mut o = storage::Options::new(dir.path());
        o.partition_ms = 3 * HOUR;
        o.ooo_window_ms = Some(24 * HOUR);
        o.block_samples_max = 60;
        o.wal_sync = storage::WalSync::Interval(Duration::from_secs(3600));
        o.maintenance_interval = Duration::from_secs(24 * 3600);
        o.head_flush_interval = Duration::from_secs(24 * 3600);
        let db = storage::Db::open(o).expect("open");
        let append = |from: i64, to: i64| {
            let mut batch = storage::Batch::new();
            for s in 0..6i64 {
                let labels = m_labels(s);
                let samples: Vec<Sample> = (from..to)
                    .filter(|i| s != 3 || i % 4 == 0)
                    .filter(|&i| s != 4 || i < 3 * 240 + 17)
                    .map(|i| Sample::new(BASE + i * 15_000, float_value(s, i)))
                    .collect();
                batch.push(labels, samples);
            }
            for s in 0..2i64 {
                let labels = Labels::from_pairs(&[("__name__", "c_total"), ("s", &s.to_string())]);
                let samples: Vec<Sample> = (from..to)
                    .map(|i| {
                        let v = match (s, i) {
                            (1, 500) => storage::stale_nan(),
                            // Resets: at an hour's first sample, and inside an hour.
                            (0, _) => (i % 480) as f64 * 1.5,
                            _ => ((i - 333).rem_euclid(700) * 3) as f64,
                        };
                        Sample::new(BASE + i * 15_000, v)
                    })
                    .collect();
                batch.push(labels, samples);
            }
            let hist: Vec<HistogramSample> = (from..to)
                .step_by(4)
                .map(|i| {
                    let n = (i % 300) as f64;
                    let h = FloatHistogram {
                        schema: 0,
                        zero_threshold: 0.001,
                        zero_count: n,
                        count: 4.0 * n,
                        sum: 2.5 * n,
                        positive: if n == 0.0 { vec![] } else { vec![(0, n), (2, 2.0 * n)] },
                        ..FloatHistogram::default()
                    };
                    HistogramSample { t: BASE + i * 15_000, h }
                })
                .collect();
            batch.push_histograms(Labels::from_pairs(&[("__name__", "nh"), ("s", "0")]), hist);
            db.append(&batch).expect("append");
        };
        let per_hour = 240;
        append(0, 3 * per_hour);
        db.flush().expect("flush");
        append(3 * per_hour, 5 * per_hour);
        // Out-of-order samples between hour 1's, for two series: the second file overlaps the first.
        let mut batch = storage::Batch::new();
        for s in [1i64, 2] {
            let labels = m_labels(s);
            let samples = (per_hour + 40..per_hour + 90)
                .map(|i| Sample::new(BASE + i * 15_000 + 7_000, 100.0 - i as f64))
                .collect();
            batch.push(labels, samples);
        }
        db.append(&batch).expect("append");
        db.flush().expect("flush");
        append(5 * per_hour, 6 * per_hour + 1);
        let snap = db.snapshot();
        let _ = dir.close();
        (db, snap)
    })
    .1
}

/// `m{s="<s>", h="a"|"b"}`: even series in group `a`, odd ones in `b`.
fn m_labels(s: i64) -> Labels {
    Labels::from_pairs(&[("__name__", "m"), ("s", &s.to_string()), ("h", if s % 2 == 0 { "a" } else { "b" })])
}

/// `m{s}`'s value at step `i`: mostly small integers (ties across series and blocks), with
/// the values whose folding rules differ: signed zeros, NaNs with payloads, infinities, stale
/// markers, and integers beyond 2^53.
fn float_value(s: i64, i: i64) -> f64 {
    let x = (i * 7 + s * 13) % 97;
    match x {
        0 => -0.0,
        1 => 0.0,
        2 if s != 0 => f64::NAN,
        3 => f64::from_bits(0x7ff8_0000_0000_0abc),
        4 if s == 5 => f64::INFINITY,
        5 if s == 2 => f64::NEG_INFINITY,
        6 => storage::stale_nan(),
        7 => 9_007_199_254_740_993.0,
        _ => ((x * 5 + s) % 11) as f64 - 5.0,
    }
}

/// (start, end, step) over [`db_snapshot`]'s data; step 0 is an instant query at `start`.
const PUSHDOWN_GRIDS: [(i64, i64, i64); 8] = [
    (BASE + 6 * HOUR, BASE + 6 * HOUR, 0),
    (BASE + HOUR, BASE + 6 * HOUR, HOUR),
    (BASE, BASE + 6 * HOUR, 15 * 60_000),
    (BASE + 7 * 60_000, BASE + 6 * HOUR, 10 * 60_000),
    (BASE + 3 * HOUR, BASE + 3 * HOUR, 0),
    (BASE - HOUR, BASE + 7 * HOUR, 37_000),
    (BASE + HOUR / 2, BASE + 11 * HOUR / 2, HOUR),
    (BASE + 5 * HOUR / 2, BASE + 5 * HOUR / 2, 0),
];

/// The answer as text with every float as its bits, so NaN payloads and signed zeros count,
/// and series in the order given.
fn exact(v: &Value) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let p = |out: &mut String, t: i64, v: f64| {
        let _ = write!(out, " {t}:{:x}", v.to_bits());
    };
    match v {
        Value::Scalar { t, v } => p(&mut out, *t, *v),
        Value::String { t, v } => {
            let _ = write!(out, "{t}:{v:?}");
        }
        Value::Vector(samples) => {
            for s in samples {
                let _ = write!(out, "\n{:?}", s.labels);
                p(&mut out, s.t, s.v);
                let _ = write!(out, " {:?}", s.h);
            }
        }
        Value::Matrix(series) => {
            for s in series {
                let _ = write!(out, "\n{:?}", s.labels);
                for point in &s.points {
                    p(&mut out, point.t, point.v);
                }
                for h in &s.histograms {
                    let _ = write!(out, " {}:{:?}", h.t, h.h);
                }
            }
        }
    }
    out
}

/// `promql_pushdown`: any query over a real database whose blocks carry statistics
/// ([`db_snapshot`]), evaluated with push-down (block statistics, per-group extremes, the
/// prefetch of range calls) and without (every sample decoded); the answers must be
/// identical, float bits, series order and annotations included, and so must the errors,
/// except where one way trips the sample limit or the timeout and the other does not (the
/// statistics path loads fewer samples). The first byte picks the grid (low 3 bits) and the
/// optional language features (0x80).
pub fn pushdown(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    let Ok(query) = std::str::from_utf8(rest) else { return };
    let all = mode & 0x80 != 0;
    let engine = |pushdown| {
        Engine::new(EngineOptions {
            experimental_functions: all,
            duration_expressions: all,
            extended_range_selectors: all,
            binop_fill_modifiers: all,
            pushdown,
            max_samples: 200_000,
            timeout: Duration::from_millis(500),
            ..EngineOptions::default()
        })
    };
    let (start, end, step) = PUSHDOWN_GRIDS[usize::from(mode & 7)];
    let snap = db_snapshot();
    let run = |pushdown: bool| {
        if step == 0 {
            engine(pushdown).instant(snap, query, start)
        } else {
            engine(pushdown).range(snap, query, start, end, step)
        }
    };
    let (pushed, decoded) = (run(true), run(false));
    match (pushed, decoded) {
        (Ok(p), Ok(d)) => {
            assert_eq!(exact(&p.value), exact(&d.value), "{query:?} on grid {}", mode & 7);
            assert_eq!(p.warnings, d.warnings, "{query:?}");
            assert_eq!(p.infos, d.infos, "{query:?}");
        }
        // A panic is a crash even when both ways panic alike.
        (Err(Error::Execution(msg)), _) | (_, Err(Error::Execution(msg))) if msg.contains("panicked") => {
            panic!("{query:?}: {msg}")
        }
        (Err(p), Err(d)) if p.to_string() == d.to_string() => {}
        (Err(Error::Timeout(_) | Error::TooManySamples(_)), _)
        | (_, Err(Error::Timeout(_) | Error::TooManySamples(_))) => {}
        (p, d) => panic!("{query:?} on grid {}: push-down {:?}, decoding {:?}", mode & 7, p.err(), d.err()),
    }
}

/// The push-down run's statistics for `query` on grid `grid` (a test of [`db_snapshot`]).
#[allow(dead_code)]
pub fn pushdown_stats(query: &str, grid: usize) -> promql::QueryStats {
    let (start, end, step) = PUSHDOWN_GRIDS[grid];
    let engine = Engine::new(EngineOptions { pushdown: true, ..EngineOptions::default() });
    engine.range(db_snapshot(), query, start, end, step).expect("query").stats
}

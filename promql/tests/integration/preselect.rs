//! A querier that asks for it (`Querier::selects_ahead`, a query node) gets every selection of
//! a query before the query's first read, and nothing else changes: the same answers, the same
//! statistics, and no selection made twice.

use std::sync::{Arc, Mutex};

use promql::{Engine, EngineOptions, QueryPool, QueryResult};
use storage::mem::MemStore;
use storage::{Labels, Sample};

use super::common::{Call, Watched, bits};

const HOUR: i64 = 3_600_000;

/// A store whose calls are logged in order, `S` for a selection and `R` for a read.
type Logged = Watched<Box<dyn Fn(Call) + Send + Sync>>;

/// `x{i="0"}`... and `y{...}`, 4 series each, a sample a minute over three hours; its log.
fn logged(ahead: bool) -> (Logged, Arc<Mutex<String>>) {
    let mut inner = MemStore::new();
    for (k, name) in ["x", "y"].into_iter().enumerate() {
        for i in 0..4 {
            let samples: Vec<Sample> =
                (0..=180).map(|m| Sample::new(m * 60_000, ((m * (i + 3) + k as i64) % 17) as f64)).collect();
            inner.append(&Labels::from_pairs(&[("__name__", name), ("i", &i.to_string())]), &samples);
        }
    }
    let log = Arc::new(Mutex::new(String::new()));
    let to = Arc::clone(&log);
    let watch: Box<dyn Fn(Call) + Send + Sync> =
        Box::new(move |c| to.lock().unwrap().push(if c == Call::Select { 'S' } else { 'R' }));
    (Watched { inner, watch, ahead }, log)
}

/// Queries of several selectors of every kind the engine reaches over the query's grid.
const QUERIES: &[&str] = &[
    // TSBS single-groupby: aggregations storage answers per group, one after another.
    r#"label_replace(max(max_over_time(x{i=~"1|2"}[1m])), "m", "x", "", "") or label_replace(max(max_over_time(y{i=~"1|2"}[1m])), "m", "y", "", "")"#,
    "x + on(i) y",
    "sum(rate(x[5m])) / sum(rate(y[5m]))",
    "x offset 5m > bool y",
    "avg_over_time(x[10m]) - min_over_time(y[10m] offset 1m)",
    "max_over_time(x[30m] @ 7200) + on(i) y",
];

fn run(engine: &Engine, ahead: bool, query: &str, instant: bool) -> (String, QueryResult) {
    let (store, log) = logged(ahead);
    let r = if instant {
        engine.instant(&store, query, 2 * HOUR)
    } else {
        engine.range(&store, query, HOUR, 3 * HOUR, 60_000)
    };
    let r = r.unwrap_or_else(|e| panic!("{query}: {e}"));
    let log = log.lock().unwrap().clone();
    (log, r)
}

#[test]
fn selections_come_first_and_change_nothing() {
    // Inline evaluation (on the server's runtime threads, for small queries) too.
    for (threads, inline_points_max) in [(None, None), (Some(2), None), (None, Some(1 << 20))] {
        let engine = Engine::new(EngineOptions {
            parallel: threads.map(QueryPool::new),
            inline_points_max,
            ..EngineOptions::default()
        });
        for &query in QUERIES {
            for instant in [false, true] {
                let what =
                    format!("{query} (threads {threads:?}, inline {inline_points_max:?}, instant {instant})");
                let (plain, want) = run(&engine, false, query, instant);
                let (ahead, got) = run(&engine, true, query, instant);
                assert_eq!(bits(&got), bits(&want), "{what}");
                assert_eq!(got.warnings, want.warnings, "{what}");
                assert_eq!(got.stats.series_selected, want.stats.series_selected, "{what}");
                assert_eq!(got.stats.samples_read, want.stats.samples_read, "{what}");
                assert_eq!(
                    plain.matches('S').count(),
                    ahead.matches('S').count(),
                    "{what}: {plain} vs {ahead}"
                );
                assert_eq!(
                    plain.matches('R').count(),
                    ahead.matches('R').count(),
                    "{what}: {plain} vs {ahead}"
                );
                assert!(!ahead.trim_start_matches('S').contains('S'), "{what}: {ahead}");
                assert!(ahead.starts_with("SS"), "{what}: {ahead}");
            }
        }
    }
}

/// On a query node, a query of two selectors whose groups storage answers (and so reads
/// between the selections) fetches from a cold file as often as a query of one: the file's
/// opening, the series chunks of both selections at once, then the blocks of both at once.
#[test]
fn a_query_node_fetches_for_all_selectors_at_once() {
    use std::time::Duration;
    use storage::{Batch, BucketOptions, Db, Options};
    let root = tempfile::tempdir().unwrap();
    let bucket = |prefix: &str| BucketOptions {
        url: format!("file://{}/{prefix}", root.path().display()),
        delete_delay: Duration::from_secs(3600),
        ..BucketOptions::default()
    };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    // Two hours of data from four hours ago, moved back where they would cross midnight UTC:
    // partitions are days, and a second file would add to the requests counted.
    let mut base = (now / HOUR - 4) * HOUR;
    if (base + 2 * HOUR) / (24 * HOUR) != base / (24 * HOUR) {
        base -= 2 * HOUR;
    }
    let dw = tempfile::tempdir().unwrap();
    let w = Db::open(Options { bucket: Some(bucket("w")), ..Options::new(dw.path()) }).unwrap();
    let mut b = Batch::new();
    let mut x = 1u64;
    // Enough series that the series chunks of `a` and `b` lie outside the file's tail, which
    // opening reads (`c`'s are in it), and large random integers, so that blocks lie outside.
    for name in ["a", "b", "c"] {
        for i in 0..4000 {
            let samples = (1..=120).map(|k| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                Sample::new(base + k * 60_000, (x >> 24) as f64)
            });
            b.push(Labels::from_pairs(&[("__name__", name), ("i", &i.to_string())]), samples.collect());
        }
    }
    w.append(&b).unwrap();
    w.flush().unwrap();
    assert!(w.wait_mirrored(Duration::from_secs(10)));
    let engine = Engine::new(EngineOptions::default());
    let one = r#"max(max_over_time(a{i=~"1|2|3"}[1m]))"#;
    let two = format!(r#"{one} or label_replace(max(max_over_time(b{{i=~"1|2|3"}}[1m])), "x", "b", "", "")"#);
    let cold_reads = |query: &str| {
        let dq = tempfile::tempdir().unwrap();
        let q = Db::open(Options {
            bucket: Some(bucket("")),
            follow: Some(Duration::from_secs(3600)),
            ..Options::new(dq.path())
        })
        .unwrap();
        let snap = q.snapshot();
        let r = engine.range(&snap, query, base + HOUR, base + 2 * HOUR, 60_000).unwrap();
        assert!(!bits(&r).is_empty(), "{query}");
        let (reads, _) = snap.bucket_reads().get();
        drop(snap);
        q.close().unwrap();
        reads
    };
    let (reads_one, reads_two) = (cold_reads(one), cold_reads(&two));
    // Header and tail (two requests at once, the file being larger than 1 MiB), series chunks,
    // blocks.
    assert_eq!(reads_one, 4, "opening, series chunks, blocks");
    assert_eq!(reads_two, reads_one, "the second selector's chunks and blocks come with the first's");
    w.close().unwrap();
}

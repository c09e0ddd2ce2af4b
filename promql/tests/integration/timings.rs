//! The phase timings of `QueryStats` (`select_time`, `read_time`) on every path that reads
//! storage: a store that sleeps a known time in each call gives them a floor, so the checks
//! hold on any clock and any load (a sleep lasts at least what it was asked for).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use promql::{Engine, EngineOptions, QueryPool, QueryStats};
use storage::mem::MemStore;
use storage::{Labels, Sample};

use super::common::{Call, Watched};

/// What a [`Slow`] store sleeps in each `select`.
const SELECT_DELAY: Duration = Duration::from_millis(2);
/// What a [`Slow`] store sleeps in each call that reads samples.
const READ_DELAY: Duration = Duration::from_millis(1);

const HOUR: i64 = 3_600_000;

/// The calls a [`Slow`] store made.
#[derive(Default)]
struct Counts {
    selects: AtomicU32,
    reads: AtomicU32,
    window_calls: AtomicU32,
    group_calls: AtomicU32,
}

/// A [`MemStore`] that sleeps in every call and counts them ([`Watched`]: push-down's calls
/// answered by decoding, so the engine takes those paths too).
struct Slow {
    store: Watched<Box<dyn Fn(Call) + Send + Sync>>,
    counts: Arc<Counts>,
}

impl Slow {
    /// `n` series `x{i="0"}`... and as many `y{...}`, a sample a minute over two hours.
    fn new(n: usize) -> Self {
        let mut inner = MemStore::new();
        let samples: Vec<Sample> = (0..=120).map(|m| Sample::new(m * 60_000, m as f64)).collect();
        for name in ["x", "y"] {
            for i in 0..n {
                inner.append(&Labels::from_pairs(&[("__name__", name), ("i", &i.to_string())]), &samples);
            }
        }
        let counts = Arc::new(Counts::default());
        let c = Arc::clone(&counts);
        let watch: Box<dyn Fn(Call) + Send + Sync> = Box::new(move |call| {
            if call == Call::Select {
                c.selects.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(SELECT_DELAY);
                return;
            }
            match call {
                Call::Window => c.window_calls.fetch_add(1, Ordering::Relaxed),
                Call::Group => c.group_calls.fetch_add(1, Ordering::Relaxed),
                _ => 0,
            };
            c.reads.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(READ_DELAY);
        });
        Slow { store: Watched { inner, watch, ahead: false }, counts }
    }

    /// Checks `stats` against the calls made: at least their sleeps, and some of each kind.
    fn check(&self, query: &str, stats: &QueryStats) {
        let c = &self.counts;
        let (selects, reads) = (c.selects.load(Ordering::Relaxed), c.reads.load(Ordering::Relaxed));
        assert!(selects > 0 && reads > 0, "{query}: {selects} selects, {reads} reads");
        assert!(stats.select_time >= SELECT_DELAY * selects, "{query}: {selects} selects: {stats:?}");
        assert!(stats.read_time >= READ_DELAY * reads, "{query}: {reads} reads: {stats:?}");
    }
}

/// An engine that sends every per-series loop to a pool of `threads` (none: sequential).
fn engine(threads: Option<usize>) -> Engine {
    Engine::new(EngineOptions {
        parallel: threads.map(QueryPool::new),
        parallel_min_series: 0,
        parallel_min_points: 0,
        parallel_min_work: Duration::ZERO,
        ..EngineOptions::default()
    })
}

/// Runs `query` as a range query over the second hour, hourly steps, on a fresh store of `n`
/// series per name; the store is returned to look at its calls.
fn run(engine: &Engine, query: &str, n: usize) -> (Slow, QueryStats) {
    let store = Slow::new(n);
    let r =
        engine.range(&store.store, query, HOUR, 2 * HOUR, HOUR).unwrap_or_else(|e| panic!("{query}: {e}"));
    (store, r.stats)
}

#[test]
fn selection_and_reads_are_timed_on_one_thread() {
    for query in ["x", "sum(rate(x[5m]))", "x * on(i) y", "count_over_time(x[1h]) + 1"] {
        let (store, stats) = run(&engine(None), query, 3);
        store.check(query, &stats);
        // One thread did everything: its wall time holds both phases.
        assert!(stats.eval_time >= stats.select_time + stats.read_time, "{query}: {stats:?}");
    }
}

#[test]
fn push_down_scans_are_read_time() {
    let (store, stats) = run(&engine(None), "max_over_time(x[1h])", 3);
    store.check("max_over_time", &stats);
    assert_eq!(store.counts.window_calls.load(Ordering::Relaxed), 3, "one scan per series");

    // One group of 16 series, answered per piece of the group.
    let (store, stats) = run(&engine(None), "max(max_over_time(x[1h]))", 16);
    store.check("max(max_over_time)", &stats);
    assert!(store.counts.group_calls.load(Ordering::Relaxed) > 0, "{stats:?}");
}

#[test]
fn read_time_sums_the_pool_threads() {
    let pooled = engine(Some(2));
    // A selector's loop, range calls prefetched as one loop, and a group's pieces: each piece
    // of work is timed on the thread that did it, and every one is added up.
    for query in [
        "x",
        "rate(x[5m])",
        "max_over_time(x[1h]) or min_over_time(y[1h])",
        "irate(x[5m]) / deriv(y[5m])",
        "max(max_over_time(x[1h]))",
    ] {
        let (store, stats) = run(&pooled, query, 16);
        store.check(query, &stats);
    }
}

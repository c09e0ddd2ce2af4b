//! The worker threads that evaluate the per-series loops of large queries in parallel.
//!
//! A query is evaluated on its own thread (`engine.rs`); when a selector matches many series,
//! the per-series work under it (reading samples, sliding range functions across the steps)
//! is split into chunks that the threads of one [`QueryPool`] take. The pool is shared by every
//! query of the server, so however many queries run at once, at most `threads` of them compute
//! in parallel on top of their own evaluation threads: the rest of the machine stays free for
//! ingest. Results are merged in series order, so they are the same bits as the sequential loop's
//! (see `eval/parallel.rs`).

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// Stack size of a worker thread. Workers run per-series loops only, never the recursion over
/// the syntax tree, so the default of a few MiB would do; this leaves headroom for storage's
/// decoders in unoptimised builds.
const WORKER_STACK_BYTES: usize = 8 * 1024 * 1024;

/// A pool of query worker threads, shared by all queries that hold a clone of it.
///
/// The threads are started on first use, so an engine configured with a pool costs nothing
/// until a query is large enough to use it. If they cannot be started, queries run
/// sequentially, which gives the same answers.
#[derive(Clone)]
pub struct QueryPool {
    inner: Arc<Inner>,
}

struct Inner {
    threads: usize,
    pool: OnceLock<Option<rayon::ThreadPool>>,
    /// Parallel loops running now, over all queries.
    active: AtomicUsize,
}

/// A parallel loop admitted by [`QueryPool::enter`]; leaving it frees its place.
pub(crate) struct Entered<'p>(&'p QueryPool);

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        self.0.inner.active.fetch_sub(1, Ordering::AcqRel);
    }
}

impl QueryPool {
    /// A pool of `threads` workers (at least one).
    pub fn new(threads: usize) -> Self {
        QueryPool {
            inner: Arc::new(Inner {
                threads: threads.max(1),
                pool: OnceLock::new(),
                active: AtomicUsize::new(0),
            }),
        }
    }

    /// A pool with one worker per core (`std::thread::available_parallelism`).
    pub fn per_core() -> Self {
        QueryPool::new(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// The number of worker threads.
    pub fn threads(&self) -> usize {
        self.inner.threads
    }

    /// Most parallel loops at once: half the threads (at least one), so each gets about two.
    fn max_active(&self) -> usize {
        (self.inner.threads / 2).max(1)
    }

    /// Admits one more parallel loop unless [`QueryPool::max_active`] are running. A loop
    /// refused runs on its query's own thread: when the pool is taken, the cores are busy with
    /// other queries, and splitting more work would only add hand-offs, not speed.
    pub(crate) fn enter(&self) -> Option<Entered<'_>> {
        let before = self.inner.active.fetch_add(1, Ordering::AcqRel);
        let entered = Entered(self);
        (before < self.max_active()).then_some(entered)
    }

    /// Runs `f` on every part and returns the outputs in part order: on the pool's threads
    /// and this one at once when a parallel loop may start ([`QueryPool::enter`]), otherwise on
    /// this thread. For work outside evaluation that splits into independent parts, such as
    /// writing a large answer.
    pub fn map<P: Sync, T: Send>(&self, parts: &[P], f: impl Fn(&P) -> T + Sync) -> Vec<T> {
        let here = || parts.iter().map(&f).collect();
        if parts.len() < 2 {
            return here();
        }
        let Some(_entered) = self.enter() else { return here() };
        let Some(pool) = self.get() else { return here() };
        let outputs = run_chunks(pool, parts, || (), |(), p| f(p));
        // `None` only for a part a panic left undone, and the panic unwinds out of
        // `run_chunks`: computing it here is never reached, but needs no `expect`.
        outputs.into_iter().zip(parts).map(|(out, p)| out.unwrap_or_else(|| f(p))).collect()
    }

    /// The started pool, or `None` if its threads could not be started.
    pub(crate) fn get(&self) -> Option<&rayon::ThreadPool> {
        self.inner
            .pool
            .get_or_init(|| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(self.inner.threads)
                    .stack_size(WORKER_STACK_BYTES)
                    .thread_name(|i| format!("promql-worker-{i}"))
                    .build()
                    .ok()
            })
            .as_ref()
    }
}

/// Runs `f` on every chunk, on `pool`'s threads and the calling thread at once, each taking
/// the next chunk not yet taken until none is left, with its own state from `state` kept
/// across its chunks; returns the outputs in chunk order (`None` for a chunk not computed,
/// which only a panic, unwinding out of here, could cause).
pub(crate) fn run_chunks<C, S, T>(
    pool: &rayon::ThreadPool,
    chunks: &[C],
    state: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, &C) -> T + Sync,
) -> Vec<Option<T>>
where
    C: Sync,
    T: Send,
{
    let slots: Vec<Mutex<Option<T>>> = chunks.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let work = || {
        let mut s = state();
        loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            let Some(chunk) = chunks.get(k) else { break };
            let out = f(&mut s, chunk);
            *slots[k].lock().unwrap_or_else(PoisonError::into_inner) = Some(out);
        }
    };
    // The calling thread works too, from the start: handing the whole loop to the pool and
    // sleeping until it is done cost two thread wake-ups per loop, which on a small loop (TSBS
    // cpu-max-all-8: ten selectors of eight series) ate the gain of a second core. The pool's
    // threads join as soon as they wake.
    pool.in_place_scope(|scope| {
        for _ in 1..pool.current_num_threads() {
            scope.spawn(|_| work());
        }
        work();
    });
    slots.into_iter().map(|m| m.into_inner().unwrap_or_else(PoisonError::into_inner)).collect()
}

impl fmt::Debug for QueryPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueryPool").field("threads", &self.inner.threads).finish()
    }
}

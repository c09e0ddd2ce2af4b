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
use std::sync::{Arc, OnceLock};

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
}

impl QueryPool {
    /// A pool of `threads` workers (at least one).
    pub fn new(threads: usize) -> Self {
        QueryPool { inner: Arc::new(Inner { threads: threads.max(1), pool: OnceLock::new() }) }
    }

    /// A pool with one worker per core (`std::thread::available_parallelism`).
    pub fn per_core() -> Self {
        QueryPool::new(std::thread::available_parallelism().map_or(1, |n| n.get()))
    }

    /// The number of worker threads.
    pub fn threads(&self) -> usize {
        self.inner.threads
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

impl fmt::Debug for QueryPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueryPool").field("threads", &self.inner.threads).finish()
    }
}

//! The server-wide side of PromQL evaluation: the engine options set by flags and the gate
//! that bounds how many queries evaluate at once.
//!
//! Prometheus admits `--query.max-concurrency` queries and makes the rest wait in a queue
//! (its "active query tracker"); the wait counts against the query's timeout, and a query
//! whose time runs out while waiting fails with "query timed out in query queue". strata
//! does the same with a semaphore, so a burst of dashboard loads queues up instead of
//! oversubscribing the CPU.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use promql::{EngineOptions, ParseCache, QueryPool};
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::error::ApiError;

/// Prometheus' default `--query.max-concurrency`.
pub const DEFAULT_MAX_CONCURRENCY: usize = 20;

/// The query settings the server is started with (from the `--query.*` and `--enable-feature`
/// flags).
#[derive(Debug, Clone)]
pub struct QueryConfig {
    /// Engine options: timeout, sample limit, lookback delta, language features.
    pub options: EngineOptions,
    /// Most queries evaluating at once; more wait.
    pub max_concurrency: usize,
    /// Worker threads shared by all queries for the per-series loops of large selectors:
    /// 0 is one per core, 1 keeps every query on its own thread (`--query.max-parallelism`).
    pub max_parallelism: usize,
    /// Largest encoded answer of one query (`--query.max-response-bytes`); 0: unlimited.
    pub max_response_bytes: usize,
    /// Queries estimated below this many points run on the async runtime's own threads
    /// (`--query.inline-max-points`, see [`QueryService::try_inline`]); 0: never.
    pub inline_max_points: usize,
}

/// `--query.inline-max-points`' default: about half a millisecond of evaluation, what a
/// dashboard panel of a few series over hours needs, long enough to save the hand-off to a
/// blocking thread and short enough not to hold up other requests on the runtime thread.
pub const DEFAULT_INLINE_MAX_POINTS: usize = 50_000;

/// `--query.max-response-bytes`' default: 1 GiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 1 << 30;

impl Default for QueryConfig {
    fn default() -> Self {
        QueryConfig {
            options: EngineOptions::default(),
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            max_parallelism: 0,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            inline_max_points: DEFAULT_INLINE_MAX_POINTS,
        }
    }
}

impl QueryConfig {
    /// The query worker pool `max_parallelism` asks for, if any. Its threads start with the
    /// first query large enough to use them.
    pub fn pool(&self) -> Option<QueryPool> {
        match self.max_parallelism {
            0 => Some(QueryPool::per_core()).filter(|p| p.threads() > 1),
            1 => None,
            n => Some(QueryPool::new(n)),
        }
    }
}

/// Engine options plus the concurrency gate, shared by every query handler.
#[derive(Debug)]
pub struct QueryService {
    options: EngineOptions,
    gate: Semaphore,
    max_concurrency: usize,
    max_response_bytes: usize,
    inline_max_points: usize,
    /// Queries evaluating on async runtime threads right now.
    inline_running: AtomicUsize,
}

impl Default for QueryService {
    fn default() -> Self {
        QueryService::new(&QueryConfig::default())
    }
}

/// A query's turn to evaluate on an async runtime thread ([`QueryService::try_inline`]),
/// given back when dropped.
#[derive(Debug)]
pub struct InlineSlot<'a> {
    running: &'a AtomicUsize,
    /// The `EngineOptions::inline_points_max` to evaluate with.
    pub max_points: usize,
}

impl Drop for InlineSlot<'_> {
    fn drop(&mut self) {
        self.running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One query's admission: the permit held while it evaluates and how long it waited for it.
#[derive(Debug)]
pub struct Admission<'a> {
    _permit: SemaphorePermit<'a>,
    /// Time spent waiting for a free slot (Prometheus' `execQueueTime`).
    pub queued: Duration,
}

impl QueryService {
    /// A service evaluating with `config.options`, at most `config.max_concurrency` queries at
    /// a time (at least one), with the worker pool of `config.max_parallelism` unless the
    /// options already name one.
    pub fn new(config: &QueryConfig) -> Self {
        let max_concurrency = config.max_concurrency.max(1);
        let mut options = config.options.clone();
        if options.parallel.is_none() {
            options.parallel = config.pool();
        }
        if options.parse_cache.is_none() {
            options.parse_cache = Some(ParseCache::new());
        }
        QueryService {
            options,
            gate: Semaphore::new(max_concurrency),
            max_concurrency,
            max_response_bytes: config.max_response_bytes,
            inline_max_points: config.inline_max_points,
            inline_running: AtomicUsize::new(0),
        }
    }

    /// A slot to evaluate a query on the calling async runtime thread, with
    /// `EngineOptions::inline_points_max` set to stop it early if it is not small: `None` when
    /// inline evaluation is off, when the runtime has a single thread, or when as many queries
    /// as it has threads but one already run inline, so one thread always stays free to serve
    /// ingest and other requests.
    pub fn try_inline(&self) -> Option<InlineSlot<'_>> {
        if self.inline_max_points == 0 {
            return None;
        }
        let threads = tokio::runtime::Handle::try_current().map_or(1, |h| h.metrics().num_workers());
        let spare = threads.saturating_sub(1);
        self.inline_running
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < spare).then_some(n + 1))
            .ok()?;
        Some(InlineSlot { running: &self.inline_running, max_points: self.inline_max_points })
    }

    /// The server's engine options (`--query.*` flags and enabled features).
    pub fn options(&self) -> &EngineOptions {
        &self.options
    }

    /// Largest encoded answer of one query; 0: unlimited.
    pub fn max_response_bytes(&self) -> usize {
        self.max_response_bytes
    }

    /// How many queries may evaluate at once.
    pub fn max_concurrency(&self) -> usize {
        self.max_concurrency
    }

    /// Waits for a free evaluation slot until `deadline`.
    pub async fn admit(&self, deadline: Instant) -> Result<Admission<'_>, ApiError> {
        let started = Instant::now();
        let timed_out = || ApiError::Timeout("query timed out in query queue".into());
        if deadline <= started {
            return Err(timed_out());
        }
        let permit = tokio::time::timeout_at(deadline.into(), self.gate.acquire())
            .await
            .map_err(|_| timed_out())?
            // The semaphore is never closed.
            .map_err(|_| ApiError::Unavailable("the query gate is closed; strata is stopping".into()))?;
        Ok(Admission { _permit: permit, queued: started.elapsed() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn excess_queries_wait_and_time_out_in_the_queue() {
        let service = QueryService::new(&QueryConfig { max_concurrency: 1, ..QueryConfig::default() });
        let far = Instant::now() + Duration::from_secs(3600);
        let first = service.admit(far).await.unwrap();
        // The only slot is taken and stays taken: the second query gives up at its deadline.
        let err = service.admit(Instant::now() + Duration::from_millis(20)).await.unwrap_err();
        assert_eq!(err.error_type(), "timeout");
        assert_eq!(err.to_string(), "query timed out in query queue");
        drop(first);
        assert!(service.admit(far).await.is_ok());
    }

    #[test]
    fn max_parallelism_sizes_the_shared_pool() {
        let pool = |n| QueryConfig { max_parallelism: n, ..QueryConfig::default() }.pool();
        assert!(pool(1).is_none());
        assert_eq!(pool(3).map(|p| p.threads()), Some(3));
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(pool(0).map_or(1, |p| p.threads()), cores);
        let service = QueryService::new(&QueryConfig { max_parallelism: 5, ..QueryConfig::default() });
        assert_eq!(service.options().parallel.as_ref().map(|p| p.threads()), Some(5));
    }

    #[test]
    fn at_least_one_query_is_admitted() {
        assert_eq!(
            QueryService::new(&QueryConfig { max_concurrency: 0, ..QueryConfig::default() })
                .max_concurrency(),
            1
        );
    }
}

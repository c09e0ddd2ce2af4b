//! Per-series loops, sequential or split across the query pool, with the same result.
//!
//! Selectors and range functions over selectors do one independent piece of work per series:
//! read its samples, compute its points. [`Evaluator::map_series`] runs such a loop. The work
//! of one series sees only a [`SeriesCtx`]: the querier, the options, the deadline, and its own
//! counters and annotations, never the evaluator. When the loop is large enough (see
//! `EngineOptions::parallel_min_series`; the first series is evaluated on the calling thread and
//! timed, see `EngineOptions::parallel_min_work`) and the pool is not already taken by other
//! queries' loops (`QueryPool::enter`), the calling thread and the pool's threads take
//! contiguous chunks of the remaining series, each chunk with its own context, until none is
//! left (the caller starts at once and the pool's threads join as they wake); the evaluator
//! then takes the chunks back in series order, adds their counters, merges their annotations,
//! and counts each series' points against `max_samples` in series order.
//!
//! What stays the same as the sequential loop, bit for bit:
//! - the series and their order, and every point (the per-series code is the same function);
//! - the annotations (merged in series order: the same messages, the same positions);
//! - the statistics (`samples_read`, blocks and samples decoded: sums; `peak_samples`: points
//!   are counted in series order at the same moments relative to each other);
//! - the error: the first error in series order wins, and `max_samples` trips at the same
//!   series as sequentially, since points are counted in that order.
//!
//! What can differ: work done before an error is noticed. Chunks of one round are computed
//! before they are counted, so a query over the sample limit may hold up to one round of
//! results beyond it for a moment before failing (a round is sized from the limit's headroom so
//! this stays small: see [`round_len`]), and a failing series does not stop other chunks of its
//! round. The deadline is checked by every worker, each on its own count of calls. And the
//! timings: `read_time` adds up each chunk's time reading storage on whichever thread computed
//! it: thread time, which with the pool may exceed the wall time the loop took.

use std::time::{Duration, Instant};

use storage::Querier;
use storage::window_agg::ScanStats;

use super::{Evaluator, Series};
use crate::annotations::Annotations;
use crate::error::{Error, Result};
use crate::options::EngineOptions;
use crate::pool::{Entered, run_chunks};

/// Most series in one round of parallel work: bounds what is computed before being counted
/// against the sample limit, and the chunks' result buffers.
const MAX_ROUND: usize = 4096;

/// Chunks per worker thread in one round, so a slow chunk (series with more data) does not
/// leave the other threads idle at the end of the round.
const CHUNKS_PER_THREAD: usize = 4;

/// Read access and per-worker bookkeeping for the work on one series.
pub(crate) struct SeriesCtx<'a> {
    pub querier: &'a dyn Querier,
    pub opts: &'a EngineOptions,
    deadline: Instant,
    ticks: u32,
    /// Samples read from storage (the query's `samples_read`).
    pub samples_read: u64,
    /// What push-down cost.
    pub scan: ScanStats,
    /// Time reading from storage on this context's thread (the query's `read_time`).
    pub read_time: Duration,
    /// Annotations raised, in series order.
    pub annotations: Annotations,
}

impl<'a> SeriesCtx<'a> {
    pub(crate) fn new(querier: &'a dyn Querier, opts: &'a EngineOptions, deadline: Instant) -> Self {
        SeriesCtx {
            querier,
            opts,
            deadline,
            ticks: 0,
            samples_read: 0,
            scan: ScanStats::default(),
            read_time: Duration::ZERO,
            annotations: Annotations::default(),
        }
    }

    /// Returns an error once the query's time is up; reads the clock every 64 calls.
    pub fn check_deadline(&mut self) -> Result<()> {
        self.ticks = self.ticks.wrapping_add(1);
        if self.ticks.is_multiple_of(64) && Instant::now() > self.deadline {
            return Err(Error::Timeout("expression evaluation"));
        }
        Ok(())
    }
}

/// What one chunk of series produced.
struct Part {
    samples_read: u64,
    scan: ScanStats,
    read_time: Duration,
    annotations: Annotations,
    /// Per series of the chunk up to the first error: its result, if it has points.
    results: Vec<Option<Series>>,
    error: Option<Error>,
}

/// Series in the next round: as many as the sample limit's headroom allows at `est` points
/// each, plus one so that a query over the limit trips in this round, but at least one per
/// thread and at most [`MAX_ROUND`].
fn round_len(headroom: usize, est: usize, threads: usize) -> usize {
    (headroom / est.max(1)).saturating_add(1).clamp(threads, MAX_ROUND.max(threads))
}

impl<'a> Evaluator<'a> {
    /// A fresh context for per-series work of this query.
    pub(crate) fn series_ctx(&self) -> SeriesCtx<'a> {
        SeriesCtx::new(self.querier, self.opts, self.deadline)
    }

    /// Adds what per-series work reported: its counters, its read time and its annotations.
    pub(crate) fn absorb(
        &mut self,
        samples_read: u64,
        scan: &ScanStats,
        read_time: Duration,
        annotations: Annotations,
    ) {
        self.samples_read += samples_read;
        self.scan.add(scan);
        self.read_time += read_time;
        self.annotations.merge(annotations);
    }

    /// Whether a loop over `n` series of about `est` points each is worth the pool and the
    /// pool has room for it: then the pool, and the admission to hold while using it.
    pub(crate) fn pool_for(&self, n: usize, est: usize) -> Option<(&'a rayon::ThreadPool, Entered<'a>)> {
        let opts: &'a EngineOptions = self.opts;
        let pool = opts.parallel.as_ref()?;
        if n < 2 || pool.threads() < 2 {
            return None;
        }
        if n < opts.parallel_min_series && n.saturating_mul(est) < opts.parallel_min_points {
            return None;
        }
        let entered = pool.enter()?;
        Some((pool.get()?, entered))
    }

    /// Whether `rest` more series, each taking as long as the one timed since `began`, are less
    /// work than `EngineOptions::parallel_min_work`: then they stay on the query's thread. The
    /// point estimate cannot know that push-down answers a series from block statistics in a
    /// few microseconds, and waking the pool for so little costs more than it saves.
    pub(crate) fn too_little_for_pool(&self, began: Instant, rest: usize) -> bool {
        let rest = u32::try_from(rest).unwrap_or(u32::MAX);
        began.elapsed().saturating_mul(rest) < self.opts.parallel_min_work
    }

    /// Runs `f` for every item (a series) and returns the series it produced, in item order,
    /// each counted against the sample limit. `est` estimates the points per series, for the
    /// decision to go parallel and the size of a round. `S` is scratch space (buffers) that
    /// one thread reuses across the series it handles.
    pub(crate) fn map_series<I, S, F>(&mut self, items: &[I], est: usize, f: F) -> Result<Vec<Series>>
    where
        I: Sync,
        S: Default,
        F: Fn(&mut SeriesCtx<'a>, &mut S, &I) -> Result<Option<Series>> + Sync,
    {
        if let Some(max) = self.opts.inline_points_max {
            self.inline_points = self.inline_points.saturating_add(items.len().saturating_mul(est));
            if items.len() >= self.opts.parallel_min_series || self.inline_points >= max {
                return Err(Error::NotInline);
            }
        }
        // At most one series per item; pages never written cost no memory, while growing by
        // doubling copies and touches fresh pages each time.
        let mut out = Vec::with_capacity(items.len());
        let Some((pool, entered)) = self.pool_for(items.len(), est) else {
            self.map_serial(items, &f, &mut out)?;
            return Ok(out);
        };
        // The estimate counts samples in the read range, but push-down may answer a series from
        // block statistics in a few microseconds: time the first series here before waking the
        // pool, and keep a loop that would take less than `parallel_min_work` on this thread.
        let mut start = 0;
        if !self.opts.parallel_min_work.is_zero() {
            let began = Instant::now();
            self.map_serial(&items[..1], &f, &mut out)?;
            start = 1;
            if self.too_little_for_pool(began, items.len() - 1) {
                drop(entered);
                self.map_serial(&items[1..], &f, &mut out)?;
                return Ok(out);
            }
        }
        let threads = pool.current_num_threads();
        let (querier, opts, deadline) = (self.querier, self.opts, self.deadline);
        while start < items.len() {
            let headroom = self.samples.max.saturating_sub(self.samples.current);
            let end = start.saturating_add(round_len(headroom, est, threads)).min(items.len());
            let round = &items[start..end];
            let chunk = round.len().div_ceil(threads * CHUNKS_PER_THREAD).max(1);
            let chunks: Vec<&[I]> = round.chunks(chunk).collect();
            // Each chunk has its own context, so what the chunks report is merged in series
            // order below, whoever computed them; scratch buffers stay with their thread.
            let parts = run_chunks(pool, &chunks, S::default, |scratch, chunk| {
                let mut ctx = SeriesCtx::new(querier, opts, deadline);
                let mut results = Vec::with_capacity(chunk.len());
                let mut error = None;
                for item in *chunk {
                    match f(&mut ctx, scratch, item) {
                        Ok(s) => results.push(s),
                        Err(e) => {
                            error = Some(e);
                            break;
                        }
                    }
                }
                Part {
                    samples_read: ctx.samples_read,
                    scan: ctx.scan,
                    read_time: ctx.read_time,
                    annotations: ctx.annotations,
                    results,
                    error,
                }
            });
            for part in parts {
                // Every chunk was taken and finished before the scope ended (a panic in one
                // would have ended it early, by unwinding).
                let Some(part) = part else {
                    return Err(Error::Execution("a parallel chunk of series was not computed".into()));
                };
                self.absorb(part.samples_read, &part.scan, part.read_time, part.annotations);
                for s in part.results.into_iter().flatten() {
                    self.track(s.points.len() + s.hpoints.len())?;
                    out.push(s);
                }
                if let Some(e) = part.error {
                    return Err(e);
                }
            }
            start = end;
        }
        Ok(out)
    }

    /// The sequential loop of [`Evaluator::map_series`] over `items`, appending to `out`.
    fn map_serial<I, S, F>(&mut self, items: &[I], f: &F, out: &mut Vec<Series>) -> Result<()>
    where
        S: Default,
        F: Fn(&mut SeriesCtx<'a>, &mut S, &I) -> Result<Option<Series>>,
    {
        let mut ctx = self.series_ctx();
        let mut scratch = S::default();
        let mut result = Ok(());
        for item in items {
            match f(&mut ctx, &mut scratch, item) {
                Ok(Some(s)) => {
                    if let Err(e) = self.track(s.points.len() + s.hpoints.len()) {
                        result = Err(e);
                        break;
                    }
                    out.push(s);
                }
                Ok(None) => {}
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        self.absorb(ctx.samples_read, &ctx.scan, ctx.read_time, ctx.annotations);
        result
    }
}

/// Runs `f` for every item on the pool as `run_chunks` does (four chunks per thread) and
/// returns the outputs in item order, or `None` if a chunk was not computed. For work whose
/// outputs are kept apart per item (`group_extreme.rs`); `map_series` runs its own chunks, which
/// also stop at their first error.
pub(crate) fn run_items<I, S, T>(
    pool: &rayon::ThreadPool,
    items: &[I],
    state: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, &I) -> T + Sync,
) -> Option<Vec<T>>
where
    I: Sync,
    T: Send,
{
    let outputs = run_item_chunks(pool, items, state, |s, chunk| {
        chunk.iter().map(|item| f(s, item)).collect::<Vec<T>>()
    });
    outputs.map(|v| v.into_iter().flatten().collect())
}

/// Runs `f` on chunks of `items` on the pool as `run_chunks` does (four chunks per thread) and
/// returns each chunk's output in order, or `None` if a chunk was not computed: for work that
/// sums up a chunk's items (`prefetch.rs`).
pub(crate) fn run_item_chunks<I, S, T>(
    pool: &rayon::ThreadPool,
    items: &[I],
    state: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, &[I]) -> T + Sync,
) -> Option<Vec<T>>
where
    I: Sync,
    T: Send,
{
    let chunk = items.len().div_ceil(pool.current_num_threads() * CHUNKS_PER_THREAD).max(1);
    let chunks: Vec<&[I]> = items.chunks(chunk).collect();
    run_chunks(pool, &chunks, state, |s, chunk| f(s, chunk)).into_iter().collect()
}

/// Points per series to expect from reading `[mint, maxt]` and evaluating `steps` steps: the
/// steps plus one sample per 15 s (a common scrape interval) of the range. Only a heuristic
/// for when to go parallel and how much to compute per round.
pub(crate) fn estimate_points(steps: usize, mint: i64, maxt: i64) -> usize {
    let span = maxt.saturating_sub(mint).max(0) as u64;
    steps.saturating_add((span / 15_000).min(usize::MAX as u64) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_follow_the_limit_headroom() {
        assert_eq!(round_len(1000, 100, 2), 11);
        assert_eq!(round_len(0, 100, 4), 4);
        assert_eq!(round_len(usize::MAX, 1, 2), MAX_ROUND);
        assert_eq!(round_len(usize::MAX, 0, 2), MAX_ROUND);
    }

    #[test]
    fn estimates_count_steps_and_samples() {
        assert_eq!(estimate_points(60, 0, 3_600_000), 60 + 240);
        assert_eq!(estimate_points(1, 10, 0), 1);
    }
}

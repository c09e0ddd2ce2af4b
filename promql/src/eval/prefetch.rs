//! The range calls over selectors of one query, evaluated together in one parallel loop before
//! the query is evaluated, and handed over when evaluation reaches them.
//!
//! Why: each range call over a selector (`max_over_time(x{...}[1h])`) runs its own per-series
//! loop (`parallel.rs`), which wakes the query pool and waits for it. A query made of many small
//! calls, such as TSBS cpu-max-all-8 (ten `max_over_time` calls over eight series each, joined by
//! `or`), woke the pool ten times, and most of each loop was done by the query's thread alone
//! before the pool's threads were awake (a profile: the query's thread decoded 4 times as many
//! samples as each pool thread). Here the calls' series form one loop of 80 series.
//!
//! What stays the same, bit for bit: everything the query answers and reports. Only calls that
//! evaluation reaches over the query's own grid are taken (none below a subquery, a trim
//! operator or a histogram function, none with `@`, anchored or smoothed selectors, or other
//! arguments); each is keyed by its node and grid and taken at most once. When evaluation
//! reaches one, its per-series results are taken in series order exactly as its own loop would
//! have produced them: its points counted against `max_samples` then, its counters added, its
//! annotations merged, its first error returned. A call evaluation never reaches (an operand a
//! binary operator did not need) is work wasted, never an answer changed.
//!
//! What can differ: work done, and memory. The results wait until used, outside the sample
//! count; so the calls taken together are bounded by [`MAX_POINTS`] points of results. The
//! time spent reading storage is added to the query's `read_time` here, when it is spent, so
//! it counts the reads of calls evaluation then does not take too.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use storage::SeriesRef;
use storage::window_agg::ScanStats;

use super::group_extreme::group_extreme_call;
use super::parallel::{SeriesCtx, estimate_points};
use super::range_fn::{RangeCall, RangeScratch, Source};
use super::{Evaluator, Grid, HistStatsScope, Series};
use crate::annotations::Annotations;
use crate::error::Result;
use crate::options::EngineOptions;
use crate::parser::ast::{BinOp, Call, Expr};

/// At most this many result points (series times steps) are computed ahead, in all calls
/// together: 4 MiB of points, held outside the sample count until evaluation takes them.
const MAX_POINTS: usize = 1 << 18;

/// What one series of a prefetched call produced, with what its work cost.
struct Item {
    samples_read: u64,
    scan: ScanStats,
    /// Time reading storage, added to the query's when the item is computed.
    read_time: Duration,
    annotations: Annotations,
    result: Result<Option<Series>>,
}

/// A call's results, waiting for evaluation to reach the call.
pub(crate) struct Prefetched {
    grid: Grid,
    /// Series its selector matched (the query's `seriesMatched`).
    selected: u64,
    /// Per series, in selector order.
    items: Vec<Item>,
}

/// A call worked out for prefetching: what its own evaluation would have worked out.
struct Leaf<'e> {
    call: &'e Call,
    rc: RangeCall,
    series: Vec<SeriesRef>,
    mint: i64,
    maxt: i64,
    /// Series its selector matched.
    selected: u64,
}

/// Calls computed ahead, by the address of their node.
pub(crate) type PrefetchMap = HashMap<usize, Prefetched>;

/// A call prefetching may take: one argument, a range selector without `@`, anchored or
/// smoothed modifiers (those stay with the call's own loop).
fn is_leaf(c: &Call) -> bool {
    matches!(c.args.as_slice(), [Expr::Matrix(ms)] if ms.vs.at.is_none() && !ms.vs.anchored && !ms.vs.smoothed)
}

/// The calls evaluation reaches over the query's grid with the default histogram scope, in
/// the order it reaches them.
fn collect<'e>(e: &'e Expr, opts: &EngineOptions, out: &mut Vec<&'e Call>) {
    match e {
        Expr::Paren(p) => collect(&p.expr, opts, out),
        Expr::Unary(u) => collect(&u.expr, opts, out),
        Expr::Binary(b) if !matches!(b.op, BinOp::TrimUpper | BinOp::TrimLower) => {
            collect(&b.lhs, opts, out);
            collect(&b.rhs, opts, out);
        }
        // Answered per group from storage, without the call's per-series loop.
        Expr::Aggregate(a) if group_extreme_call(a, opts).is_some() => {}
        Expr::Aggregate(a) => collect(&a.expr, opts, out),
        Expr::Call(c) if is_leaf(c) => out.push(c),
        Expr::Call(c) if HistStatsScope::keeps_default(c.func.name) => {
            for a in &c.args {
                collect(a, opts, out);
            }
        }
        _ => {}
    }
}

impl<'a> Evaluator<'a> {
    /// Computes the range calls of `root` (evaluated over `g`) in one loop, when there are at
    /// least two and the pool can be used; [`Evaluator::take_prefetched`] hands them over.
    pub(crate) fn prefetch(&mut self, root: &Expr, g: Grid) {
        match self.opts.parallel.as_ref() {
            Some(pool) if pool.threads() >= 2 && self.opts.inline_points_max.is_none() => {}
            _ => return,
        }
        let mut calls = Vec::new();
        collect(root, self.opts, &mut calls);
        if calls.len() < 2 {
            return;
        }
        // Work out each call as its own evaluation would; the first that fails (or would
        // exceed the bound) ends the list, and evaluation meets its error itself.
        let mut leaves: Vec<Leaf<'_>> = Vec::new();
        let mut points = 0usize;
        for c in calls {
            let before = self.series_selected;
            let prepared = self.range_call(c, g, 0);
            let selected = self.series_selected - before;
            self.series_selected = before;
            let Ok((rc, Source::Selector(series, mint, maxt))) = prepared else { break };
            points = points.saturating_add(series.len().saturating_mul(g.len()));
            if points > MAX_POINTS {
                break;
            }
            leaves.push(Leaf { call: c, rc, series, mint, maxt, selected });
        }
        if leaves.len() < 2 {
            return;
        }
        let items: Vec<(usize, usize)> = leaves
            .iter()
            .enumerate()
            .flat_map(|(li, l)| (0..l.series.len()).map(move |si| (li, si)))
            .collect();
        let est = leaves.iter().map(|l| estimate_points(g.len(), l.mint, l.maxt)).max().unwrap_or(0);
        let (querier, opts, deadline) = (self.querier, self.opts, self.deadline);
        let run = |ctx: &mut SeriesCtx<'a>, scratch: &mut RangeScratch, &(li, si): &(usize, usize)| {
            let l = &leaves[li];
            let result = l.rc.selector_series(ctx, scratch, &l.series[si], l.mint, l.maxt);
            Item {
                samples_read: std::mem::take(&mut ctx.samples_read),
                scan: std::mem::take(&mut ctx.scan),
                read_time: std::mem::take(&mut ctx.read_time),
                annotations: std::mem::take(&mut ctx.annotations),
                result,
            }
        };
        let fresh = || (SeriesCtx::new(querier, opts, deadline), RangeScratch::default());
        let mut outputs: Vec<Item> = Vec::with_capacity(items.len());
        // As `map_series` does: time the first series here, and keep a loop too small for the
        // pool (push-down answering from statistics) on this thread.
        let (mut ctx, mut scratch) = fresh();
        let began = Instant::now();
        if let Some(first) = items.first() {
            outputs.push(run(&mut ctx, &mut scratch, first));
        }
        let rest = &items[outputs.len()..];
        let pool =
            if self.too_little_for_pool(began, rest.len()) { None } else { self.pool_for(rest.len(), est) };
        match pool {
            Some((pool, _entered)) => {
                // A chunk not computed (a panic) leaves every call to its own evaluation.
                let Some(done) = super::parallel::run_items(pool, rest, fresh, |(ctx, scratch), item| {
                    run(ctx, scratch, item)
                }) else {
                    return;
                };
                outputs.extend(done);
            }
            None => outputs.extend(rest.iter().map(|item| run(&mut ctx, &mut scratch, item))),
        }
        self.read_time += outputs.iter().map(|item| item.read_time).sum::<Duration>();
        let mut outputs = outputs.into_iter();
        for l in &leaves {
            let items: Vec<Item> = outputs.by_ref().take(l.series.len()).collect();
            let key = std::ptr::from_ref(l.call) as usize;
            self.prefetched.insert(key, Prefetched { grid: g, selected: l.selected, items });
        }
    }

    /// The results of call `c` over `g` if they were computed ahead, taken in series order as
    /// its own loop takes them: counted against `max_samples`, counters added, annotations
    /// merged, the first error returned.
    pub(crate) fn take_prefetched(&mut self, c: &Call, g: Grid) -> Result<Option<Vec<Series>>> {
        if self.prefetched.is_empty() {
            return Ok(None);
        }
        let Some(p) = self.prefetched.remove(&(std::ptr::from_ref(c) as usize)) else {
            return Ok(None);
        };
        if p.grid != g || self.hist_stats.stats_only() {
            return Ok(None);
        }
        self.series_selected += p.selected;
        let mut out = Vec::new();
        for item in p.items {
            // Its read time was added when it was computed (`prefetch`).
            self.absorb(item.samples_read, &item.scan, Duration::ZERO, item.annotations);
            if let Some(s) = item.result? {
                self.track(s.points.len() + s.hpoints.len())?;
                out.push(s);
            }
        }
        Ok(Some(out))
    }
}

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

/// What a call's series cost, summed over them: added to the query's when evaluation takes
/// the call. (A query that fails reports none of it, so the sums need not stop at the first
/// series that failed.)
#[derive(Default)]
struct Cost {
    samples_read: u64,
    scan: ScanStats,
    annotations: Annotations,
}

impl Cost {
    /// Takes what `ctx` counted since it was last taken.
    fn take_from(&mut self, ctx: &mut SeriesCtx<'_>) {
        self.samples_read += std::mem::take(&mut ctx.samples_read);
        self.scan.add(&std::mem::take(&mut ctx.scan));
        self.annotations.merge(std::mem::take(&mut ctx.annotations));
    }

    fn add(&mut self, other: Cost) {
        self.samples_read += other.samples_read;
        self.scan.add(&other.scan);
        self.annotations.merge(other.annotations);
    }
}

/// What a run of consecutive series of one call (within one chunk of the loop) produced.
struct Part {
    leaf: usize,
    cost: Cost,
    /// Per series, in selector order.
    results: Vec<Result<Option<Series>>>,
}

/// A call's results, waiting for evaluation to reach the call.
pub(crate) struct Prefetched {
    grid: Grid,
    /// Series its selector matched (the query's `seriesMatched`).
    selected: u64,
    cost: Cost,
    /// Per series, in selector order.
    results: Vec<Result<Option<Series>>>,
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
        // A chunk of items, in parts by call, and the time it spent reading storage. Only
        // results are kept per series, each moved once; counters are summed per part. (A record
        // of each series' counters beside its result, moved four times on its way to its call,
        // cost TSBS double-groupby-all over 100,000 series 8 % of its CPU.)
        let run = |(ctx, scratch): &mut (SeriesCtx<'a>, RangeScratch), chunk: &[(usize, usize)]| {
            let mut parts: Vec<Part> = Vec::new();
            for &(li, si) in chunk {
                let l = &leaves[li];
                let result = l.rc.selector_series(ctx, scratch, &l.series[si], l.mint, l.maxt);
                match parts.last_mut() {
                    Some(p) if p.leaf == li => p.results.push(result),
                    _ => parts.push(Part { leaf: li, cost: Cost::default(), results: vec![result] }),
                }
                if let Some(p) = parts.last_mut() {
                    p.cost.take_from(ctx);
                }
            }
            (parts, std::mem::take(&mut ctx.read_time))
        };
        let fresh = || (SeriesCtx::new(querier, opts, deadline), RangeScratch::default());
        let mut outputs: Vec<(Vec<Part>, Duration)> = Vec::new();
        // As `map_series` does: time the first series here, and keep a loop too small for the
        // pool (push-down answering from statistics) on this thread.
        let mut here = fresh();
        let began = Instant::now();
        let first = items.len().min(1);
        outputs.push(run(&mut here, &items[..first]));
        let rest = &items[first..];
        let pool =
            if self.too_little_for_pool(began, rest.len()) { None } else { self.pool_for(rest.len(), est) };
        match pool {
            Some((pool, _entered)) => {
                // A chunk not computed (a panic) leaves every call to its own evaluation.
                let Some(done) = super::parallel::run_item_chunks(pool, rest, fresh, run) else {
                    return;
                };
                outputs.extend(done);
            }
            None => outputs.push(run(&mut here, rest)),
        }
        self.read_time += outputs.iter().map(|(_, read)| *read).sum::<Duration>();
        let mut calls: Vec<Prefetched> = leaves
            .iter()
            .map(|l| Prefetched {
                grid: g,
                selected: l.selected,
                cost: Cost::default(),
                results: Vec::with_capacity(l.series.len()),
            })
            .collect();
        // Parts come in item order, so each call's results and costs in series order.
        for part in outputs.into_iter().flat_map(|(parts, _)| parts) {
            let call = &mut calls[part.leaf];
            call.cost.add(part.cost);
            call.results.extend(part.results);
        }
        for (l, call) in leaves.iter().zip(calls) {
            self.prefetched.insert(std::ptr::from_ref(l.call) as usize, call);
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
        // Its read time was added when it was computed (`prefetch`).
        self.absorb(p.cost.samples_read, &p.cost.scan, Duration::ZERO, p.cost.annotations);
        let mut out = Vec::with_capacity(p.results.len());
        for result in p.results {
            if let Some(s) = result? {
                self.track(s.points.len() + s.hpoints.len())?;
                out.push(s);
            }
        }
        Ok(Some(out))
    }
}

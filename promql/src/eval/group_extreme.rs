//! `max(max_over_time(sel[r]))` and `min(min_over_time(sel[r]))`, with or without `by` or
//! `without`, answered per group by storage ([`storage::Querier::group_extremes`]) instead of
//! per series.
//!
//! Why: over windows not aligned with the blocks, as dashboards' `now`-relative steps and TSBS
//! cpu-max-all make them, no block lies inside a window, so the per-series push-down
//! (`pushdown.rs`) decodes everything: 800 blocks for cpu-max-all-8. The group needs only each
//! window's largest value, and storage can leave out every block whose statistics show it
//! cannot beat a value already found, in any series of the group.
//!
//! Same answer, bit for bit: the aggregation folds the per-series results with the rule
//! `max_over_time` folds samples with, so the group's answer is that fold over all its samples
//! in series order (the order the selector returns them, the order of the aggregation's input),
//! which is what storage computes (see `storage::window_agg::Extreme`). Series that end up in
//! one group are grouped exactly as `aggregate.rs` groups the calls' results: the call drops the
//! metric name, so grouping by the series' own labels gives the same groups, as long as the
//! grouping does not name `__name__` (then this path is not taken).
//!
//! What differs: work, and the counters that measure it. Series with native histograms (whose
//! annotations the engine produces) make storage decline, and the call is evaluated as usual.

use std::time::{Duration, Instant};

use storage::window_agg::{Extreme, ScanStats};

use super::labels::group_labels;
use super::parallel::{SeriesCtx, estimate_points, run_items};
use super::range_fn::Source;
use super::series::OutputBuilder;
use super::series::labels_collide_without_name;
use super::{Evaluator, Grid, HashMap, Val};
use crate::error::Result;
use crate::options::EngineOptions;
use crate::parser::ast::{AggOp, AggregateExpr, Call, Expr};

/// The call and extreme of an aggregation this path answers, if it is one.
pub(crate) fn group_extreme_call<'e>(
    a: &'e AggregateExpr,
    opts: &EngineOptions,
) -> Option<(&'e Call, Extreme)> {
    if !opts.pushdown || a.param.is_some() {
        return None;
    }
    let (which, name) = match a.op {
        AggOp::Max => (Extreme::Max, "max_over_time"),
        AggOp::Min => (Extreme::Min, "min_over_time"),
        _ => return None,
    };
    let Expr::Call(c) = &a.expr else { return None };
    let plain = matches!(c.args.as_slice(),
        [Expr::Matrix(ms)] if ms.vs.at.is_none() && !ms.vs.anchored && !ms.vs.smoothed);
    let by_name = !a.without && a.grouping.iter().any(|l| l == storage::METRIC_NAME);
    (c.func.name == name && plain && !by_name).then_some((c, which))
}

/// Fewest series in one piece of work: pieces of a group are folded apart (their blocks
/// cannot leave out each other's), so a group is cut only as far as the pool needs.
const MIN_PIECE: usize = 8;

/// Most series in one piece: storage works on a piece without a look at the deadline, and
/// holds a piece's head samples and the blocks its current window cuts. Larger pieces leave
/// out more blocks (measured on 10,000 TSBS hosts, 1-minute windows: 256 decoded 44 % of the
/// samples 64 did, in 62 % of the time).
const MAX_PIECE: usize = 256;

/// Pieces a query's series are cut into (more or fewer when `MAX_PIECE` or `MIN_PIECE` say
/// so): enough for a pool of 4 threads to share. Not derived from the pool's size, so the work
/// done, and the statistics that report it, are the same with or without the pool.
const PIECES: usize = 16;

/// One piece of a group, as storage answered it.
struct Piece {
    scan: ScanStats,
    /// Time in `Querier::group_extremes`, on the thread that worked on the piece.
    read_time: Duration,
    /// The piece's extreme per window; `None` if storage declined.
    values: Result<Option<Vec<Option<f64>>>>,
}

impl<'a> Evaluator<'a> {
    /// Evaluates `a` per group from storage, if it is an aggregation this path answers and
    /// storage can answer it; `None` otherwise, with nothing counted.
    ///
    /// Groups are cut into contiguous pieces of their series, worked on by the query pool as
    /// `map_series` works on series; each group's answer is its pieces' answers folded in
    /// order, which is the fold over all its series (see `storage::window_agg::Extreme`).
    pub(crate) fn eval_group_extreme(&mut self, a: &AggregateExpr, g: Grid) -> Result<Option<Val>> {
        let Some((c, which)) = group_extreme_call(a, self.opts) else { return Ok(None) };
        let selected_before = self.series_selected;
        let (rc, source) = self.range_call(c, g, 0)?;
        let (Source::Selector(series, mint, maxt), Some(windows)) = (source, rc.pushdown_windows()) else {
            self.series_selected = selected_before;
            return Ok(None);
        };
        // Series that differ only in their names may be the duplicate-labelset error once the
        // call drops the names, if both have points: the per-series path finds out.
        if !self.opts.delayed_name_removal && labels_collide_without_name(series.iter().map(|s| &s.labels)) {
            self.series_selected = selected_before;
            return Ok(None);
        }
        let mut grouping = a.grouping.clone();
        grouping.sort();
        let mut index: HashMap<storage::Labels, usize> = HashMap::default();
        let mut groups: Vec<(storage::Labels, Vec<storage::SeriesRef>)> = Vec::new();
        let total = series.len();
        for s in series {
            let key = group_labels(&s.labels, &grouping, a.without);
            let i = *index.entry(key.clone()).or_insert_with(|| {
                groups.push((key, Vec::new()));
                groups.len() - 1
            });
            groups[i].1.push(s);
        }
        // Alone in its group, a series has no other to be left out for, and the per-series loop
        // (`pushdown.rs`, or decoding) is faster (measured: 1-hour windows not aligned with hour
        // blocks, one series per group, 15 % more CPU here).
        if groups.iter().all(|(_, m)| m.len() < 2) {
            self.series_selected = selected_before;
            return Ok(None);
        }
        let piece = total.div_ceil(PIECES).clamp(MIN_PIECE, MAX_PIECE);
        let tasks: Vec<(usize, &[storage::SeriesRef])> = groups
            .iter()
            .enumerate()
            .flat_map(|(gi, (_, m))| m.chunks(piece).map(move |c| (gi, c)))
            .collect();

        let (querier, opts, deadline) = (self.querier, self.opts, self.deadline);
        let run = |ctx: &mut SeriesCtx<'a>, &(_, members): &(usize, &[storage::SeriesRef])| {
            let mut scan = ScanStats::default();
            let began = Instant::now();
            let values = ctx.check_deadline().and_then(|()| {
                let mut v = Vec::with_capacity(windows.len());
                Ok(querier.group_extremes(members, windows, which, &mut v, &mut scan)?.then_some(v))
            });
            Piece { scan, read_time: began.elapsed(), values }
        };
        let fresh = || SeriesCtx::new(querier, opts, deadline);
        // As `map_series` does: time the first piece here, and keep work too small for the
        // pool (blocks answered from statistics) on this thread.
        let mut ctx = fresh();
        let began = Instant::now();
        let mut pieces: Vec<Piece> = tasks.first().map(|t| run(&mut ctx, t)).into_iter().collect();
        // Storage declines for the whole query alike (histograms aside): do not wait for the rest.
        if let Some(p) = pieces.first()
            && matches!(p.values, Ok(None))
        {
            // The time was spent even so; the counters are left to the path that reads again.
            self.read_time += p.read_time;
            self.series_selected = selected_before;
            return Ok(None);
        }
        let rest = &tasks[pieces.len()..];
        let est = estimate_points(g.len(), mint, maxt).saturating_mul(piece);
        let pool =
            if self.too_little_for_pool(began, rest.len()) { None } else { self.pool_for(rest.len(), est) };
        match pool.and_then(|(pool, _entered)| run_items(pool, rest, fresh, run)) {
            Some(done) => pieces.extend(done),
            None => pieces.extend(rest.iter().map(|t| run(&mut ctx, t))),
        }

        // Thread time, summed over the pieces, whether storage then answers or declines.
        self.read_time += pieces.iter().map(|p| p.read_time).sum::<Duration>();
        let mut answers: Vec<Vec<Option<f64>>> = vec![vec![None; windows.len()]; groups.len()];
        let mut scan = ScanStats::default();
        for ((gi, _), p) in tasks.iter().zip(pieces) {
            scan.add(&p.scan);
            let Some(values) = p.values? else {
                self.series_selected = selected_before;
                return Ok(None);
            };
            for (acc, v) in answers[*gi].iter_mut().zip(values) {
                if let Some(v) = v {
                    which.fold(acc, v);
                }
            }
        }
        self.samples_read += scan.samples_decoded;
        self.scan.add(&scan);
        // Series in the order the aggregation's step-by-step loop creates them: by the first
        // step with a value, then group order (order that `limitk` or `topk` ties can see).
        let mut order: Vec<usize> =
            (0..groups.len()).filter(|&gi| answers[gi].iter().any(Option::is_some)).collect();
        order.sort_by_key(|&gi| (answers[gi].iter().position(Option::is_some), gi));
        let mut out = OutputBuilder::new(g);
        for gi in order {
            let key = &groups[gi].0;
            for (i, v) in answers[gi].iter().enumerate() {
                if let Some(v) = *v {
                    // The call's results lose their names; the group's labels have none.
                    out.push(key.clone(), true, g.ts(i), v)?;
                }
            }
        }
        Ok(Some(Val::Vector(out.finish(true)?)))
    }
}

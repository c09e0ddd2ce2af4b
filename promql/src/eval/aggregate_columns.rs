//! `sum`, `avg`, `min`, `max`, `count` and `group` over float series, computed a series at a
//! time into one column of cells per group instead of a step at a time.
//!
//! Why: the step-wise aggregation (`aggregate.rs`) walks every input series at every step, keeps
//! a general accumulator (with room for histograms and quantiles) per group and step, and hands
//! each result to an `OutputBuilder` that finds its series by label set. For the common dashboard
//! shape, a few series aggregated over hundreds of steps, that machinery was a sixth of a query's
//! server time. Here each input point goes straight to its group's cell for its step.
//!
//! The answer is the step-wise one bit for bit: at each step a cell sees the group's series in
//! input order (the outer loop is the input order), with the same arithmetic, and the output
//! series come in the order the step-wise builder creates them (by the first step a group has a
//! value, then by group). `tests::columns_equal_step_wise` checks this against the step-wise path.

use storage::Labels;

use super::aggregate::avg_add;
use super::numeric::kahan_inc;
use super::series::{FPoint, Series};
use super::{Evaluator, Grid};
use crate::error::Result;
use crate::parser::ast::AggOp;

/// Cells (groups × steps, 40 bytes each) are always allowed up to this many, and beyond it up
/// to the number of input points (16 bytes each, already in memory), so the columns never
/// take more than about two and a half times what the input holds. Larger aggregations (few
/// points over many groups and steps) take the step-wise path, whose memory grows with the
/// answer only.
const MAX_CELLS: usize = 1 << 18;

/// The running aggregate of one group at one step.
#[derive(Debug, Clone, Copy, Default)]
struct Cell {
    seen: bool,
    /// `avg` switched to an incremental mean because the direct sum overflowed.
    incremental: bool,
    value: f64,
    kahan_c: f64,
    count: f64,
    mean: f64,
}

impl Cell {
    /// Adds `f`, exactly as the step-wise accumulator does.
    #[inline]
    fn add(&mut self, op: AggOp, f: f64) {
        if !self.seen {
            *self = Cell { seen: true, value: f, mean: f, count: 1.0, ..Cell::default() };
            if op == AggOp::Group {
                self.value = 1.0;
            }
            return;
        }
        match op {
            AggOp::Sum => (self.value, self.kahan_c) = kahan_inc(f, self.value, self.kahan_c),
            AggOp::Avg => {
                self.count += 1.0;
                avg_add(
                    f,
                    self.count,
                    &mut self.value,
                    &mut self.kahan_c,
                    &mut self.mean,
                    &mut self.incremental,
                );
            }
            AggOp::Max if self.value < f || self.value.is_nan() => self.value = f,
            AggOp::Min if self.value > f || self.value.is_nan() => self.value = f,
            AggOp::Count => self.count += 1.0,
            _ => {}
        }
    }

    /// The aggregate's value.
    fn result(&self, op: AggOp) -> f64 {
        match op {
            AggOp::Sum => self.value + self.kahan_c,
            AggOp::Avg if self.incremental => self.mean + self.kahan_c,
            AggOp::Avg => self.value / self.count + self.kahan_c / self.count,
            AggOp::Count => self.count,
            _ => self.value,
        }
    }
}

/// Where a group's output series starts: its first step with a value, and whether a series
/// contributing at that step had its name marked for dropping (the step-wise builder takes the
/// flag from a series' first point).
#[derive(Debug, Clone, Copy)]
struct First {
    step: usize,
    drop_name: bool,
}

impl<'a> Evaluator<'a> {
    /// The aggregation computed by columns, or `None` where only the step-wise path applies:
    /// another operator, histogram points, or more cells than [`MAX_CELLS`] and the input's
    /// points.
    pub(super) fn aggregate_columns(
        &mut self,
        op: AggOp,
        input: &[Series],
        group_of: &[usize],
        group_names: &[Labels],
        g: Grid,
    ) -> Result<Option<Vec<Series>>> {
        let simple =
            matches!(op, AggOp::Sum | AggOp::Avg | AggOp::Min | AggOp::Max | AggOp::Count | AggOp::Group);
        let steps = g.len();
        let cells = group_names.len().saturating_mul(steps);
        if !simple || g.step <= 0 || input.iter().any(|s| !s.hpoints.is_empty()) {
            return Ok(None);
        }
        if cells > MAX_CELLS && cells > input.iter().map(|s| s.points.len()).sum::<usize>() {
            return Ok(None);
        }
        let mut col = vec![Cell::default(); cells];
        let mut first: Vec<Option<First>> = vec![None; group_names.len()];
        for (s, &gi) in input.iter().zip(group_of) {
            self.check_deadline()?;
            let cells = &mut col[gi * steps..(gi + 1) * steps];
            let from = s.points.partition_point(|p| p.t < g.start);
            let (mut last, mut first_k) = (None, None);
            for p in &s.points[from..] {
                if p.t > g.end {
                    break;
                }
                let off = p.t - g.start;
                if off % g.step != 0 {
                    continue;
                }
                let k = (off / g.step) as usize;
                // A series gives at most one value per step (its first there), as in `StepCursor`.
                if last == Some(k) {
                    continue;
                }
                last = Some(k);
                first_k = first_k.or(last);
                cells[k].add(op, p.f);
            }
            let Some(k) = first_k else { continue };
            first[gi] = match first[gi] {
                Some(f) if f.step < k => Some(f),
                Some(f) if f.step == k => Some(First { step: k, drop_name: f.drop_name || s.drop_name }),
                _ => Some(First { step: k, drop_name: s.drop_name }),
            };
        }
        let mut order: Vec<(usize, usize)> =
            first.iter().enumerate().filter_map(|(gi, f)| f.map(|f| (f.step, gi))).collect();
        order.sort_unstable();
        let mut out = Vec::with_capacity(order.len());
        for (start, gi) in order {
            let cells = &col[gi * steps..(gi + 1) * steps];
            let points: Vec<FPoint> = cells[start..]
                .iter()
                .enumerate()
                .filter(|(_, c)| c.seen)
                .map(|(k, c)| FPoint { t: g.ts(start + k), f: c.result(op) })
                .collect();
            let drop_name = first[gi].is_some_and(|f| f.drop_name);
            out.push(Series::new(group_names[gi].clone(), drop_name, points));
        }
        Ok(Some(out))
    }
}

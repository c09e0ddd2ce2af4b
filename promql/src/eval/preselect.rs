//! A query's selections made before anything is read, on a querier that asks for it
//! ([`Querier::selects_ahead`]: a query node reading partition files from a bucket).
//!
//! Why: such a querier fetches, at a query's first read of a file not in its cache, the blocks
//! of every series the query has selected so far, in one request (storage's `footprint`).
//! Evaluation selects each selector when it reaches it, so a query of five selectors that reads
//! between its selections (`max(max_over_time(a[1m])) or max(max_over_time(b[1m])) ...`, each
//! answered per group from storage) fetched from each file five times. Selected here first, the
//! five selections are known before the first read, and each file is fetched from once; the
//! querier is told all of them first (`Querier::prepare`), so that a query node loads the
//! series chunks they need from each file in one request too.
//!
//! What stays the same: every answer and every count. A selection made here is the one
//! evaluation would make (same matchers, same time range, same snapshot), handed over when
//! evaluation selects the same selector over the same range, and counted then (against the
//! series limit too). A selector whose range here differs from evaluation's (below a
//! subquery, say, which is not visited) is simply selected again; one evaluation never reaches
//! is work wasted.

use std::collections::HashMap;
use std::time::Instant;

use storage::{Matcher, SeriesRef};

use super::{Evaluator, Grid};
use crate::parser::ast::Expr;

/// Selections made ahead, by the address and length of their matchers and their time range.
pub(crate) type Preselected = HashMap<(usize, usize, i64, i64), Vec<SeriesRef>>;

/// The key of a selection of `matchers` (a selector's own, never a copy) in `[mint, maxt]`.
pub(crate) fn key(matchers: &[Matcher], mint: i64, maxt: i64) -> (usize, usize, i64, i64) {
    (matchers.as_ptr() as usize, matchers.len(), mint, maxt)
}

impl Evaluator<'_> {
    /// Selects the selectors of `root` evaluated over `g` that evaluation reaches over that
    /// grid, if the querier asks for it; [`Evaluator::select`] takes them.
    pub(crate) fn preselect(&mut self, root: &Expr, g: Grid) {
        if !self.querier.selects_ahead() {
            return;
        }
        let mut wanted = Vec::new();
        self.collect(root, g, &mut wanted);
        if wanted.len() < 2 {
            // One selection is known before its reads anyway.
            return;
        }
        // Inline evaluation declines a selector that no equality narrows down (see
        // `Evaluator::select`): then it will not get that far, and nothing is selected here.
        let narrowed =
            |m: &[Matcher]| m.iter().any(|m| m.op == storage::MatchOp::Equal && !m.value.is_empty());
        if self.opts.inline_points_max.is_some() && !wanted.iter().all(|(m, _, _)| narrowed(m)) {
            return;
        }
        let began = Instant::now();
        // A failure here is met again by the selections, or by evaluation.
        let _ = self.querier.prepare(&wanted);
        for (matchers, mint, maxt) in wanted {
            let k = key(matchers, mint, maxt);
            if self.preselected.contains_key(&k) {
                continue;
            }
            // A failure, or a selection over the series limit, is met again by evaluation.
            match self.select_now(matchers, mint, maxt) {
                Ok(refs) if self.opts.max_series == 0 || refs.len() <= self.opts.max_series => {
                    self.preselected.insert(k, refs);
                }
                _ => break,
            }
        }
        self.select_time += began.elapsed();
    }

    /// The selections (matchers and time range) evaluation makes for the selectors of `e` over
    /// `g`, as far as they are worked out the way evaluation works them out.
    fn collect<'e>(&self, e: &'e Expr, g: Grid, out: &mut Vec<(&'e [Matcher], i64, i64)>) {
        match e {
            Expr::Paren(p) => self.collect(&p.expr, g, out),
            Expr::Unary(u) => self.collect(&u.expr, g, out),
            Expr::Binary(b) => {
                self.collect(&b.lhs, g, out);
                self.collect(&b.rhs, g, out);
            }
            Expr::Aggregate(a) => self.collect(&a.expr, g, out),
            Expr::Vector(vs) => {
                if let Some((mint, maxt)) = self.refs(vs, g).ok().and_then(|refs| self.vector_span(vs, &refs))
                {
                    out.push((&vs.matchers, mint, maxt));
                }
            }
            Expr::Call(c) => {
                for a in &c.args {
                    match a {
                        Expr::Matrix(ms) => {
                            if let (Ok(spec), Ok(refs)) = (self.window_spec(ms), self.refs(&ms.vs, g)) {
                                let (mint, maxt) = spec.span(&refs);
                                out.push((&ms.vs.matchers, mint, maxt));
                            }
                        }
                        a => self.collect(a, g, out),
                    }
                }
            }
            Expr::Number(_) | Expr::String(_) | Expr::Matrix(_) | Expr::Subquery(_) => {}
        }
    }
}

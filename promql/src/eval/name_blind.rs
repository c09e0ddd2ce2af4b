//! Range calls whose output is grouped by an aggregation that cannot see the metric name, so
//! the name is not dropped from each output series' labels.
//!
//! Why: `sum by (job) (rate(x[5m]))`, the most common shape of query, drops `__name__` from
//! every series `rate` answers (a new label set per series: allocated, copied, later freed),
//! and `sum by (job)` then keeps `job` alone. Over 100,000 series that was a seventh of TSBS
//! double-groupby-all's time. A call below such an aggregation keeps its input's labels and
//! marks each series `drop_name`, as delayed name removal does.
//!
//! What stays the same, bit for bit: the aggregation's groups (`by` keeps only the labels it
//! names, and none of them is one a dropped name would remove), the call's duplicate check (two
//! series that would have the same labels once their names are dropped are still an error:
//! [`super::series::has_duplicate_labels_without_name`]), and the one annotation that names an
//! aggregation's input metric (it says "" for a series marked `drop_name` without delayed name
//! removal, as the dropped labels would).

use super::Evaluator;
use super::labels::{HashSet, NAME_LABELS};
use crate::parser::ast::{AggOp, AggregateExpr, Call, Expr};

impl Evaluator<'_> {
    /// Finds the calls of `root` whose output goes straight into an aggregation that cannot
    /// see names. Without delayed name removal only: with it, no call drops names anyway.
    pub(crate) fn find_name_blind(&mut self, root: &Expr) {
        if !self.opts.delayed_name_removal {
            walk(root, &mut self.name_blind);
        }
    }

    /// Whether call `c` keeps its input's names (marked `drop_name`) because no one sees them.
    pub(crate) fn is_name_blind(&self, c: &Call) -> bool {
        self.name_blind.contains(&key(c))
    }
}

/// The key of call `c` in the evaluator's set.
fn key(c: &Call) -> usize {
    std::ptr::from_ref(c) as usize
}

/// Whether `a`'s output labels are made of its `by` labels alone, none of which is one a
/// dropped name removes. Not `without` (it keeps `__type__` and `__unit__`), nor the
/// aggregations that answer their input's series (`topk`, `limitk`...), nor `count_values`
/// (its label may be `__name__`).
fn blind(a: &AggregateExpr) -> bool {
    let groups = matches!(
        a.op,
        AggOp::Sum
            | AggOp::Avg
            | AggOp::Count
            | AggOp::Min
            | AggOp::Max
            | AggOp::Group
            | AggOp::Stddev
            | AggOp::Stdvar
            | AggOp::Quantile
    );
    groups && !a.without && !a.grouping.iter().any(|n| NAME_LABELS.contains(&n.as_str()))
}

fn walk(e: &Expr, out: &mut HashSet<usize>) {
    match e {
        Expr::Paren(p) => walk(&p.expr, out),
        Expr::Unary(u) => walk(&u.expr, out),
        Expr::Binary(b) => {
            walk(&b.lhs, out);
            walk(&b.rhs, out);
        }
        Expr::Aggregate(a) => {
            if blind(a)
                && let Expr::Call(c) = a.expr.unparen()
            {
                out.insert(key(c));
            }
            if let Some(p) = &a.param {
                walk(p, out);
            }
            walk(&a.expr, out);
        }
        Expr::Call(c) => c.args.iter().for_each(|a| walk(a, out)),
        Expr::Subquery(s) => walk(&s.expr, out),
        Expr::Number(_) | Expr::String(_) | Expr::Vector(_) | Expr::Matrix(_) => {}
    }
}

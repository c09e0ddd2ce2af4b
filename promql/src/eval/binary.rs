//! Binary operators: scalar/scalar, vector/scalar, and vector/vector with label matching
//! (`on`, `ignoring`, `group_left`, `group_right`, `fill*`) and the set operators.

use std::sync::Arc;

use storage::{FloatHistogram, Labels};

use super::float_histogram as fh;
use super::histogram_trim;
use super::labels::HashSet;
use super::series::{OutputBuilder, StepCursor, StepSample, has_duplicate_labels, merge_same_labelsets};
use super::{Evaluator, FPoint, Grid, HashMap, Val, drop_metric_labels, labels};
use crate::annotations::Annotations;
use crate::error::{Error, Result};
use crate::parser::ast::{BinOp, BinaryExpr, Cardinality, Expr, VectorMatching, VectorSelector};
use crate::parser::strings::go_quote;

/// `op` on two floats: the value and, for comparisons, whether the element is kept.
pub(crate) fn apply(op: BinOp, l: f64, r: f64) -> (f64, bool) {
    match op {
        BinOp::Add => (l + r, true),
        BinOp::Sub => (l - r, true),
        BinOp::Mul => (l * r, true),
        BinOp::Div => (l / r, true),
        BinOp::Pow => (l.powf(r), true),
        BinOp::Mod => (l % r, true),
        BinOp::Atan2 => (l.atan2(r), true),
        BinOp::Eql => (l, l == r),
        BinOp::Neq => (l, l != r),
        BinOp::Gtr => (l, l > r),
        BinOp::Lss => (l, l < r),
        BinOp::Gte => (l, l >= r),
        BinOp::Lte => (l, l <= r),
        BinOp::And | BinOp::Or | BinOp::Unless => (l, true),
        // Trimming is defined for histograms only: float elements are dropped.
        BinOp::TrimUpper | BinOp::TrimLower => (l, false),
    }
}

/// A comparison against a literal (`x > 90`, or `90 < x`), used as a filter: what [`apply`]
/// keeps point by point, with the operator matched once per call. Kept with the vector on the
/// left (`90 < x` is `x > 90`: a comparison with NaN is false either way).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Comparison {
    op: BinOp,
    c: f64,
}

impl Comparison {
    /// The filter `op` makes with the literal `c` (`c` on the left if `scalar_left`), or `None`
    /// if `op` is not a comparison.
    pub(crate) fn new(op: BinOp, c: f64, scalar_left: bool) -> Option<Comparison> {
        let op = match (op, scalar_left) {
            (BinOp::Gtr, true) => BinOp::Lss,
            (BinOp::Lss, true) => BinOp::Gtr,
            (BinOp::Gte, true) => BinOp::Lte,
            (BinOp::Lte, true) => BinOp::Gte,
            (op, _) => op,
        };
        op.is_comparison().then_some(Comparison { op, c })
    }

    /// The operator, with the vector on its left: `==`, `!=`, `>`, `<`, `>=` or `<=`.
    pub(crate) fn op(self) -> BinOp {
        self.op
    }

    /// The literal, on the operator's right.
    pub(crate) fn literal(self) -> f64 {
        self.c
    }

    /// Whether some value in `[min, max]` may be kept, where `min` and `max` leave NaNs out
    /// (both NaN if there is no other value). False only if none is: a NaN fails every
    /// comparison but `!=`, which never answers false here.
    pub(crate) fn may_keep(self, min: f64, max: f64) -> bool {
        let c = self.c;
        match self.op {
            BinOp::Gtr => max > c,
            BinOp::Gte => max >= c,
            BinOp::Lss => min < c,
            BinOp::Lte => min <= c,
            BinOp::Eql => min <= c && c <= max,
            _ => true,
        }
    }

    /// Whether an element of value `f` is kept.
    #[inline]
    pub(crate) fn keeps(self, f: f64) -> bool {
        let c = self.c;
        match self.op {
            BinOp::Eql => f == c,
            BinOp::Neq => f != c,
            BinOp::Gtr => f > c,
            BinOp::Lss => f < c,
            BinOp::Gte => f >= c,
            BinOp::Lte => f <= c,
            _ => true,
        }
    }

    /// The comparison of `b` if it filters an instant vector selector by a literal, without
    /// `bool`: then the selector can drop what fails while it reads (see
    /// [`Evaluator::eval_binary`]). Returns the comparison and the selector.
    fn of_selector(b: &BinaryExpr) -> Option<(Comparison, &VectorSelector)> {
        if b.return_bool {
            return None;
        }
        match (b.lhs.unparen(), b.rhs.unparen()) {
            (Expr::Vector(vs), Expr::Number(n)) => Some((Comparison::new(b.op, n.value, false)?, vs)),
            (Expr::Number(n), Expr::Vector(vs)) => Some((Comparison::new(b.op, n.value, true)?, vs)),
            _ => None,
        }
    }
}

/// If `op` is a comparison, keeps the points whose value compares true with the literal `c`
/// (`c` on the left if `scalar_left`), values unchanged, and returns true: what [`apply`] keeps
/// point by point, with the operator matched once for the whole series (high-cpu's `x > 90`
/// over a day at the scrape interval is 8,640 points a series). Otherwise returns false and
/// leaves `points` alone.
fn keep_compared(points: &mut Vec<FPoint>, op: BinOp, c: f64, scalar_left: bool) -> bool {
    let Some(cmp) = Comparison::new(op, c, scalar_left) else { return false };
    points.retain(|p| cmp.keeps(p.f));
    true
}

/// An operand: a float, or a native histogram.
type Operand<'h> = (f64, Option<&'h Arc<FloatHistogram>>);

/// `op` where at least one side is a histogram (Prometheus' `vectorElemBinop`): the value (a
/// histogram, or for `==`/`!=` the left one) and whether the element is kept, or `None` to drop
/// it. Only `h*f`, `f*h`, `h/f`, `h+h`, `h-h`, `h==h` and `h!=h` are defined; the rest drop the
/// element with an info.
fn histogram_op(
    op: BinOp,
    l: Operand<'_>,
    r: Operand<'_>,
    annotations: &mut Annotations,
    pos: usize,
) -> Option<(Option<Arc<FloatHistogram>>, bool)> {
    let scaled = |h: &FloatHistogram, f: f64, div: bool| {
        let mut h = h.clone();
        if div {
            fh::divide(&mut h, f)
        } else {
            fh::scale(&mut h, f)
        }
        fh::compact(&mut h);
        Some((Some(Arc::new(h)), true))
    };
    match (l.1, r.1, op) {
        (None, Some(h), BinOp::Mul) => scaled(h, l.0, false),
        (Some(h), None, BinOp::Mul) => scaled(h, r.0, false),
        (Some(h), None, BinOp::Div) => scaled(h, r.0, true),
        (Some(h), None, BinOp::TrimUpper | BinOp::TrimLower) => {
            Some((Some(Arc::new(histogram_trim::trim(h, r.0, op == BinOp::TrimUpper))), true))
        }
        (Some(a), Some(b), BinOp::Add | BinOp::Sub) => {
            let (res, verb) =
                if op == BinOp::Add { (fh::add(a, b), "addition") } else { (fh::sub(a, b), "subtraction") };
            match res {
                Ok((mut h, info)) => {
                    if info.counter_reset_collision {
                        annotations.warn(format!("conflicting counter resets during histogram {verb}"), pos);
                    }
                    if info.reconciled_custom_buckets {
                        annotations
                            .info(format!("mismatched custom buckets were reconciled during {verb}"), pos);
                    }
                    if op == BinOp::Sub {
                        // A difference is no counter, even where it is not negative.
                        h.counter_reset_hint = storage::CounterResetHint::Gauge;
                    }
                    fh::compact(&mut h);
                    Some((Some(Arc::new(h)), true))
                }
                Err(_) => {
                    annotations.warn(
                        "vector contains a mix of histograms with exponential and custom buckets schemas",
                        pos,
                    );
                    None
                }
            }
        }
        (Some(a), Some(b), BinOp::Eql | BinOp::Neq) => {
            let eq = fh::same(a, b);
            Some((Some(a.clone()), if op == BinOp::Eql { eq } else { !eq }))
        }
        _ => {
            let kind = |h: Option<&Arc<FloatHistogram>>| if h.is_some() { "histogram" } else { "float" };
            annotations.info(
                format!(
                    "incompatible sample types encountered for binary operator {:?}: {} {} {}",
                    op.as_str(),
                    kind(l.1),
                    op.as_str(),
                    kind(r.1)
                ),
                pos,
            );
            None
        }
    }
}

/// Prometheus' `labels.Labels.String()`: `{__name__="a", b="c"}`.
fn labels_string(l: &Labels) -> String {
    let parts: Vec<String> = l.iter().map(|x| format!("{}={}", x.name, go_quote(&x.value))).collect();
    format!("{{{}}}", parts.join(", "))
}

/// A left-leaning chain of three or more vectors joined by `or` with one matching clause
/// (`a or b or c`, which parses as `(a or b) or c`): its operands in order, and the operations
/// joining them (`joins[k]` joins operand `k + 1` to the ones before).
fn or_chain(b: &BinaryExpr) -> Option<(Vec<&Expr>, Vec<&BinaryExpr>)> {
    let clause = |x: &BinaryExpr| x.matching.as_ref().map(|m| (m.on, m.labels.clone()));
    let joins_same = |x: &BinaryExpr| x.op == BinOp::Or && clause(x) == clause(b);
    if !joins_same(b) {
        return None;
    }
    let mut joins = vec![b];
    let mut first = &b.lhs;
    while let Expr::Binary(inner) = first.unparen()
        && joins_same(inner)
    {
        joins.push(inner);
        first = &inner.lhs;
    }
    if joins.len() < 2 {
        return None;
    }
    joins.reverse();
    let operands: Vec<&Expr> = std::iter::once(first).chain(joins.iter().map(|j| &j.rhs)).collect();
    let vectors = operands.iter().all(|e| e.value_type() == crate::parser::ast::ValueType::Vector);
    vectors.then_some((operands, joins))
}

/// True if no signature number occurs on both sides.
fn disjoint(lsig: &[usize], rsig: &[usize], nsigs: usize) -> bool {
    let mut left = vec![false; nsigs];
    for &i in lsig {
        left[i] = true;
    }
    !rsig.iter().any(|&i| left[i])
}

/// Whether label `name` is one two series are matched on: named by `on`, or not named by
/// `ignoring` and not the metric name.
fn matched_on(m: &VectorMatching, name: &str) -> bool {
    let named = m.labels.iter().any(|n| n == name);
    if m.on { named } else { !named && name != storage::METRIC_NAME }
}

/// The labels two series are matched on.
fn signature(l: &Labels, m: &VectorMatching) -> Labels {
    if l.iter().all(|x| matched_on(m, &x.name)) {
        return l.clone();
    }
    Labels::from_sorted(l.iter().filter(|x| matched_on(m, &x.name)).cloned().collect())
}

/// A hash of [`signature`]`(l, m)`, without building it.
fn signature_hash(state: &foldhash::fast::RandomState, l: &Labels, m: &VectorMatching) -> u64 {
    labels::hash_kept(state, l, |name| matched_on(m, name))
}

/// Labels of a result element (Prometheus' `resultMetric`).
fn result_labels(lhs: &Labels, rhs: &Labels, op: BinOp, m: &VectorMatching) -> Labels {
    let mut l = if op.changes_metric_schema() { drop_metric_labels(lhs) } else { lhs.clone() };
    if m.card == Cardinality::OneToOne {
        l = if m.on { labels::keep(&l, &m.labels) } else { labels::without_owned(&l, &m.labels) };
    }
    for name in &m.include {
        l = labels::set(&l, name, rhs.get(name).unwrap_or(""));
    }
    l
}

impl<'a> Evaluator<'a> {
    pub(crate) fn eval_binary(&mut self, b: &BinaryExpr, g: Grid) -> Result<Val> {
        if let Some((operands, joins)) = or_chain(b) {
            return self.eval_or_chain(&operands, &joins, g);
        }
        // `x > 90`: the selector drops the points that fail as it reads, so memory follows
        // the answer, not every point of every series it selects (high-cpu-all over 1,000
        // hosts for a day at the scrape interval reads 8.6 M points and keeps 0.6 M). The
        // filter below then keeps all that is left; histogram points are left to it.
        let filtered = Comparison::of_selector(b);
        let side = |this: &mut Self, e: &Expr| match filtered {
            Some((cmp, vs)) if matches!(e.unparen(), Expr::Vector(_)) => {
                this.eval_filtered_selector(vs, g, cmp)
            }
            _ => this.eval(e, g),
        };
        let lhs = side(self, &b.lhs)?;
        let rhs = side(self, &b.rhs)?;
        let delayed = self.opts.delayed_name_removal;
        match (lhs, rhs) {
            (Val::Scalar(l), Val::Scalar(r)) => {
                let v = l
                    .iter()
                    .zip(&r)
                    .map(|(x, y)| {
                        let (v, keep) = apply(b.op, *x, *y);
                        if b.op.is_comparison() { if keep { 1.0 } else { 0.0 } } else { v }
                    })
                    .collect();
                Ok(Val::Scalar(v))
            }
            (Val::Vector(m), Val::Scalar(s)) | (Val::Scalar(s), Val::Vector(m)) => {
                let scalar_left = matches!(b.lhs.value_type(), crate::parser::ast::ValueType::Scalar);
                let mut out = Vec::with_capacity(m.len());
                // A literal is the same at every step: no step index to compute per point.
                let constant =
                    s.windows(2).all(|w| w[0].to_bits() == w[1].to_bits()).then(|| s.first().copied());
                // A filter against a literal (`x > 90`): the operator resolved once, not per point.
                let filter = match constant {
                    Some(Some(c)) if !b.return_bool => Some(c),
                    _ => None,
                };
                for mut series in m {
                    if !filter.is_some_and(|c| keep_compared(&mut series.points, b.op, c, scalar_left)) {
                        series.points.retain_mut(|p| {
                            let sv = match constant {
                                Some(c) => c,
                                None => s.get(g.index(p.t)).copied(),
                            }
                            .unwrap_or(f64::NAN);
                            let (l, r) = if scalar_left { (sv, p.f) } else { (p.f, sv) };
                            let (mut v, mut keep) = apply(b.op, l, r);
                            if b.op.is_comparison() {
                                // The vector element's value is kept, whichever side it is on.
                                v = p.f;
                            }
                            if b.return_bool {
                                v = if keep { 1.0 } else { 0.0 };
                                keep = true;
                            }
                            p.f = v;
                            keep
                        });
                    }
                    if !series.hpoints.is_empty() {
                        let annotations = &mut self.annotations;
                        let pos = b.lhs.start();
                        series.hpoints.retain_mut(|p| {
                            let sv = s.get(g.index(p.t)).copied().unwrap_or(f64::NAN);
                            let (l, r) = if scalar_left {
                                ((sv, None), (0.0, Some(&p.h)))
                            } else {
                                ((0.0, Some(&p.h)), (sv, None))
                            };
                            match histogram_op(b.op, l, r, annotations, pos) {
                                Some((Some(h), keep)) => {
                                    p.h = h;
                                    keep
                                }
                                _ => false,
                            }
                        });
                    }
                    if series.is_empty() {
                        continue;
                    }
                    if b.op.changes_metric_schema() || b.return_bool {
                        series.drop_metric_name(delayed);
                    }
                    out.push(series);
                }
                if !delayed {
                    out = merge_same_labelsets(out)?;
                }
                Ok(Val::Vector(out))
            }
            (Val::Vector(l), Val::Vector(r)) => {
                let m = b.matching.clone().unwrap_or_else(VectorMatching::one_to_one);
                self.vector_vector(b, &m, l, r, g)
            }
            _ => Err(Error::Execution(
                "binary expression must contain only scalar and instant vector types".into(),
            )),
        }
    }

    /// `a or b or c ...` (see [`or_chain`]): when no operand holds two series with the same
    /// labels and no signature occurs in two operands, the answer is every operand's series
    /// with points, in order, as the nested evaluation's fast path (in `vector_vector`) would
    /// find level by level; then each series' signature is computed once, not once per level
    /// it is carried through (ten per-metric aggregates over 10,000 hosts joined by `or`
    /// computed 550,000 signatures, two thirds of the query). Otherwise the operands are
    /// joined pairwise, as nested.
    fn eval_or_chain(&mut self, operands: &[&Expr], joins: &[&BinaryExpr], g: Grid) -> Result<Val> {
        let mut vals = Vec::with_capacity(operands.len());
        for e in operands {
            match self.eval(e, g)? {
                Val::Vector(m) => vals.push(m),
                _ => {
                    return Err(Error::Execution(
                        "binary expression must contain only scalar and instant vector types".into(),
                    ));
                }
            }
        }
        // Signatures all distinct: no operand meets another, and none holds two series with
        // the same labels (they would have the same signature). Checked by hashes alone, so no
        // signature is built: two equal hashes send the chain to the pairwise joins, exact
        // whatever the reason.
        let m = joins[0].matching.clone().unwrap_or_else(VectorMatching::one_to_one);
        let state = foldhash::fast::RandomState::default();
        let mut seen: HashSet<u64> =
            HashSet::with_capacity_and_hasher(vals.iter().map(Vec::len).sum(), Default::default());
        let disjoint = vals.iter().flatten().all(|s| seen.insert(signature_hash(&state, &s.labels, &m)));
        if disjoint {
            let out = vals.into_iter().flatten().filter(|s| !s.points.is_empty() || !s.hpoints.is_empty());
            return Ok(Val::Vector(out.collect()));
        }
        let mut vals = vals.into_iter();
        let mut acc = vals.next().unwrap_or_default();
        for (join, v) in joins.iter().zip(vals) {
            let m = join.matching.clone().unwrap_or_else(VectorMatching::one_to_one);
            acc = match self.vector_vector(join, &m, acc, v, g)? {
                Val::Vector(m) => m,
                other => return Ok(other),
            };
        }
        Ok(Val::Vector(acc))
    }

    fn vector_vector(
        &mut self,
        b: &BinaryExpr,
        m: &VectorMatching,
        lhs: Vec<super::Series>,
        rhs: Vec<super::Series>,
        g: Grid,
    ) -> Result<Val> {
        // Signatures are computed once per series and numbered.
        let mut sig_index: HashMap<Labels, usize> = HashMap::default();
        let mut sig_labels: Vec<Labels> = Vec::new();
        let mut number = |l: &Labels| -> usize {
            let s = signature(l, m);
            *sig_index.entry(s.clone()).or_insert_with(|| {
                sig_labels.push(s);
                sig_labels.len() - 1
            })
        };
        let lsig: Vec<usize> = lhs.iter().map(|s| number(&s.labels)).collect();
        let rsig: Vec<usize> = rhs.iter().map(|s| number(&s.labels)).collect();
        let nsigs = sig_labels.len();
        if b.op == BinOp::Or
            && disjoint(&lsig, &rsig, nsigs)
            && !has_duplicate_labels(&lhs)
            && !has_duplicate_labels(&rhs)
        {
            // No right-hand series can ever meet a left-hand one with its signature, so at
            // every step the answer is all left-hand samples followed by all right-hand ones:
            // the series themselves, moved rather than rebuilt point by point (an `or` of ten
            // per-metric aggregates copied the first one's points nine times over).
            let out = lhs.into_iter().chain(rhs).filter(|s| !s.points.is_empty() || !s.hpoints.is_empty());
            return Ok(Val::Vector(out.collect()));
        }
        let (mut lc, mut rc) = (StepCursor::new(&lhs), StepCursor::new(&rhs));
        let (mut lstep, mut rstep) = (Vec::new(), Vec::new());
        let mut out = OutputBuilder::new(g);
        let mut present = vec![false; nsigs];
        for ts in g.timestamps() {
            self.check_deadline()?;
            lc.at(&lhs, ts, &mut lstep);
            rc.at(&rhs, ts, &mut rstep);
            match b.op {
                BinOp::And | BinOp::Unless => {
                    present.iter_mut().for_each(|p| *p = false);
                    for s in &rstep {
                        present[rsig[s.idx]] = true;
                    }
                    let want = b.op == BinOp::And;
                    if want && rstep.is_empty() {
                        continue;
                    }
                    for s in &lstep {
                        if present[lsig[s.idx]] == want {
                            out.push_value(s.labels.clone(), s.drop_name, ts, s.f, s.h.cloned())?;
                        }
                    }
                }
                BinOp::Or => {
                    present.iter_mut().for_each(|p| *p = false);
                    for s in &lstep {
                        present[lsig[s.idx]] = true;
                        out.push_value(s.labels.clone(), s.drop_name, ts, s.f, s.h.cloned())?;
                    }
                    for s in &rstep {
                        if !present[rsig[s.idx]] {
                            out.push_value(s.labels.clone(), s.drop_name, ts, s.f, s.h.cloned())?;
                        }
                    }
                }
                _ => self.binop_step(b, m, &lstep, &rstep, &lsig, &rsig, ts, &mut out)?,
            }
        }
        Ok(Val::Vector(out.finish(self.opts.delayed_name_removal)?))
    }

    /// One step of an arithmetic or comparison operation between vectors (Prometheus'
    /// `VectorBinop`).
    #[allow(clippy::too_many_arguments)]
    fn binop_step(
        &mut self,
        b: &BinaryExpr,
        m: &VectorMatching,
        lstep: &[StepSample<'_>],
        rstep: &[StepSample<'_>],
        lsig: &[usize],
        rsig: &[usize],
        ts: i64,
        out: &mut OutputBuilder,
    ) -> Result<()> {
        let filling = m.fill_lhs.is_some() || m.fill_rhs.is_some();
        if (lstep.is_empty() && rstep.is_empty()) || ((lstep.is_empty() || rstep.is_empty()) && !filling) {
            return Ok(());
        }
        // Work as many-to-one; for one-to-many swap the sides and swap back when computing.
        let swapped = m.card == Cardinality::OneToMany;
        let (many, one, many_sig, one_sig) =
            if swapped { (rstep, lstep, rsig, lsig) } else { (lstep, rstep, lsig, rsig) };
        let mut one_by_sig: HashMap<usize, usize> =
            HashMap::with_capacity_and_hasher(one.len(), Default::default());
        for (i, s) in one.iter().enumerate() {
            let sig = one_sig[s.idx];
            if let Some(&prev) = one_by_sig.get(&sig) {
                let side = if swapped { "left" } else { "right" };
                let matched = if m.on {
                    labels::keep(s.labels, &m.labels)
                } else {
                    let mut names: Vec<&str> = m.labels.iter().map(String::as_str).collect();
                    names.push(storage::METRIC_NAME);
                    labels::without(s.labels, &names)
                };
                let mut pair = [labels_string(one[prev].labels), labels_string(s.labels)];
                pair.sort();
                return Err(Error::Execution(format!(
                    "found duplicate series for the match group {} on the {side} hand-side of the operation: [{}, {}];\
                     many-to-many matching not allowed: matching labels must be unique on one side",
                    labels_string(&matched),
                    pair[0],
                    pair[1]
                )));
            }
            one_by_sig.insert(sig, i);
        }
        let delayed = self.opts.delayed_name_removal;
        // For one-to-one: which signatures produced a result; for many-to-one: result labels
        // per signature, to detect ambiguous matches.
        let mut matched: HashMap<usize, Vec<Labels>> = HashMap::default();
        let match_labels = |l: &Labels| -> Labels {
            if m.on {
                labels::keep(l, &m.labels)
            } else {
                let mut names: Vec<&str> = m.labels.iter().map(String::as_str).collect();
                names.push(storage::METRIC_NAME);
                labels::without(l, &names)
            }
        };
        let pos = b.lhs.start();
        let annotations = &mut self.annotations;
        let mut do_op = |matched: &mut HashMap<usize, Vec<Labels>>,
                         ll: &Labels,
                         lf: Operand<'_>,
                         rl: &Labels,
                         rf: Operand<'_>,
                         sig: usize,
                         out: &mut OutputBuilder|
         -> Result<()> {
            let (fl, fr) = if swapped { (rf, lf) } else { (lf, rf) };
            let (mut v, mut h, keep) = if fl.1.is_none() && fr.1.is_none() {
                let (v, keep) = apply(b.op, fl.0, fr.0);
                (v, None, keep)
            } else {
                match histogram_op(b.op, fl, fr, annotations, pos) {
                    Some((h, keep)) => (0.0, h, keep),
                    None => return Ok(()),
                }
            };
            if b.return_bool {
                v = if keep { 1.0 } else { 0.0 };
                h = None;
            }
            let mut metric = result_labels(ll, rl, b.op, m);
            if !delayed && b.return_bool {
                metric = drop_metric_labels(&metric);
            }
            let entry = matched.entry(sig).or_default();
            if m.card == Cardinality::OneToOne {
                if !entry.is_empty() {
                    return Err(Error::Execution(
                        "multiple matches for labels: many-to-one matching must be explicit (group_left/group_right)"
                            .into(),
                    ));
                }
                entry.push(Labels::default());
            } else {
                if entry.contains(&metric) {
                    return Err(Error::Execution(
                        "multiple matches for labels: grouping labels must ensure unique matches".into(),
                    ));
                }
                entry.push(metric.clone());
            }
            if !keep && !b.return_bool {
                return Ok(());
            }
            out.push_value(metric, b.return_bool, ts, v, h)
        };
        let (fill_many, fill_one) = (m.fill_lhs, m.fill_rhs);
        for s in many {
            let sig = many_sig[s.idx];
            match one_by_sig.get(&sig) {
                Some(&j) => {
                    do_op(&mut matched, s.labels, (s.f, s.h), one[j].labels, (one[j].f, one[j].h), sig, out)?
                }
                None => {
                    if let Some(fill) = fill_one {
                        let filled = match_labels(s.labels);
                        do_op(&mut matched, s.labels, (s.f, s.h), &filled, (fill, None), sig, out)?;
                    }
                }
            }
        }
        if let Some(fill) = fill_many {
            for s in one {
                let sig = one_sig[s.idx];
                if matched.contains_key(&sig) {
                    continue;
                }
                let filled = match_labels(s.labels);
                do_op(&mut matched, &filled, (fill, None), s.labels, (s.f, s.h), sig, out)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = f64> {
        prop_oneof![
            4 => (-3i32..4).prop_map(f64::from),
            1 => any::<f64>(),
            1 => prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(f64::NEG_INFINITY), Just(-0.0)],
        ]
    }

    proptest! {
        /// The per-series filter keeps exactly the points `apply` keeps, values unchanged, for
        /// every comparison, NaN and signed zeros included, the literal on either side.
        #[test]
        fn keep_compared_equals_apply(
            values in proptest::collection::vec(value(), 0..40),
            c in value(),
            op in prop_oneof![
                Just(BinOp::Eql), Just(BinOp::Neq), Just(BinOp::Gtr),
                Just(BinOp::Lss), Just(BinOp::Gte), Just(BinOp::Lte),
            ],
            scalar_left in any::<bool>(),
        ) {
            let points: Vec<FPoint> = values.iter().enumerate().map(|(i, &f)| FPoint { t: i as i64, f }).collect();
            let mut got = points.clone();
            prop_assert!(keep_compared(&mut got, op, c, scalar_left));
            // Not a comparison: nothing filtered, and the caller takes the per-point path.
            let mut other = points.clone();
            prop_assert!(!keep_compared(&mut other, BinOp::Add, c, scalar_left));
            prop_assert_eq!(other.len(), points.len());
            let want: Vec<FPoint> = points
                .into_iter()
                .filter(|p| if scalar_left { apply(op, c, p.f).1 } else { apply(op, p.f, c).1 })
                .collect();
            let bits = |v: &[FPoint]| v.iter().map(|p| (p.t, p.f.to_bits())).collect::<Vec<_>>();
            prop_assert_eq!(bits(&got), bits(&want));
        }
    }
}

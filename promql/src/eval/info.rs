//! The experimental `info()` function: adds data labels from info metrics (by default
//! `target_info`) to series with the same identifying labels (`instance`, `job`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use storage::{Label, Labels, MatchOp, Matcher, is_stale};

use super::series::{OutputBuilder, StepCursor};
use super::{Evaluator, Grid, HashMap, Val};
use crate::error::{Error, Result};
use crate::parser::ast::{Call, Expr};

const TARGET_INFO: &str = "target_info";
const IDENTIFYING: [&str; 2] = ["instance", "job"];

/// Time shift of the first selector in an expression, including the `@`/offset of enclosing
/// subqueries: `Some(t)` is a fixed reference time, else `offset` is subtracted from each step.
#[derive(Debug, Clone, Copy, Default)]
struct TimeShift {
    at: Option<i64>,
    offset: i64,
}

/// An info series at one step: the time of its sample in force and whether that sample is a
/// histogram (an error), or none.
type InfoSample = Option<(i64, bool)>;

impl<'a> Evaluator<'a> {
    /// The time at which the info series are read: the same shift as the first selector of the
    /// enriched expression (so `info(x offset 1m)` enriches with info as of one minute ago).
    fn info_time_shift(&self, e: &Expr, mut acc: TimeShift) -> Result<Option<TimeShift>> {
        Ok(match e {
            Expr::Vector(vs) => {
                let off = self.offset_ms(&vs.offset)?;
                match self.at_ms(vs.at) {
                    Some(t) => Some(TimeShift { at: Some(t), offset: off }),
                    None => Some(TimeShift { at: acc.at, offset: acc.offset + off }),
                }
            }
            Expr::Matrix(ms) => {
                let off = self.offset_ms(&ms.vs.offset)?;
                match self.at_ms(ms.vs.at) {
                    Some(t) => Some(TimeShift { at: Some(t), offset: off }),
                    None => Some(TimeShift { at: acc.at, offset: acc.offset + off }),
                }
            }
            Expr::Subquery(sq) => {
                let off = self.offset_ms(&sq.offset)?;
                acc = match self.at_ms(sq.at) {
                    Some(t) => TimeShift { at: Some(t), offset: off },
                    None => TimeShift { at: acc.at, offset: acc.offset + off },
                };
                self.info_time_shift(&sq.expr, acc)?
            }
            Expr::Paren(p) => self.info_time_shift(&p.expr, acc)?,
            Expr::Unary(u) => self.info_time_shift(&u.expr, acc)?,
            Expr::Binary(b) => match self.info_time_shift(&b.lhs, acc)? {
                Some(s) => Some(s),
                None => self.info_time_shift(&b.rhs, acc)?,
            },
            Expr::Aggregate(a) => {
                if let Some(p) = &a.param
                    && let Some(s) = self.info_time_shift(p, acc)?
                {
                    return Ok(Some(s));
                }
                self.info_time_shift(&a.expr, acc)?
            }
            Expr::Call(c) => {
                for a in &c.args {
                    if let Some(s) = self.info_time_shift(a, acc)? {
                        return Ok(Some(s));
                    }
                }
                None
            }
            Expr::Number(_) | Expr::String(_) => None,
        })
    }

    pub(crate) fn eval_info(&mut self, c: &Call, g: Grid) -> Result<Val> {
        let base = self.eval_vector(&c.args[0], g)?;
        let selector = match c.args.get(1).map(Expr::unparen) {
            Some(Expr::Vector(vs)) => Some(vs.matchers.clone()),
            Some(_) => return Err(Error::BadData("expected label selectors only".into())),
            None => None,
        };
        let (name_matchers, mut data_matchers): (Vec<Matcher>, Vec<Matcher>) = match &selector {
            Some(ms) => ms.iter().cloned().partition(|m| m.name == storage::METRIC_NAME),
            None => (vec![Matcher::equal(storage::METRIC_NAME, TARGET_INFO)], Vec::new()),
        };
        // Base series that are info series themselves (their name is selected by the name
        // matchers, of which at least one is positive) are passed through unchanged.
        let positive = name_matchers.iter().any(|m| matches!(m.op, MatchOp::Equal | MatchOp::Regex));
        let ignored: Vec<bool> = base
            .iter()
            .map(|s| {
                let name = s.labels.metric_name().unwrap_or("");
                positive && name_matchers.iter().all(|m| m.matches(name))
            })
            .collect();
        let mut id_values: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for (s, ign) in base.iter().zip(&ignored) {
            if *ign {
                continue;
            }
            for l in IDENTIFYING {
                if let Some(v) = s.labels.get(l) {
                    id_values.entry(l).or_default().insert(v.to_string());
                }
            }
        }
        let shift = self.info_time_shift(&c.args[0], TimeShift::default())?.unwrap_or_default();
        let refs: Vec<i64> =
            g.timestamps().map(|ts| shift.at.unwrap_or(ts).saturating_sub(shift.offset)).collect();
        // Info samples per step: value is the sample's timestamp, used to prefer newer series.
        let mut info_series: Vec<(Labels, Vec<InfoSample>)> = Vec::new();
        if !id_values.is_empty() {
            let mut matchers = Vec::new();
            for (name, vals) in &id_values {
                let re: Vec<String> = vals.iter().map(|v| regex::escape(v)).collect();
                matchers.push(Matcher::new(MatchOp::Regex, *name, re.join("|"))?);
            }
            matchers.extend(name_matchers.iter().cloned());
            matchers.extend(data_matchers.iter().cloned());
            if name_matchers.is_empty() {
                matchers.insert(0, Matcher::equal(storage::METRIC_NAME, TARGET_INFO));
            } else if !positive {
                // Only negative name matchers: candidates are still info metrics, not any series
                // that happens to share the identifying labels.
                matchers.push(Matcher::new(MatchOp::Regex, storage::METRIC_NAME, ".+_info")?);
            }
            let lb = self.opts.lookback_delta_ms;
            let lo = refs.iter().min().copied().unwrap_or(0);
            let hi = refs.iter().max().copied().unwrap_or(0);
            let mint = lo.saturating_sub(lb).saturating_add(1);
            let series = self.select(&matchers, mint, hi)?;
            let (mut buf, mut hbuf) = (Vec::new(), Vec::new());
            for r in &series {
                self.load(r, mint, hi, &mut buf)?;
                hbuf.clear();
                let began = Instant::now();
                self.querier.histograms(r, mint, hi, &mut hbuf)?;
                self.read_time += began.elapsed();
                self.samples_read += hbuf.len() as u64;
                // Per step: the time of the sample in force, and whether it is a histogram.
                let per_step: Vec<InfoSample> = refs
                    .iter()
                    .map(|&t| {
                        let f = buf.partition_point(|s| s.t <= t).checked_sub(1).map(|j| buf[j]);
                        let h = hbuf.partition_point(|s| s.t <= t).checked_sub(1).map(|j| &hbuf[j]);
                        let (st, stale, is_h) = match (f, h) {
                            (Some(f), Some(h)) if h.t > f.t => (h.t, is_stale(h.h.sum), true),
                            (Some(f), _) => (f.t, is_stale(f.v), false),
                            (None, Some(h)) => (h.t, is_stale(h.h.sum), true),
                            (None, None) => return None,
                        };
                        (st > t.saturating_sub(lb) && !stale).then_some((st, is_h))
                    })
                    .collect();
                info_series.push((r.labels.clone(), per_step));
            }
        }
        data_matchers.retain(|m| m.name != storage::METRIC_NAME);
        let mut data_by_name: HashMap<&str, Vec<&Matcher>> = HashMap::default();
        for m in &data_matchers {
            data_by_name.entry(m.name.as_str()).or_default().push(m);
        }
        let all_match_empty = data_matchers.iter().all(Matcher::matches_empty);
        let info_names: BTreeSet<String> =
            info_series.iter().map(|(l, _)| l.metric_name().unwrap_or("").to_string()).collect();
        let sig = |name: &str, l: &Labels| -> Labels {
            let mut v = vec![Label::new(storage::METRIC_NAME, name)];
            v.extend(l.iter().filter(|x| IDENTIFYING.contains(&x.name.as_ref())).cloned());
            Labels::new(v)
        };
        let info_sigs: Vec<Labels> =
            info_series.iter().map(|(l, _)| sig(l.metric_name().unwrap_or(""), l)).collect();
        let mut out = OutputBuilder::new(g);
        let mut cursor = StepCursor::new(&base);
        let mut step = Vec::new();
        for (si, ts) in g.timestamps().enumerate() {
            self.check_deadline()?;
            cursor.at(&base, ts, &mut step);
            if step.is_empty() {
                continue;
            }
            let mut by_sig: HashMap<&Labels, (usize, i64)> = HashMap::default();
            for (ii, (labels, per_step)) in info_series.iter().enumerate() {
                let Some((t, is_histogram)) = per_step.get(si).copied().flatten() else {
                    continue;
                };
                if is_histogram {
                    return Err(Error::Execution("info sample should be float".into()));
                }
                match by_sig.get(&info_sigs[ii]) {
                    Some(&(prev, pt)) if pt == t => {
                        return Err(Error::Execution(format!(
                            "found duplicate series for info metric: existing {} @ {pt}, new {labels} @ {t}",
                            info_series[prev].0
                        )));
                    }
                    Some(&(_, pt)) if pt > t => {}
                    _ => {
                        by_sig.insert(&info_sigs[ii], (ii, t));
                    }
                }
            }
            for s in &step {
                if ignored[s.idx] {
                    out.push_value(s.labels.clone(), s.drop_name, ts, s.f, s.h.cloned())?;
                    continue;
                }
                let mut added: BTreeMap<String, String> = BTreeMap::new();
                let mut matched_any = false;
                for name in &info_names {
                    let Some(&(ii, _)) = by_sig.get(&sig(name, s.labels)) else {
                        continue;
                    };
                    matched_any = true;
                    for l in info_series[ii].0.iter() {
                        let lname = l.name.as_ref();
                        if lname == storage::METRIC_NAME {
                            continue;
                        }
                        if !data_by_name.is_empty() && !data_by_name.contains_key(lname) {
                            continue;
                        }
                        if let Some(v) = added.get(lname)
                            && v.as_str() != l.value.as_ref()
                        {
                            return Err(Error::Execution(format!("conflicting label: {lname}")));
                        }
                        if s.labels.get(lname).is_some() {
                            continue;
                        }
                        added.insert(lname.to_string(), l.value.to_string());
                    }
                }
                if !matched_any && !all_match_empty {
                    continue;
                }
                let mut v: Vec<Label> = s.labels.iter().cloned().collect();
                v.extend(added.iter().map(|(n, val)| Label::new(n.as_str(), val.as_str())));
                out.push_value(Labels::new(v), s.drop_name, ts, s.f, s.h.cloned())?;
            }
        }
        Ok(Val::Vector(out.finish(self.opts.delayed_name_removal)?))
    }
}

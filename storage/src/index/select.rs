//! Evaluating label matchers against the inverted index, with Prometheus semantics.
//!
//! A missing label has the value `""`. Each matcher becomes one step on the candidate set:
//!
//! * a matcher that does not match `""` **keeps** only series whose label has one of the values
//!   the matcher accepts (`{a="x"}`, `{a=~"x.*"}`, `{a!=""}`, `{a!~"x|"}`);
//! * a matcher that matches `""` **drops** series whose label has one of the values the matcher
//!   rejects, so series without the label stay (`{a=""}`, `{a!="x"}`, `{a=~"x|"}`, `{a!~"x"}`).
//!
//! Keep steps run first, cheapest first, the first one producing the candidates (all live
//! series if there is no keep step); drop steps then subtract. The values a step selects are
//! found by direct lookup for `=`, `!=` and regexes that are alternations of literals, and
//! otherwise by running the matcher over the values of that one label name (only those with
//! the regex's literal prefix, when it has one). When the candidates are fewer than the values
//! of the name, the step instead checks the candidates' own labels, which is cheaper and the
//! same answer.

use super::Index;
use super::inverted::ValueIndex;
use super::postings;
use crate::matcher::{MatchOp, Matcher};
use crate::types::SeriesId;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Effect {
    /// Keep candidates whose label value is selected.
    Keep,
    /// Drop candidates whose label value is selected.
    Drop,
}

/// Which values of the label a step selects.
enum Values {
    /// These values, looked up directly.
    Literals(Vec<String>),
    /// Every value.
    All,
    /// The values for which [`Step::selects`] holds, found by scanning.
    Scan,
}

/// What one matcher does to the candidate set.
struct Step<'m> {
    matcher: &'m Matcher,
    effect: Effect,
    values: Values,
}

/// The result of evaluating a step against a name's values.
enum Outcome {
    /// The new candidates.
    Ids(Vec<SeriesId>),
    /// Cheaper to check the candidates' labels directly than to scan the values.
    CheckLabels,
}

impl<'m> Step<'m> {
    /// The step for a matcher, or None if it selects every series (`=~".*"`).
    fn plan(m: &'m Matcher) -> Option<Step<'m>> {
        use {Effect::*, MatchOp::*};
        let effect = if m.matches_empty() { Drop } else { Keep };
        let literal = || Values::Literals(vec![m.value.clone()]);
        let values = match (m.op, effect) {
            (Regex, Drop) if m.value == ".*" => return None,
            (Regex, Keep) if m.value == ".+" => Values::All,
            // Only `{a=""}` matches the empty value: drop every series that has `a`.
            (Equal, Drop) => Values::All,
            (Equal, Keep) => literal(),
            // Only `{a!=""}` rejects the empty value: keep every series that has `a`.
            (NotEqual, Keep) => Values::All,
            (NotEqual, Drop) => literal(),
            (Regex, Keep) => m.regex_literals().map_or(Values::Scan, Values::Literals),
            // `{a!~"x|y"}` drops exactly the series with a="x" or a="y".
            (NotRegex, Drop) => Matcher::new(Regex, m.name.as_str(), m.value.as_str())
                .ok()
                .and_then(|r| r.regex_literals())
                .map_or(Values::Scan, Values::Literals),
            (Regex, Drop) | (NotRegex, Keep) => Values::Scan,
        };
        Some(Step { matcher: m, effect, values })
    }

    /// Is a series with label value `value` selected by this step: accepted by the matcher for
    /// a keep step, rejected by it for a drop step.
    fn selects(&self, value: &str) -> bool {
        self.matcher.matches(value) == (self.effect == Effect::Keep)
    }

    /// For a scan whose selected values are exactly the regex's matches, the literal prefix
    /// every such value starts with.
    fn scan_prefix(&self) -> Option<&'m str> {
        let regex_selects = matches!(
            (self.matcher.op, self.effect),
            (MatchOp::Regex, Effect::Keep) | (MatchOp::NotRegex, Effect::Drop)
        );
        regex_selects.then(|| literal_prefix(&self.matcher.value)).filter(|p| !p.is_empty())
    }

    /// The postings of the selected values.
    fn selected<'v>(&self, values: &'v ValueIndex) -> Vec<&'v [SeriesId]> {
        match &self.values {
            Values::Literals(literals) => literals.iter().filter_map(|v| values.postings(v)).collect(),
            Values::All => values.iter().map(|(_, ids)| ids).collect(),
            Values::Scan => match self.scan_prefix() {
                Some(prefix) => {
                    values.iter_prefix(prefix).filter(|(v, _)| self.selects(v)).map(|(_, ids)| ids).collect()
                }
                None => values.iter().filter(|(v, _)| self.selects(v)).map(|(_, ids)| ids).collect(),
            },
        }
    }

    /// Roughly how many series a keep step leaves, to run the most selective first. Scans sort
    /// after lookups because they also cost a pass over the values.
    fn cost(&self, values: Option<&ValueIndex>) -> (bool, usize) {
        let Some(values) = values else { return (false, 0) };
        match &self.values {
            Values::Literals(literals) => {
                (false, literals.iter().filter_map(|v| values.postings(v)).map(<[_]>::len).sum())
            }
            Values::All => (false, values.series_count()),
            Values::Scan => (true, values.series_count()),
        }
    }

    /// Whether checking each candidate's labels beats visiting the name's values.
    fn check_labels_instead(&self, candidates: usize, values: &ValueIndex) -> bool {
        !matches!(self.values, Values::Literals(_)) && candidates < values.value_count()
    }

    /// Applies a keep step; `candidates` is None for the first step.
    fn keep(&self, index: &Index, candidates: Option<Vec<SeriesId>>) -> Vec<SeriesId> {
        let outcome = index.postings.with_values(&self.matcher.name, |values| {
            let Some(values) = values else { return Outcome::Ids(Vec::new()) };
            let Some(candidates) = candidates.as_deref() else {
                return Outcome::Ids(postings::union(&self.selected(values)));
            };
            if self.check_labels_instead(candidates.len(), values) {
                return Outcome::CheckLabels;
            }
            Outcome::Ids(match self.selected(values).as_slice() {
                [one] => postings::intersect(candidates, one),
                lists => postings::intersect(candidates, &postings::union(lists)),
            })
        });
        match outcome {
            Outcome::Ids(ids) => ids,
            Outcome::CheckLabels => {
                let mut ids = candidates.unwrap_or_default();
                index.store.retain(&mut ids, |labels| self.matcher.matches_labels(labels));
                ids
            }
        }
    }

    /// Applies a drop step to the candidates.
    fn drop(&self, index: &Index, candidates: &mut Vec<SeriesId>) {
        let check_labels = index.postings.with_values(&self.matcher.name, |values| {
            // No series has the label, so none has a value to drop.
            let Some(values) = values else { return false };
            if self.check_labels_instead(candidates.len(), values) {
                return true;
            }
            match self.selected(values).as_slice() {
                [one] => postings::subtract(candidates, one),
                lists => postings::subtract(candidates, &postings::union(lists)),
            }
            false
        });
        if check_labels {
            index.store.retain(candidates, |labels| self.matcher.matches_labels(labels));
        }
    }
}

/// The literal text every match of the (anchored) regex `source` starts with; empty if there
/// is none or if the regex has an alternation anywhere (conservative, since `a.*|b` has none).
fn literal_prefix(source: &str) -> &str {
    const SPECIAL: &str = "\\.+*?()[]{}^$|";
    if source.contains('|') {
        return "";
    }
    let end = source.find(|c| SPECIAL.contains(c)).unwrap_or(source.len());
    let (prefix, rest) = source.split_at(end);
    // A quantifier applies to the character before it, which therefore is optional or repeated.
    if rest.starts_with(['*', '?', '{']) {
        prefix.char_indices().next_back().map_or("", |(last, _)| &prefix[..last])
    } else {
        prefix
    }
}

/// Sorted ids of live series matching every matcher; see the module docs.
pub(super) fn select(index: &Index, matchers: &[Matcher]) -> Vec<SeriesId> {
    let (keeps, drops): (Vec<Step>, Vec<Step>) =
        matchers.iter().filter_map(Step::plan).partition(|s| s.effect == Effect::Keep);

    let mut keeps: Vec<((bool, usize), Step)> =
        keeps.into_iter().map(|s| (index.postings.with_values(&s.matcher.name, |v| s.cost(v)), s)).collect();
    keeps.sort_by_key(|(cost, _)| *cost);

    let mut candidates = None;
    for (_, step) in &keeps {
        let ids = step.keep(index, candidates.take());
        if ids.is_empty() {
            return ids;
        }
        candidates = Some(ids);
    }
    let mut candidates = candidates.unwrap_or_else(|| index.postings.all());
    for step in &drops {
        if candidates.is_empty() {
            break;
        }
        step.drop(index, &mut candidates);
    }
    candidates
}

#[cfg(test)]
mod tests {
    use super::literal_prefix;

    #[test]
    fn literal_prefix_stops_before_anything_optional() {
        assert_eq!(literal_prefix("host_4.*"), "host_4");
        assert_eq!(literal_prefix("cpu_.+"), "cpu_");
        assert_eq!(literal_prefix("ab*"), "a");
        assert_eq!(literal_prefix("ab?c"), "a");
        assert_eq!(literal_prefix("ab{0,2}"), "a");
        assert_eq!(literal_prefix("a.*|b"), "");
        assert_eq!(literal_prefix("(?i)abc"), "");
        assert_eq!(literal_prefix("é*"), "");
        assert_eq!(literal_prefix("plain"), "plain");
        assert_eq!(literal_prefix(""), "");
    }
}

//! The index checked against a brute-force model: random label sets over a small alphabet,
//! random creations and removals, and random matchers of all four kinds; every answer must equal
//! the one computed by testing each live series with `Matcher::matches_labels`. Label names and
//! values are also asked with a random filter (standing for "has data in the time range"),
//! through each walk the lookups can take, and the filter may only be asked about candidates.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use proptest::prelude::*;
use proptest::sample::Index as Pick;

use super::Index;
use super::lookup::Plan;
use crate::matcher::{MatchOp, Matcher, matches_all};
use crate::types::{Labels, SeriesId};

const NAMES: [&str; 3] = ["a", "b", "c"];
/// Queries also use a name no series has.
const QUERY_NAMES: [&str; 4] = ["a", "b", "c", "d"];
const VALUES: [&str; 4] = ["x", "y", "xy", "z"];
const PATTERNS: [&str; 14] =
    ["", "x", "y", "xy", "q", "x|y", "z|q", "x.*", ".*", ".+", "x|", "y|xy", "x?y", "[xz]"];
const OPS: [MatchOp; 4] = [MatchOp::Equal, MatchOp::NotEqual, MatchOp::Regex, MatchOp::NotRegex];

#[derive(Debug, Clone)]
enum Op {
    Create(Labels),
    /// Removes ids picked among all ids ever handed out (some already removed).
    Remove(Vec<Pick>),
}

fn label_set() -> impl Strategy<Value = Labels> {
    prop::collection::vec(prop::option::of(0..VALUES.len()), NAMES.len()).prop_map(|values| {
        let pairs: Vec<(&str, &str)> =
            NAMES.iter().zip(values).filter_map(|(n, v)| v.map(|v| (*n, VALUES[v]))).collect();
        Labels::from_pairs(&pairs)
    })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => label_set().prop_map(Op::Create),
        1 => prop::collection::vec(any::<Pick>(), 1..4).prop_map(Op::Remove),
    ]
}

fn matcher() -> impl Strategy<Value = Matcher> {
    (0..QUERY_NAMES.len(), 0..OPS.len(), 0..PATTERNS.len())
        .prop_map(|(n, op, p)| Matcher::new(OPS[op], QUERY_NAMES[n], PATTERNS[p]).unwrap())
}

/// The model: live series by id, and the id of each live label set.
#[derive(Default)]
struct Model {
    live: BTreeMap<SeriesId, Labels>,
    ids: HashMap<Labels, SeriesId>,
    next: SeriesId,
}

impl Model {
    fn names(&self, ids: &[SeriesId]) -> Vec<String> {
        let names: BTreeSet<String> =
            ids.iter().flat_map(|id| self.live[id].iter().map(|l| l.name.to_string())).collect();
        names.into_iter().collect()
    }

    fn values(&self, name: &str, ids: &[SeriesId]) -> Vec<String> {
        let values: BTreeSet<String> =
            ids.iter().filter_map(|id| self.live[id].get(name).map(str::to_string)).collect();
        values.into_iter().collect()
    }
}

/// Label names and values over `candidates` (None: all live series) restricted to the series
/// `kept` selects, through every plan, against the model.
fn check_filtered(
    index: &Index,
    model: &Model,
    candidates: Option<&[SeriesId]>,
    kept: &[bool],
) -> Result<(), TestCaseError> {
    let keeps = |id: SeriesId| kept[id as usize % kept.len()];
    let all: Vec<SeriesId> = model.live.keys().copied().collect();
    let pool = candidates.unwrap_or(&all);
    let passing: Vec<SeriesId> = pool.iter().copied().filter(|&id| keeps(id)).collect();
    for plan in [Plan::Cost, Plan::Values, Plan::Labels] {
        let mut asked = Vec::new();
        let mut keep = |id: SeriesId, _: Option<&Labels>| {
            asked.push(id);
            Ok(keeps(id))
        };
        prop_assert_eq!(
            index.label_names_planned(candidates, plan, &mut keep).unwrap(),
            model.names(&passing),
            "names {:?} {:?}",
            plan,
            candidates
        );
        for name in QUERY_NAMES {
            prop_assert_eq!(
                index.label_values_planned(name, candidates, plan, &mut keep).unwrap(),
                model.values(name, &passing),
                "values of {} {:?} {:?}",
                name,
                plan,
                candidates
            );
        }
        prop_assert!(asked.iter().all(|id| pool.contains(id)), "asked about a non-candidate");
    }
    Ok(())
}

fn check_queries(
    index: &Index,
    model: &Model,
    queries: &[Vec<Matcher>],
    kept: &[bool],
) -> Result<(), TestCaseError> {
    let all: Vec<SeriesId> = model.live.keys().copied().collect();
    check_filtered(index, model, None, kept)?;
    prop_assert_eq!(index.len(), all.len());
    prop_assert_eq!(index.label_names(None), model.names(&all));
    for name in QUERY_NAMES {
        prop_assert_eq!(index.label_values(name, None), model.values(name, &all));
    }
    for matchers in queries {
        let expected: Vec<SeriesId> =
            model.live.iter().filter(|(_, l)| matches_all(matchers, l)).map(|(id, _)| *id).collect();
        let got = index.select(matchers);
        prop_assert_eq!(&got, &expected, "select {:?}", matchers);
        prop_assert_eq!(index.label_names(Some(&got)), model.names(&got));
        for name in QUERY_NAMES {
            prop_assert_eq!(index.label_values(name, Some(&got)), model.values(name, &got));
        }
        check_filtered(index, model, Some(&got), kept)?;
        // Candidates need not come sorted or unique.
        let shuffled: Vec<SeriesId> = got.iter().rev().chain(got.first()).copied().collect();
        check_filtered(index, model, Some(&shuffled), kept)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn index_agrees_with_brute_force(
        ops in prop::collection::vec(op(), 1..60),
        queries in prop::collection::vec(prop::collection::vec(matcher(), 0..4), 1..6),
        kept in prop::collection::vec(any::<bool>(), 1..8),
    ) {
        let index = Index::new();
        let mut model = Model::default();
        for op in ops {
            match op {
                Op::Create(labels) => {
                    let expected = match model.ids.get(&labels) {
                        Some(&id) => (id, false),
                        None => {
                            let id = model.next;
                            model.next += 1;
                            model.ids.insert(labels.clone(), id);
                            model.live.insert(id, labels.clone());
                            (id, true)
                        }
                    };
                    prop_assert_eq!(index.get_or_create(&labels), expected);
                }
                Op::Remove(picks) => {
                    if model.next == 0 {
                        continue;
                    }
                    let ids: Vec<SeriesId> = picks.iter().map(|p| p.index(model.next as usize) as SeriesId).collect();
                    for id in &ids {
                        if let Some(labels) = model.live.remove(id) {
                            model.ids.remove(&labels);
                        }
                    }
                    index.remove(&ids);
                    for id in &ids {
                        prop_assert_eq!(index.labels(*id), None);
                    }
                }
            }
            check_queries(&index, &model, &queries, &kept)?;
        }
        index.check();
        for (labels, id) in &model.ids {
            prop_assert_eq!(index.get(labels), Some(*id));
        }
    }
}

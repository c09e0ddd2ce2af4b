//! Tests of the borrowed-label paths: [`Index::get_or_create_ref`] and [`IndexLoader`] find and
//! create the same series as the owned path, intern their strings, and keep the index
//! consistent, also when creators and readers race.

use std::sync::{Arc, Barrier};
use std::thread;

use super::Index;
use crate::labels_ref::{LabelPair, LabelsRef};
use crate::matcher::{MatchOp, Matcher};
use crate::types::{Labels, SeriesId};

fn pairs(labels: &Labels) -> Vec<LabelPair<'_>> {
    labels.iter().map(|l| (&*l.name, &*l.value)).collect()
}

#[test]
fn borrowed_and_owned_label_sets_name_the_same_series() {
    let index = Index::new();
    let a = Labels::from_pairs(&[("__name__", "up"), ("job", "api")]);
    let b = Labels::from_pairs(&[("__name__", "up"), ("job", "web")]);
    assert_eq!(index.get_or_create(&a), (0, true));
    let b_pairs = pairs(&b);
    let b_ref = LabelsRef::new(&b_pairs).unwrap();
    assert_eq!(index.get_or_create_ref(b_ref), (1, true));
    assert_eq!(index.get_or_create_ref(b_ref), (1, false));
    assert_eq!(index.get_or_create(&b), (1, false));
    let a_pairs = pairs(&a);
    assert_eq!(index.get_or_create_ref(LabelsRef::new(&a_pairs).unwrap()), (0, false));
    assert_eq!(index.get_ref(b_ref), Some(1));
    assert_eq!(index.get_ref(LabelsRef::new(&[("__name__", "down")]).unwrap()), None);
    // A prefix of a known set is another series.
    assert_eq!(index.get_ref(LabelsRef::new(&a_pairs[..1]).unwrap()), None);
    assert_eq!(index.labels(1), Some(b.clone()));
    index.check();
}

#[test]
fn series_created_from_borrowed_strings_share_the_interned_ones() {
    let index = Index::new();
    let first = Labels::from_pairs(&[("__name__", "up"), ("job", "api")]);
    index.get_or_create(&first);
    let text = String::from("__name__ up job api instance x");
    let words: Vec<&str> = text.split(' ').collect();
    let borrowed = [(words[0], words[1]), (words[4], words[5]), (words[2], words[3])];
    let mut sorted = borrowed.to_vec();
    sorted.sort();
    let (id, created) = index.get_or_create_ref(LabelsRef::new(&sorted).unwrap());
    assert!(created);
    let stored = index.labels(id).unwrap();
    assert_eq!(stored, Labels::from_pairs(&[("__name__", "up"), ("instance", "x"), ("job", "api")]));
    // Strings the index held already are shared with the first series, not copied again.
    let interned = index.labels(0).unwrap();
    for name in ["__name__", "job"] {
        let of = |l: &Labels| l.iter().find(|p| &*p.name == name).map(|p| p.value.clone()).unwrap();
        assert!(Arc::ptr_eq(&of(&stored), &of(&interned)), "{name}");
    }
    index.check();
}

#[test]
fn a_loader_fills_the_index_as_the_shared_path_does() {
    let sets: Vec<Labels> = (0..200)
        .map(|i| Labels::from_pairs(&[("__name__", format!("m{}", i % 7)), ("host", format!("h{}", i / 3))]))
        .collect();
    let shared = Index::new();
    let mut loaded = Index::new();
    let loader = loaded.loader();
    for labels in sets.iter().chain(&sets) {
        let p = pairs(labels);
        let r = LabelsRef::new(&p).unwrap();
        assert_eq!(loader.get_or_create_ref(r), shared.get_or_create_ref(r));
    }
    for id in 0..sets.len() as SeriesId {
        assert_eq!(loaded.labels(id), shared.labels(id));
    }
    let m3 = [Matcher::new(MatchOp::Equal, "__name__", "m3").unwrap()];
    assert_eq!(loaded.select(&m3), shared.select(&m3));
    loaded.check();
    shared.check();
}

/// Creators on the borrowed path race a reader: every id `select` returns has labels.
#[test]
fn borrowed_creation_publishes_labels_before_postings() {
    const THREADS: usize = 3;
    let sets: Arc<Vec<Labels>> = Arc::new(
        (0..2000)
            .map(|i| Labels::from_pairs(&[("__name__", format!("m{}", i % 5)), ("host", format!("h{i}"))]))
            .collect(),
    );
    let index = Arc::new(Index::new());
    let start = Arc::new(Barrier::new(THREADS + 1));
    let creators: Vec<_> = (0..THREADS)
        .map(|t| {
            let (sets, index, start) = (sets.clone(), index.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                for k in 0..sets.len() {
                    let labels = &sets[(k + t * 700) % sets.len()];
                    let p = pairs(labels);
                    index.get_or_create_ref(LabelsRef::new(&p).unwrap());
                }
            })
        })
        .collect();
    start.wait();
    let matchers = [Matcher::new(MatchOp::Regex, "host", "h1.*").unwrap()];
    for _ in 0..200 {
        for id in index.select(&matchers) {
            assert!(index.labels(id).is_some(), "select returned {id} before its labels");
        }
    }
    for c in creators {
        c.join().unwrap();
    }
    assert_eq!(index.len(), sets.len());
    index.check();
}

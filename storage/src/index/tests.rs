//! Unit tests of the index: each matcher kind, absent-label rules, combinations, removal,
//! interning, and concurrent creation.

use std::sync::{Arc, Barrier};
use std::thread;

use super::Index;
use crate::matcher::{MatchOp, Matcher};
use crate::types::{Labels, SeriesId};

fn m(op: MatchOp, name: &str, value: &str) -> Matcher {
    Matcher::new(op, name, value).unwrap()
}

/// 0: up{job="api", instance="a"}, 1: up{job="web", instance="b"}, 2: up{instance="c"},
/// 3: down{job="api"}.
fn sample_index() -> Index {
    let index = Index::new();
    let sets = [
        Labels::from_pairs(&[("__name__", "up"), ("job", "api"), ("instance", "a")]),
        Labels::from_pairs(&[("__name__", "up"), ("job", "web"), ("instance", "b")]),
        Labels::from_pairs(&[("__name__", "up"), ("instance", "c")]),
        Labels::from_pairs(&[("__name__", "down"), ("job", "api")]),
    ];
    for (i, l) in sets.iter().enumerate() {
        assert_eq!(index.get_or_create(l), (i as SeriesId, true));
    }
    index
}

fn select(index: &Index, matchers: &[(MatchOp, &str, &str)]) -> Vec<SeriesId> {
    let matchers: Vec<Matcher> = matchers.iter().map(|(op, n, v)| m(*op, n, v)).collect();
    index.select(&matchers)
}

use MatchOp::{Equal as EQ, NotEqual as NE, NotRegex as NRE, Regex as RE};

#[test]
fn equal_matchers() {
    let index = sample_index();
    assert_eq!(select(&index, &[(EQ, "job", "api")]), vec![0, 3]);
    assert_eq!(select(&index, &[(EQ, "job", "nope")]), Vec::<SeriesId>::new());
    // `=""` selects exactly the series without the label.
    assert_eq!(select(&index, &[(EQ, "job", "")]), vec![2]);
    assert_eq!(select(&index, &[(EQ, "__name__", "up"), (EQ, "job", "")]), vec![2]);
}

#[test]
fn not_equal_matchers() {
    let index = sample_index();
    // Series without the label have the value "", which differs from "api".
    assert_eq!(select(&index, &[(NE, "job", "api")]), vec![1, 2]);
    assert_eq!(select(&index, &[(NE, "job", "")]), vec![0, 1, 3]);
    assert_eq!(select(&index, &[(NE, "job", "nope")]), vec![0, 1, 2, 3]);
}

#[test]
fn regex_matchers() {
    let index = sample_index();
    assert_eq!(select(&index, &[(RE, "job", "api|web")]), vec![0, 1, 3]);
    assert_eq!(select(&index, &[(RE, "job", "a.*")]), vec![0, 3]);
    assert_eq!(select(&index, &[(RE, "job", ".*")]), vec![0, 1, 2, 3]);
    assert_eq!(select(&index, &[(RE, "job", ".+")]), vec![0, 1, 3]);
    assert_eq!(select(&index, &[(RE, "job", "")]), vec![2]);
    // Anchored: neither a substring nor a prefix matches.
    assert_eq!(select(&index, &[(RE, "job", "pi")]), Vec::<SeriesId>::new());
    assert_eq!(select(&index, &[(RE, "job", "ap")]), Vec::<SeriesId>::new());
    // Matches "": also selects the series without `job`.
    assert_eq!(select(&index, &[(RE, "job", "api|")]), vec![0, 2, 3]);
    assert_eq!(select(&index, &[(RE, "job", "w.*|")]), vec![1, 2]);
}

#[test]
fn not_regex_matchers() {
    let index = sample_index();
    assert_eq!(select(&index, &[(NRE, "job", "api")]), vec![1, 2]);
    assert_eq!(select(&index, &[(NRE, "job", "api|web")]), vec![2]);
    assert_eq!(select(&index, &[(NRE, "job", "a.*")]), vec![1, 2]);
    assert_eq!(select(&index, &[(NRE, "job", ".*")]), Vec::<SeriesId>::new());
    assert_eq!(select(&index, &[(NRE, "job", "")]), vec![0, 1, 3]);
    // Does not match "": only series that have `job`, with another value.
    assert_eq!(select(&index, &[(NRE, "job", "api|")]), vec![1]);
}

#[test]
fn matchers_on_a_label_no_series_has() {
    let index = sample_index();
    let all = vec![0, 1, 2, 3];
    assert_eq!(select(&index, &[(EQ, "zone", "x")]), Vec::<SeriesId>::new());
    assert_eq!(select(&index, &[(RE, "zone", "x.*")]), Vec::<SeriesId>::new());
    assert_eq!(select(&index, &[(NE, "zone", "")]), Vec::<SeriesId>::new());
    assert_eq!(select(&index, &[(EQ, "zone", "")]), all);
    assert_eq!(select(&index, &[(NE, "zone", "x")]), all);
    assert_eq!(select(&index, &[(RE, "zone", "x|")]), all);
    assert_eq!(select(&index, &[(NRE, "zone", "x")]), all);
    assert_eq!(select(&index, &[]), all);
}

#[test]
fn combinations() {
    let index = sample_index();
    assert_eq!(select(&index, &[(EQ, "__name__", "up"), (NRE, "job", "web")]), vec![0, 2]);
    assert_eq!(select(&index, &[(RE, "__name__", "up|down"), (RE, "instance", "a|c")]), vec![0, 2]);
    assert_eq!(select(&index, &[(EQ, "__name__", "up"), (NE, "job", ""), (NE, "instance", "a")]), vec![1]);
    assert_eq!(select(&index, &[(NE, "job", "api"), (EQ, "instance", "")]), Vec::<SeriesId>::new());
    assert_eq!(select(&index, &[(EQ, "job", ""), (EQ, "instance", "")]), Vec::<SeriesId>::new());
    assert_eq!(select(&index, &[(EQ, "job", "api"), (EQ, "job", "web")]), Vec::<SeriesId>::new());
    assert_eq!(select(&index, &[(NE, "job", "api"), (NE, "job", "web")]), vec![2]);
}

/// Many distinct values and few candidates: steps check candidates' labels instead of scanning
/// values. Each case is compared with the brute-force answer.
#[test]
fn label_check_path_agrees_with_value_scan() {
    let index = Index::new();
    for i in 0..200 {
        let host = format!("h{i}");
        let rack = format!("r{}", i % 50);
        let job = if i % 3 == 0 { "api" } else { "web" };
        index.get_or_create(&Labels::from_pairs(&[
            ("host", host.as_str()),
            ("rack", rack.as_str()),
            ("job", job),
        ]));
    }
    let cases: &[&[(MatchOp, &str, &str)]] = &[
        &[(EQ, "host", "h7"), (RE, "rack", "r.*")],
        &[(EQ, "host", "h7"), (RE, "rack", "r1.*")],
        &[(EQ, "rack", "r7"), (NRE, "host", "h7|h57")],
        &[(EQ, "rack", "r7"), (NRE, "host", "h1.*")],
        &[(EQ, "rack", "r7"), (RE, "host", "h1.*|")],
        &[(EQ, "rack", "r7"), (NE, "host", "")],
        &[(EQ, "rack", "r7"), (EQ, "host", "")],
        &[(RE, "host", "h1.*"), (RE, "rack", "r1.*")],
        &[(RE, "host", "h1.."), (NRE, "job", "api")],
    ];
    for case in cases {
        let matchers: Vec<Matcher> = case.iter().map(|(op, n, v)| m(*op, n, v)).collect();
        let expected: Vec<SeriesId> = (0..200)
            .filter(|&id| matchers.iter().all(|m| m.matches_labels(&index.labels(id).unwrap())))
            .collect();
        assert_eq!(index.select(&matchers), expected, "{case:?}");
    }
    assert_eq!(select(&index, &[(EQ, "host", "h7"), (RE, "rack", "r7")]), vec![7]);
}

#[test]
fn label_names_and_values() {
    let index = sample_index();
    assert_eq!(index.label_names(None), vec!["__name__", "instance", "job"]);
    assert_eq!(index.label_names(Some(&[3])), vec!["__name__", "job"]);
    assert_eq!(index.label_names(Some(&[])), Vec::<String>::new());
    assert_eq!(index.label_values("job", None), vec!["api", "web"]);
    assert_eq!(index.label_values("job", Some(&[2, 3])), vec!["api"]);
    assert_eq!(index.label_values("job", Some(&[3, 1, 0])), vec!["api", "web"]);
    assert_eq!(index.label_values("instance", Some(&[0, 1, 2, 3])), vec!["a", "b", "c"]);
    assert_eq!(index.label_values("zone", None), Vec::<String>::new());
    assert_eq!(index.label_values("zone", Some(&[0])), Vec::<String>::new());
}

#[test]
fn remove_frees_values_and_never_reuses_ids() {
    let index = sample_index();
    let down = index.labels(3).unwrap();
    index.remove(&[3, 3, 99]);
    assert_eq!(index.len(), 3);
    assert_eq!(index.labels(3), None);
    assert_eq!(index.get(&down), None);
    assert_eq!(index.label_values("__name__", None), vec!["up"]);
    assert_eq!(select(&index, &[(EQ, "job", "api")]), vec![0]);
    assert_eq!(select(&index, &[(NE, "job", "x")]), vec![0, 1, 2]);
    index.remove(&[2, 0, 1]);
    assert!(index.is_empty());
    assert_eq!(index.label_names(None), Vec::<String>::new());
    assert_eq!(select(&index, &[]), Vec::<SeriesId>::new());
    index.check();
    assert_eq!(index.get_or_create(&down), (4, true));
    assert_eq!(index.get_or_create(&down), (4, false));
    assert_eq!(select(&index, &[(EQ, "__name__", "down")]), vec![4]);
    index.check();
}

#[test]
fn labels_are_interned_and_lookups_do_not_create() {
    let index = Index::new();
    let a = Labels::from_pairs(&[("__name__", "cpu"), ("host", "h1")]);
    let b = Labels::from_pairs(&[("__name__", "cpu"), ("host", "h2")]);
    assert_eq!(index.get(&a), None);
    assert!(index.is_empty());
    let (ia, _) = index.get_or_create(&a);
    let (ib, _) = index.get_or_create(&b);
    let (la, lb) = (index.labels(ia).unwrap(), index.labels(ib).unwrap());
    assert_eq!(la, a);
    let (pa, pb) = (la.as_slice(), lb.as_slice());
    assert!(Arc::ptr_eq(&pa[0].name, &pb[0].name));
    assert!(Arc::ptr_eq(&pa[0].value, &pb[0].value));
    assert!(Arc::ptr_eq(&pa[1].name, &pb[1].name));
    // The stored copy does not keep the caller's allocation.
    assert!(!Arc::ptr_eq(&pa[0].value, &a.as_slice()[0].value));
    assert_eq!(index.get(&b), Some(ib));
    assert_eq!(index.labels(77), None);
}

#[test]
fn memory_grows_with_series() {
    let index = Index::new();
    let empty = index.memory_bytes();
    for i in 0..1000 {
        index.get_or_create(&Labels::from_pairs(&[("__name__", "m"), ("host", &format!("h{i}"))]));
    }
    let full = index.memory_bytes();
    // Each series has at least its 2-pair label set (16 + 64 bytes) and a postings entry.
    assert!(full - empty > 1000 * 80, "{empty} -> {full}");
    let ids: Vec<SeriesId> = (0..1000).collect();
    index.remove(&ids);
    assert!(index.memory_bytes() < full);
}

#[test]
fn index_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Index>();
}

/// Threads create overlapping label sets in different orders: each set gets exactly one id,
/// ids are dense, and postings stay sorted although creators finish out of order.
#[test]
fn concurrent_creation_assigns_one_id_per_label_set() {
    const THREADS: usize = 4;
    const SETS: usize = 3000;
    let sets: Arc<Vec<Labels>> = Arc::new(
        (0..SETS)
            .map(|i| {
                Labels::from_pairs(&[
                    ("__name__", format!("m{}", i % 7)),
                    ("host", format!("h{}", i / 7)),
                    ("zone", format!("z{}", i % 3)),
                ])
            })
            .collect(),
    );
    let index = Arc::new(Index::new());
    // The creators, the reader and this thread start together.
    let start = Arc::new(Barrier::new(THREADS + 2));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (sets, index, start) = (sets.clone(), index.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                // Thread t walks the sets from offset t * SETS / THREADS, half of them backwards.
                let mut ids = vec![0; SETS];
                for k in 0..SETS {
                    let i = if t % 2 == 0 { (k + t * SETS / THREADS) % SETS } else { SETS - 1 - k };
                    let (id, _) = index.get_or_create(&sets[i]);
                    ids[i] = id;
                }
                ids
            })
        })
        .collect();
    // A reader runs selects meanwhile; every answer must be sorted and made of known ids.
    let reader = {
        let (index, start) = (index.clone(), start.clone());
        thread::spawn(move || {
            start.wait();
            let matchers = [m(RE, "host", "h1.*"), m(NE, "zone", "z1")];
            for _ in 0..200 {
                let ids = index.select(&matchers);
                assert!(ids.windows(2).all(|w| w[0] < w[1]));
                for id in ids {
                    assert!(index.labels(id).is_some(), "select returned {id} before its labels");
                }
            }
        })
    };
    start.wait();
    let results: Vec<Vec<SeriesId>> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    reader.join().unwrap();

    for r in &results[1..] {
        assert_eq!(r, &results[0], "threads disagree on ids");
    }
    let mut ids = results[0].clone();
    ids.sort_unstable();
    assert_eq!(ids, (0..SETS as SeriesId).collect::<Vec<_>>(), "ids not dense or not unique");
    for (i, &id) in results[0].iter().enumerate() {
        assert_eq!(index.labels(id).as_ref(), Some(&sets[i]));
    }
    assert_eq!(index.len(), SETS);
    index.check();
    let mut m3: Vec<SeriesId> = (0..SETS).filter(|i| i % 7 == 3).map(|i| results[0][i]).collect();
    m3.sort_unstable();
    assert_eq!(select(&index, &[(EQ, "__name__", "m3")]), m3);
}

/// Removers and creators of the same label sets run at once; afterwards the index is
/// consistent and every surviving series is findable.
#[test]
fn concurrent_removal_and_creation_stay_consistent() {
    let index = Arc::new(Index::new());
    let sets: Arc<Vec<Labels>> = Arc::new(
        (0..500)
            .map(|i| Labels::from_pairs(&[("a", format!("{}", i % 10)), ("b", format!("{i}"))]))
            .collect(),
    );
    let workers: Vec<_> = (0..3)
        .map(|t| {
            let (index, sets) = (index.clone(), sets.clone());
            thread::spawn(move || {
                for round in 0..20 {
                    let mut created = Vec::new();
                    for l in sets.iter().skip(t).step_by(2) {
                        created.push(index.get_or_create(l).0);
                    }
                    if (round + t) % 2 == 0 {
                        index.remove(&created);
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    index.check();
    let live = index.select(&[]);
    assert_eq!(live.len(), index.len());
    for l in sets.iter() {
        if let Some(id) = index.get(l) {
            assert!(live.binary_search(&id).is_ok());
        }
    }
}

#[test]
fn stats_rank_by_count_then_name() {
    use super::Stat;
    let stat = |name: &str, value: u64| Stat { name: name.into(), value };
    let index = sample_index();
    let s = index.stats(2, None);
    assert_eq!((s.series, s.label_pairs), (4, 7));
    assert_eq!(s.series_by_metric_name, vec![stat("up", 3), stat("down", 1)]);
    assert_eq!(s.values_by_label_name, vec![stat("instance", 3), stat("__name__", 2)]);
    assert_eq!(s.value_bytes_by_label_name, vec![stat("__name__", 6), stat("job", 6)]);
    assert_eq!(s.series_by_label_pair, vec![stat("__name__=up", 3), stat("job=api", 2)]);
    assert!(index.stats(0, None).series_by_label_pair.is_empty());
    assert_eq!(index.stats(100, None).series_by_label_pair.len(), 7);
}

/// Statistics of the series a matcher selects (a tenant's) are those of an index holding
/// only them, without the tenant label.
#[test]
fn stats_of_a_subset_are_those_of_an_index_of_it() {
    use crate::types::TENANT_LABEL;
    let (all, only) = (Index::new(), [Index::new(), Index::new(), Index::new()]);
    for i in 0..40u32 {
        let tenant = ["", "a", "b"][(i % 3) as usize];
        let metric = ["up", "down", "cpu", "mem", "x"][(i % 5) as usize];
        let mut pairs = vec![("__name__", metric.to_string()), ("pod", format!("p{}", i % 7))];
        if i % 2 == 0 {
            pairs.push(("zone", format!("z{}", i % 4)));
        }
        only[(i % 3) as usize].get_or_create(&Labels::from_pairs(&pairs));
        pairs.push((TENANT_LABEL, tenant.to_string()));
        all.get_or_create(&Labels::from_pairs(&pairs));
    }
    for (k, tenant) in ["", "a", "b"].into_iter().enumerate() {
        let ids = all.select(&[Matcher::equal(TENANT_LABEL, tenant), Matcher::new(MatchOp::Regex, "__name__", ".+").unwrap()]);
        for limit in [1, 3, 100] {
            assert_eq!(all.stats(limit, Some(&ids)), only[k].stats(limit, None), "tenant {tenant:?} limit {limit}");
        }
    }
}

#[test]
fn lookups_test_only_series_that_can_change_the_answer() {
    let index = sample_index();
    // A filter that keeps only series 2 and 3, counting how often it is asked.
    let mut asked = Vec::new();
    let mut keep = |id: SeriesId, _: Option<&Labels>| {
        asked.push(id);
        Ok(id >= 2)
    };
    assert_eq!(index.label_values_where("instance", None, &mut keep).unwrap(), vec!["c"]);
    assert_eq!(index.label_names_where(None, &mut keep).unwrap(), vec!["__name__", "instance", "job"]);
    assert_eq!(index.label_values_where("job", Some(&[0, 1, 3]), &mut keep).unwrap(), vec!["api"]);
    assert_eq!(index.label_names_where(Some(&[3]), &mut keep).unwrap(), vec!["__name__", "job"]);
    // Values `a`, `b`, `c` once each; a name stops at its first kept series.
    assert_eq!(&asked[..3], &[0, 1, 2]);
    let err = index.label_values_where("job", None, |_, _| Err(crate::Error::InvalidInput("x".into())));
    assert!(err.is_err());
}

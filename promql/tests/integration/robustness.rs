//! Untrusted query text must never crash the engine: random token soups and mutated corpus
//! queries either evaluate or fail with an error, never with a panic.

use promql::{Engine, EngineOptions, Error};
use proptest::prelude::*;
use storage::mem::MemStore;
use storage::{Labels, Sample};

use crate::corpus;

const TOKENS: &[&str] = &[
    "x",
    "y_total",
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    "[5m]",
    "[1m:10s]",
    ",",
    "=",
    "=~",
    "!=",
    "\"a\"",
    "'.*'",
    "+",
    "-",
    "*",
    "/",
    "%",
    "^",
    "==",
    ">",
    "bool",
    "and",
    "or",
    "unless",
    "on",
    "ignoring",
    "(job)",
    "group_left",
    "by",
    "without",
    "sum",
    "topk",
    "rate",
    "histogram_quantile",
    "label_replace",
    "offset",
    "@",
    "5m",
    "-1h",
    "1",
    "0.5",
    "NaN",
    "Inf",
    "start()",
    "end()",
    "step()",
    "anchored",
    "smoothed",
    "fill(0)",
    ":",
    "le",
    "count_values",
    "info",
    "absent",
    "scalar",
    "vector",
    "time()",
    "#",
    "\\",
    "1e309",
    "0x1F",
];

fn engine() -> Engine {
    Engine::new(EngineOptions {
        experimental_functions: true,
        duration_expressions: true,
        extended_range_selectors: true,
        binop_fill_modifiers: true,
        delayed_name_removal: true,
        max_samples: 100_000,
        ..EngineOptions::default()
    })
}

fn data() -> MemStore {
    let mut s = MemStore::new();
    for (name, job) in [("x", "a"), ("x", "b"), ("y_total", "a")] {
        let l = Labels::from_pairs(&[("__name__", name), ("job", job), ("le", "1")]);
        let samples: Vec<Sample> = (0..40).map(|i| Sample::new(i * 15_000, (i * 3 % 7) as f64)).collect();
        s.append(&l, &samples);
    }
    s
}

fn check(q: &str, s: &MemStore) {
    let e = engine();
    for r in [e.instant(s, q, 300_000), e.range(s, q, 0, 600_000, 30_000)] {
        if let Err(Error::Execution(msg)) = &r {
            assert!(!msg.contains("panicked"), "{q:?} panicked");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn token_soup_never_panics(idx in proptest::collection::vec(0..TOKENS.len(), 1..14)) {
        let q: Vec<&str> = idx.iter().map(|i| TOKENS[*i]).collect();
        check(&q.join(" "), &data());
    }

    #[test]
    fn arbitrary_text_never_panics(q in "\\PC{0,40}") {
        check(&q, &data());
    }
}

#[test]
fn mutated_corpus_queries_never_panic() {
    let Some(corpus) = corpus::dir("mutated_corpus_queries_never_panic") else { return };
    let index = corpus.join("eval_index.tsv");
    let Ok(text) = std::fs::read_to_string(&index) else {
        panic!("cannot read {}", index.display());
    };
    let s = data();
    for (n, line) in text.lines().skip(1).enumerate().step_by(7) {
        let Some(expr) = line.split('\t').nth(7) else { continue };
        check(expr, &s);
        // Drop one character at a position that depends on the line.
        if !expr.is_empty() {
            let cut = n % expr.len();
            if expr.is_char_boundary(cut) && expr.is_char_boundary(cut + 1) {
                check(&format!("{}{}", &expr[..cut], &expr[cut + 1..]), &s);
            }
        }
    }
}

fn vector(r: Result<promql::QueryResult, Error>) -> Vec<promql::Sample> {
    match r.map(|r| r.value) {
        Ok(promql::Value::Vector(v)) => v,
        other => panic!("{other:?}"),
    }
}

/// A compiled regex may need megabytes (`\pL{120}`: 5.8 MB), so what one query's regexes hold is
/// bounded, and `label_replace` compiles its regex only once its argument is evaluated (nested
/// calls hold one at a time) while still reporting a bad pattern before evaluating.
#[test]
fn a_querys_compiled_regexes_are_bounded() {
    let (e, s) = (engine(), data());
    let many: Vec<String> = (0..16).map(|i| format!(r#"l{i}=~"(?:\\pL{{120}}){i}""#)).collect();
    let q = format!("x{{{}}}", many.join(", "));
    match e.instant(&s, &q, 300_000) {
        Err(Error::BadData(msg)) => assert!(msg.contains("MiB compiled"), "{msg}"),
        other => panic!("{other:?}"),
    }
    // A few are fine: a `!~` that every value passes.
    let few = r#"x{l0!~"(?:\\pL{120})0", l1!~"(?:\\pL{120})1"}"#;
    assert_eq!(vector(e.instant(&s, few, 300_000)).len(), 2);

    // Nested label_replace with big patterns: answered, each level applied.
    let mut q = "x".to_string();
    for i in 0..6 {
        q = format!(r#"label_replace({q}, "d{i}", "$1", "job", "(\\pL)|(?:\\pL{{120}}){i}")"#);
    }
    let v = vector(e.instant(&s, &q, 300_000));
    assert_eq!(v.len(), 2);
    for sample in &v {
        let job = sample.labels.get("job").unwrap();
        assert!((0..6).all(|i| sample.labels.get(&format!("d{i}")) == Some(job)), "{:?}", sample.labels);
    }
    // Too big to compile at all: the regex crate's limit, reported as Prometheus words it.
    let huge = r#"label_replace(x, "d", "$1", "job", "\\pL{2000}")"#;
    match e.instant(&s, huge, 300_000) {
        Err(Error::Execution(msg)) => {
            assert!(msg.contains("invalid regular expression in label_replace()"), "{msg}")
        }
        other => panic!("{other:?}"),
    }
    // A bad outer pattern is reported before the inner expression is evaluated.
    let both = r#"label_replace(label_replace(x, "d", "", "job", "("), "d", "", "job", "[")"#;
    match e.instant(&s, both, 300_000) {
        Err(Error::Execution(msg)) => assert!(msg.ends_with(": ["), "{msg}"),
        other => panic!("{other:?}"),
    }
}

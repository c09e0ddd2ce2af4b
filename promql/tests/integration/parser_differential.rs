//! strata's parser against `promql-parser` 0.11: for every expression of the conformance corpus
//! that `promql-parser` accepts, both must build the same tree (compared as a normalised
//! S-expression). `promql-parser` does not know duration expressions, `anchored`/`smoothed` and
//! a few newer forms; those expressions are only required to parse with strata's parser.

use promql::parser::ast::{AtModifier, Cardinality, DurationExpr, Expr};
use promql::parser::{ParseOptions, parse};
use promql_parser::parser as pp;

use crate::corpus;

fn num(v: f64) -> String {
    if v.is_nan() { "NaN".into() } else { format!("{v}") }
}

fn ours_dur(d: &DurationExpr) -> String {
    match d {
        DurationExpr::Literal(v) => format!("{}ms", (v * 1000.0).round() as i64),
        other => format!("{other:?}"),
    }
}

fn ours_sel(vs: &promql::parser::ast::VectorSelector) -> String {
    let mut ms: Vec<String> =
        vs.matchers.iter().map(|m| format!("{}{:?}{:?}", m.name, m.op, m.value)).collect();
    ms.sort();
    let off = vs.offset.as_ref().map(|o| format!(" offset={}", ours_dur(o))).unwrap_or_default();
    let at = match vs.at {
        Some(AtModifier::Timestamp(t)) => format!(" at={t}"),
        Some(AtModifier::Start) => " at=start".into(),
        Some(AtModifier::End) => " at=end".into(),
        None => String::new(),
    };
    format!("(sel {}{off}{at})", ms.join(" "))
}

fn ours(e: &Expr) -> String {
    match e {
        Expr::Number(n) => num(n.value),
        Expr::String(s) => format!("{:?}", s.value),
        Expr::Vector(vs) => ours_sel(vs),
        Expr::Matrix(ms) => format!("(range {} {})", ours_sel(&ms.vs), ours_dur(&ms.range)),
        Expr::Subquery(sq) => format!(
            "(subquery {} {} {}{}{})",
            ours(&sq.expr),
            ours_dur(&sq.range),
            sq.step.as_ref().map(ours_dur).unwrap_or_else(|| "default".into()),
            sq.offset.as_ref().map(|o| format!(" offset={}", ours_dur(o))).unwrap_or_default(),
            match sq.at {
                Some(AtModifier::Timestamp(t)) => format!(" at={t}"),
                Some(AtModifier::Start) => " at=start".into(),
                Some(AtModifier::End) => " at=end".into(),
                None => String::new(),
            }
        ),
        Expr::Paren(p) => format!("(paren {})", ours(&p.expr)),
        Expr::Unary(u) if !u.negate => ours(&u.expr),
        Expr::Unary(u) => format!("(neg {})", ours(&u.expr)),
        Expr::Binary(b) => {
            let mut m = String::new();
            if b.return_bool {
                m.push_str(" bool");
            }
            if let Some(vm) = &b.matching {
                if vm.on || !vm.labels.is_empty() {
                    m.push_str(&format!(
                        " {}({})",
                        if vm.on { "on" } else { "ignoring" },
                        vm.labels.join(",")
                    ));
                }
                match vm.card {
                    Cardinality::ManyToOne => m.push_str(&format!(" group_left({})", vm.include.join(","))),
                    Cardinality::OneToMany => m.push_str(&format!(" group_right({})", vm.include.join(","))),
                    _ => {}
                }
            }
            format!("({}{m} {} {})", b.op.as_str(), ours(&b.lhs), ours(&b.rhs))
        }
        Expr::Aggregate(a) => {
            let g = if a.without {
                format!(" without({})", a.grouping.join(","))
            } else if a.grouping.is_empty() {
                String::new()
            } else {
                format!(" by({})", a.grouping.join(","))
            };
            let p = a.param.as_ref().map(|p| format!(" {}", ours(p))).unwrap_or_default();
            format!("({}{g}{p} {})", a.op.as_str(), ours(&a.expr))
        }
        Expr::Call(c) => {
            let args: Vec<String> = c.args.iter().map(ours).collect();
            format!("({}{}{})", c.func.name, if args.is_empty() { "" } else { " " }, args.join(" "))
        }
    }
}

fn theirs_unparen(e: &pp::Expr) -> &pp::Expr {
    match e {
        pp::Expr::Paren(p) => theirs_unparen(&p.expr),
        other => other,
    }
}

fn theirs_offset(o: &Option<pp::Offset>) -> String {
    match o {
        Some(pp::Offset::Pos(d)) => format!(" offset={}ms", d.as_millis()),
        Some(pp::Offset::Neg(d)) => format!(" offset=-{}ms", d.as_millis()),
        None => String::new(),
    }
}

fn theirs_at(a: &Option<pp::AtModifier>) -> String {
    match a {
        Some(pp::AtModifier::Start) => " at=start".into(),
        Some(pp::AtModifier::End) => " at=end".into(),
        Some(pp::AtModifier::At(t)) => {
            let ms = match t.duration_since(std::time::UNIX_EPOCH) {
                Ok(d) => d.as_millis() as i64,
                Err(e) => -(e.duration().as_millis() as i64),
            };
            format!(" at={ms}")
        }
        None => String::new(),
    }
}

fn theirs_sel(vs: &pp::VectorSelector) -> String {
    let op_name = |op: &promql_parser::label::MatchOp| -> &'static str {
        match op {
            promql_parser::label::MatchOp::Equal => "Equal",
            promql_parser::label::MatchOp::NotEqual => "NotEqual",
            promql_parser::label::MatchOp::Re(_) => "Regex",
            promql_parser::label::MatchOp::NotRe(_) => "NotRegex",
        }
    };
    let mut ms: Vec<String> =
        vs.matchers.matchers.iter().map(|m| format!("{}{}{:?}", m.name, op_name(&m.op), m.value)).collect();
    if let Some(n) = &vs.name
        && !vs.matchers.matchers.iter().any(|m| m.name == "__name__" && m.value == *n)
    {
        ms.push(format!("__name__Equal{n:?}"));
    }
    ms.sort();
    format!("(sel {}{}{})", ms.join(" "), theirs_offset(&vs.offset), theirs_at(&vs.at))
}

fn theirs(e: &pp::Expr) -> String {
    match e {
        pp::Expr::NumberLiteral(n) => num(n.val),
        pp::Expr::StringLiteral(s) => format!("{:?}", s.val),
        pp::Expr::VectorSelector(vs) => theirs_sel(vs),
        pp::Expr::MatrixSelector(ms) => format!("(range {} {}ms)", theirs_sel(&ms.vs), ms.range.as_millis()),
        pp::Expr::Subquery(sq) => format!(
            "(subquery {} {}ms {}{}{})",
            theirs(&sq.expr),
            sq.range.as_millis(),
            sq.step.map(|s| format!("{}ms", s.as_millis())).unwrap_or_else(|| "default".into()),
            theirs_offset(&sq.offset),
            theirs_at(&sq.at)
        ),
        pp::Expr::Paren(p) => format!("(paren {})", theirs(&p.expr)),
        pp::Expr::Unary(u) => format!("(neg {})", theirs(&u.expr)),
        pp::Expr::Binary(b) => {
            let mut m = String::new();
            if let Some(modi) = &b.modifier {
                if modi.return_bool {
                    m.push_str(" bool");
                }
                match &modi.matching {
                    Some(pp::LabelModifier::Include(l)) => {
                        m.push_str(&format!(" on({})", l.labels.join(",")))
                    }
                    Some(pp::LabelModifier::Exclude(l)) if !l.labels.is_empty() => {
                        m.push_str(&format!(" ignoring({})", l.labels.join(",")))
                    }
                    _ => {}
                }
                match &modi.card {
                    pp::VectorMatchCardinality::ManyToOne(l) => {
                        m.push_str(&format!(" group_left({})", l.labels.join(",")))
                    }
                    pp::VectorMatchCardinality::OneToMany(l) => {
                        m.push_str(&format!(" group_right({})", l.labels.join(",")))
                    }
                    _ => {}
                }
            }
            format!("({}{m} {} {})", b.op.to_string().to_lowercase(), theirs(&b.lhs), theirs(&b.rhs))
        }
        pp::Expr::Aggregate(a) => {
            let g = match &a.modifier {
                Some(pp::LabelModifier::Exclude(l)) => format!(" without({})", l.labels.join(",")),
                Some(pp::LabelModifier::Include(l)) if !l.labels.is_empty() => {
                    format!(" by({})", l.labels.join(","))
                }
                _ => String::new(),
            };
            let p = a.param.as_ref().map(|p| format!(" {}", theirs(theirs_unparen(p)))).unwrap_or_default();
            format!("({}{g}{p} {})", a.op.to_string().to_lowercase(), theirs(&a.expr))
        }
        pp::Expr::Call(c) => {
            let args: Vec<String> = c.args.args.iter().map(|a| theirs(theirs_unparen(a))).collect();
            format!("({}{}{})", c.func.name, if args.is_empty() { "" } else { " " }, args.join(" "))
        }
        pp::Expr::Extension(_) => "(extension)".into(),
    }
}

/// Printing a tree and parsing the text again gives the same tree.
#[test]
fn printed_queries_parse_to_the_same_tree() {
    let Some(corpus) = corpus::dir("printed_queries_parse_to_the_same_tree") else { return };
    let index = corpus.join("eval_index.tsv");
    let text = std::fs::read_to_string(&index)
        .unwrap_or_else(|e| panic!("cannot read {} (the conformance corpus): {e}", index.display()));
    let opts = ParseOptions::all_features();
    let mut checked = 0;
    for line in text.lines().skip(1) {
        let Some(expr) = line.split('\t').nth(7) else { continue };
        let Ok(tree) = parse(expr, &opts) else { continue };
        let printed = tree.to_string();
        let again =
            parse(&printed, &opts).unwrap_or_else(|e| panic!("{expr:?} printed as {printed:?}: {}", e.msg));
        assert_eq!(ours(&tree), ours(&again), "{expr:?} printed as {printed:?}");
        checked += 1;
    }
    assert!(checked > 2000, "only {checked} expressions checked");
}

#[test]
fn parsers_agree_on_the_corpus() {
    let Some(corpus) = corpus::dir("parsers_agree_on_the_corpus") else { return };
    let index = corpus.join("eval_index.tsv");
    let text = std::fs::read_to_string(&index)
        .unwrap_or_else(|e| panic!("cannot read {} (the conformance corpus): {e}", index.display()));
    let (mut compared, mut only_ours) = (0, 0);
    let mut mismatches = Vec::new();
    for line in text.lines().skip(1) {
        let Some(expr) = line.split('\t').nth(7) else { continue };
        let mine = match parse(expr, &ParseOptions::all_features()) {
            Ok(e) => e,
            // Only native-histogram trim operators (`>/`, `</`) are outside our grammar.
            Err(e) if expr.contains(">/") || expr.contains("</") => {
                assert!(pp::parse(expr).is_err(), "{expr}: {}", e.msg);
                continue;
            }
            Err(e) => panic!("strata cannot parse corpus expression {expr:?}: {}", e.render(expr)),
        };
        let Ok(reference) = pp::parse(expr) else {
            only_ours += 1;
            continue;
        };
        let (a, b) = (ours(&mine), theirs(&reference));
        if a.contains('\u{FFFD}') {
            // `\xNN` escapes are bytes in PromQL (Go strings); promql-parser decodes them as
            // code points, so strings that are not UTF-8 cannot be compared.
            continue;
        }
        compared += 1;
        if a != b {
            mismatches.push(format!("{expr}\n  strata:        {a}\n  promql-parser: {b}"));
        }
    }
    assert!(compared > 1500, "only {compared} expressions compared");
    assert!(
        mismatches.is_empty(),
        "{} of {compared} trees differ:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    println!("{compared} expressions agree; {only_ours} parse only with strata's extended grammar");
}

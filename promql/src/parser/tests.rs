//! Parser tests: structure via a compact S-expression rendering, and error messages.

use super::ast::*;
use super::*;

/// Renders the tree as an S-expression, e.g. `(+ (sel foo) 1)`.
pub(crate) fn sexp(e: &Expr) -> String {
    fn dur(d: &DurationExpr) -> String {
        match d {
            DurationExpr::Literal(v) => format!("{v}"),
            DurationExpr::Step => "step".into(),
            DurationExpr::Range => "range".into(),
            DurationExpr::Neg(x) => format!("(neg {})", dur(x)),
            DurationExpr::Binary(op, a, b) => format!("({op:?} {} {})", dur(a), dur(b)),
        }
    }
    fn sel(vs: &VectorSelector) -> String {
        let mut ms: Vec<String> =
            vs.matchers.iter().map(|m| format!("{}{:?}{}", m.name, m.op, m.value)).collect();
        ms.sort();
        let mut s = format!("(sel {}", ms.join(" "));
        if let Some(o) = &vs.offset {
            s.push_str(&format!(" offset={}", dur(o)));
        }
        if let Some(a) = &vs.at {
            s.push_str(&format!(" at={a:?}"));
        }
        if vs.anchored {
            s.push_str(" anchored");
        }
        if vs.smoothed {
            s.push_str(" smoothed");
        }
        s.push(')');
        s
    }
    match e {
        Expr::Number(n) => format!("{}", n.value),
        Expr::String(s) => format!("{:?}", s.value),
        Expr::Vector(vs) => sel(vs),
        Expr::Matrix(ms) => format!("(range {} {})", sel(&ms.vs), dur(&ms.range)),
        Expr::Subquery(sq) => format!(
            "(subquery {} {} {}{}{})",
            sexp(&sq.expr),
            dur(&sq.range),
            sq.step.as_ref().map(dur).unwrap_or_else(|| "default".into()),
            sq.offset.as_ref().map(|o| format!(" offset={}", dur(o))).unwrap_or_default(),
            sq.at.map(|a| format!(" at={a:?}")).unwrap_or_default()
        ),
        Expr::Paren(p) => format!("(paren {})", sexp(&p.expr)),
        Expr::Unary(u) => format!("({} {})", if u.negate { "neg" } else { "pos" }, sexp(&u.expr)),
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
                if let Some(f) = vm.fill_lhs {
                    m.push_str(&format!(" fill_left({f})"));
                }
                if let Some(f) = vm.fill_rhs {
                    m.push_str(&format!(" fill_right({f})"));
                }
            }
            format!("({}{m} {} {})", b.op.as_str(), sexp(&b.lhs), sexp(&b.rhs))
        }
        Expr::Aggregate(a) => {
            let g = if a.grouping.is_empty() && !a.without {
                String::new()
            } else {
                format!(" {}({})", if a.without { "without" } else { "by" }, a.grouping.join(","))
            };
            match &a.param {
                Some(p) => format!("({}{g} {} {})", a.op.as_str(), sexp(p), sexp(&a.expr)),
                None => format!("({}{g} {})", a.op.as_str(), sexp(&a.expr)),
            }
        }
        Expr::Call(c) => {
            let args: Vec<String> = c.args.iter().map(sexp).collect();
            format!("({} {})", c.func.name, args.join(" ")).replace(" )", ")")
        }
    }
}

fn p(q: &str) -> String {
    match parse(q, &ParseOptions::all_features()) {
        Ok(e) => sexp(&e),
        Err(e) => panic!("{q}: {}", e.render(q)),
    }
}

fn err(q: &str) -> String {
    match parse(q, &ParseOptions::all_features()) {
        Ok(e) => panic!("{q}: expected an error, got {}", sexp(&e)),
        Err(e) => e.msg,
    }
}

#[test]
fn precedence_and_associativity() {
    assert_eq!(p("1 + 2 * 3"), "(+ 1 (* 2 3))");
    assert_eq!(p("2 ^ 3 ^ 2"), "(^ 2 (^ 3 2))");
    assert_eq!(p("-2 ^ 2"), "(neg (^ 2 2))");
    assert_eq!(p("-2 * 2"), "(* -2 2)");
    assert_eq!(
        p("a or b and c"),
        "(or (sel __name__Equala) (and (sel __name__Equalb) (sel __name__Equalc)))"
    );
    assert_eq!(p("1 - -1"), "(- 1 -1)");
    assert_eq!(p("a - b - c"), "(- (- (sel __name__Equala) (sel __name__Equalb)) (sel __name__Equalc))");
}

/// Number literals as Go's `ParseInt(s, 0, 64)` then `ParseFloat` read them (Prometheus 2.42
/// refuses `1e309` and `0x8000000000000000`).
#[test]
fn number_literals_stay_in_range() {
    assert!(err("1e309").contains("error parsing number"));
    assert!(err("-1e309 + 1").contains("error parsing number"));
    assert!(err("0x8000000000000000").contains("error parsing number"));
    for (literal, value) in [
        ("0x7fffffffffffffff", i64::MAX as f64),
        ("1e308", 1e308),
        ("Inf", f64::INFINITY),
        ("1e-400", 0.0),
        // An octal literal beyond 64 bits is read as a decimal float: Go falls back to ParseFloat.
        ("01000000000000000000000000", 1e24),
    ] {
        assert_eq!(p(literal), format!("{value}"), "{literal}");
    }
}

/// Go's regexp refuses a pattern whose bytes are not UTF-8 (as Prometheus does); an equality
/// matcher takes any string.
#[test]
fn regex_matchers_must_be_utf8() {
    assert!(err(r#"{a=~"x\xbby"}"#).contains("invalid UTF-8"), "{}", err(r#"{a=~"x\xbby"}"#));
    assert!(err(r#"{a!~"\xff"}"#).contains("invalid UTF-8"));
    assert!(parse(r#"{a="\xff"}"#, &ParseOptions::default()).is_ok());
}

#[test]
fn selectors_and_modifiers() {
    assert_eq!(
        p(r#"foo{a="b", c=~"d"}[5m] offset 1m @ 100"#),
        "(range (sel __name__Equalfoo aEqualb cRegexd offset=60 at=Timestamp(100000)) 300)"
    );
    assert_eq!(p("foo @ start()"), "(sel __name__Equalfoo at=Start)");
    assert_eq!(p(r#"{"my.metric", "a.b"="c"}"#), "(sel __name__Equalmy.metric a.bEqualc)");
    assert_eq!(p("rate(x[5m])[30m:1m]"), "(subquery (rate (range (sel __name__Equalx) 300)) 1800 60)");
    assert_eq!(p("x[10m:]"), "(subquery (sel __name__Equalx) 600 default)");
    assert_eq!(p("x[5m] anchored"), "(range (sel __name__Equalx anchored) 300)");
    assert_eq!(p("a + b offset 5m"), "(+ (sel __name__Equala) (sel __name__Equalb offset=300))");
    assert_eq!(p("sum"), "(sel __name__Equalsum)");
    assert_eq!(p("foo:bar:baz"), "(sel __name__Equalfoo:bar:baz)");
}

#[test]
fn duration_expressions() {
    assert_eq!(p("x[5m+30s]"), "(range (sel __name__Equalx) (Add 300 30))");
    assert_eq!(p("x offset -2 ^ 2"), "(^ (sel __name__Equalx offset=-2) 2)");
    assert_eq!(p("x offset (2 ^ 2)"), "(sel __name__Equalx offset=(Pow 2 2))");
    assert_eq!(p("x offset -step()*2"), "(* (sel __name__Equalx offset=(neg step)) 2)");
    assert_eq!(p("x[min_of(step()+1,1h)]"), "(range (sel __name__Equalx) (Min (Add step 1) 3600))");
    assert_eq!(
        p("x offset max_of(3s, min_of(step(), 1s)) + 8000"),
        "(+ (sel __name__Equalx offset=(Max 3 (Min step 1))) 8000)"
    );
    assert_eq!(p("step()"), "(step)");
    assert_eq!(p("min_of(3, 5)"), "(min_of 3 5)");
}

#[test]
fn aggregations_and_binary_modifiers() {
    assert_eq!(p("SUM BY (job) (x)"), "(sum by(job) (sel __name__Equalx))");
    assert_eq!(p("sum(x) without (a, b,)"), "(sum without(a,b) (sel __name__Equalx))");
    assert_eq!(p("topk(3, x)"), "(topk 3 (sel __name__Equalx))");
    assert_eq!(
        p("a * on(x) group_left(y) b"),
        "(* on(x) group_left(y) (sel __name__Equala) (sel __name__Equalb))"
    );
    assert_eq!(
        p("a + fill_left(5) fill_right(-Inf) b"),
        "(+ fill_left(5) fill_right(-inf) (sel __name__Equala) (sel __name__Equalb))"
    );
    assert_eq!(p("a > bool 1"), "(> bool (sel __name__Equala) 1)");
    assert_eq!(p("fill + fill"), "(+ (sel __name__Equalfill) (sel __name__Equalfill))");
}

#[test]
fn type_errors() {
    assert_eq!(err("rate(x)"), "expected type range vector in call to function \"rate\", got instant vector");
    assert_eq!(err("1 > 2"), "comparisons between scalars must use BOOL modifier");
    assert_eq!(err("{}"), "vector selector must contain at least one non-empty matcher");
    assert_eq!(err("{a=~\".*\"}"), "vector selector must contain at least one non-empty matcher");
    assert!(err("sum(x) offset 5m").contains("offset modifier must be preceded"));
    assert_eq!(err("x offset 5m [5m]"), "no offset modifiers allowed before range");
    assert_eq!(err("(x)[5m]"), "ranges only allowed for vector selectors");
    assert_eq!(err("foo{__name__=\"bar\"}"), "metric name must not be set twice: \"foo\" or \"bar\"");
    assert_eq!(err("nosuchfunc(x)"), "unknown function with name \"nosuchfunc\"");
    assert_eq!(
        err("holt_winters(x[5m], 0.5, 0.5)"),
        "unknown function with name \"holt_winters\" (renamed double_exponential_smoothing in \
         Prometheus 3, which is experimental: enable it with \
         --enable-feature=promql-experimental-functions)"
    );
    assert_eq!(err("x[0s]"), "duration must be greater than 0");
    assert_eq!(err("a and 1"), "set operator \"and\" not allowed in binary scalar expression");
    assert_eq!(
        err("topk(x)"),
        "wrong number of arguments for aggregate expression provided, expected 2, got 1"
    );
    assert!(err("info(x, y)").contains("expected label selectors only"));
    assert_eq!(err(""), "no expression found in input");
}

#[test]
fn features_are_gated() {
    let none = ParseOptions::default();
    // Each refusal names the flag that lifts it, so a user need not look it up.
    for (q, flag) in [
        ("x[5m+1m]", "promql-duration-expr"),
        ("x offset (1m+1m)", "promql-duration-expr"),
        ("x[5m] anchored", "promql-extended-range-selectors"),
        ("a + fill(0) b", "promql-binop-fill-modifiers"),
        ("limitk(1, x)", "promql-experimental-functions"),
        ("sort_by_label(x, \"a\")", "promql-experimental-functions"),
        ("double_exponential_smoothing(x[5m], 0.5, 0.5)", "promql-experimental-functions"),
    ] {
        let msg = parse(q, &none).expect_err(q).msg;
        assert!(msg.contains(&format!("--enable-feature={flag}")), "{q}: {msg}");
    }
    assert!(parse("x[5m] offset 1m", &none).is_ok());
}

#[test]
fn info_selector_may_match_empty() {
    assert!(parse(r#"info(x, {data=~".*"})"#, &ParseOptions::all_features()).is_ok());
}

#[test]
fn deep_nesting_is_rejected_before_recursion() {
    let q = format!("{}1{}", "(".repeat(100_000), ")".repeat(100_000));
    assert!(parse(&q, &ParseOptions::default()).unwrap_err().msg.contains("nested too deeply"));
    let q = format!("{}1", "-".repeat(100_000));
    assert!(parse(&q, &ParseOptions::default()).is_err());
    let q = format!("{}x{}", "abs(".repeat(50_000), ")".repeat(50_000));
    assert!(parse(&q, &ParseOptions::default()).is_err());
    // A flat chain builds a left-deep tree, which later stages walk recursively.
    let q = format!("1{}", " + 1".repeat(50_000));
    assert!(parse(&q, &ParseOptions::default()).is_err());
    let q = format!("1{}", " + 1".repeat(100));
    assert!(parse(&q, &ParseOptions::default()).is_ok());
}

#[test]
fn metrics_and_positions() {
    let l = parse_metric(r#"foo{b="2", a="1"}"#).unwrap();
    assert_eq!(format!("{l}"), r#"foo{a="1", b="2"}"#);
    assert!(parse_metric(r#"foo{a=~"1"}"#).is_err());
    assert_eq!(line_col("ab\ncd", 4), (2, 2));
    assert_eq!(line_col("abcd", 0), (1, 1));
}

//! Prints a syntax tree back as PromQL text that parses to the same tree (used to rewrite
//! queries, e.g. to pin them with `@`, and for diagnostics).

use std::fmt::{self, Display, Formatter, Write};

use storage::MatchOp;

use super::ast::*;
use super::duration::format_duration_ms;
use super::strings::go_quote;

fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        // Go's strconv.FormatFloat(v, 'f', -1, 64), which Prometheus prints numbers with.
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

fn duration(d: &DurationExpr) -> String {
    match d {
        DurationExpr::Literal(v) if *v >= 0.0 && (v * 1000.0).fract() == 0.0 => {
            format_duration_ms((v * 1000.0) as i64)
        }
        DurationExpr::Literal(v) => format!("({})", number(*v)),
        DurationExpr::Step => "step()".into(),
        DurationExpr::Range => "range()".into(),
        DurationExpr::Neg(x) => format!("-({})", duration(x)),
        DurationExpr::Binary(DurationOp::Min, a, b) => format!("min_of({}, {})", duration(a), duration(b)),
        DurationExpr::Binary(DurationOp::Max, a, b) => format!("max_of({}, {})", duration(a), duration(b)),
        DurationExpr::Binary(op, a, b) => {
            let o = match op {
                DurationOp::Add => "+",
                DurationOp::Sub => "-",
                DurationOp::Mul => "*",
                DurationOp::Div => "/",
                DurationOp::Mod => "%",
                _ => "^",
            };
            format!("({} {o} {})", duration(a), duration(b))
        }
    }
}

/// An offset: plain durations as written, anything else parenthesised so that it binds.
fn offset(d: &DurationExpr) -> String {
    match d {
        DurationExpr::Literal(v) if *v < 0.0 => format!("-{}", duration(&DurationExpr::Literal(-v))),
        DurationExpr::Literal(_) | DurationExpr::Step | DurationExpr::Range => duration(d),
        other => format!("({})", duration(other)),
    }
}

fn modifiers(f: &mut Formatter<'_>, at: Option<AtModifier>, off: &Option<DurationExpr>) -> fmt::Result {
    match at {
        // Seconds with three decimals, as Prometheus' `%.3f`; the sign apart, so that -900 ms
        // prints as -0.900 (not the floor -1 and the remainder .100).
        Some(AtModifier::Timestamp(t)) => {
            let (sign, ms) = (if t < 0 { "-" } else { "" }, t.unsigned_abs());
            write!(f, " @ {sign}{}.{:03}", ms / 1000, ms % 1000)?
        }
        Some(AtModifier::Start) => f.write_str(" @ start()")?,
        Some(AtModifier::End) => f.write_str(" @ end()")?,
        None => {}
    }
    if let Some(o) = off {
        write!(f, " offset {}", offset(o))?;
    }
    Ok(())
}

fn selector_body(f: &mut Formatter<'_>, vs: &VectorSelector) -> fmt::Result {
    let mut matchers: Vec<String> = Vec::new();
    let mut name_outside = false;
    if let Some(n) = &vs.name {
        let plain = n.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
            && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
        if plain {
            f.write_str(n)?;
            name_outside = true;
        }
    }
    let skip = if name_outside { vs.matchers.len().saturating_sub(1) } else { vs.matchers.len() };
    for m in vs.matchers.iter().take(skip) {
        let op = match m.op {
            MatchOp::Equal => "=",
            MatchOp::NotEqual => "!=",
            MatchOp::Regex => "=~",
            MatchOp::NotRegex => "!~",
        };
        matchers.push(format!("{}{op}{}", label_name(&m.name), go_quote(&m.value)));
    }
    if !matchers.is_empty() || !name_outside {
        // Sorted and joined by a bare comma, as Prometheus' VectorSelector.String().
        matchers.sort_unstable();
        write!(f, "{{{}}}", matchers.join(","))?;
    }
    Ok(())
}

/// A label name as written: bare if it is a legacy name (`[a-zA-Z_][a-zA-Z0-9_]*`), else quoted,
/// as Prometheus 3 writes UTF-8 names (`"foo.bar"`).
fn label_name(name: &str) -> String {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain { name.to_string() } else { go_quote(name) }
}

/// Grouping labels (`by`, `without`, `on`, `ignoring`, `group_left`/`group_right`), each written
/// by [`label_name`]: `by ("foo.bar")` printed bare did not parse again (found by the
/// promql_parse fuzz target, `` on(`\x04`) ``). Prometheus quotes only what is not a legacy
/// *metric* name, so it leaves `"a:b"` bare, which then does not parse; strata quotes it.
pub fn format_labels(l: &[String]) -> String {
    l.iter().map(|n| label_name(n)).collect::<Vec<_>>().join(", ")
}

impl Display for Expr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Number(n) => f.write_str(&number(n.value)),
            // Text that is not UTF-8 can only be reproduced by the original escapes.
            Expr::String(s) if !s.valid_utf8 => f.write_str(&s.raw),
            Expr::String(s) => f.write_str(&go_quote(&s.value)),
            Expr::Vector(vs) => {
                selector_body(f, vs)?;
                modifiers(f, vs.at, &vs.offset)?;
                extended(f, vs)
            }
            Expr::Matrix(ms) => {
                selector_body(f, &ms.vs)?;
                write!(f, "[{}]", duration(&ms.range))?;
                modifiers(f, ms.vs.at, &ms.vs.offset)?;
                extended(f, &ms.vs)
            }
            Expr::Subquery(sq) => {
                write!(
                    f,
                    "{}[{}:{}]",
                    sq.expr,
                    duration(&sq.range),
                    sq.step.as_ref().map(duration).unwrap_or_default()
                )?;
                modifiers(f, sq.at, &sq.offset)
            }
            Expr::Paren(p) => write!(f, "({})", p.expr),
            Expr::Unary(u) => write!(f, "{}{}", if u.negate { "-" } else { "+" }, u.expr),
            Expr::Binary(b) => {
                let mut m = String::new();
                if b.return_bool {
                    m.push_str(" bool");
                }
                if let Some(vm) = &b.matching {
                    if vm.on {
                        write!(m, " on ({})", format_labels(&vm.labels))?;
                    } else if !vm.labels.is_empty() {
                        write!(m, " ignoring ({})", format_labels(&vm.labels))?;
                    }
                    match vm.card {
                        Cardinality::ManyToOne => write!(m, " group_left ({})", format_labels(&vm.include))?,
                        Cardinality::OneToMany => write!(m, " group_right ({})", format_labels(&vm.include))?,
                        _ => {}
                    }
                    match (vm.fill_lhs, vm.fill_rhs) {
                        (Some(l), Some(r)) if l.to_bits() == r.to_bits() => {
                            write!(m, " fill ({})", number(l))?
                        }
                        (l, r) => {
                            if let Some(l) = l {
                                write!(m, " fill_left ({})", number(l))?;
                            }
                            if let Some(r) = r {
                                write!(m, " fill_right ({})", number(r))?;
                            }
                        }
                    }
                }
                write!(f, "{} {}{m} {}", b.lhs, b.op.as_str(), b.rhs)
            }
            Expr::Aggregate(a) => {
                f.write_str(a.op.as_str())?;
                if a.without {
                    write!(f, " without ({})", format_labels(&a.grouping))?;
                } else if !a.grouping.is_empty() {
                    write!(f, " by ({})", format_labels(&a.grouping))?;
                }
                // Like Prometheus' printer: `sum(x)`, but `sum by (a) (x)`.
                let sep = if a.without || !a.grouping.is_empty() { " " } else { "" };
                match &a.param {
                    Some(p) => write!(f, "{sep}({p}, {})", a.expr),
                    None => write!(f, "{sep}({})", a.expr),
                }
            }
            // Written straight to the formatter: a writer that stops early (the pretty
            // printer's one-line check) then stops here too, and deep calls cost no copies.
            Expr::Call(c) => {
                write!(f, "{}(", c.func.name)?;
                for (i, arg) in c.args.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{arg}")?;
                }
                f.write_str(")")
            }
        }
    }
}

fn extended(f: &mut Formatter<'_>, vs: &VectorSelector) -> fmt::Result {
    if vs.anchored {
        f.write_str(" anchored")?;
    }
    if vs.smoothed {
        f.write_str(" smoothed")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::parser::{ParseOptions, parse};

    fn printed(q: &str) -> String {
        parse(q, &ParseOptions::default()).map(|e| e.to_string()).unwrap_or_else(|e| panic!("{q}: {e:?}"))
    }

    /// `@` timestamps print as seconds with three decimals, as Prometheus' `%.3f`, and a
    /// negative one keeps its value (found by the promql_parse fuzz target: `x @ -.9` printed as
    /// `x @ -1.100`, the floor and the remainder).
    #[test]
    fn at_timestamps_print_as_seconds() {
        assert_eq!(printed("x @ -.9"), "x @ -0.900");
        assert_eq!(printed("x @ -1.5"), "x @ -1.500");
        assert_eq!(printed("x @ -1"), "x @ -1.000");
        assert_eq!(printed("x @ 0.25"), "x @ 0.250");
        assert_eq!(printed("x @ 1700000000.123"), "x @ 1700000000.123");
        for q in ["x @ -.9", "x @ -1.5", "x @ -0.001", "x @ 12.345"] {
            assert_eq!(printed(&printed(q)), printed(q), "{q} round-trips");
        }
    }

    #[test]
    fn grouping_labels_that_are_not_legacy_names_are_quoted() {
        assert_eq!(printed(r#"sum by ("foo.bar", job) (x)"#), r#"sum by ("foo.bar", job) (x)"#);
        assert_eq!(printed(r#"sum without ("a:b") (x)"#), r#"sum without ("a:b") (x)"#);
        assert_eq!(printed("x + on(`\u{4}`) y"), r#"x + on ("\x04") y"#);
        assert_eq!(
            printed(r#"x + ignoring("a b") group_left("c-d", e) y"#),
            r#"x + ignoring ("a b") group_left ("c-d", e) y"#
        );
        assert_eq!(printed("x / on(sum, by) group_right y"), "x / on (sum, by) group_right () y");
        for q in [r#"sum by ("foo.bar") (x)"#, "x + on(`\u{4}`) y", r#"x + on("a b") group_left("c-d") y"#] {
            assert_eq!(printed(&printed(q)), printed(q), "{q} round-trips");
        }
    }
}

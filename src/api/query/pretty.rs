//! `/api/v1/format_query`'s output: Prometheus' `Prettify` (promql/parser/prettier.go).
//!
//! A node whose one-line text fits in 100 bytes is printed on one line. A longer node is split:
//! an aggregation or call puts its arguments on their own lines, a binary operation puts its
//! operator on a line between its operands, parentheses wrap their content; each level is
//! indented two spaces more than its parent. Selectors, literals and subquery suffixes are
//! never split. The one-line text of every node is strata's printer (`Display` for [`Expr`]),
//! which prints what Prometheus' `String()` prints.

use std::fmt;

use promql::parser::ast::{AggregateExpr, BinaryExpr, Expr, NumberLiteral, Subquery};

/// Prometheus' `maxCharactersPerLine`.
const MAX_LINE: usize = 100;

/// `/api/v1/format_query`'s longest answer: far above any real query's pretty form.
pub const MAX_BYTES: usize = 16 << 20;

/// The prettified query, or `None` if it would be longer than `max_bytes`: indentation grows
/// with depth, so a deep query with many short arguments prints up to a hundred times its own
/// size (an 8 MiB form body could have asked for a gigabyte).
pub fn format(expr: &Expr, max_bytes: usize) -> Option<String> {
    let mut out = Out { text: String::new(), max_bytes };
    pretty(expr, 0, Pad::Yes, &mut out).ok()?;
    Some(out.text)
}

/// The text so far, and where it must stop.
struct Out {
    text: String,
    max_bytes: usize,
}

/// The output reached its limit.
struct TooLong;

impl Out {
    fn push_str(&mut self, s: &str) -> Result<(), TooLong> {
        if self.text.len() + s.len() > self.max_bytes {
            return Err(TooLong);
        }
        self.text.push_str(s);
        Ok(())
    }

    fn push(&mut self, c: char) -> Result<(), TooLong> {
        self.push_str(c.encode_utf8(&mut [0; 4]))
    }
}

/// Whether a node starts with its indentation. A unary operator's operand does not: Prometheus
/// prints the operator, then the operand trimmed.
#[derive(Clone, Copy, PartialEq)]
enum Pad {
    Yes,
    No,
}

fn indent(out: &mut Out, level: usize, pad: Pad) -> Result<(), TooLong> {
    if pad == Pad::Yes {
        for _ in 0..level {
            out.push_str("  ")?;
        }
    }
    Ok(())
}

/// Writes `expr` at nesting `level`: indented by the level, split if its one-line text is too
/// long. Everything is written into one string, and a node's one-line text is printed only as
/// far as the limit, so the work grows with the output, not with the output times the depth
/// (a deep query of a few hundred kilobytes took seconds when each level printed and copied
/// its whole subtree).
fn pretty(expr: &Expr, level: usize, pad: Pad, out: &mut Out) -> Result<(), TooLong> {
    if let Some(line) = one_line(expr) {
        indent(out, level, pad)?;
        return out.push_str(&line);
    }
    match expr {
        Expr::Aggregate(a) => {
            block(out, level, pad, &aggregation_prefix(a), a.param.iter().chain([&a.expr]))?
        }
        // The operands carry the indentation, one level deeper: the node's own pad is its left
        // operand's.
        Expr::Binary(b) => {
            pretty(&b.lhs, level + 1, pad, out)?;
            out.push('\n')?;
            indent(out, level, Pad::Yes)?;
            out.push_str(&operator_and_modifiers(b))?;
            out.push('\n')?;
            pretty(&b.rhs, level + 1, Pad::Yes, out)?;
        }
        Expr::Call(c) => block(out, level, pad, c.func.name, c.args.iter())?,
        Expr::Paren(p) => block(out, level, pad, "", [&p.expr].into_iter())?,
        Expr::Subquery(sq) => {
            pretty(&sq.expr, level, pad, out)?;
            out.push_str(&subquery_suffix(sq))?;
        }
        Expr::Unary(u) => {
            indent(out, level, pad)?;
            out.push(if u.negate { '-' } else { '+' })?;
            pretty(&u.expr, level, Pad::No, out)?;
        }
        // Selectors and literals are never split.
        Expr::Number(_) | Expr::String(_) | Expr::Vector(_) | Expr::Matrix(_) => {
            indent(out, level, pad)?;
            out.push_str(&expr.to_string())?;
        }
    }
    Ok(())
}

/// `head(`, then each of `inner` on its own lines one level deeper, separated by commas, then
/// `)` on a line of its own: how aggregations, calls and parentheses split.
fn block<'e>(
    out: &mut Out,
    level: usize,
    pad: Pad,
    head: &str,
    inner: impl Iterator<Item = &'e Expr>,
) -> Result<(), TooLong> {
    indent(out, level, pad)?;
    out.push_str(head)?;
    out.push_str("(\n")?;
    for (i, e) in inner.enumerate() {
        if i > 0 {
            out.push_str(",\n")?;
        }
        pretty(e, level + 1, Pad::Yes, out)?;
    }
    out.push('\n')?;
    indent(out, level, Pad::Yes)?;
    out.push(')')
}

/// The one-line text of `expr` if it fits in [`MAX_LINE`] bytes. Printing stops as soon as it
/// does not fit, so a large subtree costs no more than a small one.
fn one_line(expr: &Expr) -> Option<String> {
    struct Bounded(String);
    impl fmt::Write for Bounded {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            if self.0.len() + s.len() > MAX_LINE {
                return Err(fmt::Error);
            }
            self.0.push_str(s);
            Ok(())
        }
    }
    let mut line = Bounded(String::new());
    fmt::write(&mut line, format_args!("{expr}")).ok()?;
    Some(line.0)
}

/// `sum`, `sum by (a, b) `, `topk without (a) ` (Prometheus' `getAggOpStr`, trailing space
/// included).
fn aggregation_prefix(a: &AggregateExpr) -> String {
    let op = a.op.as_str();
    if a.without {
        format!("{op} without ({}) ", promql::parser::format_labels(&a.grouping))
    } else if !a.grouping.is_empty() {
        format!("{op} by ({}) ", promql::parser::format_labels(&a.grouping))
    } else {
        op.to_owned()
    }
}

/// A one-byte stand-in for an operand, to print an operator's own text without its operands.
fn placeholder() -> Expr {
    Expr::Number(NumberLiteral { value: 0.0, start: 0 })
}

/// The operator with `bool`, `on`/`ignoring`, `group_*` and `fill*`: the printer's text of the
/// operation between two one-byte operands.
fn operator_and_modifiers(b: &BinaryExpr) -> String {
    let bare = BinaryExpr {
        op: b.op,
        lhs: placeholder(),
        rhs: placeholder(),
        return_bool: b.return_bool,
        matching: b.matching.clone(),
    };
    let whole = Expr::Binary(Box::new(bare)).to_string();
    whole
        .get(1..whole.len().saturating_sub(1))
        .map(|middle| middle.trim().to_owned())
        .unwrap_or_else(|| b.op.as_str().to_owned())
}

/// `[range:step] @ t offset d`: the printer's text of the subquery after a one-byte inner
/// expression.
fn subquery_suffix(sq: &Subquery) -> String {
    let bare = Subquery {
        expr: placeholder(),
        range: sq.range.clone(),
        step: sq.step.clone(),
        offset: sq.offset.clone(),
        at: sq.at,
    };
    let whole = Expr::Subquery(Box::new(bare)).to_string();
    whole.get(1..).unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The implementation before it wrote into one string and bounded the one-line check (it
    /// printed and copied every subtree at every level), kept as the model of the output.
    mod reference {
        use promql::parser::ast::{BinaryExpr, Expr, Subquery};

        use super::super::{MAX_LINE, aggregation_prefix};

        /// The prettified query.
        pub(super) fn format(expr: &Expr) -> String {
            pretty(expr, 0)
        }

        fn indent(level: usize) -> String {
            "  ".repeat(level)
        }

        /// `expr` at nesting `level`: indented by the level, split if its one-line text is too long.
        fn pretty(expr: &Expr, level: usize) -> String {
            let one_line = expr.to_string();
            let pad = indent(level);
            if one_line.len() <= MAX_LINE {
                return format!("{pad}{one_line}");
            }
            match expr {
                Expr::Aggregate(a) => {
                    let mut s = format!("{pad}{}(\n", aggregation_prefix(a));
                    if let Some(param) = &a.param {
                        s.push_str(&pretty(param, level + 1));
                        s.push_str(",\n");
                    }
                    s.push_str(&format!("{}\n{pad})", pretty(&a.expr, level + 1)));
                    s
                }
                Expr::Binary(b) => format!(
                    "{}\n{pad}{}\n{}",
                    pretty(&b.lhs, level + 1),
                    operator_and_modifiers(b),
                    pretty(&b.rhs, level + 1)
                ),
                Expr::Call(c) => {
                    let args: Vec<String> = c.args.iter().map(|a| pretty(a, level + 1)).collect();
                    format!("{pad}{}(\n{}\n{pad})", c.func.name, args.join(",\n"))
                }
                Expr::Paren(p) => format!("{pad}(\n{}\n{pad})", pretty(&p.expr, level + 1)),
                Expr::Subquery(sq) => format!("{}{}", pretty(&sq.expr, level), subquery_suffix(sq)),
                Expr::Unary(u) => {
                    let child = pretty(&u.expr, level);
                    format!("{pad}{}{}", if u.negate { "-" } else { "+" }, child.trim())
                }
                // Selectors and literals are never split.
                Expr::Number(_) | Expr::String(_) | Expr::Vector(_) | Expr::Matrix(_) => {
                    format!("{pad}{one_line}")
                }
            }
        }

        /// The operator with `bool`, `on`/`ignoring`, `group_*` and `fill*`: the printed binary
        /// expression between its two operands.
        fn operator_and_modifiers(b: &BinaryExpr) -> String {
            let whole = Expr::Binary(Box::new(b.clone())).to_string();
            let (lhs, rhs) = (b.lhs.to_string(), b.rhs.to_string());
            whole
                .get(lhs.len()..whole.len().saturating_sub(rhs.len()))
                .map(|middle| middle.trim().to_owned())
                .unwrap_or_else(|| b.op.as_str().to_owned())
        }

        /// `[range:step] @ t offset d`: the printed subquery after its inner expression.
        fn subquery_suffix(sq: &Subquery) -> String {
            let whole = Expr::Subquery(Box::new(sq.clone())).to_string();
            let inner = sq.expr.to_string();
            whole.get(inner.len()..).unwrap_or_default().to_owned()
        }
    }

    /// Queries long enough to be split at every kind of node, nested.
    fn long_queries() -> Vec<String> {
        let sel =
            |i: usize| format!("metric_with_a_long_name_{i}{{job=\"some-job\",instance=~\"host-[0-9]+\"}}");
        let mut q = vec![
            format!(
                "sum by (job, instance) (rate({}[5m])) / on (job) group_left (team) sum by (job) (rate({}[5m]))",
                sel(1),
                sel(2)
            ),
            format!("-(-({} + {}))", sel(1), sel(2)),
            format!(
                "topk(5, max_over_time(({} - {} > bool 3)[1h:5m] @ 1700000000 offset 5m))",
                sel(1),
                sel(2)
            ),
            format!(
                "label_join({}, \"dst\", \",\", \"a\", \"b\", \"c\", \"d\", \"e\", \"f\", \"g\", \"h\", \"i\", \"j\")",
                sel(3)
            ),
            format!("{} and ignoring (a, b) {} or {} unless on () {}", sel(1), sel(2), sel(3), sel(4)),
            format!(
                "quantile without (le) (0.9, histogram_quantile(0.99, sum by (le) (rate({}[5m]))))",
                sel(5)
            ),
            format!("+({})", sel(6)),
            format!("-{} * -{}", sel(1), sel(2)),
            format!("(((({}))))[10m:]", sel(7)),
            format!("absent_over_time({}[1d] offset -1h) == bool 1", sel(8)),
        ];
        // Deep: each shape nested inside the next.
        let mut deep = sel(0);
        for (i, wrap) in ["-({})", "sum({})", "abs({})", "({} + {})", "{}[5m:1m]", "rate({}[1m])"]
            .iter()
            .cycle()
            .take(40)
            .enumerate()
        {
            deep = if wrap.contains("[1m]") {
                format!("rate({}[1m])", sel(i))
            } else {
                wrap.replacen("{}", &deep, 1).replacen("{}", &sel(i), 1)
            };
            q.push(deep.clone());
        }
        q
    }

    #[test]
    fn prints_what_the_reference_prints() {
        let opts = promql::parser::ParseOptions::all_features();
        for query in long_queries() {
            let expr = promql::parser::parse(&query, &opts).unwrap_or_else(|e| panic!("{query}: {e:?}"));
            assert_eq!(format(&expr, usize::MAX).unwrap_or_default(), reference::format(&expr), "{query}");
        }
    }

    #[test]
    fn deep_wide_queries_cost_in_proportion_to_their_output() {
        // 120 levels of `-(...)` around a call with 2,000 arguments: every level printed and
        // copied its whole subtree (0.4 s for 20,000 arguments in a release build, 3 s for
        // 100,000). Compared with that model in the same run rather than with a clock: many
        // times faster (8 times in a debug build). The two are timed in turn, best of five
        // each, so a busy machine slows both alike (timed apart, best of three, a loaded
        // machine once made the ratio 2.8 and failed the test).
        let inner = format!("label_join(up, \"a\", \",\", {})", vec!["\"s\""; 2_000].join(", "));
        let query = format!("{}{inner}{}", "-(".repeat(120), ")".repeat(120));
        let expr = promql::parser::parse(&query, &promql::parser::ParseOptions::all_features()).unwrap();
        let time = |f: &dyn Fn() -> String| {
            let started = std::time::Instant::now();
            assert!(f().len() > 400_000);
            started.elapsed()
        };
        let (mut new, mut old) = (std::time::Duration::MAX, std::time::Duration::MAX);
        for _ in 0..5 {
            new = new.min(time(&|| format(&expr, usize::MAX).unwrap_or_default()));
            old = old.min(time(&|| reference::format(&expr)));
        }
        assert_eq!(format(&expr, usize::MAX).unwrap_or_default(), reference::format(&expr));
        assert!(new * 3 < old, "{new:?} against the quadratic model's {old:?}");
        // Past the limit: no answer, and the work stops there.
        assert_eq!(format(&expr, 1000), None);
        assert!(format(&expr, 600_000).is_some());
    }

    fn prettify(query: &str) -> String {
        let expr = promql::parser::parse(query, &promql::parser::ParseOptions::all_features()).unwrap();
        format(&expr, usize::MAX).unwrap_or_default()
    }

    #[test]
    fn short_queries_stay_on_one_line() {
        assert_eq!(prettify("sum(rate(foo{a=\"b\"}[5m]))by(job)"), "sum by (job) (rate(foo{a=\"b\"}[5m]))");
        assert_eq!(prettify("a+on(x)group_left(y)b"), "a + on (x) group_left (y) b");
    }

    #[test]
    fn grouping_labels_that_are_not_legacy_names_stay_quoted() {
        let long = format!(r#"sum by ("foo.bar", job) (rate({}_total[5m]))"#, "m".repeat(90));
        let pretty = prettify(&long);
        assert!(pretty.starts_with("sum by (\"foo.bar\", job) (\n"), "{pretty}");
        let opts = promql::parser::ParseOptions::all_features();
        assert!(promql::parser::parse(&pretty, &opts).is_ok(), "{pretty}");
    }
}

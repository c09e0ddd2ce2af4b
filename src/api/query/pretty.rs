//! `/api/v1/format_query`'s output: Prometheus' `Prettify` (promql/parser/prettier.go).
//!
//! A node whose one-line text fits in 100 bytes is printed on one line. A longer node is split:
//! an aggregation or call puts its arguments on their own lines, a binary operation puts its
//! operator on a line between its operands, parentheses wrap their content; each level is
//! indented two spaces more than its parent. Selectors, literals and subquery suffixes are
//! never split. The one-line text of every node is strata's printer (`Display` for [`Expr`]),
//! which prints what Prometheus' `String()` prints.

use promql::parser::ast::{AggregateExpr, BinaryExpr, Expr, Subquery};

/// Prometheus' `maxCharactersPerLine`.
const MAX_LINE: usize = 100;

/// The prettified query.
pub fn format(expr: &Expr) -> String {
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
        Expr::Number(_) | Expr::String(_) | Expr::Vector(_) | Expr::Matrix(_) => format!("{pad}{one_line}"),
    }
}

/// `sum`, `sum by (a, b) `, `topk without (a) ` (Prometheus' `getAggOpStr`, trailing space
/// included).
fn aggregation_prefix(a: &AggregateExpr) -> String {
    let op = a.op.as_str();
    if a.without {
        format!("{op} without ({}) ", a.grouping.join(", "))
    } else if !a.grouping.is_empty() {
        format!("{op} by ({}) ", a.grouping.join(", "))
    } else {
        op.to_owned()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn prettify(query: &str) -> String {
        let expr = promql::parser::parse(query, &promql::parser::ParseOptions::all_features()).unwrap();
        format(&expr)
    }

    #[test]
    fn short_queries_stay_on_one_line() {
        assert_eq!(prettify("sum(rate(foo{a=\"b\"}[5m]))by(job)"), "sum by (job) (rate(foo{a=\"b\"}[5m]))");
        assert_eq!(prettify("a+on(x)group_left(y)b"), "a + on (x) group_left (y) b");
    }
}

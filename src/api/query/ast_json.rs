//! The syntax tree as `/api/v1/parse_query` returns it: Prometheus 3's `translateAST`
//! (web/api/v1/translate_ast.go), which its web UI's tree view reads.
//!
//! Every node is an object with a `type` (`aggregation`, `binaryExpr`, `call`,
//! `matrixSelector`, `subquery`, `numberLiteral`, `parenExpr`, `stringLiteral`, `unaryExpr`,
//! `vectorSelector`) and the node's fields; durations are milliseconds, `@` timestamps
//! milliseconds or `null`, `startOrEnd` is `"start"`, `"end"` or `null`. Go marshals these
//! maps with sorted keys, and so does `serde_json::Value`.
//!
//! Durations written as expressions (`[5m + step()]`, duration-expressions feature) have no
//! value until the query runs; like Prometheus before its preprocessing step they show as 0.

use promql::parser::ast::{AtModifier, Cardinality, DurationExpr, Expr, VectorMatching, VectorSelector};
use serde_json::{Value, json};
use storage::{MatchOp, Matcher};

use super::encode;

/// An object of `fields`. Children are moved in: `json!` would serialize a `Value` given to it
/// into a new one, copying each subtree once per level above it (a deep query of a few hundred
/// kilobytes took seconds).
fn object<const N: usize>(fields: [(&str, Value); N]) -> Value {
    Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

/// The JSON tree of `expr`.
pub fn translate(expr: &Expr) -> Value {
    match expr {
        Expr::Aggregate(a) => object([
            ("type", json!("aggregation")),
            ("op", json!(a.op.as_str())),
            ("expr", translate(&a.expr)),
            ("param", a.param.as_ref().map_or(Value::Null, translate)),
            ("grouping", json!(a.grouping)),
            ("without", json!(a.without)),
        ]),
        Expr::Binary(b) => object([
            ("type", json!("binaryExpr")),
            ("op", json!(b.op.as_str())),
            ("lhs", translate(&b.lhs)),
            ("rhs", translate(&b.rhs)),
            ("matching", b.matching.as_ref().map_or(Value::Null, matching)),
            ("bool", json!(b.return_bool)),
        ]),
        Expr::Call(c) => object([
            ("type", json!("call")),
            (
                "func",
                json!({
                    "name": c.func.name,
                    "argTypes": c.func.args.iter().map(|t| t.short()).collect::<Vec<_>>(),
                    "variadic": c.func.variadic,
                    "returnType": c.func.ret.short(),
                }),
            ),
            ("args", Value::Array(c.args.iter().map(translate).collect())),
        ]),
        Expr::Matrix(m) => {
            let mut node = selector(&m.vs);
            node["type"] = json!("matrixSelector");
            node["range"] = json!(duration_ms(&m.range));
            node
        }
        Expr::Subquery(s) => {
            let (timestamp, start_or_end) = at(s.at);
            object([
                ("type", json!("subquery")),
                ("expr", translate(&s.expr)),
                ("range", json!(duration_ms(&s.range))),
                ("offset", json!(s.offset.as_ref().map_or(0, duration_ms))),
                ("step", json!(s.step.as_ref().map_or(0, duration_ms))),
                ("timestamp", timestamp),
                ("startOrEnd", start_or_end),
                ("alignEvalTime", json!(false)),
            ])
        }
        Expr::Number(n) => {
            let mut val = Vec::new();
            encode::fixed_float(&mut val, n.value);
            json!({ "type": "numberLiteral", "val": String::from_utf8_lossy(&val) })
        }
        Expr::Paren(p) => object([("type", json!("parenExpr")), ("expr", translate(&p.expr))]),
        Expr::String(s) => json!({ "type": "stringLiteral", "val": s.value }),
        Expr::Unary(u) => object([
            ("type", json!("unaryExpr")),
            ("op", json!(if u.negate { "-" } else { "+" })),
            ("expr", translate(&u.expr)),
        ]),
        Expr::Vector(vs) => selector(vs),
    }
}

/// The members shared by vector and matrix selectors.
fn selector(vs: &VectorSelector) -> Value {
    let (timestamp, start_or_end) = at(vs.at);
    json!({
        "type": "vectorSelector",
        "name": vs.name.clone().unwrap_or_default(),
        "offset": vs.offset.as_ref().map_or(0, duration_ms),
        "matchers": vs.matchers.iter().map(matcher).collect::<Vec<_>>(),
        "timestamp": timestamp,
        "startOrEnd": start_or_end,
        "anchored": vs.anchored,
        "smoothed": vs.smoothed,
    })
}

fn matcher(m: &Matcher) -> Value {
    let op = match m.op {
        MatchOp::Equal => "=",
        MatchOp::NotEqual => "!=",
        MatchOp::Regex => "=~",
        MatchOp::NotRegex => "!~",
    };
    json!({ "name": m.name, "value": m.value, "type": op })
}

fn matching(m: &VectorMatching) -> Value {
    let card = match m.card {
        Cardinality::OneToOne => "one-to-one",
        Cardinality::ManyToOne => "many-to-one",
        Cardinality::OneToMany => "one-to-many",
        Cardinality::ManyToMany => "many-to-many",
    };
    json!({
        "card": card,
        "labels": m.labels,
        "on": m.on,
        "include": m.include,
        "fillValues": { "lhs": m.fill_lhs, "rhs": m.fill_rhs },
    })
}

/// `@` as Prometheus' `Timestamp` (ms or null) and `StartOrEnd` ("start", "end" or null).
fn at(at: Option<AtModifier>) -> (Value, Value) {
    match at {
        Some(AtModifier::Timestamp(ms)) => (json!(ms), Value::Null),
        Some(AtModifier::Start) => (Value::Null, json!("start")),
        Some(AtModifier::End) => (Value::Null, json!("end")),
        None => (Value::Null, Value::Null),
    }
}

/// A literal duration in ms; expressions are unresolved until evaluation and count as 0.
fn duration_ms(d: &DurationExpr) -> i64 {
    match d {
        DurationExpr::Literal(secs) => (secs * 1000.0).round() as i64,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_wide_trees_cost_in_proportion_to_their_size() {
        // 120 levels of `-(...)` around a call with 2,000 arguments. With `json!` every level
        // copied its subtree (3 s for 100,000 arguments in a release build); now building the
        // tree costs about what copying it once does (compared in the same run, not with a
        // clock).
        let inner = format!("label_join(up, \"a\", \",\", {})", vec!["\"s\""; 2_000].join(", "));
        let query = format!("{}{inner}{}", "-(".repeat(120), ")".repeat(120));
        let expr = promql::parser::parse(&query, &promql::parser::ParseOptions::all_features()).unwrap();
        let time = |f: &dyn Fn() -> Value| {
            let started = std::time::Instant::now();
            std::hint::black_box(f());
            started.elapsed()
        };
        let tree = translate(&expr);
        assert_eq!(tree["expr"]["expr"]["type"], "unaryExpr");
        // Timed in turn, best of five each, so a busy machine slows both alike.
        let (mut built, mut copied) = (std::time::Duration::MAX, std::time::Duration::MAX);
        for _ in 0..5 {
            built = built.min(time(&|| translate(&expr)));
            copied = copied.min(time(&|| tree.clone()));
        }
        assert!(built < copied * 10, "built in {built:?}, copied in {copied:?}");
    }
}

//! Type checking of a parsed expression (Prometheus' `checkAST`), with the same messages.

use storage::METRIC_NAME;

use super::ast::*;
use super::parse_error::ParseError;

/// Checks types and structural rules; may mark `info()` label selectors and drop vector
/// matching from operations that involve a scalar.
pub(crate) fn check(e: &mut Expr) -> Result<ValueType, ParseError> {
    let t = e.value_type();
    match e {
        Expr::Number(_) | Expr::String(_) => {}
        Expr::Paren(p) => {
            check(&mut p.expr)?;
        }
        Expr::Unary(u) => {
            let inner = check(&mut u.expr)?;
            if inner != ValueType::Scalar && inner != ValueType::Vector {
                return Err(ParseError::new(
                    u.start,
                    format!(
                        "unary expression only allowed on expressions of type scalar or instant vector, got {:?}",
                        inner.documented()
                    ),
                ));
            }
        }
        Expr::Vector(vs) => check_selector(vs)?,
        Expr::Matrix(ms) => check_selector(&ms.vs)?,
        Expr::Subquery(sq) => {
            let inner = check(&mut sq.expr)?;
            if inner != ValueType::Vector {
                return Err(ParseError::new(
                    sq.expr.start(),
                    format!("subquery is only allowed on instant vector, got {} instead", inner.short()),
                ));
            }
        }
        Expr::Aggregate(a) => {
            expect_type(&mut a.expr, ValueType::Vector, "aggregation expression")?;
            match a.op {
                AggOp::Topk | AggOp::Bottomk | AggOp::Quantile | AggOp::Limitk | AggOp::LimitRatio => {
                    if let Some(p) = a.param.as_mut() {
                        expect_type(p, ValueType::Scalar, "aggregation parameter")?;
                    }
                }
                AggOp::CountValues => {
                    if let Some(p) = a.param.as_mut() {
                        expect_type(p, ValueType::String, "aggregation parameter")?;
                    }
                }
                _ => {}
            }
        }
        Expr::Binary(b) => check_binary(b)?,
        Expr::Call(c) => check_call(c)?,
    }
    Ok(t)
}

fn expect_type(e: &mut Expr, want: ValueType, context: &str) -> Result<(), ParseError> {
    let got = check(e)?;
    if got != want {
        return Err(ParseError::new(
            e.start(),
            format!("expected type {} in {context}, got {}", want.documented(), got.documented()),
        ));
    }
    Ok(())
}

fn check_selector(vs: &VectorSelector) -> Result<(), ParseError> {
    if let Some(name) = &vs.name {
        // The last matcher is the one added for the name outside the braces.
        let inner = &vs.matchers[..vs.matchers.len().saturating_sub(1)];
        if let Some(m) = inner.iter().find(|m| m.name == METRIC_NAME) {
            return Err(ParseError::new(
                vs.start,
                format!("metric name must not be set twice: {name:?} or {:?}", m.value),
            ));
        }
        return Ok(());
    }
    if !vs.bypass_empty_matcher_check && !vs.matchers.iter().any(|m| !m.matches_empty()) {
        return Err(ParseError::new(vs.start, "vector selector must contain at least one non-empty matcher"));
    }
    Ok(())
}

fn check_binary(b: &mut BinaryExpr) -> Result<(), ParseError> {
    let lt = check(&mut b.lhs)?;
    let rt = check(&mut b.rhs)?;
    let pos = b.lhs.start();
    if b.return_bool && !b.op.is_comparison() {
        return Err(ParseError::new(pos, "bool modifier can only be used on comparison operators"));
    }
    if b.op.is_comparison() && !b.return_bool && lt == ValueType::Scalar && rt == ValueType::Scalar {
        return Err(ParseError::new(pos, "comparisons between scalars must use BOOL modifier"));
    }
    if let Some(m) = b.matching.as_mut() {
        if b.op.is_set() && m.card == Cardinality::OneToOne {
            m.card = Cardinality::ManyToMany;
        }
        if m.on
            && let Some(l) = m.labels.iter().find(|l| m.include.contains(l))
        {
            return Err(ParseError::new(
                pos,
                format!("label {l:?} must not occur in ON and GROUP clause at once"),
            ));
        }
    }
    if lt != ValueType::Scalar && lt != ValueType::Vector {
        return Err(ParseError::new(
            b.lhs.start(),
            "binary expression must contain only scalar and instant vector types",
        ));
    }
    if rt != ValueType::Scalar && rt != ValueType::Vector {
        return Err(ParseError::new(
            b.rhs.start(),
            "binary expression must contain only scalar and instant vector types",
        ));
    }
    if lt != ValueType::Vector || rt != ValueType::Vector {
        if let Some(m) = &b.matching {
            if !m.labels.is_empty() {
                return Err(ParseError::new(pos, "vector matching only allowed between instant vectors"));
            }
            if m.fill_lhs.is_some() || m.fill_rhs.is_some() {
                return Err(ParseError::new(
                    pos,
                    "filling in missing series only allowed between instant vectors",
                ));
            }
        }
        b.matching = None;
    } else if b.op.is_set()
        && let Some(m) = &b.matching
    {
        if matches!(m.card, Cardinality::OneToMany | Cardinality::ManyToOne) {
            return Err(ParseError::new(
                pos,
                format!("no grouping allowed for {:?} operation", b.op.as_str()),
            ));
        }
        if m.fill_lhs.is_some() || m.fill_rhs.is_some() {
            return Err(ParseError::new(pos, "filling in missing series not allowed for set operators"));
        }
    }
    if (lt == ValueType::Scalar || rt == ValueType::Scalar) && b.op.is_set() {
        return Err(ParseError::new(
            pos,
            format!("set operator {:?} not allowed in binary scalar expression", b.op.as_str()),
        ));
    }
    Ok(())
}

fn check_call(c: &mut Call) -> Result<(), ParseError> {
    let f = c.func;
    let nargs = f.args.len();
    let got = c.args.len();
    if f.variadic == 0 {
        if nargs != got {
            return Err(ParseError::new(
                c.start,
                format!("expected {nargs} argument(s) in call to {:?}, got {got}", f.name),
            ));
        }
    } else {
        let min = nargs - 1;
        if min > got {
            return Err(ParseError::new(
                c.start,
                format!("expected at least {min} argument(s) in call to {:?}, got {got}", f.name),
            ));
        }
        if f.variadic > 0 && min + f.variadic as usize > 0 && got > min + f.variadic as usize {
            return Err(ParseError::new(
                c.start,
                format!(
                    "expected at most {} argument(s) in call to {:?}, got {got}",
                    min + f.variadic as usize,
                    f.name
                ),
            ));
        }
    }
    if f.name == "info" && c.args.len() > 1 {
        let arg = &mut c.args[1];
        if arg.value_type() != ValueType::Vector {
            return Err(ParseError::new(
                c.start,
                format!(
                    "expected type instant vector in call to function \"info\", got {}",
                    arg.value_type().documented()
                ),
            ));
        }
        match arg {
            Expr::Vector(vs) if vs.name.is_some() => {
                return Err(ParseError::new(
                    vs.start,
                    "expected label selectors only, got vector selector instead",
                ));
            }
            Expr::Vector(vs) => vs.bypass_empty_matcher_check = true,
            other => return Err(ParseError::new(other.start(), "expected label selectors only")),
        }
    }
    for (i, arg) in c.args.iter_mut().enumerate() {
        let want = if i >= nargs {
            if f.variadic == 0 {
                break;
            }
            f.args[nargs - 1]
        } else {
            f.args[i]
        };
        let t = check(arg)?;
        if t != want {
            return Err(ParseError::new(
                arg.start(),
                format!(
                    "expected type {} in call to function {:?}, got {}",
                    want.documented(),
                    f.name,
                    t.documented()
                ),
            ));
        }
    }
    Ok(())
}

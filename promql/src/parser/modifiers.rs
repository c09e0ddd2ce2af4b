//! The time-related parts of the grammar: durations (plain and, with the feature enabled,
//! arithmetic with `step()`, `range()`, `min_of`, `max_of`), `offset`, `@`, and the
//! `anchored`/`smoothed` modifiers.

use super::ast::*;
use super::lexer::{Keyword, Tok};
use super::parse::{PREC_UNARY_OPERAND, Parser, parse_number};
use super::parse_error::ParseError;

type PResult<T> = Result<T, ParseError>;

impl<'a> Parser<'a> {
    /// A range or step inside `[...]`: the full duration-expression grammar, must be positive.
    pub(super) fn positive_duration(&mut self) -> PResult<DurationExpr> {
        let start = self.tok().start;
        let d = self.duration_expr(0)?;
        if let DurationExpr::Literal(v) = d {
            if v <= 0.0 {
                return Err(ParseError::new(start, "duration must be greater than 0"));
            }
        } else if !self.opts.duration_expressions {
            return Err(ParseError::new(
                start,
                "experimental duration expression is not enabled: enable it with --enable-feature=promql-duration-expr",
            ));
        }
        Ok(d)
    }

    /// The argument of `offset`: a (signed) literal, `step()`, `range()`, `min_of`/`max_of`, or a
    /// parenthesised duration expression. Anything after it is ordinary expression syntax, so
    /// `x offset 1m + 1m` is `(x offset 1m) + 1m`.
    pub(super) fn offset_duration(&mut self) -> PResult<DurationExpr> {
        let start = self.tok().start;
        let negate = match self.peek() {
            Tok::Sub => {
                self.next();
                true
            }
            Tok::Add => {
                self.next();
                false
            }
            _ => false,
        };
        let d = self.duration_atom()?;
        if !d.is_literal() && !self.opts.duration_expressions {
            return Err(ParseError::new(
                start,
                "experimental duration expression is not enabled: enable it with --enable-feature=promql-duration-expr",
            ));
        }
        Ok(match (negate, d) {
            (true, DurationExpr::Literal(v)) => DurationExpr::Literal(-v),
            (true, d) => DurationExpr::Neg(Box::new(d)),
            (false, d) => d,
        })
    }

    fn duration_expr(&mut self, min_prec: u8) -> PResult<DurationExpr> {
        self.enter()?;
        let mut lhs = match self.peek() {
            Tok::Sub | Tok::Add => {
                let neg = self.next().kind == Tok::Sub;
                let operand = self.duration_expr(PREC_UNARY_OPERAND)?;
                match (neg, operand) {
                    (true, DurationExpr::Literal(v)) => DurationExpr::Literal(-v),
                    (true, d) => DurationExpr::Neg(Box::new(d)),
                    (false, d) => d,
                }
            }
            _ => self.duration_atom()?,
        };
        loop {
            let (op, prec) = match self.peek() {
                Tok::Add => (DurationOp::Add, 4),
                Tok::Sub => (DurationOp::Sub, 4),
                Tok::Mul => (DurationOp::Mul, 5),
                Tok::Div => (DurationOp::Div, 5),
                Tok::Mod => (DurationOp::Mod, 5),
                Tok::Pow => (DurationOp::Pow, 6),
                _ => break,
            };
            if prec < min_prec {
                break;
            }
            let t = self.next();
            let rhs = self.duration_expr(if op == DurationOp::Pow { prec } else { prec + 1 })?;
            if matches!(op, DurationOp::Div | DurationOp::Mod) && rhs == DurationExpr::Literal(0.0) {
                let what = if op == DurationOp::Div { "division by zero" } else { "modulo by zero" };
                return Err(ParseError::new(t.start, what));
            }
            lhs = DurationExpr::Binary(op, Box::new(lhs), Box::new(rhs));
        }
        self.leave();
        Ok(lhs)
    }

    fn duration_atom(&mut self) -> PResult<DurationExpr> {
        let t = self.tok();
        match t.kind {
            Tok::Number => {
                self.next();
                let text = self.text(t);
                parse_number(text)
                    .map(DurationExpr::Literal)
                    .ok_or_else(|| ParseError::new(t.start, format!("error parsing number: {text:?}")))
            }
            Tok::Duration => {
                self.next();
                let ms = super::duration::parse_duration_ms(self.text(t))
                    .map_err(|e| ParseError::new(t.start, e))?;
                Ok(DurationExpr::Literal(ms as f64 / 1000.0))
            }
            Tok::LParen => {
                self.next();
                let d = self.duration_expr(0)?;
                self.expect(Tok::RParen, "duration expression")?;
                Ok(d)
            }
            Tok::Keyword(Keyword::Step | Keyword::Range) => {
                self.next();
                self.expect(Tok::LParen, "duration expression")?;
                self.expect(Tok::RParen, "duration expression")?;
                Ok(if t.kind == Tok::Keyword(Keyword::Step) {
                    DurationExpr::Step
                } else {
                    DurationExpr::Range
                })
            }
            Tok::Keyword(Keyword::Min | Keyword::Max) | Tok::Ident => {
                let name = self.text(t).to_ascii_lowercase();
                let op = match name.as_str() {
                    "min" | "min_of" => DurationOp::Min,
                    "max" | "max_of" => DurationOp::Max,
                    _ => return Err(self.unexpected("duration expression")),
                };
                self.next();
                self.expect(Tok::LParen, "duration expression")?;
                let a = self.duration_expr(0)?;
                self.expect(Tok::Comma, "duration expression")?;
                let b = self.duration_expr(0)?;
                self.expect(Tok::RParen, "duration expression")?;
                Ok(DurationExpr::Binary(op, Box::new(a), Box::new(b)))
            }
            _ => Err(self.unexpected("duration expression, expected number, duration, step(), or range()")),
        }
    }

    /// The value after `@`: a (signed) number of seconds, `start()` or `end()`.
    pub(super) fn at_value(&mut self) -> PResult<AtModifier> {
        let t = self.tok();
        if let Tok::Keyword(k @ (Keyword::Start | Keyword::End)) = t.kind {
            self.next();
            self.expect(Tok::LParen, "@")?;
            self.expect(Tok::RParen, "@")?;
            return Ok(if k == Keyword::Start { AtModifier::Start } else { AtModifier::End });
        }
        let mut sign = 1.0;
        match t.kind {
            Tok::Sub => {
                self.next();
                sign = -1.0;
            }
            Tok::Add => {
                self.next();
            }
            _ => {}
        }
        let n = self.tok();
        let secs = match n.kind {
            Tok::Number => parse_number(self.text(n)),
            Tok::Duration => {
                super::duration::parse_duration_ms(self.text(n)).ok().map(|ms| ms as f64 / 1000.0)
            }
            _ => return Err(self.unexpected("@, expected timestamp")),
        };
        self.next();
        let secs = sign * secs.ok_or_else(|| ParseError::new(n.start, "error parsing number"))?;
        if !secs.is_finite() || secs >= i64::MAX as f64 / 1000.0 || secs <= i64::MIN as f64 / 1000.0 {
            return Err(ParseError::new(
                t.start,
                format!("timestamp out of bounds for @ modifier: {secs:.6}"),
            ));
        }
        Ok(AtModifier::Timestamp((secs * 1000.0).round() as i64))
    }
}

fn modifier_target_error(pos: Pos, what: &str) -> ParseError {
    ParseError::new(
        pos,
        format!(
            "{what} modifier must be preceded by an instant vector selector or range vector selector or a subquery"
        ),
    )
}

pub(super) fn set_offset(e: Expr, d: DurationExpr, pos: Pos) -> PResult<Expr> {
    let slot = match &e {
        Expr::Vector(vs) => &vs.offset,
        Expr::Matrix(ms) => &ms.vs.offset,
        Expr::Subquery(sq) => &sq.offset,
        _ => return Err(modifier_target_error(pos, "offset")),
    };
    if slot.is_some() {
        return Err(ParseError::new(pos, "offset may not be set multiple times"));
    }
    Ok(match e {
        Expr::Vector(mut vs) => {
            vs.offset = Some(d);
            Expr::Vector(vs)
        }
        Expr::Matrix(mut ms) => {
            ms.vs.offset = Some(d);
            Expr::Matrix(ms)
        }
        Expr::Subquery(mut sq) => {
            sq.offset = Some(d);
            Expr::Subquery(sq)
        }
        other => other,
    })
}

pub(super) fn set_at(e: Expr, at: AtModifier, pos: Pos) -> PResult<Expr> {
    let slot = match &e {
        Expr::Vector(vs) => &vs.at,
        Expr::Matrix(ms) => &ms.vs.at,
        Expr::Subquery(sq) => &sq.at,
        _ => return Err(modifier_target_error(pos, "@")),
    };
    if slot.is_some() {
        return Err(ParseError::new(pos, "@ <timestamp> may not be set multiple times"));
    }
    Ok(match e {
        Expr::Vector(mut vs) => {
            vs.at = Some(at);
            Expr::Vector(vs)
        }
        Expr::Matrix(mut ms) => {
            ms.vs.at = Some(at);
            Expr::Matrix(ms)
        }
        Expr::Subquery(mut sq) => {
            sq.at = Some(at);
            Expr::Subquery(sq)
        }
        other => other,
    })
}

pub(super) fn set_extended(e: Expr, anchored: bool, pos: Pos) -> PResult<Expr> {
    let name = if anchored { "anchored" } else { "smoothed" };
    let apply = |vs: &mut VectorSelector| -> PResult<()> {
        if anchored {
            vs.anchored = true;
        } else {
            vs.smoothed = true;
        }
        if vs.anchored && vs.smoothed {
            return Err(ParseError::new(pos, "anchored and smoothed modifiers cannot be used together"));
        }
        Ok(())
    };
    match e {
        Expr::Vector(mut vs) => {
            apply(&mut vs)?;
            Ok(Expr::Vector(vs))
        }
        Expr::Matrix(mut ms) => {
            apply(&mut ms.vs)?;
            Ok(Expr::Matrix(ms))
        }
        Expr::Subquery(_) => {
            Err(ParseError::new(pos, format!("{name} modifier is not supported for subqueries")))
        }
        _ => Err(ParseError::new(pos, format!("{name} modifier not implemented"))),
    }
}

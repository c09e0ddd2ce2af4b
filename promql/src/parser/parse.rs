//! Recursive-descent parser with precedence climbing, producing [`Expr`].
//!
//! Operator precedence, from loosest to tightest (as in Prometheus' grammar): `or`;
//! `and`/`unless`; comparisons; `+ -`; `* / % atan2`; `^` (right-associative). A unary sign binds
//! tighter than `*` but looser than `^` (`-2^2` is `-(2^2)`). The postfix modifiers `[range]`,
//! `[range:step]`, `offset`, `@`, `anchored` and `smoothed` bind to the operand right before them.
//!
//! Recursion is bounded by [`ParseOptions::max_depth`]; the text was already pre-scanned by
//! [`super::guard`], so this bound is a second line of defence.

use storage::{MatchOp, Matcher};

use super::ast::*;
use super::functions::{self, FunctionSpec};
use super::lexer::{Keyword, Tok, Token};
use super::modifiers::{set_at, set_extended, set_offset};
use super::parse_error::ParseError;
use super::strings::unquote;

/// Default limit on nesting depth (parentheses, unary signs, calls, `^` chains).
pub const DEFAULT_MAX_DEPTH: usize = 256;

/// Which optional parts of the language the parser accepts.
#[derive(Debug, Clone)]
pub struct ParseOptions {
    /// Experimental functions and aggregations (`limitk`, `info`, `sort_by_label`, ...).
    pub experimental_functions: bool,
    /// Arithmetic inside durations: `[5m + 30s]`, `offset step()`.
    pub duration_expressions: bool,
    /// `anchored` and `smoothed` range-selector modifiers.
    pub extended_range_selectors: bool,
    /// `fill()`, `fill_left()`, `fill_right()` binary-operator modifiers.
    pub binop_fill_modifiers: bool,
    /// Maximum nesting depth; deeper queries are rejected before recursion can overflow.
    pub max_depth: usize,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions {
            experimental_functions: false,
            duration_expressions: false,
            extended_range_selectors: false,
            binop_fill_modifiers: false,
            max_depth: DEFAULT_MAX_DEPTH,
        }
    }
}

impl ParseOptions {
    /// Everything enabled (what Prometheus' own test runner uses).
    pub fn all_features() -> Self {
        ParseOptions {
            experimental_functions: true,
            duration_expressions: true,
            extended_range_selectors: true,
            binop_fill_modifiers: true,
            max_depth: DEFAULT_MAX_DEPTH,
        }
    }
}

type PResult<T> = Result<T, ParseError>;

/// Parses tokens of `input` into an expression (no type checking yet).
pub(crate) fn parse_tokens(input: &str, toks: Vec<Token>, opts: &ParseOptions) -> PResult<Expr> {
    let mut p = Parser { input, toks, pos: 0, opts, depth: 0, regex_budget: Default::default() };
    if p.peek() == Tok::Eof {
        return Err(ParseError::new(0, "no expression found in input"));
    }
    let e = p.expr(0)?;
    if p.peek() != Tok::Eof {
        return Err(p.unexpected(""));
    }
    Ok(e)
}

pub(super) struct Parser<'a> {
    pub(super) input: &'a str,
    pub(super) toks: Vec<Token>,
    pub(super) pos: usize,
    pub(super) opts: &'a ParseOptions,
    pub(super) depth: usize,
    /// What this query's matchers' compiled regexes hold so far.
    pub(super) regex_budget: storage::matcher::RegexBudget,
}

pub(super) const PREC_UNARY_OPERAND: u8 = 6;

fn binop_of(t: Tok) -> Option<(BinOp, u8)> {
    Some(match t {
        Tok::Keyword(Keyword::Or) => (BinOp::Or, 1),
        Tok::Keyword(Keyword::And) => (BinOp::And, 2),
        Tok::Keyword(Keyword::Unless) => (BinOp::Unless, 2),
        Tok::EqlC => (BinOp::Eql, 3),
        Tok::Neq => (BinOp::Neq, 3),
        Tok::Gtr => (BinOp::Gtr, 3),
        Tok::Lss => (BinOp::Lss, 3),
        Tok::Gte => (BinOp::Gte, 3),
        Tok::Lte => (BinOp::Lte, 3),
        Tok::Add => (BinOp::Add, 4),
        Tok::Sub => (BinOp::Sub, 4),
        Tok::Mul => (BinOp::Mul, 5),
        Tok::Div => (BinOp::Div, 5),
        Tok::Mod => (BinOp::Mod, 5),
        Tok::TrimUpper => (BinOp::TrimUpper, 5),
        Tok::TrimLower => (BinOp::TrimLower, 5),
        Tok::Keyword(Keyword::Atan2) => (BinOp::Atan2, 5),
        Tok::Pow => (BinOp::Pow, 6),
        _ => return None,
    })
}

fn agg_of(k: Keyword) -> Option<AggOp> {
    Some(match k {
        Keyword::Sum => AggOp::Sum,
        Keyword::Avg => AggOp::Avg,
        Keyword::Count => AggOp::Count,
        Keyword::Min => AggOp::Min,
        Keyword::Max => AggOp::Max,
        Keyword::Group => AggOp::Group,
        Keyword::Stddev => AggOp::Stddev,
        Keyword::Stdvar => AggOp::Stdvar,
        Keyword::Topk => AggOp::Topk,
        Keyword::Bottomk => AggOp::Bottomk,
        Keyword::CountValues => AggOp::CountValues,
        Keyword::Quantile => AggOp::Quantile,
        Keyword::Limitk => AggOp::Limitk,
        Keyword::LimitRatio => AggOp::LimitRatio,
        _ => return None,
    })
}

/// Keywords that may also be used as metric names (Prometheus' `metric_identifier`).
fn keyword_is_metric_name(k: Keyword) -> bool {
    agg_of(k).is_some()
        || matches!(
            k,
            Keyword::By
                | Keyword::And
                | Keyword::Or
                | Keyword::Unless
                | Keyword::Offset
                | Keyword::Without
                | Keyword::Start
                | Keyword::End
                | Keyword::Step
                | Keyword::Range
                | Keyword::Anchored
                | Keyword::Smoothed
        )
}

/// Parses a number the way Prometheus does: Go integer syntax first (hex, octal, `_`; 64-bit
/// signed, as `strconv.ParseInt`), then float. A literal beyond the float range (`1e309`) is
/// refused, as Go's `ParseFloat` reports it out of range; `Inf` is the way to write infinity.
pub(crate) fn parse_number(text: &str) -> Option<f64> {
    let lower = text.to_ascii_lowercase();
    match lower.as_str() {
        "inf" | "+inf" => return Some(f64::INFINITY),
        "-inf" => return Some(f64::NEG_INFINITY),
        "nan" => return Some(f64::NAN),
        _ => {}
    }
    let cleaned: String = lower.chars().filter(|c| *c != '_').collect();
    if let Some(hex) = cleaned.strip_prefix("0x") {
        // Beyond `i64` Go's ParseFloat gets it, and takes hex only with a `p` exponent.
        return i64::from_str_radix(hex, 16).ok().map(|v| v as f64);
    }
    if cleaned.len() > 1
        && cleaned.starts_with('0')
        && cleaned.bytes().all(|b| b.is_ascii_digit())
        && let Ok(v) = i64::from_str_radix(&cleaned[1..], 8)
    {
        return Some(v as f64);
    }
    cleaned.parse::<f64>().ok().filter(|v| v.is_finite())
}

impl<'a> Parser<'a> {
    pub(super) fn peek(&self) -> Tok {
        self.toks.get(self.pos).map_or(Tok::Eof, |t| t.kind)
    }

    pub(super) fn peek_at(&self, n: usize) -> Tok {
        self.toks.get(self.pos + n).map_or(Tok::Eof, |t| t.kind)
    }

    pub(super) fn tok(&self) -> Token {
        self.toks.get(self.pos).copied().unwrap_or(Token {
            kind: Tok::Eof,
            start: self.input.len(),
            end: self.input.len(),
        })
    }

    pub(super) fn text(&self, t: Token) -> &'a str {
        &self.input[t.start..t.end]
    }

    pub(super) fn next(&mut self) -> Token {
        let t = self.tok();
        if self.pos < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn describe(&self, t: Token) -> String {
        match t.kind {
            Tok::Eof => "end of input".to_string(),
            Tok::Ident | Tok::MetricIdent => format!("identifier {:?}", self.text(t)),
            Tok::Number => format!("number {:?}", self.text(t)),
            Tok::Duration => format!("duration {:?}", self.text(t)),
            Tok::Str => format!("string {:?}", self.text(t)),
            Tok::Keyword(_) => format!("<{}>", self.text(t).to_ascii_lowercase()),
            _ => format!("{:?}", self.text(t)),
        }
    }

    pub(super) fn unexpected(&self, context: &str) -> ParseError {
        let t = self.tok();
        let mut msg = format!("unexpected {}", self.describe(t));
        if !context.is_empty() {
            msg.push_str(" in ");
            msg.push_str(context);
        }
        ParseError::new(t.start, msg)
    }

    pub(super) fn expect(&mut self, kind: Tok, context: &str) -> PResult<Token> {
        if self.peek() == kind { Ok(self.next()) } else { Err(self.unexpected(context)) }
    }

    pub(super) fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > self.opts.max_depth {
            return Err(ParseError::new(
                self.tok().start,
                format!("query is nested too deeply (more than {} levels)", self.opts.max_depth),
            ));
        }
        Ok(())
    }

    pub(super) fn leave(&mut self) {
        self.depth -= 1;
    }

    /// `expr` with operators of at least `min_prec`.
    fn expr(&mut self, min_prec: u8) -> PResult<Expr> {
        self.enter()?;
        let mut lhs = self.unary()?;
        while let Some((op, prec)) = binop_of(self.peek()) {
            if prec < min_prec {
                break;
            }
            self.next();
            let (return_bool, matching) = self.bin_modifiers()?;
            let next_min = if op == BinOp::Pow { prec } else { prec + 1 };
            let rhs = self.expr(next_min)?;
            lhs = Expr::Binary(Box::new(BinaryExpr { op, lhs, rhs, return_bool, matching: Some(matching) }));
        }
        self.leave();
        Ok(lhs)
    }

    fn unary(&mut self) -> PResult<Expr> {
        let t = self.tok();
        if matches!(t.kind, Tok::Add | Tok::Sub) {
            self.next();
            let negate = t.kind == Tok::Sub;
            let operand = self.expr(PREC_UNARY_OPERAND)?;
            return Ok(match operand {
                Expr::Number(n) => Expr::Number(NumberLiteral {
                    value: if negate { -n.value } else { n.value },
                    start: t.start,
                }),
                other => Expr::Unary(Box::new(UnaryExpr { negate, expr: other, start: t.start })),
            });
        }
        let primary = self.primary()?;
        self.postfix(primary)
    }

    fn primary(&mut self) -> PResult<Expr> {
        let t = self.tok();
        match t.kind {
            Tok::Number => {
                self.next();
                let text = self.text(t);
                let value = parse_number(text)
                    .ok_or_else(|| ParseError::new(t.start, format!("error parsing number: {text:?}")))?;
                Ok(Expr::Number(NumberLiteral { value, start: t.start }))
            }
            Tok::Duration => {
                self.next();
                let ms = super::duration::parse_duration_ms(self.text(t))
                    .map_err(|e| ParseError::new(t.start, e))?;
                Ok(Expr::Number(NumberLiteral { value: ms as f64 / 1000.0, start: t.start }))
            }
            Tok::Str => {
                self.next();
                Ok(Expr::String(self.string_literal(t)?))
            }
            Tok::LParen => {
                self.next();
                let inner = self.expr(0)?;
                self.expect(Tok::RParen, "paren expression")?;
                Ok(Expr::Paren(Box::new(ParenExpr { expr: inner, start: t.start })))
            }
            Tok::LBrace => {
                let matchers = self.label_matchers()?;
                Ok(Expr::Vector(Box::new(self.selector(None, matchers, t.start))))
            }
            Tok::Keyword(k) => {
                if let Some(op) = agg_of(k)
                    && matches!(self.peek_at(1), Tok::LParen | Tok::Keyword(Keyword::By | Keyword::Without))
                {
                    return self.aggregation(op);
                }
                if matches!(k, Keyword::Start | Keyword::End | Keyword::Step | Keyword::Range)
                    && self.peek_at(1) == Tok::LParen
                {
                    let name = self.text(t).to_ascii_lowercase();
                    return self.call(&name);
                }
                if keyword_is_metric_name(k) {
                    return self.named_selector();
                }
                Err(self.unexpected(""))
            }
            Tok::Ident | Tok::MetricIdent => {
                if t.kind == Tok::Ident && self.peek_at(1) == Tok::LParen {
                    let name = self.text(t).to_string();
                    return self.call(&name);
                }
                self.named_selector()
            }
            _ => Err(self.unexpected("")),
        }
    }

    fn string_literal(&self, t: Token) -> PResult<StringLiteral> {
        let raw = self.text(t);
        let u = unquote(raw)
            .map_err(|e| ParseError::new(t.start, format!("error unquoting string {raw:?}: {e}")))?;
        Ok(StringLiteral { value: u.value, valid_utf8: u.valid_utf8, raw: raw.to_string(), start: t.start })
    }

    fn selector(&self, name: Option<String>, mut matchers: Vec<Matcher>, start: Pos) -> VectorSelector {
        if let Some(n) = &name {
            matchers.push(Matcher::equal(storage::METRIC_NAME, n.clone()));
        }
        VectorSelector {
            name,
            matchers,
            offset: None,
            at: None,
            anchored: false,
            smoothed: false,
            bypass_empty_matcher_check: false,
            start,
        }
    }

    fn named_selector(&mut self) -> PResult<Expr> {
        let t = self.next();
        let name = self.text(t).to_string();
        let matchers = if self.peek() == Tok::LBrace { self.label_matchers()? } else { Vec::new() };
        Ok(Expr::Vector(Box::new(self.selector(Some(name), matchers, t.start))))
    }

    /// `{ matcher, ... }`
    fn label_matchers(&mut self) -> PResult<Vec<Matcher>> {
        self.expect(Tok::LBrace, "label matching")?;
        let mut out = Vec::new();
        loop {
            let t = self.tok();
            match t.kind {
                Tok::RBrace => {
                    self.next();
                    return Ok(out);
                }
                Tok::Ident | Tok::Str => {
                    self.next();
                    let name = if t.kind == Tok::Str {
                        let s = self.string_literal(t)?;
                        if !s.valid_utf8 {
                            return Err(ParseError::new(t.start, "invalid UTF-8 in label name"));
                        }
                        s.value
                    } else {
                        self.text(t).to_string()
                    };
                    let op = match self.peek() {
                        Tok::Assign => Some(MatchOp::Equal),
                        Tok::Neq => Some(MatchOp::NotEqual),
                        Tok::EqlRegex => Some(MatchOp::Regex),
                        Tok::NeqRegex => Some(MatchOp::NotRegex),
                        _ => None,
                    };
                    match op {
                        Some(op) => {
                            self.next();
                            let vt = self.tok();
                            if vt.kind != Tok::Str {
                                return Err(self.unexpected("label matching, expected string"));
                            }
                            self.next();
                            let value = self.string_literal(vt)?;
                            // Go's regexp refuses bytes that are not UTF-8; the lossy text would
                            // match U+FFFD instead.
                            if !value.valid_utf8 && matches!(op, MatchOp::Regex | MatchOp::NotRegex) {
                                return Err(ParseError::new(
                                    t.start,
                                    format!("error parsing regexp: invalid UTF-8: `{}`", value.raw),
                                ));
                            }
                            let m = Matcher::new(op, name, value.value)
                                .map_err(|e| ParseError::new(t.start, e.to_string()))?;
                            self.regex_budget.charge(&m).map_err(|e| ParseError::new(t.start, e))?;
                            out.push(m);
                        }
                        None if t.kind == Tok::Str => out.push(Matcher::equal(storage::METRIC_NAME, name)),
                        None => {
                            return Err(self.unexpected("label matching, expected label matching operator"));
                        }
                    }
                    match self.peek() {
                        Tok::Comma => {
                            self.next();
                        }
                        Tok::RBrace => {}
                        _ => return Err(self.unexpected("label matching, expected \",\" or \"}\"")),
                    }
                }
                _ => return Err(self.unexpected("label matching, expected identifier or \"}\"")),
            }
        }
    }

    fn call(&mut self, name: &str) -> PResult<Expr> {
        let t = self.next();
        let func: &'static FunctionSpec = functions::lookup(name).ok_or_else(|| {
            let mut msg = format!("unknown function with name {name:?}");
            if let Some(hint) = functions::renamed(name) {
                msg.push_str(&format!(" ({hint})"));
            }
            ParseError::new(t.start, msg)
        })?;
        if func.experimental && !self.opts.experimental_functions {
            // Prometheus' text, plus the flag that turns it on: users migrating a dashboard
            // otherwise have to look the flag up.
            return Err(ParseError::new(
                t.start,
                format!(
                    "function {name:?} is not enabled: it is experimental and must be enabled with \
                     --enable-feature=promql-experimental-functions"
                ),
            ));
        }
        // Parentheses around arguments carry no meaning (`rate((x[5m]))`), as in Prometheus.
        let args = self.call_args()?.into_iter().map(Expr::into_unparen).collect();
        Ok(Expr::Call(Box::new(Call { func, args, start: t.start })))
    }

    /// `( expr, ... )`
    fn call_args(&mut self) -> PResult<Vec<Expr>> {
        self.expect(Tok::LParen, "function call")?;
        let mut args = Vec::new();
        if self.peek() == Tok::RParen {
            self.next();
            return Ok(args);
        }
        loop {
            args.push(self.expr(0)?);
            match self.peek() {
                Tok::Comma => {
                    let c = self.next();
                    if self.peek() == Tok::RParen {
                        return Err(ParseError::new(
                            c.start,
                            "trailing commas not allowed in function call args",
                        ));
                    }
                }
                Tok::RParen => {
                    self.next();
                    return Ok(args);
                }
                _ => return Err(self.unexpected("function call, expected \",\" or \")\"")),
            }
        }
    }

    fn aggregation(&mut self, op: AggOp) -> PResult<Expr> {
        let t = self.next();
        let mut grouping = None;
        if let Tok::Keyword(k @ (Keyword::By | Keyword::Without)) = self.peek() {
            self.next();
            grouping = Some((self.grouping_labels()?, k == Keyword::Without));
        }
        let args = self.call_args()?;
        if grouping.is_none()
            && let Tok::Keyword(k @ (Keyword::By | Keyword::Without)) = self.peek()
        {
            self.next();
            grouping = Some((self.grouping_labels()?, k == Keyword::Without));
        }
        if args.is_empty() {
            return Err(ParseError::new(t.start, "no arguments for aggregate expression provided"));
        }
        if op.is_experimental() && !self.opts.experimental_functions {
            return Err(ParseError::new(
                t.start,
                format!(
                    "{}() is experimental and must be enabled with --enable-feature=promql-experimental-functions",
                    op.as_str()
                ),
            ));
        }
        let want = if op.has_param() { 2 } else { 1 };
        if args.len() != want {
            return Err(ParseError::new(
                t.start,
                format!(
                    "wrong number of arguments for aggregate expression provided, expected {want}, got {}",
                    args.len()
                ),
            ));
        }
        let mut args = args.into_iter();
        let param = if want == 2 { args.next().map(Expr::into_unparen) } else { None };
        let Some(expr) = args.next() else {
            return Err(ParseError::new(t.start, "no arguments for aggregate expression provided"));
        };
        let (grouping, without) = grouping.unwrap_or_default();
        Ok(Expr::Aggregate(Box::new(AggregateExpr { op, expr, param, grouping, without, start: t.start })))
    }

    /// `( label, ... )` after `by`, `without`, `on`, `ignoring`, `group_left`, `group_right`.
    fn grouping_labels(&mut self) -> PResult<Vec<String>> {
        self.expect(Tok::LParen, "grouping opts, expected \"(\"")?;
        let mut out = Vec::new();
        loop {
            let t = self.tok();
            match t.kind {
                Tok::RParen => {
                    self.next();
                    return Ok(out);
                }
                Tok::Ident | Tok::Keyword(_) | Tok::MetricIdent | Tok::Str => {
                    self.next();
                    let name = if t.kind == Tok::Str {
                        let s = self.string_literal(t)?;
                        if !s.valid_utf8 || s.value.is_empty() {
                            return Err(ParseError::new(
                                t.start,
                                format!("invalid label name for grouping: {:?}", s.value),
                            ));
                        }
                        s.value
                    } else {
                        let text = self.text(t);
                        if t.kind == Tok::MetricIdent {
                            return Err(ParseError::new(
                                t.start,
                                format!("invalid label name for grouping: {text:?}"),
                            ));
                        }
                        text.to_string()
                    };
                    out.push(name);
                    match self.peek() {
                        Tok::Comma => {
                            self.next();
                        }
                        Tok::RParen => {}
                        _ => return Err(self.unexpected("grouping opts, expected \",\" or \")\"")),
                    }
                }
                _ => return Err(self.unexpected("grouping opts, expected label")),
            }
        }
    }

    /// `bool`, `on`/`ignoring`, `group_left`/`group_right`, `fill*` after a binary operator.
    fn bin_modifiers(&mut self) -> PResult<(bool, VectorMatching)> {
        let mut m = VectorMatching::one_to_one();
        let mut return_bool = false;
        if self.peek() == Tok::Keyword(Keyword::Bool) {
            self.next();
            return_bool = true;
        }
        if let Tok::Keyword(k @ (Keyword::On | Keyword::Ignoring)) = self.peek() {
            self.next();
            m.on = k == Keyword::On;
            m.labels = self.grouping_labels()?;
            if let Tok::Keyword(g @ (Keyword::GroupLeft | Keyword::GroupRight)) = self.peek() {
                self.next();
                m.card =
                    if g == Keyword::GroupLeft { Cardinality::ManyToOne } else { Cardinality::OneToMany };
                if self.peek() == Tok::LParen {
                    m.include = self.grouping_labels()?;
                }
            }
        } else if let Tok::Keyword(Keyword::GroupLeft | Keyword::GroupRight) = self.peek() {
            return Err(self.unexpected(""));
        }
        let fill_start = self.tok().start;
        let mut seen_left = false;
        let mut seen_right = false;
        while let Tok::Keyword(k @ (Keyword::Fill | Keyword::FillLeft | Keyword::FillRight)) = self.peek() {
            if (k == Keyword::Fill && (seen_left || seen_right))
                || (k == Keyword::FillLeft && seen_left)
                || (k == Keyword::FillRight && seen_right)
            {
                return Err(self.unexpected(""));
            }
            self.next();
            let v = self.fill_value()?;
            match k {
                Keyword::Fill => {
                    m.fill_lhs = Some(v);
                    m.fill_rhs = Some(v);
                    seen_left = true;
                    seen_right = true;
                }
                Keyword::FillLeft => {
                    m.fill_lhs = Some(v);
                    seen_left = true;
                }
                _ => {
                    m.fill_rhs = Some(v);
                    seen_right = true;
                }
            }
        }
        if (seen_left || seen_right) && !self.opts.binop_fill_modifiers {
            return Err(ParseError::new(
                fill_start,
                "binop fill modifiers are experimental and not enabled: enable them with \
                 --enable-feature=promql-binop-fill-modifiers",
            ));
        }
        Ok((return_bool, m))
    }

    fn fill_value(&mut self) -> PResult<f64> {
        self.expect(Tok::LParen, "fill modifier")?;
        let mut sign = 1.0;
        match self.peek() {
            Tok::Sub => {
                self.next();
                sign = -1.0;
            }
            Tok::Add => {
                self.next();
            }
            _ => {}
        }
        let t = self.tok();
        if t.kind != Tok::Number {
            return Err(ParseError::new(t.start, "Number expected for fill value"));
        }
        self.next();
        let v = parse_number(self.text(t))
            .ok_or_else(|| ParseError::new(t.start, format!("error parsing number: {:?}", self.text(t))))?;
        self.expect(Tok::RParen, "fill modifier")?;
        Ok(sign * v)
    }

    /// Applies `[...]`, `offset`, `@`, `anchored` and `smoothed` to `e` while they follow.
    fn postfix(&mut self, mut e: Expr) -> PResult<Expr> {
        loop {
            let t = self.tok();
            e = match t.kind {
                Tok::LBracket => self.range_or_subquery(e)?,
                Tok::Keyword(Keyword::Offset) => {
                    self.next();
                    let d = self.offset_duration()?;
                    set_offset(e, d, t.start)?
                }
                Tok::At => {
                    self.next();
                    let at = self.at_value()?;
                    set_at(e, at, t.start)?
                }
                Tok::Keyword(k @ (Keyword::Anchored | Keyword::Smoothed)) => {
                    self.next();
                    let name = if k == Keyword::Anchored { "anchored" } else { "smoothed" };
                    if !self.opts.extended_range_selectors {
                        return Err(ParseError::new(
                            t.start,
                            format!(
                                "{name} modifier is experimental and not enabled: enable it with \
                                 --enable-feature=promql-extended-range-selectors"
                            ),
                        ));
                    }
                    set_extended(e, k == Keyword::Anchored, t.start)?
                }
                _ => return Ok(e),
            };
        }
    }

    fn range_or_subquery(&mut self, e: Expr) -> PResult<Expr> {
        let open = self.next();
        let range = self.positive_duration()?;
        if self.peek() == Tok::Colon {
            self.next();
            let step = if self.peek() == Tok::RBracket { None } else { Some(self.positive_duration()?) };
            self.expect(Tok::RBracket, "subquery selector, expected \"]\"")?;
            return Ok(Expr::Subquery(Box::new(Subquery { expr: e, range, step, offset: None, at: None })));
        }
        self.expect(Tok::RBracket, "subquery or range, expected \":\" or \"]\"")?;
        match e {
            Expr::Vector(vs) => {
                if vs.offset.is_some() {
                    return Err(ParseError::new(open.start, "no offset modifiers allowed before range"));
                }
                if vs.at.is_some() {
                    return Err(ParseError::new(open.start, "no @ modifiers allowed before range"));
                }
                Ok(Expr::Matrix(Box::new(MatrixSelector { vs: *vs, range })))
            }
            _ => Err(ParseError::new(open.start, "ranges only allowed for vector selectors")),
        }
    }
}

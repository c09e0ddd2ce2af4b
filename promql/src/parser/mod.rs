//! PromQL parsing: text to a type-checked [`Expr`].
//!
//! strata parses with its own small recursive-descent parser rather than `promql-parser`: the
//! language served is Prometheus 3.x including duration expressions (`[5m+30s]`,
//! `offset step()`), `anchored`/`smoothed` range selectors, `fill()` modifiers and the `info()`
//! label-selector argument, none of which `promql-parser` 0.11 accepts, and warnings must carry
//! the `line:column` of the sub-expression they refer to, which needs positions in the tree.
//! `promql-parser` remains a dev-dependency: a test checks that both parsers agree on every
//! query of the conformance corpus that it can parse.
//!
//! Parsing is guarded against stack exhaustion: [`guard::check_depth`] scans the text linearly
//! first, and the parser itself also stops at [`ParseOptions::max_depth`].

pub mod ast;
mod check;
pub mod duration;
pub mod functions;
pub mod guard;
mod lexer;
mod modifiers;
mod parse;
mod parse_error;
mod printer;
pub mod strings;

use storage::{Label, Labels, Matcher};

pub use ast::Expr;
pub use parse::{DEFAULT_MAX_DEPTH, ParseOptions};
pub use parse_error::{ParseError, line_col};
pub use printer::format_labels;

/// Parses and type-checks a query.
pub fn parse(input: &str, opts: &ParseOptions) -> Result<Expr, ParseError> {
    guard::check_depth(input, opts.max_depth)?;
    let toks = lexer::tokenize(input)?;
    // The parser counts its own levels slightly differently from the pre-scan; give it room so
    // the pre-scan's message is the one users see.
    let parse_opts = ParseOptions { max_depth: opts.max_depth * 2 + 8, ..opts.clone() };
    let mut e = parse::parse_tokens(input, toks, &parse_opts)?;
    check::check(&mut e)?;
    Ok(e)
}

/// Parses a metric with labels, `name{a="b"}` or `{__name__="name", a="b"}`, into a label set
/// (Prometheus' `ParseMetric`). Only `=` is allowed.
pub fn parse_metric(input: &str) -> Result<Labels, ParseError> {
    let sel = parse_selector_expr(input)?;
    let mut labels = Vec::with_capacity(sel.matchers.len());
    for m in sel.matchers {
        if m.op != storage::MatchOp::Equal {
            return Err(ParseError::new(0, "only \"=\" is allowed in a metric"));
        }
        labels.push(Label::new(m.name.as_str(), m.value.as_str()));
    }
    Ok(Labels::new(labels))
}

/// Parses a series selector such as a `match[]` parameter into its matchers.
pub fn parse_metric_selector(input: &str) -> Result<Vec<Matcher>, ParseError> {
    let sel = parse_selector_expr(input)?;
    Ok(sel.matchers)
}

fn parse_selector_expr(input: &str) -> Result<ast::VectorSelector, ParseError> {
    guard::check_depth(input, DEFAULT_MAX_DEPTH)?;
    let toks = lexer::tokenize(input)?;
    match parse::parse_tokens(input, toks, &ParseOptions::default())? {
        Expr::Vector(vs) if vs.offset.is_none() && vs.at.is_none() => Ok(*vs),
        _ => Err(ParseError::new(0, "expected a series selector")),
    }
}

#[cfg(test)]
mod tests;

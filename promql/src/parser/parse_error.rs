//! The error of a query that does not parse, and how positions in a query are shown.
//!
//! A leaf: the lexer, the parser, the checks and [`crate::annotations`] all use it.

/// A syntax or type error at a byte offset of the query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Byte offset of the offending token.
    pub pos: usize,
    /// What is wrong.
    pub msg: String,
}

impl ParseError {
    pub(crate) fn new(pos: usize, msg: impl Into<String>) -> Self {
        ParseError { pos, msg: msg.into() }
    }

    /// The message in Prometheus' format, `<line>:<column>: parse error: <msg>`.
    pub fn render(&self, input: &str) -> String {
        let (line, col) = line_col(input, self.pos);
        format!("{line}:{col}: parse error: {}", self.msg)
    }
}

/// 1-based line and byte column of `pos` in `input`.
pub fn line_col(input: &str, pos: usize) -> (usize, usize) {
    let pos = pos.min(input.len());
    let before = &input.as_bytes()[..pos];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let col = match before.iter().rposition(|b| *b == b'\n') {
        Some(nl) => pos - nl,
        None => pos + 1,
    };
    (line, col)
}

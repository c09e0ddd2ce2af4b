//! Turns a PromQL query into tokens with byte positions.
//!
//! The lexer follows Prometheus' `promql/parser/lex.go` closely where the token boundaries
//! matter: numbers (decimal, hex, exponents, `_` separators), durations (`1h30m`, `5m`),
//! identifiers that may contain `:`, case-insensitive keywords, the three string quotes, and two
//! contexts that change how characters are read: inside `{...}` every word is a label name, and
//! inside `[...]` a `:` separates range and step instead of being part of an identifier.
//!
//! The whole input is tokenized up front (linear time, no recursion), which keeps the parser
//! simple and lets it look ahead freely.

use super::parse_error::ParseError;

/// Keywords of the language. Matching is case-insensitive (`SUM BY`, `Offset`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keyword {
    And,
    Or,
    Unless,
    Atan2,
    Sum,
    Avg,
    Count,
    Min,
    Max,
    Group,
    Stddev,
    Stdvar,
    Topk,
    Bottomk,
    CountValues,
    Quantile,
    Limitk,
    LimitRatio,
    Offset,
    Smoothed,
    Anchored,
    By,
    Without,
    On,
    Ignoring,
    GroupLeft,
    GroupRight,
    Fill,
    FillLeft,
    FillRight,
    Bool,
    Start,
    End,
    Step,
    Range,
}

impl Keyword {
    fn lookup(lower: &str) -> Option<Keyword> {
        use Keyword::*;
        Some(match lower {
            "and" => And,
            "or" => Or,
            "unless" => Unless,
            "atan2" => Atan2,
            "sum" => Sum,
            "avg" => Avg,
            "count" => Count,
            "min" => Min,
            "max" => Max,
            "group" => Group,
            "stddev" => Stddev,
            "stdvar" => Stdvar,
            "topk" => Topk,
            "bottomk" => Bottomk,
            "count_values" => CountValues,
            "quantile" => Quantile,
            "limitk" => Limitk,
            "limit_ratio" => LimitRatio,
            "offset" => Offset,
            "smoothed" => Smoothed,
            "anchored" => Anchored,
            "by" => By,
            "without" => Without,
            "on" => On,
            "ignoring" => Ignoring,
            "group_left" => GroupLeft,
            "group_right" => GroupRight,
            "fill" => Fill,
            "fill_left" => FillLeft,
            "fill_right" => FillRight,
            "bool" => Bool,
            "start" => Start,
            "end" => End,
            "step" => Step,
            "range" => Range,
            _ => return None,
        })
    }
}

/// The kind of a token; its text is `&input[start..end]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tok {
    /// A name without `:`.
    Ident,
    /// A name containing `:` (only valid as a metric name).
    MetricIdent,
    Keyword(Keyword),
    /// A number literal, including `Inf` and `NaN`.
    Number,
    /// A duration literal such as `5m` or `1h30m`.
    Duration,
    /// A quoted string, quotes included.
    Str,
    LParen,
    RParen,
    LBrace,
    RBrace,
    LBracket,
    RBracket,
    Comma,
    Colon,
    /// `=`
    Assign,
    /// `==`
    EqlC,
    /// `!=`
    Neq,
    /// `=~`
    EqlRegex,
    /// `!~`
    NeqRegex,
    Lss,
    Lte,
    Gtr,
    Gte,
    /// `</`, the histogram trim operator keeping the lower part.
    TrimUpper,
    /// `>/`, the histogram trim operator keeping the upper part.
    TrimLower,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
    At,
    Eof,
}

/// One token: kind plus byte range in the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Token {
    pub kind: Tok,
    pub start: usize,
    pub end: usize,
}

/// Splits `input` into tokens, ending with one `Eof` token.
pub(crate) fn tokenize(input: &str) -> Result<Vec<Token>, ParseError> {
    Lexer { input, bytes: input.as_bytes(), pos: 0, in_braces: false, in_brackets: false, parens: 0 }.run()
}

struct Lexer<'a> {
    input: &'a str,
    bytes: &'a [u8],
    pos: usize,
    in_braces: bool,
    in_brackets: bool,
    parens: i64,
}

fn is_alpha(c: u8) -> bool {
    c == b'_' || c.is_ascii_alphabetic()
}

fn is_alnum(c: u8) -> bool {
    is_alpha(c) || c.is_ascii_digit()
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

impl<'a> Lexer<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn peek_at(&self, off: usize) -> Option<u8> {
        self.bytes.get(self.pos + off).copied()
    }

    fn err<T>(&self, at: usize, msg: impl Into<String>) -> Result<T, ParseError> {
        Err(ParseError::new(at, msg))
    }

    fn run(mut self) -> Result<Vec<Token>, ParseError> {
        let mut out = Vec::new();
        loop {
            // Skip whitespace and `#` line comments.
            while let Some(c) = self.peek() {
                if is_space(c) {
                    self.pos += 1;
                } else if c == b'#' {
                    while let Some(c) = self.peek() {
                        if c == b'\n' || c == b'\r' {
                            break;
                        }
                        self.pos += 1;
                    }
                } else {
                    break;
                }
            }
            let start = self.pos;
            let Some(c) = self.peek() else {
                if self.in_braces {
                    return self.err(start, "unexpected end of input inside braces");
                }
                if self.parens > 0 {
                    return self.err(start, "unclosed left parenthesis");
                }
                if self.in_brackets {
                    return self.err(start, "unclosed left bracket");
                }
                out.push(Token { kind: Tok::Eof, start, end: start });
                return Ok(out);
            };
            let kind = self.next_token(c, start)?;
            out.push(Token { kind, start, end: self.pos });
        }
    }

    fn next_token(&mut self, c: u8, start: usize) -> Result<Tok, ParseError> {
        if c == b'"' || c == b'\'' || c == b'`' {
            self.scan_string(c)?;
            return Ok(Tok::Str);
        }
        if self.in_braces {
            return self.brace_token(c, start);
        }
        if c.is_ascii_digit() || (c == b'.' && self.peek_at(1).is_some_and(|d| d.is_ascii_digit())) {
            return self.number_or_duration(start);
        }
        if is_alpha(c) || (c == b':' && !self.in_brackets) {
            return Ok(self.word(!self.in_brackets));
        }
        self.pos += 1;
        let two = |l: &mut Self, next: u8, yes: Tok, no: Tok| {
            if l.peek() == Some(next) {
                l.pos += 1;
                yes
            } else {
                no
            }
        };
        Ok(match c {
            b',' => Tok::Comma,
            b'*' => Tok::Mul,
            b'/' => Tok::Div,
            b'%' => Tok::Mod,
            b'+' => Tok::Add,
            b'-' => Tok::Sub,
            b'^' => Tok::Pow,
            b'@' => Tok::At,
            b':' => Tok::Colon,
            b'=' => match self.peek() {
                Some(b'=') => {
                    self.pos += 1;
                    Tok::EqlC
                }
                Some(b'~') => {
                    self.pos += 1;
                    Tok::EqlRegex
                }
                _ => Tok::Assign,
            },
            b'!' => match self.peek() {
                Some(b'=') => {
                    self.pos += 1;
                    Tok::Neq
                }
                Some(b'~') => {
                    self.pos += 1;
                    Tok::NeqRegex
                }
                other => {
                    return self.err(
                        start,
                        format!("unexpected character after '!': {:?}", other.map(char::from).unwrap_or(' ')),
                    );
                }
            },
            b'<' if self.peek() == Some(b'/') => {
                self.pos += 1;
                Tok::TrimUpper
            }
            b'>' if self.peek() == Some(b'/') => {
                self.pos += 1;
                Tok::TrimLower
            }
            b'<' => two(self, b'=', Tok::Lte, Tok::Lss),
            b'>' => two(self, b'=', Tok::Gte, Tok::Gtr),
            b'(' => {
                self.parens += 1;
                Tok::LParen
            }
            b')' => {
                self.parens -= 1;
                if self.parens < 0 {
                    return self.err(start, "unexpected right parenthesis ')'");
                }
                Tok::RParen
            }
            b'{' => {
                self.in_braces = true;
                Tok::LBrace
            }
            b'}' => return self.err(start, "unexpected right brace '}'"),
            b'[' => {
                if self.in_brackets {
                    return self.err(start, "unexpected left bracket '['");
                }
                self.in_brackets = true;
                Tok::LBracket
            }
            b']' => {
                if !self.in_brackets {
                    return self.err(start, "unexpected right bracket ']'");
                }
                self.in_brackets = false;
                Tok::RBracket
            }
            _ => {
                let ch = self.input[start..].chars().next().unwrap_or('?');
                // Do not split a multi-byte character in later error positions.
                self.pos = start + ch.len_utf8();
                return self.err(start, format!("unexpected character: {ch:?}"));
            }
        })
    }

    /// Tokens inside `{...}`: label names (keywords are plain names here), operators, commas.
    fn brace_token(&mut self, c: u8, start: usize) -> Result<Tok, ParseError> {
        if is_alpha(c) {
            while self.peek().is_some_and(is_alnum) {
                self.pos += 1;
            }
            return Ok(Tok::Ident);
        }
        self.pos += 1;
        Ok(match c {
            b',' => Tok::Comma,
            b'}' => {
                self.in_braces = false;
                Tok::RBrace
            }
            b'=' => {
                if self.peek() == Some(b'~') {
                    self.pos += 1;
                    Tok::EqlRegex
                } else {
                    Tok::Assign
                }
            }
            b'!' => match self.peek() {
                Some(b'~') => {
                    self.pos += 1;
                    Tok::NeqRegex
                }
                Some(b'=') => {
                    self.pos += 1;
                    Tok::Neq
                }
                _ => return self.err(start, "unexpected character after '!' inside braces"),
            },
            b'{' => return self.err(start, "unexpected left brace '{'"),
            _ => {
                let ch = self.input[start..].chars().next().unwrap_or('?');
                return self.err(start, format!("unexpected character inside braces: {ch:?}"));
            }
        })
    }

    /// A word: keyword, `Inf`/`NaN`, identifier or (outside brackets, with `:`) metric name.
    fn word(&mut self, allow_colon: bool) -> Tok {
        let start = self.pos;
        while self.peek().is_some_and(|c| is_alnum(c) || (allow_colon && c == b':')) {
            self.pos += 1;
        }
        let text = &self.input[start..self.pos];
        let lower = text.to_ascii_lowercase();
        if lower == "inf" || lower == "nan" {
            return Tok::Number;
        }
        if let Some(kw) = Keyword::lookup(&lower) {
            // `fill`, `fill_left` and `fill_right` are keywords only when a `(` follows, so
            // existing metrics with these names keep working (as in Prometheus).
            let is_fill = matches!(kw, Keyword::Fill | Keyword::FillLeft | Keyword::FillRight);
            if !is_fill || self.followed_by_lparen() {
                return Tok::Keyword(kw);
            }
            return Tok::Ident;
        }
        if text.contains(':') { Tok::MetricIdent } else { Tok::Ident }
    }

    fn followed_by_lparen(&self) -> bool {
        self.bytes[self.pos..].iter().find(|c| !is_space(**c)) == Some(&b'(')
    }

    fn scan_string(&mut self, quote: u8) -> Result<(), ParseError> {
        let start = self.pos;
        self.pos += 1;
        loop {
            let Some(c) = self.peek() else {
                let msg =
                    if quote == b'`' { "unterminated raw string" } else { "unterminated quoted string" };
                return self.err(start, msg);
            };
            self.pos += 1;
            if c == quote {
                return Ok(());
            }
            if quote != b'`' {
                if c == b'\n' {
                    return self.err(start, "unterminated quoted string");
                }
                if c == b'\\' {
                    // Validity of the escape is checked when the string is unquoted; here we only
                    // need to not end the string at an escaped quote.
                    if self.peek().is_some() {
                        self.pos += 1;
                    }
                }
            }
        }
    }

    fn number_or_duration(&mut self, start: usize) -> Result<Tok, ParseError> {
        if self.scan_number() {
            return Ok(Tok::Number);
        }
        self.pos = start;
        if self.scan_duration() {
            return Ok(Tok::Duration);
        }
        // Consume the rest of the word for a readable message.
        while self.peek().is_some_and(|c| is_alnum(c) || c == b'.') {
            self.pos += 1;
        }
        self.err(start, format!("bad number or duration syntax: {:?}", &self.input[start..self.pos]))
    }

    fn accept(&mut self, set: &[u8]) -> bool {
        if self.peek().is_some_and(|c| set.contains(&c)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// Mirrors Prometheus' `scanNumber`: true if a complete number ends here (not followed by
    /// an alphanumeric character).
    fn scan_number(&mut self) -> bool {
        let initial = self.pos;
        let mut digits: &[u8] = b"0123456789";
        const HEX: &[u8] = b"0123456789abcdefABCDEF";
        if self.peek() == Some(b'0') && matches!(self.peek_at(1), Some(b'x' | b'X')) {
            self.pos += 2;
            self.accept(b"_");
            digits = HEX;
        }
        self.accept(b".");
        self.accept(digits);
        let mut dot = false;
        let mut exp = false;
        while let Some(c) = self.peek() {
            let is_exp = (c == b'e' || c == b'E') && digits.len() == 10;
            if c == b'.' {
                if dot {
                    return false;
                }
                self.pos += 1;
                dot = true;
                if self.accept(b"_.") || digits.len() > 10 {
                    return false;
                }
            } else if is_exp {
                if exp {
                    return false;
                }
                self.pos += 1;
                exp = true;
                self.accept(b"+-");
                if self.accept(b"._eE") || self.peek().is_none() {
                    return false;
                }
            } else if c == b'_' {
                self.pos += 1;
                if self.accept(b"._eE") || self.peek().is_none() {
                    return false;
                }
            } else if digits.contains(&c) {
                self.pos += 1;
            } else {
                break;
            }
        }
        if self.pos == initial {
            return false;
        }
        !self.peek().is_some_and(is_alnum)
    }

    /// Mirrors `acceptRemainingDuration` after a run of digits: unit groups like `1h30m5s`.
    fn scan_duration(&mut self) -> bool {
        let mut any = false;
        loop {
            let digits_start = self.pos;
            while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                self.pos += 1;
            }
            if self.pos == digits_start {
                break;
            }
            if !self.accept(b"smhdwy") {
                return false;
            }
            self.accept(b"s");
            any = true;
        }
        any && !self.peek().is_some_and(is_alnum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(s: &str) -> Vec<Tok> {
        tokenize(s).unwrap().into_iter().map(|t| t.kind).collect()
    }

    #[test]
    fn numbers_durations_and_words() {
        assert_eq!(
            kinds("1.5e3 0x1F 5m 1h30m inf NaN"),
            vec![Tok::Number, Tok::Number, Tok::Duration, Tok::Duration, Tok::Number, Tok::Number, Tok::Eof]
        );
        assert_eq!(
            kinds("a:b SUM by"),
            vec![Tok::MetricIdent, Tok::Keyword(Keyword::Sum), Tok::Keyword(Keyword::By), Tok::Eof]
        );
        assert!(tokenize("1x").is_err());
    }

    #[test]
    fn brackets_and_braces_change_context() {
        assert_eq!(
            kinds("x[5m:1m]"),
            vec![
                Tok::Ident,
                Tok::LBracket,
                Tok::Duration,
                Tok::Colon,
                Tok::Duration,
                Tok::RBracket,
                Tok::Eof
            ]
        );
        assert_eq!(
            kinds("{by=~\"a\"}"),
            vec![Tok::LBrace, Tok::Ident, Tok::EqlRegex, Tok::Str, Tok::RBrace, Tok::Eof]
        );
        assert_eq!(
            kinds("fill + fill(0)"),
            vec![
                Tok::Ident,
                Tok::Add,
                Tok::Keyword(Keyword::Fill),
                Tok::LParen,
                Tok::Number,
                Tok::RParen,
                Tok::Eof
            ]
        );
    }

    #[test]
    fn strings_and_comments() {
        assert_eq!(kinds(r#""a\"b" 'c' `d\` # comment"#), vec![Tok::Str, Tok::Str, Tok::Str, Tok::Eof]);
        assert!(tokenize("\"abc").is_err());
        assert!(tokenize("(a").is_err());
    }
}

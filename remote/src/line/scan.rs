//! The line-protocol scanner: splits one point into its series key, fields and timestamp.
//!
//! Syntax (InfluxDB line protocol reference, docs.influxdata.com `.../line_protocol_reference/`):
//!
//! ```text
//! measurement[,tag_key=tag_value...] field_key=field_value[,field_key=field_value...] [timestamp]
//! ```
//!
//! * The series key (measurement and tag set) ends at the first unescaped space. A backslash
//!   escapes the byte after it for the purpose of finding delimiters; which escapes are
//!   *unescaped* depends on the element (see `series`). A backslash never escapes a newline.
//! * Field values: `"string"` (with `\"` and `\\`; may contain newlines), integer `-12i`,
//!   unsigned `12u`, boolean `t T true True TRUE f F false False FALSE`, or float
//!   (`-1.5`, `1.`, `.5`, `1e3`, `-1.5E-2`; no sign `+`, no `inf`/`nan`, must be finite).
//! * Timestamp: an optional signed integer in the request's precision.
//! * One or more spaces separate the sections; trailing spaces and a `\r` before `\n` are ignored.
//!   Blank lines and lines whose first non-blank byte is `#` are skipped.

use memchr::memchr3;

/// A scanned point: borrowed pieces of the body, not yet validated as labels.
#[derive(Debug)]
pub(crate) struct RawPoint<'a> {
    /// Measurement and tag set exactly as written (escapes intact); equal keys mean equal series.
    pub(crate) key: &'a [u8],
    /// The timestamp as written, in the request's precision.
    pub(crate) timestamp: Option<i64>,
}

/// A field value as the scanner sees it: a number for storage, or a string to skip.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value {
    /// A float, integer, unsigned or boolean field as `f64`.
    Num(f64),
    /// A string field (not storable as a sample).
    Str,
}

/// Walks a body point by point. The fields of the last point are in [`Scanner::fields`].
pub(crate) struct Scanner<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Newlines inside quoted strings of the current point, for line numbering.
    pub(crate) extra_lines: usize,
    /// `(field key as written, value)` of the current point.
    pub(crate) fields: Vec<(&'a [u8], Value)>,
}

/// What starts at the current position.
pub(crate) enum Next {
    /// The end of the body.
    Eof,
    /// A blank or comment line, already consumed.
    Skip,
    /// A point; call [`Scanner::point`].
    Point,
}

impl<'a> Scanner<'a> {
    /// A scanner at the start of `buf`.
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Scanner { buf, pos: 0, extra_lines: 0, fields: Vec::new() }
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    #[inline]
    fn peek_at(&self, i: usize) -> Option<u8> {
        self.buf.get(i).copied()
    }

    /// True at the end of a line: end of input, `\n`, or `\r` followed by `\n` or end of input.
    #[inline]
    fn at_line_end(&self) -> bool {
        match self.peek() {
            None | Some(b'\n') => true,
            Some(b'\r') => matches!(self.peek_at(self.pos + 1), None | Some(b'\n')),
            _ => false,
        }
    }

    /// Consumes the line end [`Self::at_line_end`] found.
    #[inline]
    fn consume_line_end(&mut self) {
        if self.peek() == Some(b'\r') {
            self.pos += 1;
        }
        if self.peek() == Some(b'\n') {
            self.pos += 1;
        }
    }

    #[inline]
    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.pos += 1;
        }
    }

    /// Skips leading blanks and reports what the line holds; blank and comment lines are consumed.
    pub(crate) fn next(&mut self) -> Next {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
        if self.peek().is_none() {
            return Next::Eof;
        }
        if self.at_line_end() {
            self.consume_line_end();
            return Next::Skip;
        }
        if self.peek() == Some(b'#') {
            self.skip_line();
            return Next::Skip;
        }
        Next::Point
    }

    /// Skips to just after the next newline (after an error, or over a comment).
    pub(crate) fn skip_line(&mut self) {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        self.pos = match memchr::memchr(b'\n', rest) {
            Some(i) => self.pos + i + 1,
            None => self.buf.len(),
        };
    }

    /// Scans one point, consuming its line end. On error the position is somewhere inside the
    /// line; call [`Self::skip_line`].
    pub(crate) fn point(&mut self) -> Result<RawPoint<'a>, String> {
        self.extra_lines = 0;
        let start = self.pos;
        let key_end = self.series_key_end()?;
        let key = self.buf.get(start..key_end).unwrap_or_default();
        self.pos = key_end;
        self.skip_spaces();
        self.fields.clear();
        loop {
            let field = self.field()?;
            self.fields.push(field);
            if self.peek() == Some(b',') {
                self.pos += 1;
            } else {
                break;
            }
        }
        let timestamp = self.timestamp()?;
        Ok(RawPoint { key, timestamp })
    }

    /// Position of the unescaped space that ends the series key.
    #[inline]
    fn series_key_end(&self) -> Result<usize, String> {
        let mut i = self.pos;
        loop {
            let rest = self.buf.get(i..).unwrap_or_default();
            let Some(off) = memchr3(b' ', b'\\', b'\n', rest) else {
                return Err("missing fields".into());
            };
            let j = i + off;
            match self.peek_at(j) {
                Some(b' ') => return Ok(j),
                Some(b'\\') => i = if self.peek_at(j + 1) == Some(b'\n') { j + 1 } else { j + 2 },
                _ => return Err("missing fields".into()),
            }
        }
    }

    /// Scans `key=value` and leaves the position on the delimiter after the value.
    #[inline]
    fn field(&mut self) -> Result<(&'a [u8], Value), String> {
        let start = self.pos;
        loop {
            match self.peek() {
                Some(b'=') => break,
                Some(b'\\') => self.pos += if self.peek_at(self.pos + 1) == Some(b'\n') { 1 } else { 2 },
                Some(b' ' | b',' | b'\n') | None => {
                    let key = self.buf.get(start..self.pos).unwrap_or_default();
                    return Err(if key.is_empty() {
                        "missing field".into()
                    } else {
                        format!("missing '=' after field key {:?}", super::snippet(key))
                    });
                }
                Some(_) => self.pos += 1,
            }
        }
        let key = self.buf.get(start..self.pos).unwrap_or_default();
        if key.is_empty() {
            return Err("empty field key".into());
        }
        self.pos += 1;
        if self.peek() == Some(b'"') {
            self.string().map_err(|e| format!("{e} in field {:?}", super::snippet(key)))?;
            return Ok((key, Value::Str));
        }
        let vstart = self.pos;
        while let Some(b) = self.peek() {
            if matches!(b, b',' | b' ' | b'\n') || (b == b'\r' && self.at_line_end()) {
                break;
            }
            self.pos += 1;
        }
        let token = self.buf.get(vstart..self.pos).unwrap_or_default();
        match parse_value(token) {
            Some(v) => Ok((key, Value::Num(v))),
            None if token.is_empty() => Err(format!("missing value for field {:?}", super::snippet(key))),
            None => {
                Err(format!("invalid value {:?} for field {:?}", super::snippet(token), super::snippet(key)))
            }
        }
    }

    /// Skips a quoted string field; the position is on its opening quote. A string may span
    /// lines (Telegraf sends newlines unescaped); one still open at the end of the body is an
    /// error for its own line only, and scanning resumes at the next line.
    fn string(&mut self) -> Result<(), String> {
        self.pos += 1;
        let mut first_newline = None;
        loop {
            let rest = self.buf.get(self.pos..).unwrap_or_default();
            let Some(off) = memchr3(b'"', b'\\', b'\n', rest) else {
                if let Some(nl) = first_newline {
                    self.pos = nl;
                    self.extra_lines = 0;
                }
                return Err("unterminated string".into());
            };
            self.pos += off;
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    break;
                }
                Some(b'\\') => {
                    self.extra_lines += usize::from(self.peek_at(self.pos + 1) == Some(b'\n'));
                    self.pos += 2;
                }
                _ => {
                    first_newline.get_or_insert(self.pos);
                    self.extra_lines += 1;
                    self.pos += 1;
                }
            }
        }
        if matches!(self.peek(), Some(b',' | b' ')) || self.at_line_end() {
            Ok(())
        } else {
            Err("unexpected character after closing quote".into())
        }
    }

    /// Scans the optional timestamp and the line end.
    fn timestamp(&mut self) -> Result<Option<i64>, String> {
        self.skip_spaces();
        if self.at_line_end() {
            self.consume_line_end();
            return Ok(None);
        }
        let start = self.pos;
        while let Some(b) = self.peek() {
            if matches!(b, b' ' | b'\n') || (b == b'\r' && self.at_line_end()) {
                break;
            }
            self.pos += 1;
        }
        let token = self.buf.get(start..self.pos).unwrap_or_default();
        let ts = parse_i64(token).ok_or_else(|| format!("invalid timestamp {:?}", super::snippet(token)))?;
        self.skip_spaces();
        if !self.at_line_end() {
            return Err("unexpected text after the timestamp".into());
        }
        self.consume_line_end();
        Ok(Some(ts))
    }
}

/// A numeric field value (integer, unsigned, boolean or float) as `f64`; `None` if invalid.
#[inline]
pub(crate) fn parse_value(token: &[u8]) -> Option<f64> {
    match token {
        [digits @ .., b'i'] => parse_i64(digits).map(|v| v as f64),
        [digits @ .., b'u'] => parse_u64(digits).map(|v| v as f64),
        b"t" | b"T" | b"true" | b"True" | b"TRUE" => Some(1.0),
        b"f" | b"F" | b"false" | b"False" | b"FALSE" => Some(0.0),
        _ => parse_float(token),
    }
}

/// Digits only, no sign, fits in `u64`.
#[inline]
pub(crate) fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d))?;
    }
    Some(v)
}

/// An optional `-` and digits, in `i64` range.
#[inline]
pub(crate) fn parse_i64(s: &[u8]) -> Option<i64> {
    match s {
        [b'-', digits @ ..] => {
            let v = parse_u64(digits)?;
            if v <= i64::MAX as u64 + 1 { Some((v as i64).wrapping_neg()) } else { None }
        }
        _ => i64::try_from(parse_u64(s)?).ok(),
    }
}

/// `-?(digits[.digits*]|.digits)([eE][+-]?digits)?`, finite. The grammar is checked here
/// because Rust's `f64::from_str` also accepts `inf`, `NaN` and a leading `+`, which Influx
/// does not.
#[inline]
pub(crate) fn parse_float(s: &[u8]) -> Option<f64> {
    let mut i = usize::from(s.first() == Some(&b'-'));
    let int_start = i;
    while s.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    let mut mantissa_digits = i - int_start;
    if s.get(i) == Some(&b'.') {
        i += 1;
        let frac_start = i;
        while s.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        mantissa_digits += i - frac_start;
    }
    if mantissa_digits == 0 {
        return None;
    }
    if matches!(s.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(s.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp_start = i;
        while s.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == exp_start {
            return None;
        }
    }
    if i != s.len() {
        return None;
    }
    // The grammar above admits ASCII only, so this never fails.
    let v: f64 = std::str::from_utf8(s).ok()?.parse().ok()?;
    v.is_finite().then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        let cases: &[(&str, Option<f64>)] = &[
            ("1", Some(1.0)),
            ("-1.5", Some(-1.5)),
            ("1.", Some(1.0)),
            (".5", Some(0.5)),
            ("1e3", Some(1000.0)),
            ("-1.5E-2", Some(-0.015)),
            ("1E+2", Some(100.0)),
            ("12i", Some(12.0)),
            ("-12i", Some(-12.0)),
            ("-9223372036854775808i", Some(-9223372036854775808.0)),
            ("9223372036854775807i", Some(9223372036854775807.0)),
            ("9223372036854775808i", None),
            ("12u", Some(12.0)),
            ("18446744073709551615u", Some(18446744073709551615.0)),
            ("-1u", None),
            ("t", Some(1.0)),
            ("TRUE", Some(1.0)),
            ("False", Some(0.0)),
            ("tRUE", None),
            ("inf", None),
            ("NaN", None),
            ("+1", None),
            ("1e400", None),
            ("1.2.3", None),
            ("e3", None),
            ("1e", None),
            ("-", None),
            ("i", None),
            ("1x", None),
            ("", None),
        ];
        for (s, want) in cases {
            assert_eq!(parse_value(s.as_bytes()), *want, "{s}");
        }
    }
}

//! String literals: Go-style unquoting (Prometheus' `strutil.Unquote`).
//!
//! PromQL strings are `"..."` or `'...'` with Go escapes, or raw `` `...` ``. Escapes such as
//! `\xff` can produce bytes that are not UTF-8; Rust strings cannot hold them, so the decoded
//! text is kept lossily and [`Unquoted::valid_utf8`] records the fact (label names built from such
//! a string are invalid, as in Prometheus).

/// A decoded string literal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unquoted {
    /// The text, with invalid UTF-8 sequences replaced by U+FFFD.
    pub value: String,
    /// False if the escapes produced bytes that are not valid UTF-8.
    pub valid_utf8: bool,
}

/// Decodes a quoted string literal including its quotes.
pub fn unquote(quoted: &str) -> Result<Unquoted, String> {
    let bytes = quoted.as_bytes();
    let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) else {
        return Err("invalid syntax".into());
    };
    if bytes.len() < 2 || first != last || !matches!(first, b'"' | b'\'' | b'`') {
        return Err("invalid syntax".into());
    }
    let inner = &quoted[1..quoted.len() - 1];
    if first == b'`' {
        if inner.contains('`') {
            return Err("invalid syntax".into());
        }
        return Ok(Unquoted { value: inner.to_string(), valid_utf8: true });
    }
    let mut out: Vec<u8> = Vec::with_capacity(inner.len());
    let mut chars = inner.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        if c == first as char {
            return Err("invalid syntax".into());
        }
        if c == '\n' {
            return Err("invalid syntax".into());
        }
        if c != '\\' {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            continue;
        }
        let Some((_, e)) = chars.next() else {
            return Err("invalid syntax".into());
        };
        let simple = match e {
            'a' => Some(0x07),
            'b' => Some(0x08),
            'f' => Some(0x0c),
            'n' => Some(b'\n'),
            'r' => Some(b'\r'),
            't' => Some(b'\t'),
            'v' => Some(0x0b),
            '\\' => Some(b'\\'),
            '\'' | '"' if e == first as char => Some(e as u8),
            _ => None,
        };
        if let Some(b) = simple {
            out.push(b);
            continue;
        }
        let (count, radix, is_byte) = match e {
            '0'..='7' => (3, 8, true),
            'x' => (2, 16, true),
            'u' => (4, 16, false),
            'U' => (8, 16, false),
            _ => return Err(format!("unknown escape sequence \\{e}")),
        };
        let mut value: u32 = 0;
        let mut digits = 0;
        if radix == 8 {
            value = e.to_digit(8).unwrap_or(0);
            digits = 1;
        }
        while digits < count {
            let Some((_, d)) = chars.next() else {
                return Err("escape sequence not terminated".into());
            };
            let Some(v) = d.to_digit(radix) else {
                return Err(format!("illegal character {d:?} in escape sequence"));
            };
            value = value * radix + v;
            digits += 1;
        }
        if is_byte {
            let Ok(b) = u8::try_from(value) else {
                return Err("escape sequence is an invalid Unicode code point".into());
            };
            out.push(b);
        } else {
            let Some(ch) = char::from_u32(value) else {
                return Err("escape sequence is an invalid Unicode code point".into());
            };
            let mut buf = [0u8; 4];
            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
        }
    }
    match String::from_utf8(out) {
        Ok(value) => Ok(Unquoted { value, valid_utf8: true }),
        Err(e) => {
            Ok(Unquoted { value: String::from_utf8_lossy(e.as_bytes()).into_owned(), valid_utf8: false })
        }
    }
}

/// Quotes a string the way Go's `%q` does for valid UTF-8 text (used in error messages).
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(unquote(r#""a\"b\n""#).unwrap().value, "a\"b\n");
        assert_eq!(unquote(r"'it\'s'").unwrap().value, "it's");
        assert_eq!(unquote(r#""\u00e9\x41\101""#).unwrap().value, "éAA");
        assert_eq!(unquote("`raw\\n`").unwrap().value, "raw\\n");
        let bad = unquote(r#""a\xc5z""#).unwrap();
        assert!(!bad.valid_utf8);
        assert!(unquote(r#""\q""#).is_err());
        assert!(unquote(r#""\'""#).is_err());
    }

    #[test]
    fn quoting() {
        assert_eq!(go_quote("a\"b\n"), r#""a\"b\n""#);
    }
}

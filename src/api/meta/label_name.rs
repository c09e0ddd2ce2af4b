//! The `<name>` of `/api/v1/label/<name>/values`: Prometheus 3's `U__` escaping and its
//! validity rule.
//!
//! Label names may be any UTF-8 text since Prometheus 3, which a URL path segment cannot always
//! carry comfortably, so clients may send a name in the "values" escaping of
//! `model.EscapeName`: `U__` followed by the name with `_` doubled and every other character
//! outside `[a-zA-Z0-9_:]` written as `_<hex code point>_` (`U__http_2e_method` for
//! `http.method`). A name that does not decode stays as it was, as `model.UnescapeName` does.

/// The label name a path segment stands for: `U__`-decoded if it is so escaped.
pub fn unescape(segment: &str) -> String {
    match segment.strip_prefix("U__") {
        Some(escaped) => decode_values_escaping(escaped).unwrap_or_else(|| segment.to_string()),
        None => segment.to_string(),
    }
}

/// Decodes the part after `U__`, or None if it is not a valid encoding (an unpaired `_`, a
/// code point that is not hex, longer than five digits, or not a valid character).
fn decode_values_escaping(escaped: &str) -> Option<String> {
    let mut out = String::with_capacity(escaped.len());
    let mut chars = escaped.chars();
    while let Some(c) = chars.next() {
        if c != '_' {
            out.push(c);
            continue;
        }
        let mut code: u32 = 0;
        let mut digits = 0;
        loop {
            match chars.next()? {
                '_' if digits == 0 => {
                    // `__` is one underscore.
                    out.push('_');
                    break;
                }
                '_' => {
                    out.push(char::from_u32(code)?);
                    break;
                }
                d => {
                    // Go's decoder gives up on the sixth character after `_` (so at most five
                    // hex digits, `_10ffff_` included).
                    if digits >= 5 {
                        return None;
                    }
                    code = code * 16 + d.to_digit(16)?;
                    digits += 1;
                }
            }
        }
    }
    Some(out)
}

/// Prometheus 3's rule for label names (UTF-8 validation): any non-empty text. Rust strings are
/// UTF-8 already, so only emptiness is left to check.
pub fn is_valid(name: &str) -> bool {
    !name.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_escaping_decodes_as_prometheus_common() {
        assert_eq!(unescape("job"), "job");
        assert_eq!(unescape("U__http_2e_method"), "http.method");
        assert_eq!(unescape("U__a__b"), "a_b");
        assert_eq!(unescape("U___1f600_"), "\u{1f600}");
        assert_eq!(unescape("U__"), "");
        // Not a valid encoding: the segment is taken as it is.
        for raw in ["U__a_", "U__a_zz_", "U__a_123456_", "U__a_d800_", "U__a_10ffff_"] {
            assert_eq!(unescape(raw), raw, "{raw}");
        }
    }

    #[test]
    fn only_the_empty_name_is_invalid() {
        assert!(is_valid("job"));
        assert!(is_valid("1a"));
        assert!(is_valid("http.method"));
        assert!(!is_valid(""));
    }
}

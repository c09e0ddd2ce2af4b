//! A linear pre-scan that rejects queries nested too deeply, before any recursive code runs.
//!
//! Parsing, type checking, evaluating and even dropping a syntax tree recurse once per level of
//! the tree. A query like `((((...))))`, `------1` or `1+1+1+...+1` with thousands of levels would
//! overflow the stack, which aborts the whole process (it cannot be caught). This scan bounds the
//! depth of the tree the parser would build without recursing itself: every open `(`, `[`, `{`,
//! every unary sign and every binary operator can add one level, and the scan stops at the first
//! point where the sum over the currently open groups exceeds the limit.
//!
//! The estimate is conservative (in `a*b + c*d` only the `+` adds a level to the tree, but both
//! operators are counted), so the limit applies to "operators and groups per enclosing group"
//! more than to exact tree depth.

use super::parse_error::ParseError;

#[derive(Default)]
struct Frame {
    /// Inside `{...}`: label matchers, whose `=` and `,` are not operators.
    braces: bool,
    /// Unary signs waiting for their operand inside this group.
    unary: usize,
    /// Binary operators seen in this group.
    ops: usize,
}

const KEYWORD_OPERATORS: [&str; 4] = ["and", "or", "unless", "atan2"];

/// Returns an error if `input` could produce a syntax tree deeper than `max_depth`.
pub fn check_depth(input: &str, max_depth: usize) -> Result<(), ParseError> {
    let bytes = input.as_bytes();
    let mut frames = vec![Frame::default()];
    // Depth contributed by all open groups; updated incrementally so the scan stays linear.
    let mut depth: usize = 0;
    // True when the previous token completed an operand, so a following sign is binary.
    let mut after_operand = false;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let in_braces = frames.last().is_some_and(|f| f.braces);
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => {}
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'"' | b'\'' | b'`' => {
                i += 1;
                while i < bytes.len() && bytes[i] != c {
                    if bytes[i] == b'\\' && c != b'`' {
                        i += 1;
                    }
                    i += 1;
                }
                after_operand = true;
            }
            b'(' | b'[' | b'{' => {
                frames.push(Frame { braces: c == b'{', ..Frame::default() });
                depth += 1;
                after_operand = false;
            }
            b')' | b']' | b'}' => {
                if frames.len() > 1
                    && let Some(f) = frames.pop()
                {
                    depth = depth.saturating_sub(1 + f.unary + f.ops);
                }
                // The group completes the operand that pending unary signs apply to.
                if let Some(f) = frames.last_mut() {
                    depth = depth.saturating_sub(f.unary);
                    f.unary = 0;
                }
                after_operand = true;
            }
            _ if in_braces => {}
            b'+' | b'-' if !after_operand => {
                if let Some(f) = frames.last_mut() {
                    f.unary += 1;
                }
                depth += 1;
            }
            b'+' | b'-' | b'*' | b'/' | b'%' | b'^' | b'=' | b'!' | b'<' | b'>' => {
                // Two-character operators (`==`, `!=`, `<=`, `>=`) count once.
                let second = matches!(bytes.get(i + 1), Some(b'='));
                if let Some(f) = frames.last_mut() {
                    f.ops += 1;
                }
                depth += 1;
                if second && matches!(c, b'=' | b'!' | b'<' | b'>') {
                    i += 1;
                }
                after_operand = false;
            }
            b',' | b'@' | b':' => after_operand = false,
            _ => {
                let start = i;
                while i < bytes.len()
                    && (bytes[i].is_ascii_alphanumeric() || matches!(bytes[i], b'_' | b'.' | b':'))
                {
                    i += 1;
                }
                if i == start {
                    // Any other character (the lexer rejects it); always make progress.
                    i += 1;
                    continue;
                }
                let word = &input[start..i];
                if after_operand && KEYWORD_OPERATORS.iter().any(|k| word.eq_ignore_ascii_case(k)) {
                    if let Some(f) = frames.last_mut() {
                        f.ops += 1;
                    }
                    depth += 1;
                    after_operand = false;
                } else {
                    // An operand (or a modifier keyword): pending unary signs are resolved.
                    if let Some(f) = frames.last_mut() {
                        depth = depth.saturating_sub(f.unary);
                        f.unary = 0;
                    }
                    after_operand = true;
                }
                if depth > max_depth {
                    return too_deep(start, max_depth);
                }
                continue;
            }
        }
        if depth > max_depth {
            return too_deep(i, max_depth);
        }
        i += 1;
    }
    Ok(())
}

fn too_deep(pos: usize, max_depth: usize) -> Result<(), ParseError> {
    Err(ParseError::new(pos, format!("query is nested too deeply (more than {max_depth} levels)")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_deep_nesting() {
        let deep = format!("{}1{}", "(".repeat(300), ")".repeat(300));
        assert!(check_depth(&deep, 256).is_err());
        let ok = format!("{}1{}", "(".repeat(100), ")".repeat(100));
        assert!(check_depth(&ok, 256).is_ok());
        assert!(check_depth(&format!("{}1", "-".repeat(300)), 256).is_err());
        assert!(check_depth(&format!("1{}", "^1".repeat(300)), 256).is_err());
        assert!(check_depth(&format!("1{}", " + 1".repeat(300)), 256).is_err());
        assert!(check_depth(&format!("a{}", " and a".repeat(300)), 256).is_err());
        assert!(check_depth(&format!("1{}", " + 1".repeat(100)), 256).is_ok());
        assert!(check_depth(&format!("{}x{}", "abs(".repeat(300), ")".repeat(300)), 256).is_err());
    }

    #[test]
    fn strings_and_matchers_do_not_count() {
        let q = format!("label_replace(x, \"a\", \"{}\", \"b\", \"c\")", "(".repeat(1000));
        assert!(check_depth(&q, 256).is_ok());
        let matchers: Vec<String> = (0..500).map(|i| format!("l{i}=\"v\"")).collect();
        assert!(check_depth(&format!("x{{{}}}", matchers.join(",")), 256).is_ok());
        // Sibling groups do not add up.
        assert!(check_depth("(1)+(1)", 256).is_ok());
        let siblings: Vec<&str> = std::iter::repeat_n("f(x)", 200).collect();
        assert!(check_depth(&format!("g({})", siblings.join(",")), 256).is_ok());
    }
}

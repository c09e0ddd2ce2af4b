//! Go's regular-expression syntax, rewritten into the `regex` crate's.
//!
//! Prometheus parses matcher and `label_replace` patterns with Go's `regexp/syntax` (RE2 with
//! Perl extensions). The `regex` crate's syntax is close but not the same, and the differences
//! change answers, not just error messages:
//!
//! * a `{` that does not start a repetition is a literal in Go: `uri=~"/users/{id}"` matches
//!   the route label many HTTP libraries export; the `regex` crate refuses it, and reads
//!   `a{1, 2}` (spaces) as a repetition where Go reads a literal;
//! * Go refuses counted repetitions above 1,000, alone or nested (`(a{100}){100}`), and stacked
//!   repetition operators (`a**`, `a{2}*`); the `regex` crate accepts them, and compiling a large
//!   count can take most of a second before its size limit refuses it;
//! * `\d`, `\s`, `\w` and `\b` are ASCII in Go and Unicode in the `regex` crate;
//! * octal escapes (`\0`, `\101`) and `\Q...\E` are literals in Go, refused by the `regex`
//!   crate; `\<` and `\>` are the characters in Go, word-boundary assertions in the `regex` crate
//!   (as is `\b{start}`, which Go reads as `\b` and the literal `{start}`);
//! * inside a class, `[` is a literal and `&&`, `--`, `~~` are literal characters in Go, nested
//!   classes and set operations in the `regex` crate;
//! * the `x`, `u` and `R` flags exist only in the `regex` crate.
//!
//! * Unicode classes: the `regex` crate also takes lower-case, loose and alias names (`\pl`,
//!   `\p{greek}`, `\p{Grek}`, `\p{Emoji}`), Go only its categories and scripts as spelled;
//!
//! [`translate`] reads the pattern with Go's grammar, refuses what Go refuses (with Go's
//! message), and writes each construct in the `regex` crate's syntax, with every literal
//! character escaped. Not mirrored: group names must start with a letter or `_`.

use std::fmt;

/// Go's limit on a counted repetition, alone or multiplied through nested ones.
const MAX_REPEAT: u32 = 1000;

/// A pattern Go's parser refuses: Go's message is `error parsing regexp: <code>: `<expr>``.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxError {
    /// What is wrong, in Go's words (`invalid repeat count`).
    pub code: &'static str,
    /// The offending part of the pattern.
    pub expr: String,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error parsing regexp: {}: `{}`", self.code, self.expr)
    }
}

impl std::error::Error for SyntaxError {}

const INVALID_CHAR_RANGE: &str = "invalid character class range";
const INVALID_ESCAPE: &str = "invalid escape sequence";
const INVALID_NAMED_CAPTURE: &str = "invalid named capture";
const INVALID_PERL_OP: &str = "invalid or unsupported Perl syntax";
const INVALID_REPEAT_OP: &str = "invalid nested repetition operator";
const INVALID_REPEAT_SIZE: &str = "invalid repeat count";
const MISSING_ARGUMENT: &str = "missing argument to repetition operator";
const MISSING_BRACKET: &str = "missing closing ]";
const MISSING_PAREN: &str = "missing closing )";
const TRAILING_BACKSLASH: &str = "trailing backslash at end of expression";
const UNEXPECTED_PAREN: &str = "unexpected )";

fn error(code: &'static str, expr: &str) -> SyntaxError {
    SyntaxError { code, expr: expr.to_owned() }
}

/// A Go pattern in the `regex` crate's syntax.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Translated {
    /// The pattern for the `regex` crate; it matches what the Go pattern matches.
    pub pattern: String,
}

/// Rewrites `pattern` (Go syntax, Perl flags) into the `regex` crate's syntax, or says why Go
/// refuses it. Parentheses must balance, as Go requires, so the result can be wrapped in an
/// anchoring group without escaping it.
pub fn translate(pattern: &str) -> Result<Translated, SyntaxError> {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut t = pattern;
    // The text from the previous repetition operator on, while the last thing read was one.
    let mut last_repeat: Option<&str> = None;
    let mut depth = 0usize;
    // Whether something a repetition can apply to was read last (not the start, `(` or `|`).
    // Deviation: after a flags-only group (`a(?i)*`) Go repeats the `a`; this refuses.
    let mut operand = false;
    while let Some(c) = t.chars().next() {
        let mut repeat = None;
        let mut now_operand = true;
        match c {
            '(' if t.starts_with("(?") => {
                let (rest, opened) = perl_group(t, &mut out)?;
                depth += usize::from(opened);
                t = rest;
                now_operand = false;
            }
            '(' => {
                depth += 1;
                out.push('(');
                t = &t[1..];
                now_operand = false;
            }
            ')' => {
                depth = depth.checked_sub(1).ok_or_else(|| error(UNEXPECTED_PAREN, pattern))?;
                out.push(')');
                t = &t[1..];
            }
            '|' => {
                out.push('|');
                t = &t[1..];
                now_operand = false;
            }
            '[' => t = class(t, &mut out)?,
            '*' | '+' | '?' => {
                let before = t;
                t = non_greedy(&t[1..]);
                check_repeatable(last_repeat, operand, before, t)?;
                out.push_str(&before[..before.len() - t.len()]);
                repeat = Some(before);
            }
            '{' => match parse_repeat(t) {
                None => {
                    out.push_str("\\{");
                    t = &t[1..];
                }
                Some((min, max, after)) => {
                    let valid = min.is_some_and(|min| {
                        min <= MAX_REPEAT
                            && max.is_none_or(|max| max.is_some_and(|m| m <= MAX_REPEAT && min <= m))
                    });
                    if !valid {
                        return Err(error(INVALID_REPEAT_SIZE, &t[..t.len() - after.len()]));
                    }
                    let before = t;
                    t = non_greedy(after);
                    check_repeatable(last_repeat, operand, before, t)?;
                    out.push_str(&before[..before.len() - t.len()]);
                    repeat = Some(before);
                }
            },
            '\\' if t.starts_with("\\Q") => {
                let (rest, wrote) = quoted(t, &mut out);
                // An empty `\Q\E` adds nothing: what came before stays the operand.
                now_operand = operand || wrote;
                t = rest;
            }
            '\\' => t = escape(t, &mut out)?,
            _ => {
                out.push(c);
                t = &t[c.len_utf8()..];
            }
        }
        last_repeat = repeat;
        operand = now_operand;
    }
    if depth > 0 {
        return Err(error(MISSING_PAREN, pattern));
    }
    check_repeat_sizes(&out)?;
    Ok(Translated { pattern: out })
}

/// Skips the `?` that makes a repetition non-greedy.
fn non_greedy(after: &str) -> &str {
    after.strip_prefix('?').unwrap_or(after)
}

/// Go (with Perl flags) refuses a repetition operator right after another (`a**`, `a{2}+`) and
/// one with nothing to repeat (`*a`, `(+)`, `a|?`). `before` starts at the operator, `after`
/// follows it.
fn check_repeatable(
    last_repeat: Option<&str>,
    operand: bool,
    before: &str,
    after: &str,
) -> Result<(), SyntaxError> {
    if let Some(last) = last_repeat {
        return Err(error(INVALID_REPEAT_OP, &last[..last.len() - after.len()]));
    }
    if !operand {
        return Err(error(MISSING_ARGUMENT, &before[..before.len() - after.len()]));
    }
    Ok(())
}

/// Go's `{min}`, `{min,}` or `{min,max}` at the start of `t`: `None` if `t` does not have that
/// form (the `{` is then a literal); a count too large to read is `None` inside the `Some`.
/// Returns min, max (`None` for no upper bound) and the text after the `}`.
#[allow(clippy::type_complexity)]
fn parse_repeat(t: &str) -> Option<(Option<u32>, Option<Option<u32>>, &str)> {
    let s = t.strip_prefix('{')?;
    let (min, s) = parse_int(s)?;
    let (max, s) = match s.strip_prefix(',') {
        None => (Some(min), s),
        Some(s) if s.starts_with('}') => (None, s),
        Some(s) => {
            let (max, s) = parse_int(s)?;
            (Some(max), s)
        }
    };
    let rest = s.strip_prefix('}')?;
    Some((min, max, rest))
}

/// A decimal count as Go reads it: no sign, no leading zero; `None` inside when too large.
fn parse_int(s: &str) -> Option<(Option<u32>, &str)> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || (digits >= 2 && s.starts_with('0')) {
        return None;
    }
    let (number, rest) = s.split_at(digits);
    Some((number.parse::<u32>().ok().filter(|n| *n < 100_000_000), rest))
}

/// `(?flags)`, `(?flags:`, `(?P<name>` or `(?<name>` at the start of `t`. Returns the rest and
/// whether a group was opened.
fn perl_group<'a>(t: &'a str, out: &mut String) -> Result<(&'a str, bool), SyntaxError> {
    let named = t.strip_prefix("(?P<").or_else(|| t.strip_prefix("(?<"));
    if let Some(rest) = named {
        let Some(end) = rest.find('>') else {
            return Err(error(INVALID_NAMED_CAPTURE, t));
        };
        let name = &rest[..end];
        let open = &t[..t.len() - rest.len() + end + 1];
        if name.is_empty() || !name.bytes().all(|b| b == b'_' || b.is_ascii_alphanumeric()) {
            return Err(error(INVALID_NAMED_CAPTURE, open));
        }
        out.push_str(&format!("(?P<{name}>"));
        return Ok((&rest[end + 1..], true));
    }
    // Go takes flags in any number and order (`(?ii)`, `(?i-i)`: set, then cleared); the
    // regex crate refuses repeats, so the net effect is written once.
    let (mut set, mut cleared) = (String::new(), String::new());
    let mut negated = false;
    let mut flag_seen = false;
    for (i, c) in t[2..].char_indices() {
        let end = 2 + i + c.len_utf8();
        match c {
            'i' | 'm' | 's' | 'U' => {
                flag_seen = true;
                let list = if negated { &mut cleared } else { &mut set };
                if !list.contains(c) {
                    list.push(c);
                }
            }
            '-' if !negated => {
                negated = true;
                flag_seen = false;
            }
            ':' | ')' if !negated || flag_seen => {
                set.retain(|f| !cleared.contains(f));
                let opened = c == ':';
                if opened || !set.is_empty() || !cleared.is_empty() {
                    out.push_str("(?");
                    out.push_str(&set);
                    if !cleared.is_empty() {
                        out.push('-');
                        out.push_str(&cleared);
                    }
                    out.push(c);
                }
                return Ok((&t[end..], opened));
            }
            _ => return Err(error(INVALID_PERL_OP, &t[..end])),
        }
    }
    Err(error(INVALID_PERL_OP, t))
}

/// An escape outside a class, at the start of `t` (which starts with `\`).
fn escape<'a>(t: &'a str, out: &mut String) -> Result<&'a str, SyntaxError> {
    let mut chars = t[1..].chars();
    let Some(c) = chars.next() else {
        return Err(error(TRAILING_BACKSLASH, ""));
    };
    let after = chars.as_str();
    match c {
        'A' => out.push_str("\\A"),
        'z' => out.push_str("\\z"),
        // Go's word boundaries are ASCII.
        'b' => out.push_str("(?-u:\\b)"),
        'B' => out.push_str("(?-u:\\B)"),
        'C' => return Err(error(INVALID_ESCAPE, "\\C")),
        'p' | 'P' => {
            let (class, rest) = unicode_class(t)?;
            out.push_str(&class);
            return Ok(rest);
        }
        'd' | 'D' | 's' | 'S' | 'w' | 'W' => {
            let (set, negated) = perl_class(c);
            out.push_str(if negated { "[^" } else { "[" });
            out.push_str(set);
            out.push(']');
        }
        _ => {
            let (c, rest) = escaped_char(t)?;
            push_literal(out, c);
            return Ok(rest);
        }
    }
    Ok(after)
}

/// `\Q...\E` (or `\Q...` to the end) at the start of `t`: the characters between, as literals.
/// Returns the rest and whether there were any.
fn quoted<'a>(t: &'a str, out: &mut String) -> (&'a str, bool) {
    let after = &t[2..];
    let (literal, rest) = match after.find("\\E") {
        Some(i) => (&after[..i], &after[i + 2..]),
        None => (after, ""),
    };
    for c in literal.chars() {
        push_literal(out, c);
    }
    (rest, !literal.is_empty())
}

/// The ASCII set of a Perl class escape (`\d` and so on), and whether it is negated.
fn perl_class(c: char) -> (&'static str, bool) {
    let set = match c.to_ascii_lowercase() {
        'd' => "0-9",
        's' => "\\t\\n\\x0C\\r ",
        _ => "0-9A-Za-z_",
    };
    (set, c.is_ascii_uppercase())
}

/// `\pN`, `\p{Name}`, `\p{^Name}` (or `\P`) at the start of `t`: the class in the `regex`
/// crate's syntax and the rest. Only names Go knows, spelled as Go spells them: the `regex`
/// crate would also take `\pl`, `\p{greek}` or `\p{Grek}`, which Go refuses.
fn unicode_class(t: &str) -> Result<(String, &str), SyntaxError> {
    let negated = t.as_bytes()[1] == b'P';
    let after = &t[2..];
    let (name, len) = match after.chars().next() {
        None => return Err(error(INVALID_CHAR_RANGE, t)),
        Some('{') => match after.find('}') {
            Some(end) => (&after[1..end], end + 1),
            None => return Err(error(INVALID_CHAR_RANGE, t)),
        },
        Some(c) => (&after[..c.len_utf8()], c.len_utf8()),
    };
    let (seq, rest) = t.split_at(2 + len);
    let (name, negated) = match name.strip_prefix('^') {
        Some(inner) => (inner, !negated),
        None => (name, negated),
    };
    if name != "Any" && !GO_CATEGORIES.contains(&name) && !GO_SCRIPTS.contains(&name) {
        return Err(error(INVALID_CHAR_RANGE, seq));
    }
    let class = match (name, negated) {
        // Surrogates never occur in UTF-8 text, and the regex crate has no `Cs`: a class that
        // matches nothing, or anything. Both forms also work nested in a class.
        ("Cs", false) => "[^\\x{0}-\\x{10FFFF}]".to_string(),
        ("Cs", true) => "[\\x{0}-\\x{10FFFF}]".to_string(),
        (name, negated) => format!("\\{}{{{name}}}", if negated { 'P' } else { 'p' }),
    };
    Ok((class, rest))
}

/// The Unicode general categories Go's `unicode.Categories` names.
const GO_CATEGORIES: [&str; 36] = [
    "C", "Cc", "Cf", "Co", "Cs", "L", "Ll", "Lm", "Lo", "Lt", "Lu", "M", "Mc", "Me", "Mn", "N", "Nd", "Nl",
    "No", "P", "Pc", "Pd", "Pe", "Pf", "Pi", "Po", "Ps", "S", "Sc", "Sk", "Sm", "So", "Z", "Zl", "Zp", "Zs",
];

/// The Unicode 15 scripts Go's `unicode.Scripts` names, `Common` and `Inherited` included (Go 1.21
/// and later).
const GO_SCRIPTS: [&str; 163] = [
    "Adlam",
    "Ahom",
    "Anatolian_Hieroglyphs",
    "Arabic",
    "Armenian",
    "Avestan",
    "Balinese",
    "Bamum",
    "Bassa_Vah",
    "Batak",
    "Bengali",
    "Bhaiksuki",
    "Bopomofo",
    "Brahmi",
    "Braille",
    "Buginese",
    "Buhid",
    "Canadian_Aboriginal",
    "Carian",
    "Caucasian_Albanian",
    "Chakma",
    "Cham",
    "Cherokee",
    "Chorasmian",
    "Common",
    "Coptic",
    "Cuneiform",
    "Cypriot",
    "Cypro_Minoan",
    "Cyrillic",
    "Deseret",
    "Devanagari",
    "Dives_Akuru",
    "Dogra",
    "Duployan",
    "Egyptian_Hieroglyphs",
    "Elbasan",
    "Elymaic",
    "Ethiopic",
    "Georgian",
    "Glagolitic",
    "Gothic",
    "Grantha",
    "Greek",
    "Gujarati",
    "Gunjala_Gondi",
    "Gurmukhi",
    "Han",
    "Hangul",
    "Hanifi_Rohingya",
    "Hanunoo",
    "Hatran",
    "Hebrew",
    "Hiragana",
    "Imperial_Aramaic",
    "Inherited",
    "Inscriptional_Pahlavi",
    "Inscriptional_Parthian",
    "Javanese",
    "Kaithi",
    "Kannada",
    "Katakana",
    "Kawi",
    "Kayah_Li",
    "Kharoshthi",
    "Khitan_Small_Script",
    "Khmer",
    "Khojki",
    "Khudawadi",
    "Lao",
    "Latin",
    "Lepcha",
    "Limbu",
    "Linear_A",
    "Linear_B",
    "Lisu",
    "Lycian",
    "Lydian",
    "Mahajani",
    "Makasar",
    "Malayalam",
    "Mandaic",
    "Manichaean",
    "Marchen",
    "Masaram_Gondi",
    "Medefaidrin",
    "Meetei_Mayek",
    "Mende_Kikakui",
    "Meroitic_Cursive",
    "Meroitic_Hieroglyphs",
    "Miao",
    "Modi",
    "Mongolian",
    "Mro",
    "Multani",
    "Myanmar",
    "Nabataean",
    "Nag_Mundari",
    "Nandinagari",
    "New_Tai_Lue",
    "Newa",
    "Nko",
    "Nushu",
    "Nyiakeng_Puachue_Hmong",
    "Ogham",
    "Ol_Chiki",
    "Old_Hungarian",
    "Old_Italic",
    "Old_North_Arabian",
    "Old_Permic",
    "Old_Persian",
    "Old_Sogdian",
    "Old_South_Arabian",
    "Old_Turkic",
    "Old_Uyghur",
    "Oriya",
    "Osage",
    "Osmanya",
    "Pahawh_Hmong",
    "Palmyrene",
    "Pau_Cin_Hau",
    "Phags_Pa",
    "Phoenician",
    "Psalter_Pahlavi",
    "Rejang",
    "Runic",
    "Samaritan",
    "Saurashtra",
    "Sharada",
    "Shavian",
    "Siddham",
    "SignWriting",
    "Sinhala",
    "Sogdian",
    "Sora_Sompeng",
    "Soyombo",
    "Sundanese",
    "Syloti_Nagri",
    "Syriac",
    "Tagalog",
    "Tagbanwa",
    "Tai_Le",
    "Tai_Tham",
    "Tai_Viet",
    "Takri",
    "Tamil",
    "Tangsa",
    "Tangut",
    "Telugu",
    "Thaana",
    "Thai",
    "Tibetan",
    "Tifinagh",
    "Tirhuta",
    "Toto",
    "Ugaritic",
    "Vai",
    "Vithkuqi",
    "Wancho",
    "Warang_Citi",
    "Yezidi",
    "Yi",
    "Zanabazar_Square",
];

/// A single escaped character (`\n`, `\x41`, `\x{263a}`, `\101`, `\.`) at the start of `t`, as
/// Go's `parseEscape` reads it.
fn escaped_char(t: &str) -> Result<(char, &str), SyntaxError> {
    let mut chars = t[1..].chars();
    let Some(c) = chars.next() else {
        return Err(error(TRAILING_BACKSLASH, ""));
    };
    let after = chars.as_str();
    let invalid = |rest: &str| error(INVALID_ESCAPE, &t[..t.len() - rest.len()]);
    let octal = |s: &str| s.bytes().next().is_some_and(|b| (b'0'..=b'7').contains(&b));
    match c {
        // An octal escape: `\0` and up to two more digits, or `\1`-`\7` followed by one (a
        // single non-zero digit would be a backreference, which Go does not support).
        '0'..='7' if c == '0' || octal(after) => {
            let mut value = c as u32 - '0' as u32;
            let mut rest = after;
            for _ in 0..2 {
                if !octal(rest) {
                    break;
                }
                value = value * 8 + u32::from(rest.as_bytes()[0] - b'0');
                rest = &rest[1..];
            }
            // At most 0o777, always a valid scalar value.
            Ok((char::from_u32(value).unwrap_or('\0'), rest))
        }
        'x' => hex_escape(after).ok_or_else(|| invalid(after_hex(after))),
        'a' => Ok(('\x07', after)),
        'f' => Ok(('\x0C', after)),
        'n' => Ok(('\n', after)),
        'r' => Ok(('\r', after)),
        't' => Ok(('\t', after)),
        'v' => Ok(('\x0B', after)),
        c if c.is_ascii() && !c.is_ascii_alphanumeric() => Ok((c, after)),
        _ => Err(invalid(after)),
    }
}

/// `HH` or `{H...}` after `\x`.
fn hex_escape(after: &str) -> Option<(char, &str)> {
    if let Some(braced) = after.strip_prefix('{') {
        let end = braced.find('}')?;
        let digits = &braced[..end];
        if digits.is_empty() {
            return None;
        }
        let mut value = 0u32;
        for c in digits.chars() {
            value = value * 16 + c.to_digit(16)?;
            if value > u32::from(char::MAX) {
                return None;
            }
        }
        return Some((char::from_u32(value)?, &braced[end + 1..]));
    }
    let digits = after.get(..2)?;
    if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let value = u32::from_str_radix(digits, 16).ok()?;
    Some((char::from_u32(value)?, &after[2..]))
}

/// How much of a bad hex escape Go quotes: the `x` and what it read of the digits.
fn after_hex(after: &str) -> &str {
    if let Some(braced) = after.strip_prefix('{') {
        let used = braced
            .find(|c: char| !c.is_ascii_hexdigit())
            .map_or(braced.len(), |i| i + braced[i..].chars().next().map_or(0, char::len_utf8));
        return &braced[used..];
    }
    let mut chars = after.chars();
    for _ in 0..2 {
        match chars.next() {
            Some(c) if c.is_ascii_hexdigit() => {}
            Some(_) => return chars.as_str(),
            None => break,
        }
    }
    chars.as_str()
}

/// Writes `c` so the `regex` crate reads it as that character, in or outside a class.
fn push_literal(out: &mut String, c: char) {
    if regex_syntax::is_meta_character(c) {
        out.push('\\');
        out.push(c);
    } else if c.is_whitespace() || c.is_control() {
        out.push_str(&format!("\\x{{{:X}}}", u32::from(c)));
    } else {
        out.push(c);
    }
}

/// The Go names `[:name:]` may use.
const POSIX_CLASSES: [&str; 14] = [
    "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct", "space",
    "upper", "word", "xdigit",
];

/// A bracketed class at the start of `s` (which starts with `[`), as Go's `parseClass` reads
/// it: `]` first is a literal, `-` makes a range only between two characters, `[` is a literal
/// unless it starts `[:name:]`. Every character is written escaped, so the `regex` crate's
/// nested classes and set operators (`&&`, `--`, `~~`) never come into play.
fn class<'a>(s: &'a str, out: &mut String) -> Result<&'a str, SyntaxError> {
    let mut t = &s[1..];
    out.push('[');
    if let Some(rest) = t.strip_prefix('^') {
        out.push('^');
        t = rest;
    }
    let mut first = true;
    loop {
        if t.starts_with(']') && !first {
            out.push(']');
            return Ok(&t[1..]);
        }
        if t.is_empty() {
            return Err(error(MISSING_BRACKET, s));
        }
        first = false;
        if let Some(inner) = t.strip_prefix("[:")
            && let Some(end) = inner.find(":]")
        {
            let name = &inner[..end];
            let bare = name.strip_prefix('^').unwrap_or(name);
            if !POSIX_CLASSES.contains(&bare) {
                return Err(error(INVALID_CHAR_RANGE, &t[..end + 4]));
            }
            out.push_str(&t[..end + 4]);
            t = &t[end + 4..];
            continue;
        }
        if t.starts_with("\\p") || t.starts_with("\\P") {
            let (class, rest) = unicode_class(t)?;
            out.push_str(&class);
            t = rest;
            continue;
        }
        if let Some(c @ ('d' | 'D' | 's' | 'S' | 'w' | 'W')) =
            t.strip_prefix('\\').and_then(|r| r.chars().next())
        {
            let (set, negated) = perl_class(c);
            if negated {
                // A nested class: the regex crate's union, exactly what Go adds.
                out.push_str("[^");
                out.push_str(set);
                out.push(']');
            } else {
                out.push_str(set);
            }
            t = &t[2..];
            continue;
        }
        let range_start = t;
        let (lo, rest) = class_char(t, s)?;
        t = rest;
        push_literal(out, lo);
        if t.len() >= 2 && t.starts_with('-') && !t[1..].starts_with(']') {
            let (hi, rest) = class_char(&t[1..], s)?;
            t = rest;
            if hi < lo {
                return Err(error(INVALID_CHAR_RANGE, &range_start[..range_start.len() - t.len()]));
            }
            out.push('-');
            push_literal(out, hi);
        }
    }
}

/// One character of a class: an escape or the character itself.
fn class_char<'a>(t: &'a str, whole: &str) -> Result<(char, &'a str), SyntaxError> {
    match t.chars().next() {
        None => Err(error(MISSING_BRACKET, whole)),
        Some('\\') => escaped_char(t),
        Some(c) => Ok((c, &t[c.len_utf8()..])),
    }
}

/// Go refuses a counted repetition that, multiplied through the counted repetitions inside it,
/// makes more than 1,000 copies of something (`(a{100}){100}`): such patterns compile to huge
/// programs.
fn check_repeat_sizes(pattern: &str) -> Result<(), SyntaxError> {
    use regex_syntax::ast::{Ast, RepetitionKind, RepetitionRange};

    /// The largest count of a counted repetition (its minimum when unbounded), `None` for
    /// `*`, `+`, `?`.
    fn count(kind: &RepetitionKind) -> Option<(u32, u32)> {
        match kind {
            RepetitionKind::Range(RepetitionRange::Exactly(n)) => Some((*n, *n)),
            RepetitionKind::Range(RepetitionRange::AtLeast(n)) => Some((*n, *n)),
            RepetitionKind::Range(RepetitionRange::Bounded(min, max)) => Some((*min, *max)),
            _ => None,
        }
    }
    /// Go's `repeatIsValid`: no path below `ast` multiplies to more than `n` copies.
    fn within(ast: &Ast, mut n: u32) -> bool {
        match ast {
            Ast::Repetition(r) => {
                if let Some((_, m)) = count(&r.op.kind) {
                    if m == 0 {
                        return true;
                    }
                    if m > n {
                        return false;
                    }
                    n /= m;
                }
                within(&r.ast, n)
            }
            Ast::Group(g) => within(&g.ast, n),
            Ast::Concat(c) => c.asts.iter().all(|a| within(a, n)),
            Ast::Alternation(a) => a.asts.iter().all(|a| within(a, n)),
            _ => true,
        }
    }
    fn walk<'p>(ast: &Ast, pattern: &'p str) -> Result<(), &'p str> {
        match ast {
            Ast::Repetition(r) => {
                if let Some((min, max)) = count(&r.op.kind)
                    && (min >= 2 || max >= 2)
                    && !within(ast, MAX_REPEAT)
                {
                    return Err(&pattern[r.op.span.start.offset..r.op.span.end.offset]);
                }
                walk(&r.ast, pattern)
            }
            Ast::Group(g) => walk(&g.ast, pattern),
            Ast::Concat(c) => c.asts.iter().try_for_each(|a| walk(a, pattern)),
            Ast::Alternation(a) => a.asts.iter().try_for_each(|a| walk(a, pattern)),
            _ => Ok(()),
        }
    }
    // A pattern the regex crate cannot parse fails when it is compiled, with its own message.
    let Ok(ast) = regex_syntax::ast::parse::Parser::new().parse(pattern) else {
        return Ok(());
    };
    walk(&ast, pattern).map_err(|op| error(INVALID_REPEAT_SIZE, op))
}

#[cfg(test)]
mod tests;

//! Label matchers with Prometheus semantics.

use std::sync::LazyLock;

use crate::error::{Error, Result};
use crate::types::Labels;

pub mod go_syntax;
mod regex_cache;

pub use regex_cache::{QUERY_REGEX_BYTES_MAX, Regex};
use regex_cache::{RegexCache, check_syntax, compile};

/// Compiles a matcher's pattern as Prometheus does: parsed on its own with Go's syntax
/// ([`go_syntax`], so `a)|(b` cannot close the anchoring group early), then anchored as
/// `^(?s:pattern)$`. Reuses the regex compiled for the same pattern before, while it fits the
/// cache's memory budget (see `matcher/regex_cache.rs`). Clones share the compiled program.
pub fn anchored_regex(pattern: &str) -> std::result::Result<Regex, String> {
    static CACHE: LazyLock<RegexCache> = LazyLock::new(Default::default);
    CACHE.get_or_compile(pattern, || {
        let translated = go_syntax::translate(pattern).map_err(|e| e.to_string())?;
        compile(&format!("^(?s:{})$", translated.pattern))
    })
}

/// Compiles `^(?s:pattern)$` as one Go pattern, as Prometheus' `label_replace` does: unlike
/// [`anchored_regex`] the pattern is not parsed on its own first, so `a)|(b` is accepted and
/// closes the group (Prometheus gives `^(?s:a)|(b)$` to Go's compiler unchanged). A TSBS
/// `cpu-max-all` query with ten `label_replace(..., "", "")` spent about a tenth of its time
/// compiling the same pattern before these were cached.
pub fn wrapped_regex(pattern: &str) -> std::result::Result<Regex, String> {
    WRAPPED.get_or_compile(pattern, || compile(&wrapped_translation(pattern)?))
}

/// Checks that [`wrapped_regex`] would accept `pattern`'s syntax, without compiling it (which
/// may take megabytes and tens of milliseconds); only a pattern too big to compile passes
/// this and fails there. A pattern kept compiled is known good: no work on a dashboard's
/// repeated query.
pub fn check_wrapped_regex(pattern: &str) -> std::result::Result<(), String> {
    if WRAPPED.contains(pattern) {
        return Ok(());
    }
    check_syntax(&wrapped_translation(pattern)?)
}

/// The regexes [`wrapped_regex`] compiled, by pattern.
static WRAPPED: LazyLock<RegexCache> = LazyLock::new(Default::default);

/// `^(?s:pattern)$` read as one Go pattern, in the `regex` crate's syntax.
fn wrapped_translation(pattern: &str) -> std::result::Result<String, String> {
    go_syntax::translate(&format!("^(?s:{pattern})$")).map(|t| t.pattern).map_err(|e| e.to_string())
}

/// Adds up the memory of the compiled regexes of matchers held together (one query's, one
/// `match[]` list's, one remote-read query's) against [`QUERY_REGEX_BYTES_MAX`]: a compiled
/// regex may need megabytes (`\pL{120}`: 5.8 MB) and a query may hold thousands of matchers.
#[derive(Debug, Default)]
pub struct RegexBudget {
    bytes: usize,
}

impl RegexBudget {
    /// Counts `matcher`'s regex; the error says the budget is spent.
    pub fn charge(&mut self, matcher: &Matcher) -> std::result::Result<(), String> {
        self.bytes += matcher.regex_bytes();
        if self.bytes > QUERY_REGEX_BYTES_MAX {
            return Err(format!(
                "the query's regular expressions need more than {} MiB compiled",
                QUERY_REGEX_BYTES_MAX >> 20
            ));
        }
        Ok(())
    }
}

/// The four matcher kinds of PromQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatchOp {
    /// `=`
    Equal,
    /// `!=`
    NotEqual,
    /// `=~` (fully anchored regex)
    Regex,
    /// `!~` (fully anchored regex)
    NotRegex,
}

/// One label matcher. A missing label has the empty value, so a matcher that matches `""`
/// also selects series that lack the label (`{foo=""}`, `{foo!="x"}`, `{foo=~".*"}`).
#[derive(Debug, Clone)]
pub struct Matcher {
    /// Label name.
    pub name: String,
    /// Kind.
    pub op: MatchOp,
    /// Literal value or regex source (unanchored, as the user wrote it).
    pub value: String,
    /// The compiled, anchored regex for `Regex`/`NotRegex`, unless `literals` stands in for it.
    regex: Option<Regex>,
    /// For a regex that is an alternation of plain literals (`host_1|host_7`, what Grafana
    /// variables and TSBS queries produce), the literals: a value matches the anchored regex
    /// exactly when it equals one of them, and building the regex's automaton cost more than
    /// the rest of a small query (a dozen such matchers per TSBS `cpu-max-all` query).
    literals: Option<Vec<String>>,
}

impl Matcher {
    /// Builds a matcher; regexes are anchored as `^(?:value)$` like Prometheus.
    pub fn new(op: MatchOp, name: impl Into<String>, value: impl Into<String>) -> Result<Self> {
        let name = name.into();
        let value = value.into();
        let is_regex = matches!(op, MatchOp::Regex | MatchOp::NotRegex);
        let literals = if is_regex { literal_alternation(&value) } else { None };
        let regex = match op {
            MatchOp::Regex | MatchOp::NotRegex if literals.is_none() => {
                // The pattern must be a regex on its own, as Prometheus checks before compiling
                // it anchored: otherwise `a)|(b` would close the anchoring group early and
                // match unanchored (found by the remote-read fuzz target's oracle).
                let re = anchored_regex(&value)
                    .map_err(|e| Error::InvalidInput(format!("invalid regex {value:?}: {e}")))?;
                Some(re)
            }
            _ => None,
        };
        Ok(Matcher { name, op, value, regex, literals })
    }

    /// Shorthand for an `=` matcher (cannot fail).
    pub fn equal(name: impl Into<String>, value: impl Into<String>) -> Self {
        Matcher { name: name.into(), op: MatchOp::Equal, value: value.into(), regex: None, literals: None }
    }

    /// Does a label value (`""` when the label is absent) satisfy this matcher?
    pub fn matches(&self, value: &str) -> bool {
        match self.op {
            MatchOp::Equal => value == self.value,
            MatchOp::NotEqual => value != self.value,
            MatchOp::Regex => self.regex_match(value),
            MatchOp::NotRegex => !self.regex_match(value),
        }
    }

    fn regex_match(&self, value: &str) -> bool {
        match &self.literals {
            Some(lits) => lits.iter().any(|l| l == value),
            None => self.regex.as_ref().is_some_and(|r| r.is_match(value)),
        }
    }

    /// Heap bytes of this matcher's compiled regex (0 for other kinds and literal alternations),
    /// shared with the cache or not (see [`RegexBudget`]).
    pub fn regex_bytes(&self) -> usize {
        self.regex.as_ref().map_or(0, Regex::memory_usage)
    }

    /// Does this matcher search with a compiled regex (not a literal alternation)? Cheaper to
    /// ask than [`Matcher::regex_bytes`], which sums the regex's parts.
    pub fn has_compiled_regex(&self) -> bool {
        self.regex.is_some()
    }

    /// Does this matcher select series that do not have the label at all?
    pub fn matches_empty(&self) -> bool {
        self.matches("")
    }

    /// Does the series with these labels satisfy this matcher?
    pub fn matches_labels(&self, labels: &Labels) -> bool {
        self.matches(labels.get(&self.name).unwrap_or(""))
    }

    /// For a regex that is an alternation of literals (`a|b|c`), the literals; lets the index
    /// look values up directly instead of scanning all values of the label.
    pub fn regex_literals(&self) -> Option<Vec<String>> {
        if !matches!(self.op, MatchOp::Regex) {
            return None;
        }
        self.literals.clone()
    }
}

/// The alternatives of `pattern` if it is an alternation of non-empty literals, which the
/// anchored regex matches exactly: `a|b`, and Grafana's form of a multi-value variable, one
/// group around values whose metacharacters are escaped (`(host-1\.example|host-2\.example)`).
/// As in Go's syntax, a backslash before an ASCII character that is neither a letter nor a digit
/// stands for that character. Anything else (an unescaped metacharacter, an empty alternative,
/// a group that is not the whole pattern) is left to the regex.
fn literal_alternation(pattern: &str) -> Option<Vec<String>> {
    const SPECIAL: &str = "\\.+*?()[]{}^$|";
    let inner = match pattern.strip_prefix('(') {
        Some(rest) => rest.strip_suffix(')')?,
        None => pattern,
    };
    let mut parts = Vec::new();
    let mut part = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e) if e.is_ascii() && !e.is_ascii_alphanumeric() => part.push(e),
                _ => return None,
            },
            '|' => {
                if part.is_empty() {
                    return None;
                }
                parts.push(std::mem::take(&mut part));
            }
            c if SPECIAL.contains(c) => return None,
            c => part.push(c),
        }
    }
    if part.is_empty() {
        return None;
    }
    parts.push(part);
    Some(parts)
}

/// True if `labels` satisfies every matcher.
pub fn matches_all(matchers: &[Matcher], labels: &Labels) -> bool {
    matchers.iter().all(|m| m.matches_labels(labels))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regex_is_anchored_and_empty_matches_absent() {
        let m = Matcher::new(MatchOp::Regex, "job", "api|web").unwrap();
        assert!(m.matches("api"));
        assert!(!m.matches("xapi"));
        assert!(!m.matches_empty());
        assert_eq!(m.regex_literals(), Some(vec!["api".to_string(), "web".to_string()]));
        let m = Matcher::new(MatchOp::Regex, "job", ".*").unwrap();
        assert!(m.matches_empty());
        assert_eq!(m.regex_literals(), None);
        let m = Matcher::new(MatchOp::NotEqual, "job", "x").unwrap();
        assert!(m.matches_labels(&Labels::from_pairs(&[("a", "b")])));
        assert!(Matcher::new(MatchOp::Regex, "a", "(").is_err());
    }

    #[test]
    fn cached_regexes_behave_as_freshly_compiled_ones() {
        // Patterns the two syntaxes read alike; `a)|(b` is refused by a matcher and accepted by
        // `label_replace` (below).
        let patterns = ["a.*", "(x|y)+z", "", ".", "[", "é+"];
        for _round in 0..2 {
            for p in patterns {
                let fresh = regex::Regex::new(&format!("^(?s:{p})$"));
                assert_eq!(check_wrapped_regex(p).is_ok(), wrapped_regex(p).is_ok(), "{p}");
                for cached in [anchored_regex(p), wrapped_regex(p)] {
                    assert_eq!(fresh.is_ok(), cached.is_ok(), "{p}");
                    let (Ok(fresh), Ok(cached)) = (&fresh, cached) else { continue };
                    for v in ["", "a", "abc", "xyz", "xxz", "\n", "é", "ab"] {
                        assert_eq!(fresh.is_match(v), cached.is_match(v), "{p} on {v:?}");
                    }
                }
            }
        }
        // Many more patterns: still answered right.
        for i in 0..300 {
            let re = anchored_regex(&format!("v{i}")).unwrap();
            assert!(re.is_match(&format!("v{i}")) && !re.is_match(&format!("v{i}x")));
        }
        // A matcher refuses a pattern that would escape its anchors, cached or not;
        // `label_replace` compiles it as Prometheus does, the second branch unanchored.
        for _round in 0..2 {
            assert!(anchored_regex("a)|(b").is_err());
            assert!(Matcher::new(MatchOp::Regex, "l", "a)|(b").is_err());
            let wrapped = wrapped_regex("a)|(b").unwrap();
            assert!(wrapped.is_match("ax") && wrapped.is_match("xb") && !wrapped.is_match("xa"));
        }
    }

    #[test]
    fn literal_alternations_match_as_their_regex() {
        let values = [
            "", "a", "b", "ab", "a|b", "host_1", "host_10", "host_1 ", "A", "é", "x\ny", "h.1", "hx1",
            "a\\b", "(x)", "x", "a-b", "{", "_",
        ];
        let patterns = [
            "a|b",
            "host_1|host_10",
            "ab",
            "é|A",
            "a b|x",
            "a|b|a",
            // Grafana's multi-value form: one group, metacharacters escaped.
            "(a|b)",
            r"(h\.1|host_1)",
            r"(a\|b|x)",
            r"(a\\b)",
            r"(\(x\))",
            r"(a\-b|\{|\_)",
            "(x)",
        ];
        for pattern in patterns {
            // Compiled as a matcher compiles it (Go's syntax).
            let compiled = anchored_regex(pattern).unwrap();
            for op in [MatchOp::Regex, MatchOp::NotRegex] {
                let m = Matcher::new(op, "l", pattern).unwrap();
                assert!(m.literals.is_some() && m.regex.is_none(), "{pattern}");
                for v in values {
                    assert_eq!(
                        m.matches(v),
                        compiled.is_match(v) == (op == MatchOp::Regex),
                        "{pattern} {v:?}"
                    );
                }
            }
        }
        for not_literal in
            ["a|.*", "a||b", "(a|)", "()", "(a)|(b)", "((a|b))", r"a\d", r"\pL", "(?i)a", "a{2}"]
        {
            let m = Matcher::new(MatchOp::Regex, "l", not_literal).unwrap();
            assert!(m.literals.is_none() && m.regex.is_some(), "{not_literal}");
        }
        assert!(Matcher::new(MatchOp::Equal, "l", "a").unwrap().literals.is_none());
        // An escaped closing parenthesis is not the group's end: refused like the regex.
        assert!(Matcher::new(MatchOp::Regex, "l", r"(a\)").is_err());
    }

    proptest::proptest! {
        /// Whatever the literal path accepts, it answers as the compiled regex does.
        #[test]
        fn literal_alternations_agree_with_the_regex(
            pattern in r"[ab|()\\.\-{_]{0,10}",
            values in proptest::collection::vec(r"[ab|().\\\-{_]{0,4}", 1..8),
        ) {
            let Some(literals) = literal_alternation(&pattern) else { return Ok(()) };
            let m = Matcher::new(MatchOp::Regex, "l", pattern.as_str()).unwrap();
            proptest::prop_assert_eq!(m.literals.as_ref(), Some(&literals));
            let compiled = anchored_regex(&pattern).unwrap();
            for v in values.iter().chain(&literals) {
                proptest::prop_assert_eq!(m.matches(v), compiled.is_match(v), "{} on {:?}", pattern, v);
            }
        }
    }

    #[test]
    fn a_pattern_cannot_escape_its_anchors() {
        for escape in ["a)|(b", "a)|(?s:b", ")|("] {
            assert!(Matcher::new(MatchOp::Regex, "a", escape).is_err(), "{escape}");
            assert!(Matcher::new(MatchOp::NotRegex, "a", escape).is_err(), "{escape}");
        }
        let m = Matcher::new(MatchOp::Regex, "a", "(a)|(b)").unwrap();
        assert!(m.matches("b") && !m.matches("xb"));
    }

    #[test]
    fn dot_matches_newline_like_prometheus() {
        let m = Matcher::new(MatchOp::Regex, "a", "x.y").unwrap();
        assert!(m.matches("x\ny"));
    }
}

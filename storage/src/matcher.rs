//! Label matchers with Prometheus semantics.

use std::collections::HashMap;
use std::sync::LazyLock;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::types::Labels;

/// Most compiled regexes [`anchored_regex`] keeps; when full it starts over.
const REGEX_CACHE_MAX: usize = 256;
/// Longer patterns are compiled every time rather than kept (bounds the cache's memory).
const REGEX_CACHE_PATTERN_MAX: usize = 4096;

pub mod go_syntax;

/// Compiles a matcher's pattern as Prometheus does: parsed on its own with Go's syntax
/// ([`go_syntax`], so `a)|(b` cannot close the anchoring group early), then anchored as
/// `^(?s:pattern)$`. Reuses the regex compiled for the same pattern before: dashboards send
/// the same queries every refresh, and compiling (the `regex` crate may build a whole DFA for a
/// small pattern) cost more than evaluating a small query. Clones share the compiled program.
pub fn anchored_regex(pattern: &str) -> std::result::Result<regex::Regex, String> {
    static CACHE: LazyLock<RegexCache> = LazyLock::new(Default::default);
    CACHE.get_or_compile(pattern, || {
        let translated = go_syntax::translate(pattern).map_err(|e| e.to_string())?;
        regex::Regex::new(&format!("^(?s:{})$", translated.pattern)).map_err(|e| e.to_string())
    })
}

/// Compiles `^(?s:pattern)$` as one Go pattern, as Prometheus' `label_replace` does: unlike
/// [`anchored_regex`] the pattern is not parsed on its own first, so `a)|(b` is accepted and
/// closes the group (Prometheus gives `^(?s:a)|(b)$` to Go's compiler unchanged). A TSBS
/// `cpu-max-all` query with ten `label_replace(..., "", "")` spent about a tenth of its time
/// compiling the same pattern before these were cached.
pub fn wrapped_regex(pattern: &str) -> std::result::Result<regex::Regex, String> {
    static CACHE: LazyLock<RegexCache> = LazyLock::new(Default::default);
    CACHE.get_or_compile(pattern, || {
        let translated = go_syntax::translate(&format!("^(?s:{pattern})$")).map_err(|e| e.to_string())?;
        regex::Regex::new(&translated.pattern).map_err(|e| e.to_string())
    })
}

/// Compiled regexes by pattern, bounded: at [`REGEX_CACHE_MAX`] entries it starts over, and
/// patterns longer than [`REGEX_CACHE_PATTERN_MAX`] are not kept.
#[derive(Default)]
struct RegexCache(Mutex<HashMap<String, regex::Regex>>);

impl RegexCache {
    fn get_or_compile(
        &self,
        pattern: &str,
        compile: impl FnOnce() -> std::result::Result<regex::Regex, String>,
    ) -> std::result::Result<regex::Regex, String> {
        if let Some(re) = self.0.lock().get(pattern) {
            return Ok(re.clone());
        }
        let re = compile()?;
        if pattern.len() <= REGEX_CACHE_PATTERN_MAX {
            let mut cache = self.0.lock();
            if cache.len() >= REGEX_CACHE_MAX {
                cache.clear();
            }
            cache.insert(pattern.to_owned(), re.clone());
        }
        Ok(re)
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
    regex: Option<regex::Regex>,
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
        literal_alternation(&self.value)
    }
}

/// The alternatives of `pattern` if it is an alternation of non-empty literals (no regex
/// metacharacter anywhere), which the anchored regex matches exactly.
fn literal_alternation(pattern: &str) -> Option<Vec<String>> {
    let special = |c: char| "\\.+*?()[]{}^$|".contains(c);
    let parts: Vec<String> = pattern.split('|').map(str::to_string).collect();
    if parts.iter().all(|p| !p.is_empty() && !p.chars().any(special)) { Some(parts) } else { None }
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
                for cached in [anchored_regex(p), wrapped_regex(p)] {
                    assert_eq!(fresh.is_ok(), cached.is_ok(), "{p}");
                    let (Ok(fresh), Ok(cached)) = (&fresh, cached) else { continue };
                    for v in ["", "a", "abc", "xyz", "xxz", "\n", "é", "ab"] {
                        assert_eq!(fresh.is_match(v), cached.is_match(v), "{p} on {v:?}");
                    }
                }
            }
        }
        // More patterns than the cache holds: still answered right.
        for i in 0..(REGEX_CACHE_MAX + 10) {
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
        let values = ["", "a", "b", "ab", "a|b", "host_1", "host_10", "host_1 ", "A", "é", "x\ny"];
        for pattern in ["a|b", "host_1|host_10", "ab", "é|A", "a b|x", "a|b|a"] {
            let compiled = regex::Regex::new(&format!("^(?s:{pattern})$")).unwrap();
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
        assert!(Matcher::new(MatchOp::Regex, "l", "a|.*").unwrap().literals.is_none());
        assert!(Matcher::new(MatchOp::Regex, "l", "a||b").unwrap().literals.is_none());
        assert!(Matcher::new(MatchOp::Equal, "l", "a").unwrap().literals.is_none());
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

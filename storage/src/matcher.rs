//! Label matchers with Prometheus semantics.

use crate::error::{Error, Result};
use crate::types::Labels;

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
    /// The compiled, anchored regex for `Regex`/`NotRegex`.
    regex: Option<regex::Regex>,
}

impl Matcher {
    /// Builds a matcher; regexes are anchored as `^(?:value)$` like Prometheus.
    pub fn new(op: MatchOp, name: impl Into<String>, value: impl Into<String>) -> Result<Self> {
        let name = name.into();
        let value = value.into();
        let regex = match op {
            MatchOp::Regex | MatchOp::NotRegex => {
                let invalid =
                    |e: &dyn std::fmt::Display| Error::InvalidInput(format!("invalid regex {value:?}: {e}"));
                // The pattern must be a regex on its own, as Prometheus checks before compiling
                // it anchored: otherwise `a)|(b` would close the anchoring group early and
                // match unanchored (found by the remote-read fuzz target's oracle).
                regex_syntax::Parser::new().parse(&value).map_err(|e| invalid(&e))?;
                Some(regex::Regex::new(&format!("^(?s:{value})$")).map_err(|e| invalid(&e))?)
            }
            _ => None,
        };
        Ok(Matcher { name, op, value, regex })
    }

    /// Shorthand for an `=` matcher (cannot fail).
    pub fn equal(name: impl Into<String>, value: impl Into<String>) -> Self {
        Matcher { name: name.into(), op: MatchOp::Equal, value: value.into(), regex: None }
    }

    /// Does a label value (`""` when the label is absent) satisfy this matcher?
    pub fn matches(&self, value: &str) -> bool {
        match self.op {
            MatchOp::Equal => value == self.value,
            MatchOp::NotEqual => value != self.value,
            MatchOp::Regex => self.regex.as_ref().is_some_and(|r| r.is_match(value)),
            MatchOp::NotRegex => !self.regex.as_ref().is_some_and(|r| r.is_match(value)),
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
        let special = |c: char| "\\.+*?()[]{}^$|".contains(c);
        let parts: Vec<String> = self.value.split('|').map(str::to_string).collect();
        if parts.iter().all(|p| !p.is_empty() && !p.chars().any(special)) { Some(parts) } else { None }
    }
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

//! Compiling matcher regexes, and the process-wide caches that keep them, bounded by memory.
//!
//! Dashboards send the same queries every refresh, and compiling a regex (the engine may build
//! a lazy DFA, a one-pass DFA and literal prefilters for a small pattern) cost more than
//! evaluating a small query, so compiled regexes are kept by pattern. What a compiled regex
//! costs depends on the pattern, not its length: the `regex` crate compiles Unicode classes to
//! UTF-8 byte automata, so the 20-byte `(?:\pL{120})0` needs 5.8 MB and `\w{100}` 5.6 MB,
//! while a 2,800-byte alternation of 100 host names needs 57 KB. A cache bounded by count
//! alone let 250 distinct `\pL{120}` queries take a server from 10 MB to 2 GB of RSS; these
//! caches count each entry's measured size ([`Regex::memory_usage`]) against a byte budget,
//! and compile a pattern too big for them afresh every time instead of keeping it.
//!
//! Outside the budget: search caches (lazy-DFA transition tables, up to [`LAZY_DFA_CAPACITY`]
//! each, one per thread that searched). They belong to each clone of a compiled regex, not to
//! the compiled program, and these caches hand out clones and never search, so a search cache
//! lives as long as the matcher that searched with it: the query's (the evaluator searches with
//! clones of a kept syntax tree's matchers, so the parse cache holds none). They grow only with
//! the states the label values searched actually reach.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use parking_lot::Mutex;
pub use regex_automata::meta::Regex;
use regex_automata::util::syntax;
use regex_automata::{MatchKind, meta};

/// Largest compiled automaton (each of the NFAs, the one-pass DFA) one pattern may need: the
/// `regex` crate's default, so strata refuses no pattern the `regex` crate would accept.
/// A query's patterns are bounded together by [`QUERY_REGEX_BYTES_MAX`].
const NFA_SIZE_LIMIT: usize = 10 << 20;
/// Largest lazy-DFA transition table a search cache may grow to: the `regex` crate's default.
const LAZY_DFA_CAPACITY: usize = 2 << 20;

/// Most bytes of compiled regexes (and their patterns) one cache keeps.
const CACHE_BYTES_MAX: usize = 32 << 20;
/// A regex needing more than this is compiled every time instead of kept: one pattern cannot
/// take more than an eighth of a cache (and evict everything else for itself).
const ENTRY_BYTES_MAX: usize = CACHE_BYTES_MAX / 8;
/// Most entries one cache keeps, whatever their size.
const CACHE_ENTRIES_MAX: usize = 1024;

/// Most bytes of compiled regexes one query (or one remote-read request) may hold at once: the
/// caches bound what is kept between queries, this bounds what one query's matchers hold
/// while it runs. Room for a few patterns at the 10 MiB compile limit and thousands of ordinary
/// ones.
pub const QUERY_REGEX_BYTES_MAX: usize = 64 << 20;

/// The syntax options `regex::Regex::new` uses.
fn syntax_config() -> syntax::Config {
    syntax::Config::new().utf8(true)
}

/// Checks that `pattern` (in the `regex` crate's syntax) parses, without compiling it: what
/// [`compile`] refuses, less a pattern too big to compile.
pub fn check_syntax(pattern: &str) -> Result<(), String> {
    syntax::parse_with(pattern, &syntax_config()).map(drop).map_err(|e| e.to_string())
}

/// Compiles `pattern` (already in the `regex` crate's syntax) exactly as `regex::Regex::new`
/// would: same syntax options, same limits, leftmost-first matching, empty matches only at
/// UTF-8 boundaries. strata uses the engine underneath `regex::Regex` because only it says how
/// much memory a compiled regex takes.
pub fn compile(pattern: &str) -> Result<Regex, String> {
    let config = meta::Config::new()
        .nfa_size_limit(Some(NFA_SIZE_LIMIT))
        .hybrid_cache_capacity(LAZY_DFA_CAPACITY)
        .match_kind(MatchKind::LeftmostFirst)
        .utf8_empty(true);
    meta::Builder::new().configure(config).syntax(syntax_config()).build(pattern).map_err(|e| {
        match (e.size_limit(), e.syntax_error()) {
            (Some(limit), _) => format!("compiled regex exceeds size limit of {limit} bytes"),
            (None, Some(syntax)) => syntax.to_string(),
            (None, None) => e.to_string(),
        }
    })
}

/// What keeping `re` for `pattern` costs: the compiled regex, the key, the map's slot.
pub fn entry_bytes(pattern: &str, re: &Regex) -> usize {
    re.memory_usage() + pattern.len() + std::mem::size_of::<(String, Regex)>()
}

/// Compiled regexes by pattern, bounded by [`CACHE_BYTES_MAX`] and [`CACHE_ENTRIES_MAX`]: when
/// the next entry would not fit it starts over (a dashboard's patterns are compiled again on
/// its next refresh, once), and an entry over [`ENTRY_BYTES_MAX`] is never kept.
#[derive(Default)]
pub(super) struct RegexCache(Mutex<Entries>);

#[derive(Default)]
struct Entries {
    by_pattern: HashMap<String, Regex>,
    /// Sum of [`entry_bytes`] over `by_pattern`.
    bytes: usize,
}

impl RegexCache {
    /// The regex compiled for `key` before, or `compile`'s, kept if it fits.
    pub(super) fn get_or_compile(
        &self,
        key: &str,
        compile: impl FnOnce() -> Result<Regex, String>,
    ) -> Result<Regex, String> {
        if let Some(re) = self.0.lock().by_pattern.get(key) {
            return Ok(re.clone());
        }
        // Compiled outside the lock: a big pattern takes tens of milliseconds.
        let re = compile()?;
        let bytes = entry_bytes(key, &re);
        if bytes <= ENTRY_BYTES_MAX {
            let mut entries = self.0.lock();
            let entries = &mut *entries;
            if !entries.by_pattern.contains_key(key)
                && (entries.bytes + bytes > CACHE_BYTES_MAX || entries.by_pattern.len() >= CACHE_ENTRIES_MAX)
            {
                entries.by_pattern.clear();
                entries.bytes = 0;
            }
            // Another thread may have compiled the same pattern meanwhile: count it once.
            if let Entry::Vacant(slot) = entries.by_pattern.entry(key.to_owned()) {
                slot.insert(re.clone());
                entries.bytes += bytes;
            }
        }
        Ok(re)
    }

    /// Whether a regex compiled for `key` is kept (a pattern that compiled before).
    pub(super) fn contains(&self, key: &str) -> bool {
        self.0.lock().by_pattern.contains_key(key)
    }

    /// Bytes of the entries kept (for tests).
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.0.lock().bytes
    }

    /// Number of entries kept (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().by_pattern.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiles_as_the_regex_crate_does() {
        for p in ["^(?s:a.*)$", "(x|y)+z", "", "é+", r"\bfoo\b", "a*?", "(?i)straße", r"\pL{3}"] {
            let ours = compile(p).unwrap();
            let theirs = regex::Regex::new(p).unwrap();
            for h in ["", "a", "abc", "xyz", "foo bar", "é", "STRASSE", "straße", "abc\ndef", "λλλ"] {
                assert_eq!(ours.is_match(h), theirs.is_match(h), "{p} on {h:?}");
                assert_eq!(
                    ours.find(h).map(|m| m.range()),
                    theirs.find(h).map(|m| m.range()),
                    "{p} on {h:?}"
                );
            }
        }
        assert!(compile("(").unwrap_err().contains("unclosed group"));
        assert!(check_syntax("(").unwrap_err().contains("unclosed group"));
        assert!(check_syntax(r"\pL{2000}").is_ok());
        assert!(compile(r"\pL{2000}").unwrap_err().contains("exceeds size limit"));
    }

    #[test]
    fn the_cache_is_bounded_by_the_memory_of_what_it_keeps() {
        let cache = RegexCache::default();
        // About 1.9 MB compiled each: a cache keeps some, then starts over, never above budget.
        let big = |i: usize| format!(r"^(?s:(?:\pL{{40}}){i})$");
        let mut kept_most = 0;
        for i in 0..40 {
            let key = big(i);
            let re = cache.get_or_compile(&key, || compile(&key)).unwrap();
            assert!(re.is_match(&format!("{}{i}", "λ".repeat(40))));
            assert!(cache.bytes() <= CACHE_BYTES_MAX, "{} bytes kept", cache.bytes());
            kept_most = kept_most.max(cache.len());
        }
        assert!((8..40).contains(&kept_most), "kept at most {kept_most}");

        // Over the entry limit (5.8 MB): answered, never kept.
        let before = (cache.len(), cache.bytes());
        let huge = r"^(?s:(?:\pL{120})0)$";
        let re = cache.get_or_compile(huge, || compile(huge)).unwrap();
        assert!(entry_bytes(huge, &re) > ENTRY_BYTES_MAX);
        assert!(re.is_match(&format!("{}0", "λ".repeat(120))));
        assert_eq!((cache.len(), cache.bytes()), before);

        // Small patterns: kept, and found again without compiling.
        let small = "^(?s:api|web.*)$";
        cache.get_or_compile(small, || compile(small)).unwrap();
        let again = cache.get_or_compile(small, || panic!("compiled twice")).unwrap();
        assert!(again.is_match("web-1") && !again.is_match("db"));

        // Errors are not kept.
        assert!(cache.get_or_compile("(", || compile("(")).is_err());
        assert!(cache.get_or_compile("(", || compile("(")).is_err());
    }

    #[test]
    fn the_cache_is_bounded_by_count_too() {
        let cache = RegexCache::default();
        for i in 0..(CACHE_ENTRIES_MAX + 10) {
            let key = format!("^v{i}$");
            let re = cache.get_or_compile(&key, || compile(&key)).unwrap();
            assert!(re.is_match(&format!("v{i}")) && !re.is_match(&format!("v{i}x")));
            assert!(cache.len() <= CACHE_ENTRIES_MAX);
        }
    }
}

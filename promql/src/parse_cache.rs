//! A bounded cache of parsed queries, shared by every query of a server.
//!
//! Why: dashboards send the same query text again and again (a Grafana panel on refresh, the
//! same panel over another time range), and parsing a long query costs tens of microseconds:
//! TSBS cpu-max-all-1's 1.1 KB of PromQL parsed in 32-45 us, about a tenth of its evaluation.
//! VictoriaMetrics keeps such a cache too. The syntax tree depends only on the text and the
//! parse options, and evaluation only reads it, so a cached tree gives the same answer.
//!
//! Only successful parses of texts up to [`MAX_QUERY_BYTES`] are kept, at most [`MAX_ENTRIES`]
//! of them, holding at most [`MAX_REGEX_BYTES`] of compiled regexes together; the least
//! recently used entries go to make room. The regexes are what can be big: a tree holds its
//! matchers' compiled regexes, and a 30-byte matcher `{__name__=~"\\pL{120}"}` needs 5.8 MB
//! compiled (1,024 such trees kept 1.6 GB before they were counted). The lock is held for a
//! lookup or an insert only, never while parsing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::parser::ParseOptions;
use crate::parser::ast::Expr;

/// Queries longer than this are parsed every time (they are rare, and a deep tree is dropped
/// on whichever thread evicts it, so its size stays modest).
pub const MAX_QUERY_BYTES: usize = 4096;
/// Entries kept at most.
pub const MAX_ENTRIES: usize = 1024;
/// Most bytes of compiled regexes the kept trees hold together ([`Expr::regex_bytes`]).
pub const MAX_REGEX_BYTES: usize = 64 << 20;
/// A tree whose regexes need more than this is parsed every time: one query cannot take more
/// than an eighth of the budget.
const MAX_ENTRY_REGEX_BYTES: usize = MAX_REGEX_BYTES / 8;

/// The parse options that shape the tree, as a key.
type OptionsKey = (bool, bool, bool, bool, usize);

fn options_key(o: &ParseOptions) -> OptionsKey {
    (
        o.experimental_functions,
        o.duration_expressions,
        o.extended_range_selectors,
        o.binop_fill_modifiers,
        o.max_depth,
    )
}

struct Entry {
    expr: Arc<Expr>,
    last_used: u64,
    regex_bytes: usize,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<(String, OptionsKey), Entry>,
    /// Sum of the entries' `regex_bytes`.
    regex_bytes: usize,
    clock: u64,
    hits: u64,
    misses: u64,
}

/// See the module documentation. Cloning shares the cache.
#[derive(Clone, Default)]
pub struct ParseCache {
    inner: Arc<Mutex<Inner>>,
}

impl std::fmt::Debug for ParseCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (hits, misses, len) = self.counts();
        f.debug_struct("ParseCache")
            .field("entries", &len)
            .field("hits", &hits)
            .field("misses", &misses)
            .finish()
    }
}

impl ParseCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The map stays consistent whatever a panicking holder did (it only inserts whole
        // entries), so a poisoned lock is taken over.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The tree for `query` parsed with `opts`, from the cache or from `parse` (whose errors
    /// are passed on and not kept).
    pub(crate) fn get_or_parse<E>(
        &self,
        query: &str,
        opts: &ParseOptions,
        parse: impl FnOnce() -> Result<Expr, E>,
    ) -> Result<Arc<Expr>, E> {
        if query.len() > MAX_QUERY_BYTES {
            return parse().map(Arc::new);
        }
        let key = (query.to_owned(), options_key(opts));
        {
            let mut inner = self.lock();
            inner.clock += 1;
            let now = inner.clock;
            if let Some(e) = inner.entries.get_mut(&key) {
                e.last_used = now;
                let expr = Arc::clone(&e.expr);
                inner.hits += 1;
                return Ok(expr);
            }
            inner.misses += 1;
        }
        let expr = Arc::new(parse()?);
        let regex_bytes = expr.regex_bytes();
        if regex_bytes > MAX_ENTRY_REGEX_BYTES {
            return Ok(expr);
        }
        let mut evicted = Vec::new();
        {
            let mut inner = self.lock();
            if inner.entries.contains_key(&key) {
                return Ok(expr);
            }
            while !inner.entries.is_empty()
                && (inner.entries.len() >= MAX_ENTRIES || inner.regex_bytes + regex_bytes > MAX_REGEX_BYTES)
            {
                let oldest = inner.entries.iter().min_by_key(|(_, e)| e.last_used).map(|(k, _)| k.clone());
                let Some(gone) = oldest.and_then(|k| inner.entries.remove(&k)) else { break };
                inner.regex_bytes -= gone.regex_bytes;
                evicted.push(gone);
            }
            let last_used = inner.clock;
            inner.regex_bytes += regex_bytes;
            inner.entries.insert(key, Entry { expr: Arc::clone(&expr), last_used, regex_bytes });
        }
        // Dropped outside the lock.
        drop(evicted);
        Ok(expr)
    }

    /// `(hits, misses, entries)` so far.
    pub fn counts(&self) -> (u64, u64, usize) {
        let inner = self.lock();
        (inner.hits, inner.misses, inner.entries.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::parse;

    fn get(c: &ParseCache, q: &str, o: &ParseOptions) -> Result<Arc<Expr>, String> {
        c.get_or_parse(q, o, || parse(q, o).map_err(|e| e.render(q)))
    }

    #[test]
    fn a_hit_returns_the_same_tree_and_errors_are_not_kept() {
        let (c, o) = (ParseCache::new(), ParseOptions::default());
        let a = get(&c, "sum(rate(x[5m]))", &o).unwrap();
        let b = get(&c, "sum(rate(x[5m]))", &o).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(get(&c, "sum(", &o).is_err());
        assert!(get(&c, "sum(", &o).is_err());
        assert_eq!(c.counts(), (1, 3, 1));
    }

    #[test]
    fn options_are_part_of_the_key() {
        let c = ParseCache::new();
        let plain = ParseOptions::default();
        let experimental = ParseOptions { experimental_functions: true, ..ParseOptions::default() };
        assert!(get(&c, "limitk(1, x)", &plain).is_err());
        assert!(get(&c, "limitk(1, x)", &experimental).is_ok());
        assert!(get(&c, "limitk(1, x)", &plain).is_err());
    }

    #[test]
    fn the_least_recently_used_entry_goes_when_full() {
        let (c, o) = (ParseCache::new(), ParseOptions::default());
        let first = get(&c, "m0", &o).unwrap();
        for i in 1..MAX_ENTRIES {
            get(&c, &format!("m{i}"), &o).unwrap();
        }
        // Touch m0, so m1 is now the oldest.
        assert!(Arc::ptr_eq(&first, &get(&c, "m0", &o).unwrap()));
        get(&c, "another", &o).unwrap();
        assert_eq!(c.counts().2, MAX_ENTRIES);
        assert!(Arc::ptr_eq(&first, &get(&c, "m0", &o).unwrap()));
        let misses = c.counts().1;
        get(&c, "m1", &o).unwrap();
        assert_eq!(c.counts().1, misses + 1, "m1 was evicted");
    }

    #[test]
    fn the_kept_trees_regexes_stay_within_the_budget() {
        let (c, o) = (ParseCache::new(), ParseOptions::default());
        // About 1.9 MB compiled each: the oldest go to make room, the budget is never exceeded.
        for i in 0..60 {
            let q = format!(r#"{{__name__=~"(?:\\pL{{40}}){i}"}}"#);
            let e = get(&c, &q, &o).unwrap();
            assert!(e.regex_bytes() > 1 << 20, "{q}");
            let inner = c.lock();
            assert!(inner.regex_bytes <= MAX_REGEX_BYTES);
            assert_eq!(inner.regex_bytes, inner.entries.values().map(|e| e.regex_bytes).sum::<usize>());
        }
        let kept = c.counts().2;
        assert!((16..60).contains(&kept), "{kept} kept");
        // The newest is still there; the first went.
        let misses = c.counts().1;
        get(&c, r#"{__name__=~"(?:\\pL{40})59"}"#, &o).unwrap();
        assert_eq!(c.counts().1, misses);
        get(&c, r#"{__name__=~"(?:\\pL{40})0"}"#, &o).unwrap();
        assert_eq!(c.counts().1, misses + 1);
        // Over an eighth of the budget (5.8 MB + 5.8 MB): parsed, not kept.
        let big = r#"{a=~"(?:\\pL{120})", b=~"(?:\\pL{120})1"}"#;
        let e = get(&c, big, &o).unwrap();
        assert!(e.regex_bytes() > MAX_ENTRY_REGEX_BYTES);
        let misses = c.counts().1;
        get(&c, big, &o).unwrap();
        assert_eq!(c.counts().1, misses + 1);
    }

    #[test]
    fn long_queries_are_not_kept() {
        let (c, o) = (ParseCache::new(), ParseOptions::default());
        let long = format!("x{{a=\"{}\"}}", "v".repeat(MAX_QUERY_BYTES));
        get(&c, &long, &o).unwrap();
        assert_eq!(c.counts().2, 0);
    }
}

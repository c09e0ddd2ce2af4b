//! Turning a series' label pairs, as borrowed from the request, into a validated
//! [`storage::Labels`].
//!
//! Rules (both protocol versions): at most `labels_per_series_max` pairs as sent; names must be
//! non-empty and unique; a `__name__` label must be present with a non-empty value; pairs with
//! an empty value are dropped (Prometheus treats an empty value as an absent label); names and values must be valid UTF-8 (any UTF-8 is accepted
//! in names, as remote write 2.0 and Prometheus 3 allow); pairs are sorted by name because senders
//! may not sort them. Each distinct string is validated and allocated once per request.

use std::sync::Arc;

use storage::{Label, Labels, METRIC_NAME};

use crate::limits::{LABEL_NAME_BYTES_MAX, LABEL_VALUE_BYTES_MAX, LABELS_PER_SERIES_MAX};
use crate::{Error, Limits, Result};

/// A string of the request: its bytes and, in remote write 2.0, its index in the symbol table
/// (which makes interning an array lookup).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Str<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) sym: u32,
}

impl<'a> Str<'a> {
    /// A string that is not from a symbol table.
    #[inline]
    pub(crate) fn bytes(bytes: &'a [u8]) -> Self {
        Str { bytes, sym: u32::MAX }
    }
}

/// Where validated, shared strings come from: `None` means the bytes are not UTF-8.
pub(crate) trait StringTable<'a> {
    /// The shared string for `s`, validated as UTF-8 the first time it is seen. `slot` is the
    /// string's position in its series (2 × pair index, +1 for the value); a table may use it
    /// as a hint, since consecutive series often repeat a string at the same position.
    fn arc(&mut self, s: Str<'a>, slot: usize) -> Option<Arc<str>>;
}

/// Slots remembered by [`Interner`]; later positions go straight to the hash map.
const RECENT_SLOTS: usize = 32;

/// Interns strings by their bytes (remote write 1.0, where every label repeats its strings).
///
/// A hash lookup per string is most of the cost of a label, so the interner first compares
/// with the string last seen at the same position of the previous series (`__name__`, `job`,
/// `instance` and their values repeat there), then falls back to the map.
#[derive(Default)]
pub(crate) struct Interner<'a> {
    map: hashbrown::HashMap<Key<'a>, u32>,
    arena: Vec<Arc<str>>,
    recent: Vec<(&'a [u8], u32)>,
}

/// A map key comparing short byte strings without a `memcmp` call (labels are mostly short).
#[derive(Clone, Copy, Hash)]
struct Key<'a>(&'a [u8]);

impl PartialEq for Key<'_> {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        crate::bytes::eq(self.0, other.0)
    }
}
impl Eq for Key<'_> {}

impl<'a> StringTable<'a> for Interner<'a> {
    #[inline]
    fn arc(&mut self, s: Str<'a>, slot: usize) -> Option<Arc<str>> {
        if let Some(&(bytes, id)) = self.recent.get(slot)
            && crate::bytes::eq(bytes, s.bytes)
        {
            return self.arena.get(id as usize).cloned();
        }
        let id = match self.map.get(&Key(s.bytes)) {
            Some(&id) => id,
            None => {
                let a: Arc<str> = Arc::from(std::str::from_utf8(s.bytes).ok()?);
                let id = u32::try_from(self.arena.len()).ok()?;
                self.arena.push(a);
                self.map.insert(Key(s.bytes), id);
                id
            }
        };
        if slot < RECENT_SLOTS {
            if self.recent.len() <= slot {
                self.recent.resize(slot + 1, (&[], u32::MAX));
            }
            if let Some(r) = self.recent.get_mut(slot) {
                *r = (s.bytes, id);
            }
        }
        self.arena.get(id as usize).cloned()
    }
}

/// The remote write 2.0 symbol table; each symbol is validated and allocated on first use.
pub(crate) struct SymbolTable<'a> {
    symbols: Vec<&'a [u8]>,
    arcs: Vec<Option<Arc<str>>>,
}

impl<'a> SymbolTable<'a> {
    /// A table over the request's symbols, in order.
    pub(crate) fn new(symbols: Vec<&'a [u8]>) -> Self {
        let arcs = vec![None; symbols.len()];
        SymbolTable { symbols, arcs }
    }

    /// Number of symbols.
    pub(crate) fn len(&self) -> usize {
        self.symbols.len()
    }

    /// The symbol at `r`, or `None` if the reference is out of range.
    #[inline]
    pub(crate) fn get(&self, r: u64) -> Option<Str<'a>> {
        let i = u32::try_from(r).ok()?;
        let bytes = *self.symbols.get(i as usize)?;
        Some(Str { bytes, sym: i })
    }
}

impl<'a> StringTable<'a> for SymbolTable<'a> {
    #[inline]
    fn arc(&mut self, s: Str<'a>, _slot: usize) -> Option<Arc<str>> {
        let slot = self.arcs.get_mut(s.sym as usize)?;
        if let Some(a) = slot {
            return Some(a.clone());
        }
        let a: Arc<str> = Arc::from(std::str::from_utf8(s.bytes).ok()?);
        *slot = Some(a.clone());
        Some(a)
    }
}

/// Scratch space for one series' labels, reused across the series of a request.
#[derive(Default)]
pub(crate) struct SeriesLabels<'a> {
    pairs: Vec<(Str<'a>, Str<'a>)>,
}

impl<'a> SeriesLabels<'a> {
    /// Forgets the previous series.
    #[inline]
    pub(crate) fn clear(&mut self) {
        self.pairs.clear();
    }

    /// Number of pairs so far.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Adds a pair as it appears on the wire.
    #[inline]
    pub(crate) fn push(&mut self, name: Str<'a>, value: Str<'a>) {
        self.pairs.push((name, value));
    }

    /// Fails once there are more pairs than [`Limits::labels_per_series_max`]. Decoders call it
    /// while collecting, so a series with millions of labels is refused before it is buffered.
    #[inline]
    pub(crate) fn check_count(&self, limits: &Limits) -> Result<()> {
        if self.pairs.len() > limits.labels_per_series_max {
            return Err(Error::limit(LABELS_PER_SERIES_MAX, self.pairs.len(), limits.labels_per_series_max));
        }
        Ok(())
    }

    /// The `__name__` value, if there is one (for metadata of remote write 2.0).
    pub(crate) fn metric_name(&self) -> Option<Str<'a>> {
        self.pairs.iter().find(|(n, _)| crate::bytes::eq(n.bytes, METRIC_NAME.as_bytes())).map(|&(_, v)| v)
    }

    /// Validates the pairs and builds the label set (see the module doc for the rules).
    pub(crate) fn build(&mut self, table: &mut impl StringTable<'a>, limits: &Limits) -> Result<Labels> {
        self.check_count(limits)?;
        let mut sorted = true;
        let mut prev: &[u8] = &[];
        let mut non_empty = 0usize;
        for (name, value) in &self.pairs {
            if name.bytes.is_empty() {
                return Err(self.invalid("empty label name".into()));
            }
            if name.bytes.len() > limits.label_name_bytes_max {
                return Err(Error::limit(
                    LABEL_NAME_BYTES_MAX,
                    name.bytes.len(),
                    limits.label_name_bytes_max,
                ));
            }
            if value.bytes.len() > limits.label_value_bytes_max {
                return Err(Error::limit(
                    LABEL_VALUE_BYTES_MAX,
                    value.bytes.len(),
                    limits.label_value_bytes_max,
                ));
            }
            // Most names differ in their first byte: decide there without a `memcmp` call.
            sorted &= match (prev.first(), name.bytes.first()) {
                (Some(p), Some(n)) if p != n => p < n,
                _ => prev < name.bytes,
            };
            prev = name.bytes;
            non_empty += usize::from(!value.bytes.is_empty());
        }
        if !sorted {
            // Byte order of UTF-8 is code-point order, the order `Labels` keeps.
            self.pairs.sort_by(|a, b| a.0.bytes.cmp(b.0.bytes));
            if let Some(w) = self.pairs.windows(2).find(|w| matches!(w, [a, b] if a.0.bytes == b.0.bytes)) {
                let name =
                    w.first().map(|p| String::from_utf8_lossy(p.0.bytes).into_owned()).unwrap_or_default();
                return Err(self.invalid(format!("duplicate label name {name:?}")));
            }
        }
        match self.metric_name() {
            None => return Err(self.invalid("no __name__ label".into())),
            Some(v) if v.bytes.is_empty() => return Err(self.invalid("empty __name__ label".into())),
            Some(_) => {}
        }
        let mut labels = Vec::with_capacity(non_empty);
        for (i, &(name, value)) in self.pairs.iter().enumerate().filter(|(_, (_, v))| !v.bytes.is_empty()) {
            let (Some(n), Some(v)) = (table.arc(name, 2 * i), table.arc(value, 2 * i + 1)) else {
                return Err(self.invalid("label name or value is not valid UTF-8".into()));
            };
            labels.push(Label { name: n, value: v });
        }
        Ok(Labels::from_sorted(labels))
    }

    fn invalid(&self, reason: String) -> Error {
        Error::InvalidLabels { series: render(&self.pairs), reason }
    }
}

/// Longest rendering of a series in an error message; senders log the message as is.
const RENDER_MAX: usize = 512;

/// Prometheus notation for error messages: `name{a="1", b="2"}`, lossy for invalid UTF-8 and
/// cut at [`RENDER_MAX`] bytes.
pub(crate) fn render(pairs: &[(Str<'_>, Str<'_>)]) -> String {
    use std::fmt::Write;
    let lossy = |s: &Str<'_>| String::from_utf8_lossy(s.bytes).into_owned();
    let mut out = String::new();
    if let Some((_, v)) = pairs.iter().find(|(n, _)| n.bytes == METRIC_NAME.as_bytes()) {
        out.push_str(&lossy(v));
    }
    out.push('{');
    let mut first = true;
    for (n, v) in pairs.iter().filter(|(n, _)| n.bytes != METRIC_NAME.as_bytes()) {
        if !first {
            out.push_str(", ");
        }
        first = false;
        let _ = write!(out, "{}={:?}", lossy(n), lossy(v));
        if out.len() > RENDER_MAX {
            break;
        }
    }
    out.push('}');
    if out.len() > RENDER_MAX {
        let mut cut = RENDER_MAX;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(pairs: &[(&str, &str)], limits: &Limits) -> Result<Labels> {
        let mut s = SeriesLabels::default();
        for (n, v) in pairs {
            s.push(Str::bytes(n.as_bytes()), Str::bytes(v.as_bytes()));
        }
        s.build(&mut Interner::default(), limits)
    }

    #[test]
    fn sorts_and_drops_empty_values() {
        let l = build(&[("job", "a"), ("__name__", "up"), ("empty", "")], &Limits::default()).unwrap();
        assert_eq!(l, Labels::from_pairs(&[("__name__", "up"), ("job", "a")]));
    }

    #[test]
    fn rejects_what_can_never_be_stored() {
        let d = Limits::default();
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[("job", "a")], "invalid labels in series {job=\"a\"}: no __name__ label"),
            (&[("__name__", ""), ("job", "a")], "invalid labels in series {job=\"a\"}: empty __name__ label"),
            (&[("__name__", "up"), ("", "a")], "invalid labels in series up{=\"a\"}: empty label name"),
            (
                &[("__name__", "up"), ("b", "1"), ("a", "2"), ("b", "3")],
                "invalid labels in series up{a=\"2\", b=\"1\", b=\"3\"}: duplicate label name \"b\"",
            ),
        ];
        for (pairs, want) in cases {
            assert_eq!(build(pairs, &d).unwrap_err().to_string(), *want);
        }
    }

    #[test]
    fn enforces_limits() {
        let small = Limits {
            labels_per_series_max: 2,
            label_name_bytes_max: 8,
            label_value_bytes_max: 4,
            ..Limits::default()
        };
        let err = |pairs: &[(&str, &str)]| match build(pairs, &small) {
            Err(Error::LimitExceeded { limit, .. }) => limit,
            other => panic!("{other:?}"),
        };
        assert_eq!(err(&[("__name__", "up"), ("a", "1"), ("b", "1")]), LABELS_PER_SERIES_MAX);
        assert_eq!(err(&[("__name__", "up"), ("abcdefghi", "1")]), LABEL_NAME_BYTES_MAX);
        assert_eq!(err(&[("__name__", "upupu")]), LABEL_VALUE_BYTES_MAX);
        // The limit counts labels as sent, empty values included.
        assert_eq!(err(&[("__name__", "up"), ("a", "1"), ("b", "")]), LABELS_PER_SERIES_MAX);
    }

    #[test]
    fn invalid_utf8_is_rejected() {
        let mut s = SeriesLabels::default();
        s.push(Str::bytes(b"__name__"), Str::bytes(b"up"));
        s.push(Str::bytes(b"job"), Str::bytes(b"\xff"));
        let err = s.build(&mut Interner::default(), &Limits::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid labels in series up{job=\"\u{fffd}\"}: label name or value is not valid UTF-8"
        );
    }

    #[test]
    fn render_is_bounded() {
        let long = "x".repeat(2000);
        let pairs = [(Str::bytes(b"__name__"), Str::bytes(long.as_bytes()))];
        assert!(render(&pairs).len() <= RENDER_MAX + 3);
    }
}

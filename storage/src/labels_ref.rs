//! [`LabelsRef`]: a label set borrowed as `(name, value)` string pairs.
//!
//! Ingest decoders find label strings inside a request buffer and WAL replay finds them inside a
//! record. Turning each into an owned [`Labels`] (an allocation per string and per set) cost more
//! than everything else in decoding, although nearly every series is already known to the index.
//! So decoders hand storage borrowed pairs, the index looks the series up by them (hashing and
//! comparing the strings where they lie), and only a brand-new series is copied into an owned,
//! interned [`Labels`].
//!
//! A `LabelsRef` follows the rules of [`Labels`]: pairs sorted by name, names unique, no empty
//! value. [`normalize_tail`] applies them to pairs that may not (the same way [`Labels::new`]
//! does), so borrowed and owned input name the same series.

use std::fmt;

use crate::error::{Error, Result};
use crate::types::{Label, Labels, METRIC_NAME};

/// One label as borrowed strings: `(name, value)`.
pub type LabelPair<'a> = (&'a str, &'a str);

/// A borrowed label set: sorted by name, names unique, values non-empty (the rules of
/// [`Labels`]). `Copy`: it is two words.
#[derive(Clone, Copy, Default)]
pub struct LabelsRef<'a>(&'a [LabelPair<'a>]);

impl<'a> LabelsRef<'a> {
    /// `pairs` as a label set, or `None` if they break the rules (unsorted, a duplicate name or
    /// an empty value). [`crate::BatchRef::push`] sorts and filters instead of refusing.
    pub fn new(pairs: &'a [LabelPair<'a>]) -> Option<Self> {
        follows_rules(pairs).then_some(LabelsRef(pairs))
    }

    /// Wraps pairs that the caller has checked with [`follows_rules`] or built by
    /// [`normalize_tail`].
    pub(crate) fn new_unchecked(pairs: &'a [LabelPair<'a>]) -> Self {
        debug_assert!(follows_rules(pairs), "label pairs break the rules: {pairs:?}");
        LabelsRef(pairs)
    }

    /// The pairs in name order.
    pub fn pairs(&self) -> &'a [LabelPair<'a>] {
        self.0
    }

    /// The pairs in name order, as an iterator.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = LabelPair<'a>> + Clone + 'a {
        self.0.iter().copied()
    }

    /// Number of pairs.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True if there are no labels.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value of label `name`, if present.
    pub fn get(&self, name: &str) -> Option<&'a str> {
        let i = self.0.binary_search_by(|(n, _)| (*n).cmp(name)).ok()?;
        self.0.get(i).map(|(_, v)| *v)
    }

    /// The metric name (`__name__`), if present.
    pub fn metric_name(&self) -> Option<&'a str> {
        self.get(METRIC_NAME)
    }

    /// An owned copy (one allocation per string): for a new series, or an error message.
    pub fn to_labels(&self) -> Labels {
        Labels::from_sorted_iter(self.0.iter().map(|(n, v)| Label::new(*n, *v)))
    }
}

impl PartialEq<Labels> for LabelsRef<'_> {
    fn eq(&self, other: &Labels) -> bool {
        self.len() == other.len()
            && self.0.iter().zip(other.iter()).all(|((n, v), l)| *n == &*l.name && *v == &*l.value)
    }
}

impl PartialEq<LabelsRef<'_>> for Labels {
    fn eq(&self, other: &LabelsRef<'_>) -> bool {
        other == self
    }
}

impl PartialEq for LabelsRef<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl Eq for LabelsRef<'_> {}

impl fmt::Debug for LabelsRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Prometheus' notation, as [`Labels`] prints: `name{a="1", b="2"}`.
impl fmt::Display for LabelsRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(n) = self.metric_name() {
            f.write_str(n)?;
        }
        f.write_str("{")?;
        for (i, (n, v)) in self.iter().filter(|(n, _)| *n != METRIC_NAME).enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{n}={v:?}")?;
        }
        f.write_str("}")
    }
}

/// One label as borrowed bytes that may not have been checked as UTF-8: `(name, value)`.
pub type RawPair<'a> = (&'a [u8], &'a [u8]);

/// A borrowed label set as a [`crate::BatchRef`] carries it: the rules of [`LabelsRef`] hold
/// (sorted by name, names unique, values non-empty), but the strings may be unchecked bytes.
///
/// Checking label strings as UTF-8 was a tenth of decoding a remote-write request, and nearly
/// every series of a request is already known: bytes equal to a stored series' labels are valid
/// UTF-8 because the stored strings are. So a decoder may hand over bytes, the index looks the
/// series up by them, and only the labels of a new series are checked
/// ([`RawLabels::to_str_pairs`]), when storage creates it.
#[derive(Clone, Copy, Default)]
pub struct RawLabels<'a>(&'a [RawPair<'a>]);

impl<'a> RawLabels<'a> {
    /// `pairs` as a label set, or `None` if they break the rules (unsorted, a duplicate name or
    /// an empty value). UTF-8 is not checked.
    pub fn new(pairs: &'a [RawPair<'a>]) -> Option<Self> {
        follows_rules(pairs).then_some(RawLabels(pairs))
    }

    /// Wraps pairs that follow the rules (checked or built by [`normalize_tail`]).
    pub(crate) fn new_unchecked(pairs: &'a [RawPair<'a>]) -> Self {
        debug_assert!(follows_rules(pairs), "label pairs break the rules: {pairs:?}");
        RawLabels(pairs)
    }

    /// The pairs in name order.
    pub fn pairs(&self) -> &'a [RawPair<'a>] {
        self.0
    }

    /// The pairs in name order, as an iterator.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = RawPair<'a>> + Clone + 'a {
        self.0.iter().copied()
    }

    /// Number of pairs.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True if there are no labels.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value of label `name`, if present.
    pub fn get(&self, name: &str) -> Option<&'a [u8]> {
        let i = self.0.binary_search_by(|(n, _)| (*n).cmp(name.as_bytes())).ok()?;
        self.0.get(i).map(|(_, v)| *v)
    }

    /// The pairs as strings, or [`Error::InvalidLabels`] if one is not UTF-8: the check a new
    /// series needs before storage keeps it.
    pub fn to_str_pairs(&self) -> Result<Vec<LabelPair<'a>>> {
        let mut out = Vec::with_capacity(self.0.len());
        for &(name, value) in self.0 {
            match (std::str::from_utf8(name), std::str::from_utf8(value)) {
                (Ok(n), Ok(v)) => out.push((n, v)),
                _ => {
                    return Err(Error::InvalidLabels {
                        series: self.render(RENDER_MAX),
                        reason: "label name or value is not valid UTF-8".into(),
                    });
                }
            }
        }
        Ok(out)
    }

    /// An owned copy, or [`Error::InvalidLabels`] if a string is not UTF-8.
    pub fn to_labels(&self) -> Result<Labels> {
        Ok(LabelsRef::new_unchecked(&self.to_str_pairs()?).to_labels())
    }

    /// An owned copy with invalid UTF-8 replaced by U+FFFD: for messages about a series
    /// storage has resolved (whose bytes are a stored series' valid strings, so nothing is
    /// replaced).
    pub fn to_labels_lossy(&self) -> Labels {
        let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        Labels::from_sorted_iter(self.0.iter().map(|(n, v)| Label::new(lossy(n), lossy(v))))
    }

    /// Prometheus notation, lossy, cut after about `max` bytes (with `...`).
    pub fn render(&self, max: usize) -> String {
        render_raw(self.iter(), max)
    }
}

/// Label pairs in Prometheus' notation for an error message, as [`RawLabels`] prints them
/// (metric name first, invalid UTF-8 as U+FFFD), cut after `max` bytes with `...`. Formatting
/// stops once past `max`, so a huge label set costs little. For pairs that need not follow
/// the rules of [`LabelsRef`] (a decoder's error about a series it refuses).
pub fn render_raw<'a>(pairs: impl Iterator<Item = RawPair<'a>> + Clone, max: usize) -> String {
    use std::fmt::Write;
    let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let name = METRIC_NAME.as_bytes();
    let mut out = String::new();
    if let Some((_, v)) = pairs.clone().find(|(n, _)| *n == name) {
        out.push_str(&lossy(v));
    }
    out.push('{');
    for (i, (n, v)) in pairs.filter(|(n, _)| *n != name).enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{}={:?}", lossy(n), lossy(v));
        if out.len() > max {
            break;
        }
    }
    out.push('}');
    if out.len() > max {
        let mut cut = max;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push_str("...");
    }
    out
}

/// Longest rendering of a series in an error message (senders log the message as is).
const RENDER_MAX: usize = 512;

impl PartialEq<Labels> for RawLabels<'_> {
    fn eq(&self, other: &Labels) -> bool {
        self.len() == other.len()
            && self
                .0
                .iter()
                .zip(other.iter())
                .all(|((n, v), l)| *n == l.name.as_bytes() && *v == l.value.as_bytes())
    }
}

impl PartialEq<RawLabels<'_>> for Labels {
    fn eq(&self, other: &RawLabels<'_>) -> bool {
        other == self
    }
}

impl PartialEq<LabelsRef<'_>> for RawLabels<'_> {
    fn eq(&self, other: &LabelsRef<'_>) -> bool {
        self.len() == other.len()
            && self
                .0
                .iter()
                .zip(other.iter())
                .all(|((n, v), (m, w))| *n == m.as_bytes() && *v == w.as_bytes())
    }
}

impl PartialEq for RawLabels<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl Eq for RawLabels<'_> {}

impl fmt::Debug for RawLabels<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Prometheus' notation as [`Labels`] prints, invalid UTF-8 shown as U+FFFD.
impl fmt::Display for RawLabels<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = METRIC_NAME.as_bytes();
        if let Some(n) = self.get(METRIC_NAME) {
            f.write_str(&String::from_utf8_lossy(n))?;
        }
        f.write_str("{")?;
        for (i, (n, v)) in self.iter().filter(|(n, _)| *n != name).enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{}={:?}", String::from_utf8_lossy(n), String::from_utf8_lossy(v))?;
        }
        f.write_str("}")
    }
}

/// True if `pairs` are sorted by name with unique names and no empty value. For string and
/// byte pairs alike: byte order of UTF-8 is code-point order.
#[inline]
pub fn follows_rules<S: AsRef<[u8]> + Copy>(pairs: &[(S, S)]) -> bool {
    let Some((&(mut prev, first_value), rest)) = pairs.split_first() else { return true };
    if first_value.as_ref().is_empty() {
        return false;
    }
    for &(name, value) in rest {
        if value.as_ref().is_empty() || !name_less(prev.as_ref(), name.as_ref()) {
            return false;
        }
        prev = name;
    }
    true
}

/// `a < b`, deciding on the first byte where it differs (most names do) without a `memcmp` call.
#[inline]
pub(crate) fn name_less(a: &[u8], b: &[u8]) -> bool {
    match (a.first(), b.first()) {
        (Some(x), Some(y)) if x != y => x < y,
        _ => a < b,
    }
}

/// Makes `pairs[start..]` follow the rules the way [`Labels::new`] does: drops pairs with an
/// empty value, sorts by name (stably) and keeps the last of duplicate names. Cheap when they
/// already follow them (one pass, no allocation).
#[inline]
pub(crate) fn normalize_tail<S: AsRef<[u8]> + Copy>(pairs: &mut Vec<(S, S)>, start: usize) {
    if !pairs.get(start..).is_none_or(follows_rules) {
        normalize_tail_slow(pairs, start);
    }
}

#[cold]
pub(crate) fn normalize_tail_slow<S: AsRef<[u8]> + Copy>(pairs: &mut Vec<(S, S)>, start: usize) {
    let mut tail = pairs.split_off(start);
    tail.retain(|(_, v)| !v.as_ref().is_empty());
    tail.sort_by(|a, b| a.0.as_ref().cmp(b.0.as_ref()));
    for pair in tail {
        let in_tail = pairs.len() > start;
        match pairs.last_mut() {
            Some(prev) if in_tail && prev.0.as_ref() == pair.0.as_ref() => *prev = pair,
            _ => pairs.push(pair),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rules_are_checked() {
        assert!(LabelsRef::new(&[("a", "1"), ("b", "2")]).is_some());
        assert!(LabelsRef::new(&[]).is_some());
        assert!(LabelsRef::new(&[("b", "1"), ("a", "2")]).is_none());
        assert!(LabelsRef::new(&[("a", "1"), ("a", "2")]).is_none());
        assert!(LabelsRef::new(&[("a", "")]).is_none());
    }

    #[test]
    fn reads_and_prints_like_labels() {
        let pairs = [("__name__", "up"), ("instance", "h:1"), ("job", "a\"b")];
        let r = LabelsRef::new(&pairs).unwrap();
        let owned = Labels::from_pairs(&pairs);
        assert_eq!(r.to_labels(), owned);
        assert_eq!(r, owned);
        assert_eq!(owned, r);
        assert_eq!(r.to_string(), owned.to_string());
        assert_eq!(format!("{r:?}"), format!("{owned:?}"));
        assert_eq!(r.get("job"), Some("a\"b"));
        assert_eq!(r.get("zone"), None);
        assert_eq!(r.metric_name(), Some("up"));
        assert_ne!(LabelsRef::new(&pairs[..2]).unwrap(), owned);
    }

    #[test]
    fn normalizing_keeps_what_precedes_the_tail() {
        let mut pairs = vec![("z", "first series"), ("b", "2"), ("a", "1"), ("b", "3"), ("c", "")];
        normalize_tail(&mut pairs, 1);
        assert_eq!(pairs, vec![("z", "first series"), ("a", "1"), ("b", "3")]);
        // A duplicate of the last pair before the tail is not merged into it.
        let mut pairs = vec![("a", "x"), ("a", "y")];
        normalize_tail(&mut pairs, 1);
        assert_eq!(pairs, vec![("a", "x"), ("a", "y")]);
    }

    proptest! {
        /// Borrowed pairs normalized name the same series as `Labels::new` builds from them.
        #[test]
        fn normalizing_agrees_with_labels_new(
            raw in proptest::collection::vec(("[a-d]{0,2}", "[xy]{0,1}"), 0..8),
        ) {
            let mut pairs: Vec<LabelPair<'_>> = raw.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            normalize_tail(&mut pairs, 0);
            let r = LabelsRef::new(&pairs).expect("normalized pairs follow the rules");
            prop_assert_eq!(r.to_labels(), Labels::from_pairs(&raw));
        }
    }
}

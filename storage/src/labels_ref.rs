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

/// True if `pairs` are sorted by name with unique names and no empty value.
#[inline]
pub fn follows_rules(pairs: &[LabelPair<'_>]) -> bool {
    let Some((&(mut prev, first_value), rest)) = pairs.split_first() else { return true };
    if first_value.is_empty() {
        return false;
    }
    for &(name, value) in rest {
        if value.is_empty() || !name_less(prev, name) {
            return false;
        }
        prev = name;
    }
    true
}

/// `a < b`, deciding on the first byte where it differs (most names do) without a `memcmp` call.
#[inline]
pub(crate) fn name_less(a: &str, b: &str) -> bool {
    match (a.as_bytes().first(), b.as_bytes().first()) {
        (Some(x), Some(y)) if x != y => x < y,
        _ => a < b,
    }
}

/// Makes `pairs[start..]` follow the rules the way [`Labels::new`] does: drops pairs with an
/// empty value, sorts by name (stably) and keeps the last of duplicate names. Cheap when they
/// already follow them (one pass, no allocation).
#[inline]
pub(crate) fn normalize_tail(pairs: &mut Vec<LabelPair<'_>>, start: usize) {
    if !pairs.get(start..).is_none_or(follows_rules) {
        normalize_tail_slow(pairs, start);
    }
}

#[cold]
pub(crate) fn normalize_tail_slow(pairs: &mut Vec<LabelPair<'_>>, start: usize) {
    let mut tail = pairs.split_off(start);
    tail.retain(|(_, v)| !v.is_empty());
    tail.sort_by(|a, b| a.0.cmp(b.0));
    for pair in tail {
        let in_tail = pairs.len() > start;
        match pairs.last_mut() {
            Some(prev) if in_tail && prev.0 == pair.0 => *prev = pair,
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

//! Turning a series' label pairs, as borrowed from the request, into validated label pairs
//! that still borrow the request's bytes (a [`storage::LabelsRef`] once pushed into the batch).
//!
//! Rules (both protocol versions): at most `labels_per_series_max` pairs as sent; names must be
//! non-empty and unique; a `__name__` label must be present with a non-empty value; pairs with
//! an empty value are dropped (Prometheus treats an empty value as an absent label); names and values must be valid UTF-8 (any UTF-8 is accepted
//! in names, as remote write 2.0 and Prometheus 3 allow); pairs are sorted by name because senders
//! may not sort them. No string is copied: validating UTF-8 is the only work per string, done
//! once per series' stretch of labels in 1.0 and once per symbol in 2.0. (A 1.0 series in the
//! usual encoding does not come here: `v1::series_fast` leaves its UTF-8 check to storage.)

use storage::{LabelPair, METRIC_NAME};

use crate::limits::{LABEL_NAME_BYTES_MAX, LABEL_VALUE_BYTES_MAX, LABELS_PER_SERIES_MAX};
use crate::{Error, Limits, Result};

/// A string of the request: its bytes and, in remote write 2.0, its index in the symbol table
/// (which makes remembering its validation an array lookup).
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

/// Where validated strings come from: `None` means the bytes are not UTF-8.
pub(crate) trait StringTable<'a> {
    /// `s` as a `&str` borrowed from the request, validated as UTF-8 unless the table knows
    /// the same bytes are valid.
    fn str(&mut self, s: Str<'a>) -> Option<&'a str>;
}

/// Validates the strings of remote write 1.0, series by series.
///
/// A sender writes a series' labels one after another, so its strings lie in one short stretch
/// of the request with only tags and one-byte lengths between them (ASCII, so valid UTF-8).
/// Validating that stretch once ([`Utf8Span::set`]) and slicing each string out of it (a
/// bounds and char-boundary check) is several times faster than validating each string. A
/// string outside the stretch, or a stretch that is not UTF-8 (a length of 128 or more), is
/// validated alone.
#[derive(Default)]
pub(crate) struct Utf8Span<'a> {
    /// The current series' stretch, if valid UTF-8, with its address.
    span: Option<(&'a str, usize)>,
}

impl<'a> Utf8Span<'a> {
    /// A validator with no stretch yet.
    pub(crate) fn new() -> Self {
        Utf8Span::default()
    }

    /// Validates `stretch`, the bytes that hold the next series' labels.
    pub(crate) fn set(&mut self, stretch: &'a [u8]) {
        self.span = simdutf8::basic::from_utf8(stretch).ok().map(|s| (s, s.as_ptr() as usize));
    }
}

impl<'a> StringTable<'a> for Utf8Span<'a> {
    #[inline]
    fn str(&mut self, s: Str<'a>) -> Option<&'a str> {
        // Same address, same bytes: a string inside the stretch is the stretch's slice there.
        if let Some((span, at)) = self.span
            && let Some(off) = (s.bytes.as_ptr() as usize).checked_sub(at)
            && let Some(valid) = span.get(off..off + s.bytes.len())
        {
            return Some(valid);
        }
        std::str::from_utf8(s.bytes).ok()
    }
}

/// The remote write 2.0 symbol table; each symbol is validated on first use.
pub(crate) struct SymbolTable<'a> {
    symbols: Vec<&'a [u8]>,
    valid: Vec<Option<&'a str>>,
}

impl<'a> SymbolTable<'a> {
    /// A table over the request's symbols, in order.
    pub(crate) fn new(symbols: Vec<&'a [u8]>) -> Self {
        let valid = vec![None; symbols.len()];
        SymbolTable { symbols, valid }
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
    fn str(&mut self, s: Str<'a>) -> Option<&'a str> {
        let slot = self.valid.get_mut(s.sym as usize)?;
        if let Some(v) = slot {
            return Some(v);
        }
        let v = std::str::from_utf8(s.bytes).ok()?;
        *slot = Some(v);
        Some(v)
    }
}

/// Scratch space for one series' labels, reused across the series of a request.
#[derive(Default)]
pub(crate) struct SeriesLabels<'a> {
    /// As sent.
    pairs: Vec<(Str<'a>, Str<'a>)>,
    /// Validated, sorted, empty values dropped: what [`SeriesLabels::validate`] returns.
    valid: Vec<LabelPair<'a>>,
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

    /// Validates the pairs (see the module doc for the rules) and returns them sorted by name,
    /// without empty values, as strings borrowed from the request.
    pub(crate) fn validate(
        &mut self,
        table: &mut impl StringTable<'a>,
        limits: &Limits,
    ) -> Result<&[LabelPair<'a>]> {
        self.check_count(limits)?;
        let mut sorted = true;
        let mut prev: &[u8] = &[];
        let mut metric_name: Option<&[u8]> = None;
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
            if metric_name.is_none() && crate::bytes::eq(name.bytes, METRIC_NAME.as_bytes()) {
                metric_name = Some(value.bytes);
            }
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
        match metric_name {
            None => return Err(self.invalid("no __name__ label".into())),
            Some([]) => return Err(self.invalid("empty __name__ label".into())),
            Some(_) => {}
        }
        self.valid.clear();
        for &(name, value) in self.pairs.iter().filter(|(_, v)| !v.bytes.is_empty()) {
            let (Some(n), Some(v)) = (table.str(name), table.str(value)) else {
                return Err(self.invalid("label name or value is not valid UTF-8".into()));
            };
            self.valid.push((n, v));
        }
        Ok(&self.valid)
    }

    fn invalid(&self, reason: String) -> Error {
        Error::InvalidLabels { series: render(&self.pairs), reason }
    }
}

/// Longest rendering of a series in an error message; senders log the message as is.
const RENDER_MAX: usize = 512;

/// Prometheus notation for error messages: `name{a="1", b="2"}`, lossy for invalid UTF-8 and
/// cut at [`RENDER_MAX`] bytes (storage's renderer of raw label pairs).
pub(crate) fn render(pairs: &[(Str<'_>, Str<'_>)]) -> String {
    storage::labels_ref::render_raw(pairs.iter().map(|(n, v)| (n.bytes, v.bytes)), RENDER_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use storage::Labels;

    fn build(pairs: &[(&str, &str)], limits: &Limits) -> Result<Labels> {
        let mut s = SeriesLabels::default();
        for (n, v) in pairs {
            s.push(Str::bytes(n.as_bytes()), Str::bytes(v.as_bytes()));
        }
        let valid = s.validate(&mut Utf8Span::new(), limits)?;
        Ok(storage::LabelsRef::new(valid).expect("validated pairs follow the rules").to_labels())
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
        let err = s.validate(&mut Utf8Span::new(), &Limits::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid labels in series up{job=\"\u{fffd}\"}: label name or value is not valid UTF-8"
        );
    }

    #[test]
    fn strings_come_from_a_validated_stretch_or_alone() {
        // A stretch of two pairs with framing bytes between them, then a non-UTF-8 byte.
        let request = b"\x0a\x03job\x12\x01a\x0a\x02up\xffbad\xfe".to_vec();
        let at = |from: usize, len: usize| Str::bytes(&request[from..from + len]);
        let (job, up, bad) = (at(2, 3), at(10, 2), at(13, 4));
        let mut table = Utf8Span::new();
        table.set(&request[..12]);
        assert_eq!(table.str(job), Some("job"));
        let up_str = table.str(up).unwrap();
        assert_eq!(up_str, "up");
        assert!(std::ptr::eq(up_str.as_ptr(), request[10..].as_ptr()));
        // Outside the stretch: validated alone.
        assert_eq!(table.str(Str::bytes(b"elsewhere")), Some("elsewhere"));
        assert_eq!(table.str(bad), None);
        // A stretch that is not UTF-8: each string is validated alone.
        table.set(&request);
        assert_eq!(table.str(up), Some("up"));
        assert_eq!(table.str(bad), None);
    }

    #[test]
    fn render_is_bounded() {
        let long = "x".repeat(2000);
        let pairs = [(Str::bytes(b"__name__"), Str::bytes(long.as_bytes()))];
        assert!(render(&pairs).len() <= RENDER_MAX + 3);
    }
}

//! From scanned points to series: the naming rules and a per-request cache.
//!
//! Naming (the same rules as Telegraf's Prometheus output):
//! * metric name `<measurement>_<field key>`, or just `<measurement>` for a field named `value`;
//! * every tag becomes a label; tag values are kept as they are (any UTF-8);
//! * in metric names every character outside `[a-zA-Z0-9_:]`, and in label names every
//!   character outside `[a-zA-Z0-9_]`, becomes `_` (one per character, not per byte); a name
//!   that then starts with a digit gets a `_` prefix;
//! * a tag key that becomes `__name__`, two tag keys that become the same label name, an empty
//!   tag key or value, and names that are not valid UTF-8 make the line invalid.
//!
//! Unescaping: in the measurement `\,` and `\ `; in tag keys, tag values and field keys `\,`,
//! `\=` and `\ `. Any other backslash pair is kept as written (so `C:\Windows` survives).
//!
//! The cache maps the series key as written (measurement and tags, escapes intact) to a
//! group holding its parsed tags and one slot per field key, so a series that repeats in a
//! request is parsed and allocated once. A line touches little of its group's memory: field
//! keys become small ids by comparing with the previous line, the line's sequence of field ids
//! becomes a "layout" id, and when it equals the group's layout (the usual case: a series
//! always sends the same fields) field `i` is slot `i` without looking at the slots. Samples
//! are appended to the group's own buffer and scattered into exactly-sized per-series vectors
//! by [`SeriesCache::finish`].

use std::borrow::Cow;
use std::sync::Arc;

use storage::{Batch, Label, Labels, METRIC_NAME, Sample};

use super::scan::Value;
use crate::limits::{LABEL_NAME_BYTES_MAX, LABEL_VALUE_BYTES_MAX, LABELS_PER_SERIES_MAX};
use crate::{Error, Limits};

/// Bytes a backslash escapes in a measurement.
const MEASUREMENT_ESCAPES: &[u8] = b", ";
/// Bytes a backslash escapes in tag keys, tag values and field keys.
const KEY_ESCAPES: &[u8] = b",= ";

/// Per-request state: parsed series keys, field keys, layouts and interned strings.
#[derive(Default)]
pub(crate) struct SeriesCache<'a> {
    /// Series key as written -> index in `groups`.
    index: hashbrown::HashMap<&'a [u8], u32>,
    /// In order of first appearance, which is the order of the batch.
    groups: Vec<Group>,
    /// Field key as written -> field id (index in `field_keys`).
    field_ids: hashbrown::HashMap<&'a [u8], u32>,
    field_keys: Vec<&'a [u8]>,
    /// The last line that used each field id (wrapping at 2^32), to reject a field repeated
    /// within a line.
    field_last_line: Vec<u32>,
    /// `(key, field id)` by position in the previous line: lines usually repeat their keys,
    /// and comparing with bytes just scanned is cheaper than hashing.
    previous_fields: Vec<(&'a [u8], u32)>,
    /// Sequence of field ids -> layout id.
    layouts: hashbrown::HashMap<Box<[u32]>, u32>,
    /// The numeric field ids of the line being added, and of the previous line with its layout.
    line_fields: Vec<u32>,
    previous_layout: Option<(Vec<u32>, u32)>,
    /// `(group, field id)` -> slot, for lines whose layout is not their group's.
    slot_index: hashbrown::HashMap<(u32, u32), u32>,
    /// `(interned measurement's address, field id)` -> metric name.
    metric_names: hashbrown::HashMap<(usize, u32), Arc<str>>,
    strings: hashbrown::HashSet<Arc<str>>,
    /// Values of the numeric fields of the line being added.
    values: Vec<f64>,
    /// Slots of the line being added (slow path only).
    slots: Vec<u32>,
}

/// One series key: a measurement with its tags, and the series of its fields seen so far.
struct Group {
    /// Interned: its address identifies it in `SeriesCache::metric_names`.
    measurement: Arc<str>,
    /// Sorted by name, unique.
    tags: Vec<Label>,
    /// The layout id of `slots`' field ids, in order.
    layout: u32,
    /// `(field id, labels)`, one per field of the group, in order of first appearance.
    slots: Vec<(u32, Labels)>,
    /// `(slot, sample)` in arrival order.
    samples: Vec<(u32, Sample)>,
}

/// Counts of what one accepted line added.
pub(crate) struct Added {
    /// Numeric fields stored as samples.
    pub(crate) fields: u64,
    /// String fields skipped.
    pub(crate) skipped: u64,
}

impl<'a> SeriesCache<'a> {
    /// Adds one point's numeric fields at `t_ms`. Either the whole line is added or, on error,
    /// nothing.
    pub(crate) fn add(
        &mut self,
        key: &'a [u8],
        fields: &[(&'a [u8], Value)],
        t_ms: i64,
        line: usize,
        limits: &Limits,
    ) -> Result<Added, String> {
        let gi = match self.index.get(key) {
            Some(&gi) => gi as usize,
            None => {
                let group = new_group(key, &mut self.strings, limits)?;
                let gi = self.groups.len();
                self.groups.push(group);
                self.index.insert(key, u32::try_from(gi).map_err(|_| "too many series".to_string())?);
                gi
            }
        };
        // Field ids, duplicates and values first, so an error leaves the group untouched.
        self.line_fields.clear();
        self.values.clear();
        let mut skipped = 0u64;
        for (pos, &(fkey, value)) in fields.iter().enumerate() {
            let Value::Num(v) = value else {
                skipped += 1;
                continue;
            };
            let field = self.field_id(pos, fkey);
            let Some(last) = self.field_last_line.get_mut(field as usize) else { continue };
            if *last == line as u32 {
                return Err(format!("field {:?} appears twice", super::snippet(fkey)));
            }
            *last = line as u32;
            self.line_fields.push(field);
            self.values.push(v);
        }
        let layout = self.line_layout();
        let fast = self.groups.get(gi).is_some_and(|g| g.layout == layout);
        if !fast {
            self.resolve_slots(gi, limits)?;
        }
        let Some(group) = self.groups.get_mut(gi) else { return Err("internal: missing group".into()) };
        if fast {
            // Field `i` of the line is slot `i` of the group.
            group
                .samples
                .extend(self.values.iter().enumerate().map(|(i, &v)| (i as u32, Sample::new(t_ms, v))));
        } else {
            group
                .samples
                .extend(self.slots.iter().zip(&self.values).map(|(&s, &v)| (s, Sample::new(t_ms, v))));
        }
        Ok(Added { fields: self.values.len() as u64, skipped })
    }

    /// The layout id of `line_fields`.
    #[inline]
    fn line_layout(&mut self) -> u32 {
        if let Some((fields, id)) = &self.previous_layout
            && *fields == self.line_fields
        {
            return *id;
        }
        let id = self.layout_id_of_line();
        self.previous_layout = Some((self.line_fields.clone(), id));
        id
    }

    fn layout_id_of_line(&mut self) -> u32 {
        if let Some(&id) = self.layouts.get(self.line_fields.as_slice()) {
            return id;
        }
        let id = self.layouts.len() as u32;
        self.layouts.insert(self.line_fields.clone().into_boxed_slice(), id);
        id
    }

    /// Finds (or creates) the slot of each field of the line in group `gi`, into `slots`.
    fn resolve_slots(&mut self, gi: usize, limits: &Limits) -> Result<(), String> {
        self.slots.clear();
        let mut created = false;
        for i in 0..self.line_fields.len() {
            let Some(&field) = self.line_fields.get(i) else { continue };
            let slot = match self.slot_index.get(&(gi as u32, field)) {
                Some(&slot) => slot,
                None => {
                    let slot = self.new_slot(gi, field, limits)?;
                    self.slot_index.insert((gi as u32, field), slot);
                    created = true;
                    slot
                }
            };
            self.slots.push(slot);
        }
        if created {
            // The group's fields changed: so did its layout.
            let fields: Vec<u32> =
                self.groups.get(gi).map(|g| g.slots.iter().map(|(f, _)| *f).collect()).unwrap_or_default();
            let id = match self.layouts.get(fields.as_slice()) {
                Some(&id) => id,
                None => {
                    let id = self.layouts.len() as u32;
                    self.layouts.insert(fields.into_boxed_slice(), id);
                    id
                }
            };
            if let Some(g) = self.groups.get_mut(gi) {
                g.layout = id;
            }
        }
        Ok(())
    }

    /// The id of field key `key`, the `pos`-th field of its line.
    #[inline]
    fn field_id(&mut self, pos: usize, key: &'a [u8]) -> u32 {
        if let Some(&(k, id)) = self.previous_fields.get(pos)
            && crate::bytes::eq(k, key)
        {
            return id;
        }
        let id = match self.field_ids.get(key) {
            Some(&id) => id,
            None => {
                let id = self.field_keys.len() as u32;
                self.field_keys.push(key);
                self.field_last_line.push(0);
                self.field_ids.insert(key, id);
                id
            }
        };
        if self.previous_fields.len() <= pos {
            self.previous_fields.resize(pos + 1, (&[], u32::MAX));
        }
        if let Some(p) = self.previous_fields.get_mut(pos) {
            *p = (key, id);
        }
        id
    }

    /// Adds the slot for `field` to group `gi` and returns its index.
    fn new_slot(&mut self, gi: usize, field: u32, limits: &Limits) -> Result<u32, String> {
        let Some(group) = self.groups.get(gi) else { return Err("internal: missing group".into()) };
        let cache_key = (Arc::as_ptr(&group.measurement) as *const u8 as usize, field);
        let name = match self.metric_names.get(&cache_key) {
            Some(n) => n.clone(),
            None => {
                let key = self.field_keys.get(field as usize).copied().unwrap_or_default();
                let field_name = unescape(key, KEY_ESCAPES);
                let name = metric_name(&group.measurement, str_of(&field_name, "field key")?);
                if name.len() > limits.label_value_bytes_max {
                    return Err(Error::limit(
                        LABEL_VALUE_BYTES_MAX,
                        name.len(),
                        limits.label_value_bytes_max,
                    )
                    .to_string());
                }
                let name = intern(&mut self.strings, &name);
                self.metric_names.insert(cache_key, name.clone());
                name
            }
        };
        let name_label = Label { name: intern(&mut self.strings, METRIC_NAME), value: name };
        let at = group.tags.partition_point(|l| l.name.as_ref() < METRIC_NAME);
        let mut labels = Vec::with_capacity(group.tags.len() + 1);
        labels.extend(group.tags.get(..at).unwrap_or_default().iter().cloned());
        labels.push(name_label);
        labels.extend(group.tags.get(at..).unwrap_or_default().iter().cloned());
        let Some(group) = self.groups.get_mut(gi) else { return Err("internal: missing group".into()) };
        group.slots.push((field, Labels::from_sorted(labels)));
        u32::try_from(group.slots.len() - 1).map_err(|_| "too many fields".to_string())
    }

    /// Moves the samples into `batch`: one entry per series, in order of first appearance.
    pub(crate) fn finish(self, batch: &mut Batch) {
        for group in self.groups {
            let mut counts = vec![0usize; group.slots.len()];
            for &(slot, _) in &group.samples {
                if let Some(c) = counts.get_mut(slot as usize) {
                    *c += 1;
                }
            }
            let mut per_slot: Vec<Vec<Sample>> = counts.into_iter().map(Vec::with_capacity).collect();
            for (slot, sample) in group.samples {
                if let Some(v) = per_slot.get_mut(slot as usize) {
                    v.push(sample);
                }
            }
            for ((_, labels), samples) in group.slots.into_iter().zip(per_slot) {
                if !samples.is_empty() {
                    batch.push(labels, samples);
                }
            }
        }
    }
}

/// Parses a series key into a group: measurement and validated, sanitized, sorted tags.
fn new_group(
    key: &[u8],
    strings: &mut hashbrown::HashSet<Arc<str>>,
    limits: &Limits,
) -> Result<Group, String> {
    let (measurement, mut rest) = match find_unescaped(key, b',') {
        Some(i) => (key.get(..i).unwrap_or_default(), Some(key.get(i + 1..).unwrap_or_default())),
        None => (key, None),
    };
    if measurement.is_empty() {
        return Err("missing measurement".into());
    }
    let measurement = intern(strings, str_of(&unescape(measurement, MEASUREMENT_ESCAPES), "measurement")?);
    let mut tags = Vec::new();
    while let Some(r) = rest {
        let (tag, next) = match find_unescaped(r, b',') {
            Some(i) => (r.get(..i).unwrap_or_default(), Some(r.get(i + 1..).unwrap_or_default())),
            None => (r, None),
        };
        rest = next;
        let Some(eq) = find_unescaped(tag, b'=') else {
            return Err(format!("missing '=' in tag {:?}", super::snippet(tag)));
        };
        let (k, v) = (tag.get(..eq).unwrap_or_default(), tag.get(eq + 1..).unwrap_or_default());
        if k.is_empty() {
            return Err("empty tag key".into());
        }
        if v.is_empty() {
            return Err(format!("missing value for tag {:?}", super::snippet(k)));
        }
        if find_unescaped(v, b'=').is_some() {
            return Err(format!("unescaped '=' in the value of tag {:?}", super::snippet(k)));
        }
        let k_unescaped = unescape(k, KEY_ESCAPES);
        let name = sanitize(str_of(&k_unescaped, "tag key")?, false);
        let v_unescaped = unescape(v, KEY_ESCAPES);
        let value = str_of(&v_unescaped, "tag value")?;
        if name.len() > limits.label_name_bytes_max {
            return Err(
                Error::limit(LABEL_NAME_BYTES_MAX, name.len(), limits.label_name_bytes_max).to_string()
            );
        }
        if value.len() > limits.label_value_bytes_max {
            return Err(
                Error::limit(LABEL_VALUE_BYTES_MAX, value.len(), limits.label_value_bytes_max).to_string()
            );
        }
        if name == METRIC_NAME {
            return Err(format!("tag key {:?} would overwrite the metric name", super::snippet(k)));
        }
        tags.push(Label { name: intern(strings, &name), value: intern(strings, value) });
    }
    if tags.len() + 1 > limits.labels_per_series_max {
        return Err(
            Error::limit(LABELS_PER_SERIES_MAX, tags.len() + 1, limits.labels_per_series_max).to_string()
        );
    }
    tags.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(w) = tags.windows(2).find(|w| matches!(w, [a, b] if a.name == b.name)) {
        let name = w.first().map(|l| l.name.to_string()).unwrap_or_default();
        return Err(format!("two tags map to the label name {name:?}"));
    }
    Ok(Group { measurement, tags, layout: u32::MAX, slots: Vec::new(), samples: Vec::new() })
}

/// The metric name for `field` of `measurement` (see the module doc).
pub fn metric_name(measurement: &str, field: &str) -> String {
    if field == "value" {
        return sanitize(measurement, true).into_owned();
    }
    sanitize(&format!("{measurement}_{field}"), true).into_owned()
}

/// The label name for a tag key (see the module doc).
pub fn label_name(key: &str) -> String {
    sanitize(key, false).into_owned()
}

/// Replaces characters outside `[a-zA-Z0-9_]` (plus `:` if `colon_ok`) with `_` and prefixes a
/// leading digit with `_`; borrows when nothing changes, which is the common case.
fn sanitize(s: &str, colon_ok: bool) -> Cow<'_, str> {
    let ok = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || (colon_ok && b == b':');
    let digit_first = s.starts_with(|c: char| c.is_ascii_digit());
    if !digit_first && s.bytes().all(ok) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 1);
    if digit_first {
        out.push('_');
    }
    out.extend(s.chars().map(|c| if c.is_ascii() && ok(c as u8) { c } else { '_' }));
    Cow::Owned(out)
}

/// Position of the first `c` not escaped by a backslash.
fn find_unescaped(s: &[u8], c: u8) -> Option<usize> {
    let mut i = 0;
    while let Some(&b) = s.get(i) {
        if b == c {
            return Some(i);
        }
        i += if b == b'\\' { 2 } else { 1 };
    }
    None
}

/// Removes the backslash of `\x` for `x` in `escapes`; other pairs are kept whole.
fn unescape<'s>(s: &'s [u8], escapes: &[u8]) -> Cow<'s, [u8]> {
    if !s.contains(&b'\\') {
        return Cow::Borrowed(s);
    }
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while let Some(&b) = s.get(i) {
        match (b, s.get(i + 1)) {
            (b'\\', Some(&n)) if escapes.contains(&n) => out.push(n),
            (b'\\', Some(&n)) => out.extend_from_slice(&[b'\\', n]),
            _ => {
                out.push(b);
                i += 1;
                continue;
            }
        }
        i += 2;
    }
    Cow::Owned(out)
}

fn str_of<'s>(b: &'s [u8], what: &str) -> Result<&'s str, String> {
    std::str::from_utf8(b).map_err(|_| format!("{what} is not valid UTF-8"))
}

fn intern(strings: &mut hashbrown::HashSet<Arc<str>>, s: &str) -> Arc<str> {
    if let Some(a) = strings.get(s) {
        return a.clone();
    }
    let a: Arc<str> = Arc::from(s);
    strings.insert(a.clone());
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitized() {
        assert_eq!(metric_name("cpu", "usage_user"), "cpu_usage_user");
        assert_eq!(metric_name("cpu", "value"), "cpu");
        assert_eq!(metric_name("net.if", "rx-bytes"), "net_if_rx_bytes");
        assert_eq!(metric_name("ns:sub", "a:b"), "ns:sub_a:b");
        assert_eq!(metric_name("2xx", "n"), "_2xx_n");
        assert_eq!(metric_name("température", "°C"), "temp_rature__C");
        assert_eq!(label_name("host-name"), "host_name");
        assert_eq!(label_name("a:b"), "a_b");
        assert_eq!(label_name("1st"), "_1st");
    }

    #[test]
    fn unescaping_keeps_unknown_pairs() {
        assert_eq!(&*unescape(br"a\,b\ c\=d", KEY_ESCAPES), b"a,b c=d");
        assert_eq!(&*unescape(br"a\=b", MEASUREMENT_ESCAPES), br"a\=b");
        assert_eq!(&*unescape(br"C:\Windows", KEY_ESCAPES), br"C:\Windows");
        assert_eq!(&*unescape(br"a\\", KEY_ESCAPES), br"a\\");
        assert_eq!(&*unescape(br"a\", KEY_ESCAPES), br"a\");
        assert_eq!(find_unescaped(br"a\,b,c", b','), Some(4));
    }
}

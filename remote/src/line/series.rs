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
//! Strings stay borrowed from the body: a tag is a slice of it unless unescaping or sanitizing
//! changed it, and only metric names `<measurement>_<field>` are built (once per measurement
//! and field in a request).
//!
//! The cache maps the series key as written (measurement and tags, escapes intact) to a
//! group holding its parsed tags and one slot per field key, so a series that repeats in a
//! request is parsed once. A line touches little of its group's memory: field keys become
//! small ids by comparing with the previous line, the line's sequence of field ids becomes a
//! "layout" id, and when it equals the group's layout (the usual case: a series always sends
//! the same fields) field `i` is slot `i` without looking at the slots. Samples are appended
//! to the group's own buffer and sorted into series by [`SeriesCache::batch`].

use std::borrow::Cow;

use storage::{BatchRef, LabelPair, METRIC_NAME, Sample};

use super::scan::Value;
use crate::limits::{LABEL_NAME_BYTES_MAX, LABEL_VALUE_BYTES_MAX, LABELS_PER_SERIES_MAX};
use crate::{Error, Limits};

/// Bytes a backslash escapes in a measurement.
const MEASUREMENT_ESCAPES: &[u8] = b", ";
/// Bytes a backslash escapes in tag keys, tag values and field keys.
const KEY_ESCAPES: &[u8] = b",= ";

/// A label string: borrowed from the body, or built when unescaping or sanitizing changed it.
type Text<'a> = Cow<'a, str>;

/// Per-request state: parsed series keys, field keys, layouts and metric names.
#[derive(Default)]
pub(crate) struct SeriesCache<'a> {
    /// Series key as written -> index in `groups`.
    index: hashbrown::HashMap<&'a [u8], u32>,
    /// In order of first appearance, which is the order of the batch.
    groups: Vec<Group>,
    /// The tags of every group, back to back (each group's sorted by name).
    tags: Vec<(Text<'a>, Text<'a>)>,
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
    /// Measurement as written -> measurement id (index in `measurements`: unescaped).
    measurements: Measurements<'a>,
    /// `(measurement id, field id)` -> index in `metric_names`.
    metric_name_ids: hashbrown::HashMap<(u32, u32), u32>,
    metric_names: Vec<Text<'a>>,
    /// Values of the numeric fields of the line being added.
    values: Vec<f64>,
    /// Slots of the line being added (slow path only).
    slots: Vec<u32>,
    /// Samples in all groups, for sizing a new group's buffer.
    samples_total: usize,
}

/// The distinct measurements of a request.
#[derive(Default)]
struct Measurements<'a> {
    /// As written (escapes intact) -> id.
    ids: hashbrown::HashMap<&'a [u8], u32>,
    /// Unescaped, by id.
    names: Vec<Text<'a>>,
    /// The last one looked up: lines of one measurement usually follow each other.
    last: Option<(&'a [u8], u32)>,
}

impl<'a> Measurements<'a> {
    /// The id of the measurement written as `raw`, unescaping and validating it if new.
    fn id(&mut self, raw: &'a [u8]) -> Result<u32, String> {
        if let Some((last, id)) = self.last
            && crate::bytes::eq(last, raw)
        {
            return Ok(id);
        }
        let id = match self.ids.get(raw) {
            Some(&id) => id,
            None => {
                let name = text(unescape(raw, MEASUREMENT_ESCAPES), "measurement")?;
                let id = u32::try_from(self.names.len()).map_err(|_| "too many measurements")?;
                self.names.push(name);
                self.ids.insert(raw, id);
                id
            }
        };
        self.last = Some((raw, id));
        Ok(id)
    }
}

/// One series key: a measurement with its tags, and the series of its fields seen so far.
struct Group {
    /// The measurement's id in [`Measurements`].
    measurement: u32,
    /// Its tags: `SeriesCache::tags[tags.0..tags.1]`.
    tags: (usize, usize),
    /// The layout id of `slots`' field ids, in order.
    layout: u32,
    /// `(field id, metric name id)`, one per field of the group, in order of first appearance.
    slots: Vec<(u32, u32)>,
    /// Whether `slots` are in `SeriesCache::slot_index`.
    indexed: bool,
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
        let gi = match self.index.entry(key) {
            hashbrown::hash_map::Entry::Occupied(e) => *e.get() as usize,
            hashbrown::hash_map::Entry::Vacant(e) => {
                let gi = self.groups.len();
                let id = u32::try_from(gi).map_err(|_| "too many series".to_string())?;
                let start = self.tags.len();
                // Senders batch a series' lines together (Telegraf by metric, TSBS by host), so
                // a new group is sized like the average group so far instead of doubling its way
                // up: the copies and page faults of that growth cost a tenth of parsing. Where
                // lines interleave, groups are created early, while the average is small.
                let hint = self.samples_total.checked_div(gi).unwrap_or(0);
                match parse_key(key, &mut self.tags, &mut self.measurements, limits) {
                    Ok(mut group) => {
                        group.samples.reserve_exact(hint);
                        self.groups.push(group)
                    }
                    Err(e) => {
                        self.tags.truncate(start);
                        return Err(e);
                    }
                }
                e.insert(id);
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
                // A field written twice in one line: InfluxDB keeps the last value.
                if let Some(i) = self.line_fields.iter().position(|&f| f == field)
                    && let Some(slot) = self.values.get_mut(i)
                {
                    *slot = v;
                }
                continue;
            }
            *last = line as u32;
            self.line_fields.push(field);
            self.values.push(v);
        }
        let layout = self.line_layout();
        let fast = match self.groups.get(gi) {
            Some(g) if g.layout == layout => true,
            // A new group: its slots are the line's fields, in order.
            Some(g) if g.slots.is_empty() => {
                for i in 0..self.line_fields.len() {
                    let Some(&field) = self.line_fields.get(i) else { continue };
                    self.new_slot(gi, field, limits)?;
                }
                if let Some(g) = self.groups.get_mut(gi) {
                    g.layout = layout;
                }
                true
            }
            _ => false,
        };
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
        self.samples_total += self.values.len();
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
        // Groups are indexed on their first line that needs it: most never do.
        if let Some(g) = self.groups.get_mut(gi)
            && !g.indexed
        {
            g.indexed = true;
            for (slot, &(field, _)) in g.slots.iter().enumerate() {
                self.slot_index.insert((gi as u32, field), slot as u32);
            }
        }
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
        let cache_key = (group.measurement, field);
        let name = match self.metric_name_ids.get(&cache_key) {
            Some(&name) => name,
            None => {
                let key = self.field_keys.get(field as usize).copied().unwrap_or_default();
                let field_name = text(unescape(key, KEY_ESCAPES), "field key")?;
                let measurement = self.measurements.names.get(group.measurement as usize);
                let name = metric_name_text(measurement.unwrap_or(&Cow::Borrowed("")), &field_name);
                if name.len() > limits.label_value_bytes_max {
                    return Err(Error::limit(
                        LABEL_VALUE_BYTES_MAX,
                        name.len(),
                        limits.label_value_bytes_max,
                    )
                    .to_string());
                }
                let id = u32::try_from(self.metric_names.len()).map_err(|_| "too many metric names")?;
                self.metric_names.push(name);
                self.metric_name_ids.insert(cache_key, id);
                id
            }
        };
        let Some(group) = self.groups.get_mut(gi) else { return Err("internal: missing group".into()) };
        group.slots.push((field, name));
        u32::try_from(group.slots.len() - 1).map_err(|_| "too many fields".to_string())
    }

    /// The series of the request: one entry per group and field, groups in order of first
    /// appearance, each with its samples in arrival order. Label strings are borrowed from the
    /// body or from this cache.
    pub(crate) fn batch(&self) -> BatchRef<'_> {
        let series = self.groups.iter().map(|g| g.slots.len()).sum();
        let labels = self.groups.iter().map(|g| g.slots.len() * (g.tags.1 - g.tags.0 + 1)).sum();
        let samples = self.groups.iter().map(|g| g.samples.len()).sum();
        let mut batch = BatchRef::with_capacity(series, labels, samples);
        // A group's samples sorted by slot (stably: arrival order within a slot).
        let mut sorted: Vec<Sample> = Vec::new();
        let mut ends: Vec<usize> = Vec::new();
        for group in &self.groups {
            ends.clear();
            ends.resize(group.slots.len(), 0);
            for &(slot, _) in &group.samples {
                if let Some(n) = ends.get_mut(slot as usize) {
                    *n += 1;
                }
            }
            // Counts to starts: `ends[i]` is where slot `i` starts, and after the scatter below
            // where it ends.
            let mut at = 0;
            for n in ends.iter_mut() {
                (*n, at) = (at, at + *n);
            }
            sorted.clear();
            sorted.resize(at, Sample::new(0, 0.0));
            for &(slot, sample) in &group.samples {
                if let Some(end) = ends.get_mut(slot as usize) {
                    if let Some(s) = sorted.get_mut(*end) {
                        *s = sample;
                    }
                    *end += 1;
                }
            }
            let tags = self.tags.get(group.tags.0..group.tags.1).unwrap_or_default();
            // `__name__` sorts among the tags: before lowercase names, after uppercase ones.
            let at_name = tags.partition_point(|(n, _)| n.as_ref() < METRIC_NAME);
            let (before, after) = tags.split_at(at_name);
            let mut start = 0;
            for (&(_, name), &end) in group.slots.iter().zip(&ends) {
                let samples = sorted.get(start..end).unwrap_or_default();
                start = end;
                let Some(name) = self.metric_names.get(name as usize) else { continue };
                if samples.is_empty() {
                    continue;
                }
                let labels = before
                    .iter()
                    .map(pair)
                    .chain(std::iter::once((METRIC_NAME, name.as_ref())))
                    .chain(after.iter().map(pair));
                batch.push(labels, samples.iter().copied());
            }
        }
        batch
    }
}

/// A tag as borrowed string pair.
fn pair<'s>((name, value): &'s (Text<'_>, Text<'_>)) -> LabelPair<'s> {
    (name.as_ref(), value.as_ref())
}

/// Parses a series key into a group: measurement and validated, sanitized, sorted tags
/// (appended to `tags`; the caller removes them again on error).
fn parse_key<'a>(
    key: &'a [u8],
    tags: &mut Vec<(Text<'a>, Text<'a>)>,
    measurements: &mut Measurements<'a>,
    limits: &Limits,
) -> Result<Group, String> {
    let start = tags.len();
    // A key without a backslash (nearly all) needs no unescaping, and once all of it is known
    // to be UTF-8 each part is a slice of it; other keys are taken apart piece by piece.
    let plain =
        if memchr::memchr(b'\\', key).is_none() { simdutf8::basic::from_utf8(key).ok() } else { None };
    let find = |s: &[u8], c: u8| if plain.is_some() { memchr::memchr(c, s) } else { find_unescaped(s, c) };
    let part = |b: &'a [u8], what: &str| -> Result<Text<'a>, String> {
        let off = (b.as_ptr() as usize).wrapping_sub(key.as_ptr() as usize);
        match plain.and_then(|k| k.get(off..off + b.len())) {
            Some(s) => Ok(Cow::Borrowed(s)),
            None => text(unescape(b, KEY_ESCAPES), what),
        }
    };
    let (measurement_raw, mut rest) = match find(key, b',') {
        Some(i) => (key.get(..i).unwrap_or_default(), Some(key.get(i + 1..).unwrap_or_default())),
        None => (key, None),
    };
    if measurement_raw.is_empty() {
        return Err("missing measurement".into());
    }
    let measurement = measurements.id(measurement_raw)?;
    while let Some(r) = rest {
        let (tag, next) = match find(r, b',') {
            Some(i) => (r.get(..i).unwrap_or_default(), Some(r.get(i + 1..).unwrap_or_default())),
            None => (r, None),
        };
        rest = next;
        let Some(eq) = find(tag, b'=') else {
            return Err(format!("missing '=' in tag {:?}", super::snippet(tag)));
        };
        let (k, v) = (tag.get(..eq).unwrap_or_default(), tag.get(eq + 1..).unwrap_or_default());
        if k.is_empty() {
            return Err("empty tag key".into());
        }
        if v.is_empty() {
            return Err(format!("missing value for tag {:?}", super::snippet(k)));
        }
        if find(v, b'=').is_some() {
            return Err(format!("unescaped '=' in the value of tag {:?}", super::snippet(k)));
        }
        let name = sanitized(part(k, "tag key")?, false);
        let value = part(v, "tag value")?;
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
        tags.push((name, value));
    }
    let mine = tags.get_mut(start..).unwrap_or_default();
    if mine.len() + 1 > limits.labels_per_series_max {
        return Err(
            Error::limit(LABELS_PER_SERIES_MAX, mine.len() + 1, limits.labels_per_series_max).to_string()
        );
    }
    // Most keys are sent sorted already (Influx clients sort them).
    if !mine.windows(2).all(|w| matches!(w, [a, b] if a.0 <= b.0)) {
        mine.sort_by(|a, b| a.0.cmp(&b.0));
    }
    if let Some(w) = mine.windows(2).find(|w| matches!(w, [a, b] if a.0 == b.0)) {
        let name = w.first().map(|t| t.0.to_string()).unwrap_or_default();
        return Err(format!("two tags map to the label name {name:?}"));
    }
    Ok(Group {
        measurement,
        tags: (start, tags.len()),
        layout: u32::MAX,
        slots: Vec::new(),
        indexed: false,
        samples: Vec::new(),
    })
}

/// The metric name for `field` of `measurement` (see the module doc).
pub fn metric_name(measurement: &str, field: &str) -> String {
    metric_name_text(&Cow::Borrowed(measurement), field).into_owned()
}

/// [`metric_name`], borrowing `measurement` when it is the name as it is.
fn metric_name_text<'m>(measurement: &Text<'m>, field: &str) -> Text<'m> {
    if field == "value" {
        return sanitized(measurement.clone(), true);
    }
    let mut name = String::with_capacity(measurement.len() + 1 + field.len());
    name.push_str(measurement);
    name.push('_');
    name.push_str(field);
    sanitized(Cow::Owned(name), true)
}

/// The label name for a tag key (see the module doc).
pub fn label_name(key: &str) -> String {
    sanitized(Cow::Borrowed(key), false).into_owned()
}

/// Replaces characters outside `[a-zA-Z0-9_]` (plus `:` if `colon_ok`) with `_` and prefixes a
/// leading digit with `_`; returns `s` itself when nothing changes, which is the common case.
fn sanitized(s: Text<'_>, colon_ok: bool) -> Text<'_> {
    let ok = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || (colon_ok && b == b':');
    let digit_first = s.starts_with(|c: char| c.is_ascii_digit());
    if !digit_first && s.bytes().all(ok) {
        return s;
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

/// Unescaped bytes as text; `what` names the element in the error.
fn text<'s>(bytes: Cow<'s, [u8]>, what: &str) -> Result<Text<'s>, String> {
    let invalid = || format!("{what} is not valid UTF-8");
    match bytes {
        Cow::Borrowed(b) => std::str::from_utf8(b).map(Cow::Borrowed).map_err(|_| invalid()),
        Cow::Owned(b) => String::from_utf8(b).map(Cow::Owned).map_err(|_| invalid()),
    }
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

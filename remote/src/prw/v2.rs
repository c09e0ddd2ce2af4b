//! Decoding `io.prometheus.write.v2.Request` (remote write 2.0) into a [`storage::BatchRef`].
//!
//! Two passes: the first collects the symbol table and the series' byte ranges (protobuf allows
//! fields in any order, so symbols may follow series), the second decodes each series,
//! resolving label references against the table with bounds checks. Each referenced symbol is
//! validated as UTF-8 once per request, and the batch borrows it from the request.

use storage::{LabelPair, METRIC_NAME, Sample};

use super::DecodedRef;
use super::labels::{SeriesLabels, StringTable, SymbolTable};
use super::wire::{FieldError, Reader, Value, WireType, at, wrong_type};
use crate::limits::LABELS_PER_SERIES_MAX;
use crate::metadata::{MetricMetadata, MetricType};
use crate::{Error, Limits, Result};

/// Decodes an uncompressed `Request`.
pub(super) fn decode<'a>(buf: &'a [u8], limits: &Limits) -> Result<DecodedRef<'a>> {
    let mut symbols = Vec::new();
    let mut series_bufs = Vec::new();
    let mut r = Reader::new(buf);
    while let Some((field, value)) = r.next_field().map_err(|e| at("Request", e))? {
        match (field, value) {
            (4, Value::Len(b)) => symbols.push(b),
            (5, Value::Len(b)) => series_bufs.push(b),
            (4 | 5, v) => return Err(at("Request", wrong_type(field, &v, WireType::Len))),
            _ => {}
        }
    }
    if let Some(first) = symbols.first()
        && !first.is_empty()
    {
        return Err(Error::Protobuf(format!(
            "symbols[0] must be the empty string, found {:?}",
            String::from_utf8_lossy(first)
        )));
    }
    let mut s = Scratch {
        table: SymbolTable::new(symbols),
        labels: SeriesLabels::default(),
        refs: Vec::new(),
        samples: Vec::new(),
        starts: Vec::new(),
        hists: Vec::new(),
        metadata_seen: hashbrown::HashSet::new(),
    };
    let mut out = DecodedRef::default();
    for (i, buf) in series_bufs.into_iter().enumerate() {
        series(buf, i, &mut s, limits, &mut out)?;
    }
    Ok(out)
}

/// State kept across the series of one request.
struct Scratch<'a> {
    table: SymbolTable<'a>,
    labels: SeriesLabels<'a>,
    refs: Vec<u64>,
    samples: Vec<Sample>,
    /// Start timestamp of each sample in `samples` (0: none).
    starts: Vec<i64>,
    /// Native histograms (and their stale markers) of the series.
    hists: Vec<super::histogram::HistogramSample>,
    /// Metric families whose metadata is already in the output (first one wins).
    metadata_seen: hashbrown::HashSet<&'a str>,
}

/// `Metadata` as decoded: `(type, help_ref, unit_ref)`.
type RawMetadata = (i32, u64, u64);

/// Decodes `timeseries[i]` and appends it to `out`.
fn series<'a>(
    buf: &'a [u8],
    i: usize,
    s: &mut Scratch<'a>,
    limits: &Limits,
    out: &mut DecodedRef<'a>,
) -> Result<()> {
    s.refs.clear();
    s.samples.clear();
    s.starts.clear();
    s.hists.clear();
    // The series-level `created_timestamp` of spec drafts before rc.4: it applies to every
    // sample that has no start timestamp of its own.
    let mut series_start = 0i64;
    let mut metadata: Option<RawMetadata> = None;
    let mut n_exemplars = 0usize;
    let mut r = Reader::new(buf);
    loop {
        let next = r.next_field().map_err(|e| at(format_args!("timeseries[{i}]"), e))?;
        let Some((field, value)) = next else { break };
        match (field, value) {
            (1, v) => {
                refs(v, &mut s.refs).map_err(|e| at(format_args!("timeseries[{i}]"), e))?;
                // Bound the buffer before resolving: each pair is two references.
                if s.refs.len() > 2 * limits.labels_per_series_max + 1 {
                    return Err(Error::limit(
                        LABELS_PER_SERIES_MAX,
                        s.refs.len() / 2,
                        limits.labels_per_series_max,
                    ));
                }
            }
            (2, Value::Len(b)) => {
                let (sample, start) = sample(b)
                    .map_err(|e| at(format_args!("timeseries[{i}].samples[{}]", s.samples.len()), e))?;
                s.samples.push(sample);
                s.starts.push(start);
            }
            (3, Value::Len(b)) => {
                let path = || format!("timeseries[{i}].histograms[{}]", s.hists.len());
                let h = super::histogram::decode(b).map_err(|e| super::v1::histogram_error(path(), e))?;
                s.hists.push(h);
            }
            (4, Value::Len(b)) => {
                exemplar(b, s.table.len())
                    .map_err(|e| at(format_args!("timeseries[{i}].exemplars[{n_exemplars}]"), e))?;
                n_exemplars += 1;
            }
            (5, Value::Len(b)) => {
                // A message field seen twice is merged, as protobuf specifies.
                let base = metadata.unwrap_or_default();
                metadata = Some(
                    merge_metadata(b, base).map_err(|e| at(format_args!("timeseries[{i}].metadata"), e))?,
                );
            }
            (6, Value::Varint(t)) => series_start = t as i64,
            (2..=5, v) => {
                return Err(at(format_args!("timeseries[{i}]"), wrong_type(field, &v, WireType::Len)));
            }
            (6, v) => {
                return Err(at(format_args!("timeseries[{i}]"), wrong_type(field, &v, WireType::Varint)));
            }
            _ => {}
        }
    }
    out.exemplars += n_exemplars as u64;

    let labels = resolve_labels(i, &s.refs, &mut s.table, &mut s.labels, limits)?;
    if let Some(md) = metadata {
        // `validate` guarantees a non-empty `__name__`.
        if let Some(&(_, name)) = labels.iter().find(|(n, _)| *n == METRIC_NAME) {
            add_metadata(i, md, name, &mut s.table, &mut s.metadata_seen, out)?;
        }
    }
    // A start timestamp after its sample's timestamp is dropped (the sample is kept), as
    // Prometheus' receiver drops a created timestamp newer than the sample.
    let mut any_start = false;
    for (st, sample) in s.starts.iter_mut().zip(&s.samples) {
        if *st == 0 {
            *st = series_start;
        }
        if *st > sample.t {
            *st = 0;
        }
        any_start |= *st != 0;
    }
    out.created_timestamps += u64::from(any_start);
    out.samples += s.samples.len() as u64;
    if any_start {
        // Floats with start timestamps first, then the histograms (which carry none).
        let mut series = out.batch.series();
        for &(name, value) in labels {
            series.label(name, value);
        }
        for (&sample, &st) in s.samples.iter().zip(&s.starts) {
            series.sample_with_start(sample, st);
        }
        series.finish();
        if !s.hists.is_empty() {
            super::v1::push_with_histograms(labels, &[], &s.hists, out);
        }
    } else if !s.hists.is_empty() {
        super::v1::push_with_histograms(labels, &s.samples, &s.hists, out);
    } else if !s.samples.is_empty() {
        out.batch.push(labels.iter().copied(), s.samples.iter().copied());
    }
    Ok(())
}

/// Appends `labels_refs` values: packed (one length-delimited run) or unpacked (one varint per
/// field); protobuf parsers must accept both. A packed run is reserved at most as many slots
/// as it has bytes, so the buffer stays proportional to the input.
fn refs(v: Value<'_>, out: &mut Vec<u64>) -> Result<(), FieldError> {
    for_each_ref(v, |r| out.push(r))
}

/// Calls `f` with each reference of a `labels_refs` field, packed or unpacked.
fn for_each_ref(v: Value<'_>, mut f: impl FnMut(u64)) -> Result<(), FieldError> {
    match v {
        Value::Varint(r) => f(r),
        Value::Len(b) => {
            let mut r = Reader::new(b);
            while !r.is_empty() {
                f(r.varint()?);
            }
        }
        v => return Err(wrong_type(1, &v, WireType::Len)),
    }
    Ok(())
}

/// Resolves the series' label references and validates the label set.
fn resolve_labels<'a, 's>(
    i: usize,
    refs: &[u64],
    table: &mut SymbolTable<'a>,
    labels: &'s mut SeriesLabels<'a>,
    limits: &Limits,
) -> Result<&'s [LabelPair<'a>]> {
    let bad = |reason: String| Error::InvalidLabels { series: format!("timeseries[{i}]"), reason };
    if !refs.len().is_multiple_of(2) {
        return Err(bad(format!("labels_refs has an odd number of elements ({})", refs.len())));
    }
    labels.clear();
    for (j, pair) in refs.chunks_exact(2).enumerate() {
        let &[n, v] = pair else { continue };
        let resolve = |r: u64, k: usize| {
            table.get(r).ok_or_else(|| {
                bad(format!("labels_refs[{k}] = {r} is out of range ({} symbols)", table.len()))
            })
        };
        let (name, value) = (resolve(n, 2 * j)?, resolve(v, 2 * j + 1)?);
        labels.push(name, value);
    }
    labels.validate(table, limits)
}

/// Adds the series' metadata to the output unless its family (`name`) already has some, or it
/// is empty.
fn add_metadata<'a>(
    i: usize,
    (ty, help_ref, unit_ref): RawMetadata,
    name: &'a str,
    table: &mut SymbolTable<'a>,
    seen: &mut hashbrown::HashSet<&'a str>,
    out: &mut DecodedRef<'a>,
) -> Result<()> {
    let mut text = |field: &str, r: u64| -> Result<String> {
        let sym = table.get(r).ok_or_else(|| {
            Error::Protobuf(format!(
                "timeseries[{i}].metadata.{field} = {r} is out of range ({} symbols)",
                table.len()
            ))
        })?;
        table.str(sym).map(str::to_owned).ok_or_else(|| {
            Error::Protobuf(format!("timeseries[{i}].metadata.{field}: symbol {r} is not valid UTF-8"))
        })
    };
    let help = text("help_ref", help_ref)?;
    let unit = text("unit_ref", unit_ref)?;
    if ty == 0 && help.is_empty() && unit.is_empty() {
        return Ok(());
    }
    if seen.insert(name) {
        out.metadata.push(MetricMetadata {
            metric_family_name: name.to_string(),
            metric_type: MetricType::from_wire(ty),
            help,
            unit,
        });
    }
    Ok(())
}

/// Decodes a 2.0 `Sample`: the sample and its start (created) timestamp, 0 if unset.
#[inline]
fn sample(buf: &[u8]) -> Result<(Sample, i64), FieldError> {
    let mut s = Sample::new(0, 0.0);
    let mut start = 0i64;
    let mut r = Reader::new(buf);
    while let Some((field, v)) = r.next_field()? {
        match (field, v) {
            (1, Value::Fixed64(bits)) => s.v = f64::from_bits(bits),
            (2, Value::Varint(t)) => s.t = t as i64,
            (3, Value::Varint(t)) => start = t as i64,
            (1, v) => return Err(wrong_type(field, &v, WireType::Fixed64)),
            (2 | 3, v) => return Err(wrong_type(field, &v, WireType::Varint)),
            _ => {}
        }
    }
    Ok((s, start))
}

/// Checks an `Exemplar`'s wire types and that its label references are in range. Exemplars are
/// counted, not stored, but a request with a bad reference is malformed as a whole.
fn exemplar(buf: &[u8], n_symbols: usize) -> Result<(), ExemplarError> {
    let mut n_refs = 0usize;
    let mut bad = None;
    let mut r = Reader::new(buf);
    while let Some((field, v)) = r.next_field()? {
        match (field, v) {
            (1, v) => for_each_ref(v, |r| {
                if r >= n_symbols as u64 && bad.is_none() {
                    bad = Some((n_refs, r));
                }
                n_refs += 1;
            })?,
            (2, Value::Fixed64(_)) | (3, Value::Varint(_)) => {}
            (2, v) => return Err(wrong_type(field, &v, WireType::Fixed64).into()),
            (3, v) => return Err(wrong_type(field, &v, WireType::Varint).into()),
            _ => {}
        }
    }
    if !n_refs.is_multiple_of(2) {
        return Err(ExemplarError::OddRefs(n_refs));
    }
    if let Some((k, r)) = bad {
        return Err(ExemplarError::BadRef { k, r, n_symbols });
    }
    Ok(())
}

/// Why an exemplar is malformed.
enum ExemplarError {
    Field(FieldError),
    OddRefs(usize),
    BadRef { k: usize, r: u64, n_symbols: usize },
}

impl From<FieldError> for ExemplarError {
    fn from(e: FieldError) -> Self {
        ExemplarError::Field(e)
    }
}

impl From<super::wire::WireError> for ExemplarError {
    fn from(e: super::wire::WireError) -> Self {
        ExemplarError::Field(e.into())
    }
}

impl std::fmt::Display for ExemplarError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExemplarError::Field(e) => e.fmt(f),
            ExemplarError::OddRefs(n) => write!(f, "labels_refs has an odd number of elements ({n})"),
            ExemplarError::BadRef { k, r, n_symbols } => {
                write!(f, "labels_refs[{k}] = {r} is out of range ({n_symbols} symbols)")
            }
        }
    }
}

/// Merges one occurrence of a `Metadata` message into `base`.
fn merge_metadata(buf: &[u8], (mut ty, mut help, mut unit): RawMetadata) -> Result<RawMetadata, FieldError> {
    let mut r = Reader::new(buf);
    while let Some((field, v)) = r.next_field()? {
        match (field, v) {
            (1, Value::Varint(t)) => ty = t as i32,
            (3, Value::Varint(h)) => help = h,
            (4, Value::Varint(u)) => unit = u,
            (1 | 3 | 4, v) => return Err(wrong_type(field, &v, WireType::Varint)),
            _ => {}
        }
    }
    Ok((ty, help, unit))
}

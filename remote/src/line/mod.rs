//! Influx line protocol: request bodies (gzip or plain) to a [`storage::BatchRef`] borrowing
//! the body ([`parse_ref`]), or to an owned [`storage::Batch`] ([`parse`]).
//!
//! Parsing never fails as a whole: each line that cannot be stored is reported with its
//! 1-based line number and the good lines of the same body are still in the batch, which is
//! Influx's partial-write behaviour. The syntax is described in `scan`, the mapping to series
//! (`<measurement>_<field>`, sanitizing, the `value` field) in `series`.

mod body;
mod encode;
mod scan;
mod series;

pub use body::decode_body;
pub use encode::{FieldValue, Point, write_point};
pub use series::{label_name, metric_name};

use crate::{Error, Limits, Result};

/// How many line errors [`Parsed::errors`] keeps; the rest are only counted in
/// [`Parsed::bad_lines`], so a garbage body cannot make a huge error list.
pub const LINE_ERRORS_MAX: usize = 100;

/// The unit of the timestamps in a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Precision {
    /// Nanoseconds (the default).
    #[default]
    Ns,
    /// Microseconds.
    Us,
    /// Milliseconds.
    Ms,
    /// Seconds.
    S,
    /// Minutes (1.x API only).
    M,
    /// Hours (1.x API only).
    H,
}

impl Precision {
    /// The 1.x `/write` `precision` parameter: `ns` (also `n` and empty), `u` (also `us`), `ms`,
    /// `s`, `m`, `h`.
    pub fn parse_v1(s: &str) -> Result<Self> {
        match s {
            "" | "n" | "ns" => Ok(Precision::Ns),
            "u" | "us" => Ok(Precision::Us),
            "ms" => Ok(Precision::Ms),
            "s" => Ok(Precision::S),
            "m" => Ok(Precision::M),
            "h" => Ok(Precision::H),
            other => Err(Error::BadPrecision(other.to_owned())),
        }
    }

    /// The 2.x `/api/v2/write` `precision` parameter: `ns` (also empty), `us`, `ms`, `s`.
    pub fn parse_v2(s: &str) -> Result<Self> {
        match s {
            "" | "ns" => Ok(Precision::Ns),
            "us" => Ok(Precision::Us),
            "ms" => Ok(Precision::Ms),
            "s" => Ok(Precision::S),
            other => Err(Error::BadPrecision(other.to_owned())),
        }
    }

    /// Converts a timestamp in this precision to milliseconds. Finer precisions round towards
    /// negative infinity (so `1999999ns` is `1ms` and `-1ns` is `-1ms`: the millisecond the
    /// instant falls in); coarser ones multiply and fail on overflow.
    pub fn to_millis(self, t: i64) -> Option<i64> {
        match self {
            Precision::Ns => Some(t.div_euclid(1_000_000)),
            Precision::Us => Some(t.div_euclid(1_000)),
            Precision::Ms => Some(t),
            Precision::S => t.checked_mul(1_000),
            Precision::M => t.checked_mul(60_000),
            Precision::H => t.checked_mul(3_600_000),
        }
    }
}

/// Longest piece of a line quoted in an error message.
const SNIPPET_BYTES_MAX: usize = 64;

/// `bytes` for an error message: lossy UTF-8, cut at [`SNIPPET_BYTES_MAX`] bytes.
pub(crate) fn snippet(bytes: &[u8]) -> String {
    match bytes.get(..SNIPPET_BYTES_MAX) {
        Some(head) if bytes.len() > SNIPPET_BYTES_MAX => format!("{}...", String::from_utf8_lossy(head)),
        _ => String::from_utf8_lossy(bytes).into_owned(),
    }
}

/// A line that could not be stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    /// 1-based line number in the (decompressed) body.
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

impl std::fmt::Display for LineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// What a body contained, owned ([`parse`]).
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    /// Samples of the good lines. A series appears once per distinct way it was written.
    pub batch: storage::Batch,
    /// Lines accepted.
    pub points: u64,
    /// Numeric field values stored as samples.
    pub fields: u64,
    /// String fields (not storable as samples).
    pub skipped_fields: u64,
    /// The first [`LINE_ERRORS_MAX`] lines that could not be parsed; the good lines are in `batch`.
    pub errors: Vec<LineError>,
    /// All lines that could not be parsed (`errors` may be cut short).
    pub bad_lines: u64,
}

impl Parsed {
    /// A message for a partial-write response (`None` if every line was good), e.g.
    /// `partial write: 2 of 10 lines rejected: line 3: missing fields; line 7: ...`.
    pub fn error_message(&self) -> Option<String> {
        partial_write_message(&self.errors, self.bad_lines, self.points)
    }
}

/// What a body contained, label strings borrowed from the body ([`parse_ref`]): the same
/// counts and errors as [`Parsed`], and the batch on request.
pub struct ParsedRef<'a> {
    /// Lines accepted.
    pub points: u64,
    /// Numeric field values stored as samples.
    pub fields: u64,
    /// String fields (not storable as samples).
    pub skipped_fields: u64,
    /// The first [`LINE_ERRORS_MAX`] lines that could not be parsed; the good lines are in
    /// [`ParsedRef::batch`].
    pub errors: Vec<LineError>,
    /// All lines that could not be parsed (`errors` may be cut short).
    pub bad_lines: u64,
    series: series::SeriesCache<'a>,
}

impl ParsedRef<'_> {
    /// Samples of the good lines, one entry per series (a series appears once per distinct way
    /// it was written), label strings borrowed from the body and from `self` (metric names,
    /// unescaped strings). Built by each call: call it once.
    pub fn batch(&self) -> storage::BatchRef<'_> {
        self.series.batch()
    }

    /// A message for a partial-write response, as [`Parsed::error_message`].
    pub fn error_message(&self) -> Option<String> {
        partial_write_message(&self.errors, self.bad_lines, self.points)
    }

    /// An owned copy: every label string is allocated.
    pub fn into_owned(self) -> Parsed {
        Parsed {
            // Never fails: line-protocol labels are checked strings.
            batch: self.batch().to_batch().unwrap_or_default(),
            points: self.points,
            fields: self.fields,
            skipped_fields: self.skipped_fields,
            errors: self.errors,
            bad_lines: self.bad_lines,
        }
    }

    fn reject(&mut self, line: usize, message: String) {
        self.bad_lines += 1;
        if self.errors.len() < LINE_ERRORS_MAX {
            self.errors.push(LineError { line, message });
        }
    }
}

fn partial_write_message(errors: &[LineError], bad_lines: u64, points: u64) -> Option<String> {
    if bad_lines == 0 {
        return None;
    }
    let shown: Vec<String> = errors.iter().take(10).map(LineError::to_string).collect();
    let more = if bad_lines as usize > shown.len() { "; ..." } else { "" };
    Some(format!(
        "partial write: {} of {} lines rejected: {}{more}",
        bad_lines,
        bad_lines + points,
        shown.join("; ")
    ))
}

/// Parses a (decompressed) line-protocol body into owned data: [`parse_ref`], then a copy of
/// every label string. Servers append [`parse_ref`]'s batch instead, which copies nothing.
pub fn parse(body: &[u8], precision: Precision, now_ns: i64, limits: &Limits) -> Parsed {
    parse_ref(body, precision, now_ns, limits).into_owned()
}

/// Parses a (decompressed) line-protocol body, borrowing label strings from it. Lines without a
/// timestamp get `now_ns`. Label limits are checked per line; a line over a limit is reported
/// like a syntax error.
pub fn parse_ref<'a>(body: &'a [u8], precision: Precision, now_ns: i64, limits: &Limits) -> ParsedRef<'a> {
    let mut out = ParsedRef {
        points: 0,
        fields: 0,
        skipped_fields: 0,
        errors: Vec::new(),
        bad_lines: 0,
        series: series::SeriesCache::default(),
    };
    let mut scanner = scan::Scanner::new(body);
    let now_ms = Precision::Ns.to_millis(now_ns).unwrap_or_default();
    let mut line = 1usize;
    loop {
        match scanner.next() {
            scan::Next::Eof => break,
            scan::Next::Skip => {
                line += 1;
                continue;
            }
            scan::Next::Point => {}
        }
        let point = match scanner.point() {
            Ok(p) => p,
            Err(message) => {
                // The scanner stopped inside the line: skip the rest of it.
                out.reject(line, message);
                scanner.skip_line();
                line += 1 + scanner.extra_lines;
                continue;
            }
        };
        let t_ms = match point.timestamp {
            None => Ok(now_ms),
            Some(t) => precision.to_millis(t).ok_or_else(|| format!("timestamp {t} is out of range")),
        };
        match t_ms.and_then(|t| out.series.add(point.key, &scanner.fields, t, line, limits)) {
            Ok(added) => {
                out.points += 1;
                out.fields += added.fields;
                out.skipped_fields += added.skipped;
            }
            Err(message) => out.reject(line, message),
        }
        line += 1 + scanner.extra_lines;
    }
    out
}

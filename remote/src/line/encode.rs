//! Writing line protocol: our own sender side, for tests and benchmark loaders.

use std::io::Write;

use crate::{Error, Result};

/// One point to write.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The measurement (non-empty).
    pub measurement: String,
    /// Tag keys and values (non-empty).
    pub tags: Vec<(String, String)>,
    /// Field keys (non-empty) and values; at least one field.
    pub fields: Vec<(String, FieldValue)>,
    /// The timestamp in the precision the body will be sent with, or `None` for server time.
    pub timestamp: Option<i64>,
}

/// A field value.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    /// A finite float, written in the shortest form that reads back bit-exactly.
    Float(f64),
    /// A signed integer, `12i`.
    Int(i64),
    /// An unsigned integer, `12u`.
    UInt(u64),
    /// A boolean, `true`/`false`.
    Bool(bool),
    /// A string, quoted with `"` and `\` escaped.
    Str(String),
}

/// Appends `point` as one line (with `\n`) to `out`.
///
/// Fails with [`Error::Unencodable`] for what line protocol cannot express: empty names or tag
/// values, no fields, a newline in a name or tag value, a non-finite float, and a backslash
/// before a character the element escapes (or at its end), because Influx gives a backslash no
/// escape of its own there. On error nothing is appended.
pub fn write_point(out: &mut Vec<u8>, point: &Point) -> Result<()> {
    let start = out.len();
    let result = write(out, point);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

fn write(out: &mut Vec<u8>, p: &Point) -> Result<()> {
    escape(out, &p.measurement, b", ", "measurement")?;
    for (k, v) in &p.tags {
        out.push(b',');
        escape(out, k, b",= ", "tag key")?;
        out.push(b'=');
        escape(out, v, b",= ", "tag value")?;
    }
    if p.fields.is_empty() {
        return Err(Error::Unencodable("a point needs at least one field".into()));
    }
    for (i, (k, v)) in p.fields.iter().enumerate() {
        out.push(if i == 0 { b' ' } else { b',' });
        escape(out, k, b",= ", "field key")?;
        out.push(b'=');
        // Writing to a Vec cannot fail.
        let _ = match v {
            FieldValue::Float(f) if !f.is_finite() => {
                return Err(Error::Unencodable(format!("float field {k:?} is {f}")));
            }
            // Debug prints the shortest round-trip form, with an exponent when that is shorter.
            FieldValue::Float(f) => write!(out, "{f:?}"),
            FieldValue::Int(i) => write!(out, "{i}i"),
            FieldValue::UInt(u) => write!(out, "{u}u"),
            FieldValue::Bool(b) => write!(out, "{b}"),
            FieldValue::Str(s) => {
                out.push(b'"');
                for &b in s.as_bytes() {
                    if b == b'"' || b == b'\\' {
                        out.push(b'\\');
                    }
                    out.push(b);
                }
                out.push(b'"');
                Ok(())
            }
        };
    }
    if let Some(t) = p.timestamp {
        let _ = write!(out, " {t}");
    }
    out.push(b'\n');
    Ok(())
}

/// Writes `s` with a backslash before each byte of `special`.
fn escape(out: &mut Vec<u8>, s: &str, special: &[u8], what: &str) -> Result<()> {
    let bad = |why: &str| Err(Error::Unencodable(format!("{what} {s:?} {why}")));
    let bytes = s.as_bytes();
    match bytes.first() {
        None => return bad("is empty"),
        // A reader skips leading blanks and takes a leading '#' for a comment.
        Some(b'#' | b'\t') if what == "measurement" => return bad("starts with '#' or a tab"),
        Some(_) => {}
    }
    let mut backslashes = 0usize;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'\n' {
            return bad("contains a newline");
        }
        backslashes = if b == b'\\' { backslashes + 1 } else { 0 };
        // A reader pairs each backslash with the byte after it: an odd run of backslashes
        // before a special byte (or the end) would swallow the escape we add (or the delimiter).
        if backslashes % 2 == 1 && bytes.get(i + 1).is_none_or(|n| special.contains(n)) {
            return bad("has a backslash that would read as an escape");
        }
        if special.contains(&b) {
            out.push(b'\\');
        }
        out.push(b);
    }
    Ok(())
}

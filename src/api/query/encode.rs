//! JSON for query results, written byte for byte as Prometheus writes it.
//!
//! A range query over many series can answer with millions of points, so results are written
//! straight into a `Vec<u8>` (no `serde_json::Value` tree) with `itoa` for integers and `ryu` for
//! the shortest round-trip digits of a float, laid out the way Go's `strconv.FormatFloat` does:
//!
//! - sample values are strings: `"1"`, `"0.1"`, `"NaN"`, `"+Inf"`, `"-Inf"`, `"-0"`, and
//!   exponent notation only below 1e-6 and from 1e21 up (`"1e-07"`, `"1.5e+300"`), as
//!   Prometheus' `jsonutil.MarshalFloat`;
//! - timestamps are numbers of seconds with the milliseconds after a point, always three
//!   digits of them (`1030.250`), and no point when there are none (`1030`), as
//!   `jsonutil.MarshalTimestamp`;
//! - strings are escaped as Go's `encoding/json` with HTML escaping (`<` is `\u003c`), which
//!   is what Prometheus' jsoniter configuration produces;
//! - plain JSON numbers (statistics) follow `encoding/json`'s float rules (`1.5e-7`).
//!
//! Scalars and strings are the exception: Prometheus marshals them with Go's `json.Marshal`,
//! so their time is a plain JSON number (`1030.25`) and a scalar never uses an exponent.
//!
//! Golden answers captured from Prometheus 2.42 check all of this in the tests.

use storage::Labels;

/// Appends a sample value in Prometheus' notation, without quotes.
pub fn sample_value(out: &mut Vec<u8>, v: f64) {
    if v.is_nan() {
        out.extend_from_slice(b"NaN");
    } else if v == f64::INFINITY {
        out.extend_from_slice(b"+Inf");
    } else if v == f64::NEG_INFINITY {
        out.extend_from_slice(b"-Inf");
    } else {
        go_float(out, v, ExponentDigits::AtLeastTwo);
    }
}

/// Appends a finite float as a JSON number the way Go's `encoding/json` writes a `float64`
/// (non-finite values, which JSON cannot hold, are written as 0).
pub fn json_number(out: &mut Vec<u8>, v: f64) {
    if v.is_finite() {
        go_float(out, v, ExponentDigits::Minimal);
    } else {
        out.push(b'0');
    }
}

/// Appends a float as Go's `strconv.FormatFloat(v, 'f', -1, 64)`: never an exponent, `NaN`,
/// `+Inf`, `-Inf` (how `parse_query` writes number literals).
pub fn fixed_float(out: &mut Vec<u8>, v: f64) {
    if v.is_finite() {
        go_float(out, v, ExponentDigits::Never);
    } else {
        sample_value(out, v);
    }
}

/// Appends milliseconds as Prometheus' seconds: `1435781451.781`, `1030.250`, `-1.500`, `1030`.
pub fn timestamp(out: &mut Vec<u8>, ms: i64) {
    let mut ints = itoa::Buffer::new();
    if ms < 0 {
        out.push(b'-');
    }
    let abs = ms.unsigned_abs();
    out.extend_from_slice(ints.format(abs / 1000).as_bytes());
    let frac = abs % 1000;
    if frac != 0 {
        out.push(b'.');
        out.push(b'0' + (frac / 100) as u8);
        out.push(b'0' + (frac / 10 % 10) as u8);
        out.push(b'0' + (frac % 10) as u8);
    }
}

/// Appends an integer.
pub fn integer(out: &mut Vec<u8>, n: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Bytes [`string`] may have to escape: control characters, `"`, `\`, `<`, `>`, `&`, and 0xE2, the
/// first byte of U+2028 and U+2029.
static MAY_ESCAPE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = true;
        b += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table[b'<' as usize] = true;
    table[b'>' as usize] = true;
    table[b'&' as usize] = true;
    table[0xE2] = true;
    table
};

/// Appends `s` as a quoted JSON string escaped like Go's `encoding/json` with HTML escaping.
pub fn string(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    // Label names and values almost never need escaping: one table look-up per byte finds
    // out, and then the string is copied whole (the per-byte walk below took 15 % of an
    // instant query over 100,000 series with 11 labels each).
    if !bytes.iter().any(|&b| MAY_ESCAPE[usize::from(b)]) {
        out.reserve(bytes.len() + 2);
        out.push(b'"');
        out.extend_from_slice(bytes);
        out.push(b'"');
        return;
    }
    out.push(b'"');
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let escape: Option<&[u8]> = match b {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            0..0x20 | b'<' | b'>' | b'&' => None,
            // U+2028 and U+2029 (E2 80 A8/A9) break JavaScript parsers; Go escapes them.
            0xE2 if bytes.get(i + 1) == Some(&0x80) && matches!(bytes.get(i + 2), Some(0xA8 | 0xA9)) => {
                out.extend_from_slice(&bytes[start..i]);
                out.extend_from_slice(if bytes[i + 2] == 0xA8 { b"\\u2028" } else { b"\\u2029" });
                i += 3;
                start = i;
                continue;
            }
            _ => {
                i += 1;
                continue;
            }
        };
        out.extend_from_slice(&bytes[start..i]);
        match escape {
            Some(e) => out.extend_from_slice(e),
            None => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xF)],
            ]),
        }
        i += 1;
        start = i;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Appends a label set as a JSON object in label order: `{"__name__":"up","job":"x"}`.
pub fn labels(out: &mut Vec<u8>, labels: &Labels) {
    out.push(b'{');
    for (i, l) in labels.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(out, &l.name);
        out.push(b':');
        string(out, &l.value);
    }
    out.push(b'}');
}

/// Appends `[<timestamp>,"<value>"]`, one point of a vector or matrix.
///
/// Written into a stack buffer and appended at once: a range answer is mostly points (high-cpu
/// over 1,000 hosts is 0.6 M of them), and appending each piece separately cost a copy call
/// and a capacity check apiece, a third of the encoding time. Whole values (most gauges and
/// counters) never leave the buffer; the others are appended by [`sample_value`].
pub fn point(out: &mut Vec<u8>, t: i64, v: f64) {
    // `[`, `-`, 17 digits of seconds, `.` and 3 digits, `,"`, then up to 17 characters of a
    // whole value below 2^53 and `"]`.
    let mut buf = [0u8; 48];
    buf[0] = b'[';
    let mut n = 1 + timestamp_into(&mut buf[1..], t);
    buf[n..n + 2].copy_from_slice(b",\"");
    n += 2;
    match whole_into(&mut buf[n..], v) {
        Some(len) => {
            n += len;
            buf[n..n + 2].copy_from_slice(b"\"]");
            out.extend_from_slice(&buf[..n + 2]);
        }
        None => {
            out.extend_from_slice(&buf[..n]);
            sample_value(out, v);
            out.extend_from_slice(b"\"]");
        }
    }
}

/// [`timestamp`] written at the start of `buf` (at least 26 bytes); returns its length.
fn timestamp_into(buf: &mut [u8], ms: i64) -> usize {
    let mut n = 0;
    if ms < 0 {
        buf[0] = b'-';
        n = 1;
    }
    let abs = ms.unsigned_abs();
    let mut ints = itoa::Buffer::new();
    let secs = ints.format(abs / 1000).as_bytes();
    buf[n..n + secs.len()].copy_from_slice(secs);
    n += secs.len();
    let frac = abs % 1000;
    if frac != 0 {
        buf[n] = b'.';
        buf[n + 1] = b'0' + (frac / 100) as u8;
        buf[n + 2] = b'0' + (frac / 10 % 10) as u8;
        buf[n + 3] = b'0' + (frac % 10) as u8;
        n += 4;
    }
    n
}

/// A whole value below 2^53 in magnitude as [`sample_value`] writes it (its integer digits,
/// `-0` for negative zero), at the start of `buf` (at least 17 bytes); returns its length, or
/// `None` for any other value.
fn whole_into(buf: &mut [u8], v: f64) -> Option<usize> {
    if v.fract() != 0.0 || v.abs() >= 9_007_199_254_740_992.0 {
        return None;
    }
    if v == 0.0 && v.is_sign_negative() {
        buf[..2].copy_from_slice(b"-0");
        return Some(2);
    }
    let mut ints = itoa::Buffer::new();
    let digits = ints.format(v as i64).as_bytes();
    buf[..digits.len()].copy_from_slice(digits);
    Some(digits.len())
}

/// Appends `[<timestamp>,{<histogram>}]`, one histogram point of a vector or matrix (see
/// `histogram_json` for the object).
pub fn histogram_point(out: &mut Vec<u8>, t: i64, h: &storage::FloatHistogram) {
    out.push(b'[');
    timestamp(out, t);
    out.push(b',');
    super::histogram_json::histogram(out, h);
    out.push(b']');
}

/// Appends `"resultType":"...","result":...` for a query's value: float samples as
/// `"value"`/`"values"`, histogram samples as `"histogram"`/`"histograms"`.
/// With `split`, a vector or matrix is written in parts on its pool (see [`elements`]).
pub fn result(out: &mut Vec<u8>, value: &promql::Value, split: Option<Split<'_>>) {
    use promql::Value;
    match value {
        // Prometheus marshals scalars and strings with Go's `json.Marshal` rather than its
        // point encoder: the time is a plain float (`1030.25`), a scalar's value never uses
        // an exponent.
        Value::Scalar { t, v } => {
            out.extend_from_slice(b"\"resultType\":\"scalar\",\"result\":[");
            json_number(out, *t as f64 / 1000.0);
            out.extend_from_slice(b",\"");
            fixed_float(out, *v);
            out.extend_from_slice(b"\"]");
        }
        Value::String { t, v } => {
            out.extend_from_slice(b"\"resultType\":\"string\",\"result\":[");
            json_number(out, *t as f64 / 1000.0);
            out.push(b',');
            string(out, v);
            out.push(b']');
        }
        Value::Vector(samples) => {
            out.extend_from_slice(b"\"resultType\":\"vector\",\"result\":[");
            elements(out, samples, split, vector_sample);
            out.push(b']');
        }
        Value::Matrix(series) => {
            out.extend_from_slice(b"\"resultType\":\"matrix\",\"result\":[");
            elements(out, series, split, matrix_series);
            out.push(b']');
        }
    }
}

/// How a large answer is written in parts: the pool whose threads write them, and the
/// answer's estimated size in bytes (for the parts' buffers).
#[derive(Clone, Copy)]
pub struct Split<'a> {
    pub pool: &'a promql::QueryPool,
    pub estimate: usize,
}

/// Appends `items` separated by commas, each written by `write`. With a [`Split`], in four
/// parts per pool thread, each written into a buffer of its own on the pool and then appended
/// in order: the same bytes. Writing an answer of 100,000 series took a third of such a
/// query's time on one thread, with the second core idle.
fn elements<T: Sync>(out: &mut Vec<u8>, items: &[T], split: Option<Split<'_>>, write: fn(&mut Vec<u8>, &T)) {
    let write_all = |out: &mut Vec<u8>, items: &[T]| {
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write(out, item);
        }
    };
    let Some(Split { pool, estimate }) = split.filter(|_| items.len() > 1) else {
        write_all(out, items);
        return;
    };
    let parts: Vec<&[T]> = items.chunks(items.len().div_ceil(pool.threads() * 4)).collect();
    // Half as much again, as the whole answer's buffer: long float values take more.
    let capacity = (estimate + estimate / 2) / parts.len();
    let written = pool.map(&parts, |part| {
        let mut buf = Vec::with_capacity(capacity);
        write_all(&mut buf, part);
        buf
    });
    for (i, buf) in written.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(buf);
    }
}

/// One sample of an instant vector.
fn vector_sample(out: &mut Vec<u8>, s: &promql::Sample) {
    out.extend_from_slice(b"{\"metric\":");
    labels(out, &s.labels);
    match &s.h {
        None => {
            out.extend_from_slice(b",\"value\":");
            point(out, s.t, s.v);
        }
        Some(h) => {
            out.extend_from_slice(b",\"histogram\":");
            histogram_point(out, s.t, h);
        }
    }
    out.push(b'}');
}

/// One series of a range vector.
fn matrix_series(out: &mut Vec<u8>, s: &promql::Series) {
    out.extend_from_slice(b"{\"metric\":");
    labels(out, &s.labels);
    // Each key only when it has points, as Prometheus' `marshalSeriesJSON`.
    if !s.points.is_empty() {
        out.extend_from_slice(b",\"values\":[");
        for (j, p) in s.points.iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            point(out, p.t, p.v);
        }
        out.push(b']');
    }
    if !s.histograms.is_empty() {
        out.extend_from_slice(b",\"histograms\":[");
        for (j, p) in s.histograms.iter().enumerate() {
            if j > 0 {
                out.push(b',');
            }
            histogram_point(out, p.t, &p.h);
        }
        out.push(b']');
    }
    out.push(b'}');
}

/// Appends a JSON array of strings.
pub fn string_array(out: &mut Vec<u8>, items: &[String]) {
    out.push(b'[');
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(out, s);
    }
    out.push(b']');
}

/// Whether and how an exponent is written: `strconv.FormatFloat` writes at least two digits
/// (`1e-07`), `encoding/json` trims that to the minimum (`1e-7`), `'f'` formatting never uses
/// one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ExponentDigits {
    AtLeastTwo,
    Minimal,
    Never,
}

/// Go's shortest formatting of a finite float: `'f'` layout, or `'e'` layout below 1e-6 and
/// from 1e21 up (the cut-offs both Prometheus and `encoding/json` use).
fn go_float(out: &mut Vec<u8>, v: f64, exp_digits: ExponentDigits) {
    if v == 0.0 {
        out.extend_from_slice(if v.is_sign_negative() { b"-0" } else { b"0" });
        return;
    }
    // Whole numbers below 2^53 (most gauges and counters) print as their integer digits in
    // Go's 'f' layout; integer formatting is several times cheaper than the shortest-digits
    // search.
    if v.fract() == 0.0 && v.abs() < 9_007_199_254_740_992.0 {
        integer(out, v as i64);
        return;
    }
    let mut buf = ryu::Buffer::new();
    let formatted = buf.format_finite(v).as_bytes();
    let abs = v.abs();
    let scientific = exp_digits != ExponentDigits::Never && !(1e-6..1e21).contains(&abs);
    // Fast path, most sample values: ryu wrote plain decimal digits, which is Go's 'f' layout
    // except that ryu ends whole numbers in ".0".
    if !scientific && !formatted.contains(&b'e') {
        out.extend_from_slice(formatted.strip_suffix(b".0").unwrap_or(formatted));
        return;
    }
    let mut digits = [0u8; 32];
    let (len, point) = shortest_digits(formatted, &mut digits);
    let digits = &digits[..len];
    if v < 0.0 {
        out.push(b'-');
    }
    if scientific {
        out.push(digits[0]);
        if digits.len() > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        let exp = point - 1;
        out.push(if exp < 0 { b'-' } else { b'+' });
        let e = exp.unsigned_abs();
        if e < 10 && exp_digits == ExponentDigits::AtLeastTwo {
            out.push(b'0');
        }
        integer(out, e);
    } else if point <= 0 {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat_n(b'0', point.unsigned_abs() as usize));
        out.extend_from_slice(digits);
    } else {
        let point = point as usize;
        if point >= digits.len() {
            out.extend_from_slice(digits);
            out.extend(std::iter::repeat_n(b'0', point - digits.len()));
        } else {
            out.extend_from_slice(&digits[..point]);
            out.push(b'.');
            out.extend_from_slice(&digits[point..]);
        }
    }
}

/// Splits ryu's output (`"1.5e300"`, `"0.001"`, `"123.0"`, `"-1e-7"`) into its significant
/// digits, written to `digits` without leading or trailing zeros, and the position of the
/// decimal point relative to the first of them: the value is `0.<digits> * 10^point`.
/// Returns the number of digits (at most 17, ryu's maximum) and the point.
fn shortest_digits(formatted: &[u8], digits: &mut [u8; 32]) -> (usize, i32) {
    let s = formatted.strip_prefix(b"-").unwrap_or(formatted);
    let (mantissa, exp) = match s.iter().position(|b| *b == b'e' || *b == b'E') {
        Some(i) => {
            let exp = std::str::from_utf8(&s[i + 1..]).ok().and_then(|e| e.parse::<i32>().ok()).unwrap_or(0);
            (&s[..i], exp)
        }
        None => (s, 0),
    };
    let int_len = mantissa.iter().position(|b| *b == b'.').unwrap_or(mantissa.len());
    let mut len = 0;
    let mut point = int_len as i32 + exp;
    for &b in mantissa.iter().filter(|b| b.is_ascii_digit()) {
        if len == 0 && b == b'0' {
            // A leading zero moves the point, it is not a significant digit.
            point -= 1;
            continue;
        }
        if len < digits.len() {
            digits[len] = b;
            len += 1;
        }
    }
    while len > 0 && digits[len - 1] == b'0' {
        len -= 1;
    }
    if len == 0 {
        // Only zero has no significant digits; callers handle zero before this.
        digits[0] = b'0';
        return (1, 1);
    }
    (len, point)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(v: f64) -> String {
        let mut out = Vec::new();
        sample_value(&mut out, v);
        String::from_utf8(out).unwrap()
    }

    fn number(v: f64) -> String {
        let mut out = Vec::new();
        json_number(&mut out, v);
        String::from_utf8(out).unwrap()
    }

    fn ts(ms: i64) -> String {
        let mut out = Vec::new();
        timestamp(&mut out, ms);
        String::from_utf8(out).unwrap()
    }

    fn quoted(s: &str) -> String {
        let mut out = Vec::new();
        string(&mut out, s);
        String::from_utf8(out).unwrap()
    }

    /// Each pair was answered by Prometheus 2.42 (tests/golden/api) or is Go's
    /// `strconv.FormatFloat(v, 'f'|'e', -1, 64)` output.
    #[test]
    fn sample_values_match_go() {
        let cases: &[(f64, &str)] = &[
            (1.0, "1"),
            (0.1, "0.1"),
            (123456.789, "123456.789"),
            (-0.0, "-0"),
            (0.0, "0"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (1e21, "1e+21"),
            (1.5e300, "1.5e+300"),
            (1e-7, "1e-07"),
            (-2.5e-300, "-2.5e-300"),
            (999999999999999900000.0, "999999999999999900000"),
            (0.000001, "0.000001"),
            (1234567890123456789.0, "1234567890123456800"),
            (0.016666666666666666, "0.016666666666666666"),
            (2057.611483333333, "2057.611483333333"),
            (2.5e298, "2.5e+298"),
            (f64::MAX, "1.7976931348623157e+308"),
            (f64::MIN_POSITIVE, "2.2250738585072014e-308"),
            (5e-324, "5e-324"),
            (-1e100, "-1e+100"),
            (100.0, "100"),
            (1e20, "100000000000000000000"),
            (12345678.0, "12345678"),
            (-0.5, "-0.5"),
        ];
        for (v, want) in cases {
            assert_eq!(value(*v), *want, "{v:e}");
        }
    }

    /// The whole-number fast path prints what the shortest-digits path prints (Rust's
    /// `Display` is the shortest round-trip digits without an exponent, as Go's 'f' layout).
    #[test]
    fn whole_numbers_print_as_their_digits() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut cases: Vec<f64> = vec![58.0, -7.0, 9_007_199_254_740_991.0, -9_007_199_254_740_991.0];
        for _ in 0..10_000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let bits = (x >> 33) as u32 % 54;
            let n = (x as i64) >> (64 - bits.max(1));
            cases.push(n as f64);
        }
        for v in cases {
            assert_eq!(value(v), format!("{v}"), "{v:e}");
        }
        assert_eq!(value(9_007_199_254_740_992.0), "9007199254740992");
    }

    #[test]
    fn json_numbers_match_encoding_json() {
        assert_eq!(number(0.000233638), "0.000233638");
        assert_eq!(number(1.7252e-5), "0.000017252");
        assert_eq!(number(5e-7), "5e-7");
        assert_eq!(number(1e21), "1e+21");
        assert_eq!(number(0.0), "0");
        assert_eq!(number(f64::NAN), "0");
    }

    #[test]
    fn fixed_floats_never_use_an_exponent() {
        let fixed = |v: f64| {
            let mut out = Vec::new();
            fixed_float(&mut out, v);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(fixed(1e21), "1000000000000000000000");
        assert_eq!(fixed(1e-7), "0.0000001");
        assert_eq!(fixed(f64::INFINITY), "+Inf");
        assert_eq!(fixed(2.5), "2.5");
    }

    #[test]
    fn timestamps_match_prometheus() {
        assert_eq!(ts(1_030_000), "1030");
        assert_eq!(ts(1_030_250), "1030.250");
        assert_eq!(ts(1_030_500), "1030.500");
        assert_eq!(ts(1_435_781_451_781), "1435781451.781");
        assert_eq!(ts(-1500), "-1.500");
        assert_eq!(ts(5), "0.005");
        assert_eq!(ts(0), "0");
        assert_eq!(ts(i64::MIN), "-9223372036854775.808");
    }

    #[test]
    fn strings_are_escaped_like_go() {
        assert_eq!(quoted("plain"), "\"plain\"");
        assert_eq!(quoted("<a&b>\"q\"\\ \\u2028"), r#""\u003ca\u0026b\u003e\"q\"\\ \\u2028""#);
        assert_eq!(quoted("a\u{2028}b\u{2029}"), r#""a\u2028b\u2029""#);
        assert_eq!(quoted("\n\r\t\u{1}\u{1f}"), r#""\n\r\t\u0001\u001f""#);
        assert_eq!(quoted("ünï €"), "\"ünï €\"");
        assert_eq!(quoted(""), "\"\"");
    }

    fn histogram(count: f64) -> storage::FloatHistogram {
        storage::FloatHistogram {
            counter_reset_hint: storage::CounterResetHint::Unknown,
            schema: 0,
            zero_threshold: 0.001,
            zero_count: 0.0,
            count,
            sum: 2.5,
            positive: vec![(1, count)],
            negative: Vec::new(),
            custom_values: Vec::new(),
        }
    }

    fn encoded(value: &promql::Value) -> String {
        let mut out = Vec::new();
        result(&mut out, value, None);
        String::from_utf8(out).unwrap()
    }

    /// `marshalSampleJSON`: a histogram sample has `"histogram"` where a float has `"value"`.
    #[test]
    fn vectors_write_histogram_samples() {
        let labels = Labels::from_pairs(&[("__name__", "h")]);
        let value = promql::Value::Vector(vec![
            promql::Sample { labels: labels.clone(), t: 1_500, v: 0.0, h: Some(histogram(2.0)) },
            promql::Sample { labels, t: 1_500, v: 3.0, h: None },
        ]);
        assert_eq!(
            encoded(&value),
            concat!(
                r#""resultType":"vector","result":[{"metric":{"__name__":"h"},"histogram":[1.500,"#,
                r#"{"count":"2","sum":"2.5","buckets":[[0,"1","2","2"]]}]},"#,
                r#"{"metric":{"__name__":"h"},"value":[1.500,"3"]}]"#
            )
        );
    }

    /// `marshalSeriesJSON`: `"values"` then `"histograms"`, each only when it has points.
    #[test]
    fn matrices_write_histogram_points_after_floats() {
        let labels = Labels::from_pairs(&[("__name__", "h")]);
        let hp = |t: i64, c: f64| promql::HistogramPoint { t, h: histogram(c) };
        let value = promql::Value::Matrix(vec![
            promql::Series {
                labels: labels.clone(),
                points: vec![promql::Point { t: 1000, v: 1.0 }],
                histograms: vec![hp(2000, 1.0), hp(3000, 4.0)],
            },
            promql::Series { labels, points: Vec::new(), histograms: vec![hp(60_000, 1.0)] },
        ]);
        assert_eq!(
            encoded(&value),
            concat!(
                r#""resultType":"matrix","result":[{"metric":{"__name__":"h"},"values":[[1,"1"]],"#,
                r#""histograms":[[2,{"count":"1","sum":"2.5","buckets":[[0,"1","2","1"]]}],"#,
                r#"[3,{"count":"4","sum":"2.5","buckets":[[0,"1","2","4"]]}]]},"#,
                r#"{"metric":{"__name__":"h"},"histograms":[[60,{"count":"1","sum":"2.5","buckets":[[0,"1","2","1"]]}]]}]"#
            )
        );
    }

    proptest::proptest! {
        /// A point is its timestamp and its value as written on their own.
        #[test]
        fn points_are_timestamp_and_value(t in proptest::prelude::any::<i64>(), bits in proptest::prelude::any::<u64>(), whole in -1e17f64..1e17) {
            for v in [f64::from_bits(bits), whole.trunc(), -0.0, 9_007_199_254_740_991.0, -9_007_199_254_740_992.0] {
                let mut got = Vec::new();
                point(&mut got, t, v);
                let want = format!("[{},\"{}\"]", ts(t), value(v));
                proptest::prop_assert_eq!(String::from_utf8(got).unwrap(), want);
            }
        }

        /// Any string reads back as itself, with nothing a browser or JavaScript parser treats
        /// specially left unescaped (the fast path for strings without such bytes included).
        #[test]
        fn strings_read_back(s in ".*", plain in "[a-z0-9_. -]{0,40}") {
            for s in [s, plain] {
                let text = quoted(&s);
                let back: String = serde_json::from_str(&text).unwrap();
                proptest::prop_assert_eq!(&back, &s);
                proptest::prop_assert!(!text.contains(['<', '>', '&', '\u{2028}', '\u{2029}']), "{}", text);
            }
        }

        /// Whatever the layout, the text reads back as the same float.
        #[test]
        fn values_round_trip(bits in proptest::prelude::any::<u64>()) {
            let v = f64::from_bits(bits);
            let text = value(v);
            let back: f64 = match text.as_str() {
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                other => other.parse().unwrap(),
            };
            proptest::prop_assert!(back.to_bits() == v.to_bits() || (v.is_nan() && back.is_nan()), "{} -> {}", v, text);
        }
    }
}

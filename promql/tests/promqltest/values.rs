//! Series descriptions (`metric{l="v"} 0+10x5 _ stale`) as used by `load` blocks and expected
//! results: splitting off the label part and expanding the value items.

use storage::{CounterResetHint, FloatHistogram};

/// One expanded value slot.
#[derive(Debug, Clone, PartialEq)]
pub enum Slot {
    /// `_`: no sample at this position.
    Omitted,
    /// A float (including the stale marker).
    Float(f64),
    /// A native-histogram literal.
    Histogram(Box<HistogramLiteral>),
}

/// A `{{...}}` literal: the histogram, and whether it spelled out `counter_reset_hint:` (only
/// then is the hint compared, FORMAT.md §3.3).
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramLiteral {
    pub h: FloatHistogram,
    pub check_hint: bool,
}

/// Parses the inside of `{{ ... }}` (FORMAT.md §3.3).
fn parse_histogram(body: &str) -> Result<HistogramLiteral, String> {
    let mut h = FloatHistogram::default();
    let mut check_hint = false;
    let (mut buckets, mut n_buckets) = (Vec::new(), Vec::new());
    let (mut offset, mut n_offset) = (0i32, 0i32);
    let mut rest = body.trim();
    while !rest.is_empty() {
        let colon = rest.find(':').ok_or_else(|| format!("bad histogram field in {body:?}"))?;
        let key = rest[..colon].trim();
        let after = rest[colon + 1..].trim_start();
        let (value, next) = if after.starts_with('[') {
            let end = after.find(']').ok_or_else(|| format!("unterminated list in {body:?}"))?;
            (&after[1..end], &after[end + 1..])
        } else {
            let end = after.find(char::is_whitespace).unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        rest = next.trim_start();
        let num = |v: &str| parse_float(v).ok_or_else(|| format!("bad number {v:?} in {body:?}"));
        let list = |v: &str| v.split_whitespace().map(num).collect::<Result<Vec<f64>, String>>();
        let int = |v: &str| v.parse::<i32>().map_err(|_| format!("bad integer {v:?} in {body:?}"));
        match key {
            "schema" => h.schema = int(value)?,
            "count" => h.count = num(value)?,
            "sum" => h.sum = num(value)?,
            "z_bucket" => h.zero_count = num(value)?,
            "z_bucket_w" => h.zero_threshold = num(value)?,
            "buckets" => buckets = list(value)?,
            "n_buckets" => n_buckets = list(value)?,
            "offset" => offset = int(value)?,
            "n_offset" => n_offset = int(value)?,
            "custom_values" => h.custom_values = list(value)?,
            "counter_reset_hint" => {
                check_hint = true;
                h.counter_reset_hint = match value {
                    "unknown" => CounterResetHint::Unknown,
                    "reset" => CounterResetHint::Reset,
                    "not_reset" => CounterResetHint::NotReset,
                    "gauge" => CounterResetHint::Gauge,
                    other => return Err(format!("bad counter_reset_hint {other:?}")),
                }
            }
            other => return Err(format!("unknown histogram field {other:?}")),
        }
    }
    h.positive = buckets.into_iter().enumerate().map(|(i, c)| (offset + i as i32, c)).collect();
    h.negative = n_buckets.into_iter().enumerate().map(|(i, c)| (n_offset + i as i32, c)).collect();
    Ok(HistogramLiteral { h, check_hint })
}

/// `a + sign·b` for the `{{H}}+{{D}}xN` expansion: `b` is brought down to `a`'s schema (the
/// script must not make `a` the finer one) and the zero thresholds are assumed equal.
fn add_literal(a: &FloatHistogram, b: &FloatHistogram, sign: f64) -> Result<FloatHistogram, String> {
    if b.schema < a.schema && !b.uses_custom_buckets() {
        return Err("histogram sequence: the base schema is finer than the increment's".into());
    }
    let shift = b.schema - a.schema;
    let reduce = |v: &[(i32, f64)]| -> Vec<(i32, f64)> {
        v.iter()
            .map(|&(i, c)| if a.uses_custom_buckets() { (i, c) } else { (((i - 1) >> shift) + 1, c) })
            .collect()
    };
    let mut out = a.clone();
    let merge = |dst: &mut Vec<(i32, f64)>, src: Vec<(i32, f64)>| {
        for (i, c) in src {
            match dst.binary_search_by_key(&i, |b| b.0) {
                Ok(k) => dst[k].1 += sign * c,
                Err(k) => dst.insert(k, (i, sign * c)),
            }
        }
    };
    merge(&mut out.positive, reduce(&b.positive));
    merge(&mut out.negative, reduce(&b.negative));
    out.count += sign * b.count;
    out.sum += sign * b.sum;
    out.zero_count += sign * b.zero_count;
    use CounterResetHint::*;
    out.counter_reset_hint = match (a.counter_reset_hint, b.counter_reset_hint) {
        (x, y) if x == y => x,
        (Gauge, _) | (_, Gauge) => Gauge,
        _ => Unknown,
    };
    Ok(out)
}

/// Expands a histogram item: `{{H}}`, `{{H}}xN`, `{{H}}+{{D}}xN`, `{{H}}-{{D}}xN`.
fn expand_histogram(item: &str, out: &mut Vec<Slot>) -> Result<(), String> {
    let bad = || format!("bad histogram item {item:?}");
    let first_end = item.find("}}").ok_or_else(bad)?;
    let base = parse_histogram(item.get(2..first_end).ok_or_else(bad)?)?;
    let rest = &item[first_end + 2..];
    if rest.is_empty() {
        out.push(Slot::Histogram(Box::new(base)));
        return Ok(());
    }
    if let Some(n) = rest.strip_prefix('x') {
        let n: usize = n.parse().map_err(|_| bad())?;
        out.extend(std::iter::repeat_n(Slot::Histogram(Box::new(base)), n + 1));
        return Ok(());
    }
    let sign = match rest.as_bytes().first() {
        Some(b'+') => 1.0,
        Some(b'-') => -1.0,
        _ => return Err(bad()),
    };
    let inc_end = rest.rfind("}}").ok_or_else(bad)?;
    let inc = parse_histogram(rest.get(3..inc_end).ok_or_else(bad)?)?;
    let n: usize = rest[inc_end + 2..].strip_prefix('x').and_then(|n| n.parse().ok()).ok_or_else(bad)?;
    let mut cur = base.h;
    for _ in 0..=n {
        out.push(Slot::Histogram(Box::new(HistogramLiteral { h: cur.clone(), check_hint: inc.check_hint })));
        cur = add_literal(&cur, &inc.h, sign)?;
    }
    Ok(())
}

/// Splits a series line into its label part and the rest (the value items).
pub fn split_series(line: &str) -> Result<(&str, &str), String> {
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b':') {
        i += 1;
    }
    if i < bytes.len() && bytes[i] == b'{' {
        let mut quote: Option<u8> = None;
        i += 1;
        loop {
            let Some(&c) = bytes.get(i) else {
                return Err(format!("unterminated label set in {line:?}"));
            };
            match quote {
                Some(q) if c == b'\\' && q != b'`' => i += 1,
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None if c == b'"' || c == b'\'' || c == b'`' => quote = Some(c),
                None if c == b'}' => {
                    i += 1;
                    break;
                }
                None => {}
            }
            i += 1;
        }
    }
    if i == 0 {
        return Err(format!("no metric in {line:?}"));
    }
    Ok((&line[..i], line[i..].trim()))
}

/// Parses a float as the series-description grammar allows (decimal, exponent, `Inf`, `NaN`,
/// optional sign; no hex).
pub fn parse_float(s: &str) -> Option<f64> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let v = match body.to_ascii_lowercase().as_str() {
        "inf" => f64::INFINITY,
        "nan" => f64::NAN,
        other => {
            if other.is_empty() || other.contains('x') || !other.bytes().any(|b| b.is_ascii_digit()) {
                return None;
            }
            other.parse::<f64>().ok()?
        }
    };
    Some(if neg { -v } else { v })
}

/// Splits the value part into items, keeping `{{ ... }}` histogram literals (which contain
/// spaces) together with any `x`/`+`/`-` suffix.
fn items(s: &str) -> Vec<&str> {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        while i < bytes.len() && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= bytes.len() {
            break;
        }
        let start = i;
        let mut depth = 0;
        while i < bytes.len() {
            if bytes[i..].starts_with(b"{{") {
                depth += 1;
                i += 2;
                continue;
            }
            if bytes[i..].starts_with(b"}}") {
                depth -= 1;
                i += 2;
                continue;
            }
            if depth == 0 && bytes[i].is_ascii_whitespace() {
                break;
            }
            i += 1;
        }
        out.push(&s[start..i]);
    }
    out
}

/// Expands value items (`1`, `_`, `_x3`, `stale`, `5x3`, `1+2x3`, `1-2x3`, `{{...}}`).
pub fn expand(s: &str) -> Result<Vec<Slot>, String> {
    let mut out = Vec::new();
    for item in items(s) {
        if item.starts_with("{{") {
            expand_histogram(item, &mut out)?;
            continue;
        }
        if item == "_" {
            out.push(Slot::Omitted);
            continue;
        }
        if let Some(n) = item.strip_prefix("_x") {
            let n: usize = n.parse().map_err(|_| format!("bad repetition in {item:?}"))?;
            out.extend(std::iter::repeat_n(Slot::Omitted, n));
            continue;
        }
        if item == "stale" {
            out.push(Slot::Float(storage::stale_nan()));
            continue;
        }
        let (base, times) = match item.rfind('x') {
            Some(p) => {
                let n: u64 = item[p + 1..].parse().map_err(|_| format!("bad repetition in {item:?}"))?;
                (&item[..p], Some(n))
            }
            None => (item, None),
        };
        let Some(times) = times else {
            out.push(Slot::Float(parse_float(base).ok_or_else(|| format!("bad value {item:?}"))?));
            continue;
        };
        if let Some(v) = parse_float(base) {
            for _ in 0..=times {
                out.push(Slot::Float(v));
            }
            continue;
        }
        // `a+b` or `a-b`: split at the last sign that is not a leading sign or an exponent's.
        let b = base.as_bytes();
        let split = (1..b.len())
            .rev()
            .find(|&i| (b[i] == b'+' || b[i] == b'-') && !matches!(b[i - 1], b'e' | b'E'))
            .ok_or_else(|| format!("bad value {item:?}"))?;
        let start = parse_float(&base[..split]).ok_or_else(|| format!("bad value {item:?}"))?;
        let step = parse_float(&base[split + 1..]).ok_or_else(|| format!("bad value {item:?}"))?;
        let step = if b[split] == b'-' { -step } else { step };
        // Repeated addition, as the reference runner does (not start + k*step).
        let mut v = start;
        for _ in 0..=times {
            out.push(Slot::Float(v));
            v += step;
        }
    }
    Ok(out)
}

/// Splits a signed duration (`-1m`, `+30s`, `0`, `1m30s`) off the start of `s`; returns it in
/// milliseconds and the rest. `x` ends the duration: it starts a repetition count.
fn duration_prefix(s: &str) -> Result<(i64, &str), String> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let b = body.as_bytes();
    let mut i = 0;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
        while i < b.len() && b[i].is_ascii_alphabetic() && b[i] != b'x' {
            i += 1;
        }
    }
    if i == 0 {
        return Err(format!("expected a duration in {s:?}"));
    }
    let ms = promql::parser::duration::parse_duration_ms(&body[..i])?;
    Ok((if neg { -ms } else { ms }, &body[i..]))
}

/// Expands the items of a start-timestamp line (`<series>@st _ -1m -30s-1mx2 -1msx3`,
/// FORMAT.md §3.4) into one offset from the sample time per position, `None` for `_`.
pub fn expand_start_offsets(s: &str) -> Result<Vec<Option<i64>>, String> {
    let mut out = Vec::new();
    for item in s.split_whitespace() {
        if item == "_" {
            out.push(None);
            continue;
        }
        if let Some(n) = item.strip_prefix("_x") {
            let n: usize = n.parse().map_err(|_| format!("bad repetition in {item:?}"))?;
            out.extend(std::iter::repeat_n(None, n));
            continue;
        }
        let (base, rest) = duration_prefix(item)?;
        let (step, rest) = match rest.as_bytes().first() {
            Some(b'+') => duration_prefix(&rest[1..])?,
            Some(b'-') => {
                let (d, r) = duration_prefix(&rest[1..])?;
                (-d, r)
            }
            _ => (0, rest),
        };
        let times: usize = match rest {
            "" if step == 0 => 0,
            _ => rest
                .strip_prefix('x')
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("bad start-timestamp item {item:?}"))?,
        };
        let mut offset = base;
        for _ in 0..=times {
            out.push(Some(offset));
            offset += step;
        }
    }
    Ok(out)
}

//! Prometheus duration strings (`5m`, `1h30m`, `10s53ms`, `0`).
//!
//! Same rules as `model.ParseDuration`: one or more `<integer><unit>` groups, units `y w d h m
//! s ms` in that order and each at most once, no sign, no fractions. A year is 365 days.

/// Parses a duration string into milliseconds.
pub fn parse_duration_ms(s: &str) -> Result<i64, String> {
    let invalid = || format!("not a valid duration string: {s:?}");
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err("empty duration string".to_string());
    }
    const UNITS: [(&str, i64); 7] = [
        ("y", 365 * 24 * 3_600_000),
        ("w", 7 * 24 * 3_600_000),
        ("d", 24 * 3_600_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
        ("ms", 1),
    ];
    let bytes = s.as_bytes();
    let mut pos = 0;
    let mut next_unit = 0;
    let mut total: i64 = 0;
    while pos < bytes.len() {
        let digits_start = pos;
        while pos < bytes.len() && bytes[pos].is_ascii_digit() {
            pos += 1;
        }
        if pos == digits_start {
            return Err(invalid());
        }
        let n: i64 = s[digits_start..pos].parse().map_err(|_| invalid())?;
        let unit_start = pos;
        while pos < bytes.len() && bytes[pos].is_ascii_alphabetic() {
            pos += 1;
        }
        let unit = &s[unit_start..pos];
        let Some(idx) = UNITS.iter().position(|(u, _)| *u == unit) else {
            return Err(invalid());
        };
        if idx < next_unit {
            return Err(invalid());
        }
        next_unit = idx + 1;
        total = n
            .checked_mul(UNITS[idx].1)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(|| "duration out of range".to_string())?;
    }
    Ok(total)
}

/// Formats milliseconds the way Prometheus prints durations (`1h30m`, `500ms`, `0s`).
pub fn format_duration_ms(ms: i64) -> String {
    if ms == 0 {
        return "0s".to_string();
    }
    let mut out = String::new();
    let mut rest = ms.unsigned_abs();
    if ms < 0 {
        out.push('-');
    }
    for (unit, size) in [
        ("y", 365 * 24 * 3_600_000u64),
        ("w", 7 * 24 * 3_600_000),
        ("d", 24 * 3_600_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
        ("ms", 1),
    ] {
        if rest >= size {
            out.push_str(&format!("{}{unit}", rest / size));
            rest %= size;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats() {
        assert_eq!(parse_duration_ms("5m"), Ok(300_000));
        assert_eq!(parse_duration_ms("1h30m"), Ok(5_400_000));
        assert_eq!(parse_duration_ms("10s53ms"), Ok(10_053));
        assert_eq!(parse_duration_ms("1y"), Ok(31_536_000_000));
        assert_eq!(parse_duration_ms("0"), Ok(0));
        assert!(parse_duration_ms("5m1h").is_err());
        assert!(parse_duration_ms("1.5h").is_err());
        assert!(parse_duration_ms("-5m").is_err());
        assert_eq!(format_duration_ms(5_400_000), "1h30m");
        assert_eq!(format_duration_ms(1_500), "1s500ms");
    }
}

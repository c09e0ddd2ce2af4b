//! Durations written the way Prometheus writes them: `15d`, `1h30m`, `100ms`.
//!
//! Flags use this grammar now and the query API will use it for `step`, `timeout` and
//! `lookback_delta`, so a duration means the same thing to strata as to Prometheus. It is
//! Prometheus' `model.ParseDuration`: the bare `0`, or one or more `<integer><unit>` terms whose
//! units appear at most once and from largest to smallest: `y` (365 days), `w`, `d`, `h`, `m`,
//! `s`, `ms`. Resolution is one millisecond, the resolution of a sample timestamp.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A non-negative duration in whole milliseconds, at most `i64::MAX` so it converts losslessly
/// into the `*_ms: i64` fields of `storage::Options`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PromDuration {
    ms: u64,
}

/// Why a string is not a duration. The message quotes the input and says what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {reason}")]
pub struct DurationError {
    input: String,
    reason: String,
}

/// Units from largest to smallest, for display.
const UNITS: [(&str, u64); 7] = [
    ("y", 365 * 24 * 3_600_000),
    ("w", 7 * 24 * 3_600_000),
    ("d", 24 * 3_600_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1_000),
    ("ms", 1),
];

/// The largest representable duration in milliseconds (`i64::MAX`, lossless as `u64`).
const MAX_MS: u64 = i64::MAX as u64;

impl PromDuration {
    /// The zero duration (`0`).
    pub const ZERO: PromDuration = PromDuration { ms: 0 };

    /// A duration of `ms` milliseconds, saturating at `i64::MAX`.
    pub const fn from_millis(ms: u64) -> PromDuration {
        PromDuration { ms: if ms > MAX_MS { MAX_MS } else { ms } }
    }

    /// Whole milliseconds, as the storage options count them.
    pub fn as_millis(self) -> i64 {
        // The constructor keeps `ms <= i64::MAX`, so this never falls back.
        i64::try_from(self.ms).unwrap_or(i64::MAX)
    }

    /// The same span as a `std::time::Duration`, for timers.
    pub fn as_std(self) -> Duration {
        Duration::from_millis(self.ms)
    }

    /// True for `0`, which some flags refuse (a zero retention or partition width is meaningless).
    pub fn is_zero(self) -> bool {
        self.ms == 0
    }
}

impl FromStr for PromDuration {
    type Err = DurationError;

    /// The grammar is the PromQL engine's (`promql::parser::duration`), so a flag and a query
    /// read a duration the same way; this only adds a hint to the error.
    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let ms = promql::parser::duration::parse_duration_ms(input).map_err(|reason| DurationError {
            input: input.to_owned(),
            reason: format!("{reason}; write e.g. 15d, 1h30m or 100ms (units y w d h m s ms, largest first)"),
        })?;
        // The parser never returns a negative duration; the conversion cannot fail.
        Ok(PromDuration::from_millis(u64::try_from(ms).unwrap_or(0)))
    }
}

impl fmt::Display for PromDuration {
    /// Days and smaller units only (`15d`, not Prometheus' `2w1d`), because flag defaults and
    /// operator-facing messages read better that way; the output always parses back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ms == 0 {
            return f.write_str("0s");
        }
        let mut rest = self.ms;
        for (name, unit_ms) in UNITS.iter().skip(2) {
            let count = rest / unit_ms;
            if count > 0 {
                write!(f, "{count}{name}")?;
                rest %= unit_ms;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(input: &str) -> Result<i64, String> {
        input.parse::<PromDuration>().map(PromDuration::as_millis).map_err(|e| e.to_string())
    }

    #[test]
    fn parses_every_unit() {
        assert_eq!(ms("1ms"), Ok(1));
        assert_eq!(ms("1s"), Ok(1_000));
        assert_eq!(ms("90m"), Ok(90 * 60_000));
        assert_eq!(ms("12h"), Ok(12 * 3_600_000));
        assert_eq!(ms("15d"), Ok(15 * 86_400_000));
        assert_eq!(ms("2w"), Ok(14 * 86_400_000));
        assert_eq!(ms("1y"), Ok(365 * 86_400_000));
        assert_eq!(ms("0"), Ok(0));
        assert_eq!(ms("0s"), Ok(0));
    }

    #[test]
    fn parses_compound_durations_largest_unit_first() {
        assert_eq!(ms("1h30m"), Ok(90 * 60_000));
        assert_eq!(ms("1d2h3m4s5ms"), Ok(86_400_000 + 2 * 3_600_000 + 3 * 60_000 + 4_000 + 5));
        assert_eq!(ms("1m500ms"), Ok(60_500));
    }

    #[test]
    fn rejects_what_prometheus_rejects() {
        for bad in ["", "15", "15x", "1.5h", "-1h", "h", "1h1h", "30m1h", "1 h", " 1h", "1h ", "1H", "0x"] {
            assert!(ms(bad).is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn errors_quote_the_input_and_say_how_to_write_one() {
        let err = ms("15x").unwrap_err();
        assert!(err.starts_with(r#"invalid duration "15x": "#), "{err}");
        assert!(err.contains("write e.g. 15d"), "{err}");
    }

    #[test]
    fn rejects_overflow_instead_of_wrapping() {
        assert!(ms("99999999999999999999ms").is_err());
        assert!(ms("300000000y").unwrap_err().contains("out of range"));
        assert_eq!(ms("9223372036854775807ms"), Ok(i64::MAX));
        assert!(ms("9223372036854775808ms").is_err());
    }

    #[test]
    fn displays_in_days_and_smaller_units() {
        let show = |ms: u64| PromDuration::from_millis(ms).to_string();
        assert_eq!(show(0), "0s");
        assert_eq!(show(15 * 86_400_000), "15d");
        assert_eq!(show(90 * 60_000), "1h30m");
        assert_eq!(show(100), "100ms");
        assert_eq!(show(86_400_000 + 1), "1d1ms");
    }

    #[test]
    fn from_millis_saturates_at_i64_max() {
        assert_eq!(PromDuration::from_millis(u64::MAX).as_millis(), i64::MAX);
    }

    proptest! {
        #[test]
        fn display_parses_back(ms in 0u64..=MAX_MS) {
            let d = PromDuration::from_millis(ms);
            prop_assert_eq!(d.to_string().parse::<PromDuration>(), Ok(d));
        }

        #[test]
        fn never_panics_on_arbitrary_input(input in "\\PC{0,24}") {
            let _ = input.parse::<PromDuration>();
        }
    }
}

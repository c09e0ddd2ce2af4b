//! Byte sizes for flags: `128MiB`, `64MB`, `1048576`.
//!
//! Written here rather than taken from a crate because the one candidate (`bytesize`) saturates
//! an oversized value silently and renders `128MB` as `122.1 MiB`; a flag must refuse the first
//! and show its default exactly. The grammar: an unsigned integer followed by an optional unit,
//! `B`, `KB`/`MB`/`GB`/`TB` (powers of 1000) or `KiB`/`MiB`/`GiB`/`TiB` (powers of 1024), with
//! no space and in any letter case. A bare `K`/`M`/`G` is refused because it is ambiguous.

use std::fmt;
use std::str::FromStr;

/// A number of bytes given on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ByteSize(pub u64);

/// Why a string is not a byte size.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid size {input:?}: {reason}")]
pub struct SizeError {
    input: String,
    reason: String,
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const TIB: u64 = 1 << 40;

/// Accepted units and their multipliers (matched without regard to case).
const UNITS: [(&str, u64); 9] = [
    ("B", 1),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
    ("KiB", KIB),
    ("MiB", MIB),
    ("GiB", GIB),
    ("TiB", TIB),
];

impl FromStr for ByteSize {
    type Err = SizeError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let fail = |reason: &str| SizeError { input: input.to_owned(), reason: reason.to_owned() };
        let digits = input.find(|c: char| !c.is_ascii_digit()).unwrap_or(input.len());
        let (number, unit) = input.split_at(digits);
        if number.is_empty() {
            return Err(fail("expected a whole number of bytes, optionally with a unit, e.g. 128MiB"));
        }
        let multiplier = if unit.is_empty() {
            1
        } else {
            UNITS.iter().find(|(name, _)| name.eq_ignore_ascii_case(unit)).map(|(_, m)| *m).ok_or_else(|| {
                fail("unknown unit (use B, KB, MB, GB, TB for powers of 1000 or KiB, MiB, GiB, TiB for 1024)")
            })?
        };
        number
            .parse::<u64>()
            .ok()
            .and_then(|n| n.checked_mul(multiplier))
            .map(ByteSize)
            .ok_or_else(|| fail("too large"))
    }
}

impl fmt::Display for ByteSize {
    /// The largest binary unit that divides the value exactly, else plain bytes: `128MiB`,
    /// `1000B`. The output always parses back to the same value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        for (name, unit) in [("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)] {
            if n != 0 && n.is_multiple_of(unit) {
                return write!(f, "{}{name}", n / unit);
            }
        }
        write!(f, "{n}B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bytes(input: &str) -> Result<u64, String> {
        input.parse::<ByteSize>().map(|b| b.0).map_err(|e| e.to_string())
    }

    #[test]
    fn parses_binary_and_decimal_units_in_any_case() {
        assert_eq!(bytes("128MiB"), Ok(128 << 20));
        assert_eq!(bytes("128mib"), Ok(128 << 20));
        assert_eq!(bytes("2GiB"), Ok(2 << 30));
        assert_eq!(bytes("1TiB"), Ok(1 << 40));
        assert_eq!(bytes("4KiB"), Ok(4096));
        assert_eq!(bytes("64MB"), Ok(64_000_000));
        assert_eq!(bytes("1kb"), Ok(1_000));
        assert_eq!(bytes("1048576"), Ok(1_048_576));
        assert_eq!(bytes("512B"), Ok(512));
        assert_eq!(bytes("0"), Ok(0));
    }

    #[test]
    fn rejects_ambiguous_fractional_negative_and_spaced_input() {
        for bad in ["", "M", "128M", "1.5GiB", "-1", "128 MiB", " 128MiB", "128MiB ", "lots", "12x"] {
            assert!(bytes(bad).is_err(), "{bad:?} should not parse");
        }
        assert!(bytes("12x").unwrap_err().contains("unknown unit"));
    }

    #[test]
    fn rejects_overflow_instead_of_saturating() {
        assert!(bytes("16777216TiB").unwrap_err().contains("too large"));
        assert!(bytes("18446744073709551616").unwrap_err().contains("too large"));
        assert_eq!(bytes("18446744073709551615"), Ok(u64::MAX));
    }

    #[test]
    fn displays_exactly() {
        assert_eq!(ByteSize(128 << 20).to_string(), "128MiB");
        assert_eq!(ByteSize(1536).to_string(), "1536B");
        assert_eq!(ByteSize(3 << 10).to_string(), "3KiB");
        assert_eq!(ByteSize(1000).to_string(), "1000B");
        assert_eq!(ByteSize(0).to_string(), "0B");
    }

    proptest! {
        #[test]
        fn display_parses_back(n in any::<u64>()) {
            prop_assert_eq!(ByteSize(n).to_string().parse::<ByteSize>(), Ok(ByteSize(n)));
        }
    }
}

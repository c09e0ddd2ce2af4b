//! Compact storage of single `f64`s that are usually small integers or short decimals (block
//! statistics, a constant block's value): a 2-bit class chosen by the writer, then 1–9 bytes.
//!
//! | class | payload                                   | used for                      |
//! |-------|-------------------------------------------|-------------------------------|
//! | 0     | `v <uvarint>`                             | integers 0 ..= 2^53           |
//! | 1     | `-v - 1 <uvarint>`                        | integers -2^53 ..= -1         |
//! | 2     | `e <u8>`, `m <varint>`: v = m / 10^e      | decimals with 1..=9 digits    |
//! | 3     | `bits <u64 LE>`                           | anything else (NaN, -0.0, ...) |
//!
//! The writer picks a class only after checking that decoding gives back the exact bits.

use super::varint::{get_u8, get_u64_le, get_uvarint, get_varint, put_uvarint, put_varint};
use crate::error::{Error, Result};

const CLASS_UINT: u8 = 0;
const CLASS_NEG_INT: u8 = 1;
const CLASS_DECIMAL: u8 = 2;
const CLASS_RAW: u8 = 3;

/// Largest decimal exponent of class 2.
const MAX_EXPONENT: u8 = 9;
const POW10: [f64; MAX_EXPONENT as usize + 1] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9];
/// 2^53: larger integers are not all exact in f64.
const MAX_MANTISSA: f64 = 9_007_199_254_740_992.0;

/// A float with its storage class decided.
#[derive(Clone, Copy, Debug)]
pub(crate) enum FloatClass {
    UInt(u64),
    NegInt(u64),
    Decimal(u8, i64),
    Raw(u64),
}

impl FloatClass {
    /// Picks the shortest class that decodes back to exactly `v`'s bits.
    pub(crate) fn of(v: f64) -> FloatClass {
        for (e, &pow) in (0u8..).zip(POW10.iter()) {
            let scaled = v * pow;
            if !scaled.is_finite() || scaled.abs() > MAX_MANTISSA {
                break;
            }
            let m = scaled.round() as i64;
            let back = if e == 0 { m as f64 } else { m as f64 / pow };
            if back.to_bits() != v.to_bits() {
                continue;
            }
            return match (e, m) {
                (0, m) if m >= 0 => FloatClass::UInt(m as u64),
                (0, m) => FloatClass::NegInt(!m as u64),
                (e, m) => FloatClass::Decimal(e, m),
            };
        }
        FloatClass::Raw(v.to_bits())
    }

    /// The 2-bit class id.
    pub(crate) fn class(&self) -> u8 {
        match self {
            FloatClass::UInt(_) => CLASS_UINT,
            FloatClass::NegInt(_) => CLASS_NEG_INT,
            FloatClass::Decimal(..) => CLASS_DECIMAL,
            FloatClass::Raw(_) => CLASS_RAW,
        }
    }

    /// Appends the payload (the class id is stored by the caller).
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        match *self {
            FloatClass::UInt(u) | FloatClass::NegInt(u) => put_uvarint(out, u),
            FloatClass::Decimal(e, m) => {
                out.push(e);
                put_varint(out, m);
            }
            FloatClass::Raw(bits) => out.extend_from_slice(&bits.to_le_bytes()),
        }
    }
}

/// Reads the payload of a float of class `class` at `*pos`.
pub(crate) fn read_float(class: u8, bytes: &[u8], pos: &mut usize) -> Result<f64> {
    Ok(match class {
        CLASS_UINT => get_uvarint(bytes, pos)? as f64,
        CLASS_NEG_INT => !(get_uvarint(bytes, pos)? as i64) as f64,
        CLASS_DECIMAL => {
            let e = get_u8(bytes, pos)?;
            let pow = POW10
                .get(usize::from(e))
                .copied()
                .filter(|_| e > 0)
                .ok_or_else(|| Error::Decode(format!("decimal exponent {e} out of range")))?;
            get_varint(bytes, pos)? as f64 / pow
        }
        CLASS_RAW => f64::from_bits(get_u64_le(bytes, pos)?),
        other => return Err(Error::Decode(format!("unknown float class {other}"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoding::test_support::arb_f64;
    use proptest::prelude::*;

    fn round_trip(v: f64) -> (u8, usize) {
        let c = FloatClass::of(v);
        let mut out = Vec::new();
        c.write(&mut out);
        let mut pos = 0;
        assert_eq!(read_float(c.class(), &out, &mut pos).unwrap().to_bits(), v.to_bits(), "{v:?}");
        assert_eq!(pos, out.len());
        (c.class(), out.len())
    }

    #[test]
    fn classes_and_sizes() {
        assert_eq!(round_trip(0.0), (CLASS_UINT, 1));
        assert_eq!(round_trip(100.0), (CLASS_UINT, 1));
        assert_eq!(round_trip(-1.0), (CLASS_NEG_INT, 1));
        assert_eq!(round_trip(12.5), (CLASS_DECIMAL, 3));
        assert_eq!(round_trip(0.5), (CLASS_DECIMAL, 2));
        assert_eq!(round_trip(2f64.powi(53)), (CLASS_UINT, 8));
        assert_eq!(round_trip(-(2f64.powi(53))), (CLASS_NEG_INT, 8));
        assert_eq!(round_trip(-0.0), (CLASS_RAW, 8));
        assert_eq!(round_trip(f64::NAN), (CLASS_RAW, 8));
        assert_eq!(round_trip(1e300), (CLASS_RAW, 8));
    }

    proptest! {
        #[test]
        fn any_bits_round_trip(v in arb_f64()) {
            round_trip(v);
        }

        #[test]
        fn reader_never_panics(class in 0u8..5, bytes in proptest::collection::vec(any::<u8>(), 0..12)) {
            let _ = read_float(class, &bytes, &mut 0);
        }
    }
}

//! LEB128 variable-length integers, as Go's `encoding/binary` and protobuf write them.
//!
//! An unsigned value is written 7 bits at a time, least significant group first; the high bit of
//! each byte says "more bytes follow". A `u64` takes 1 to 10 bytes. Signed values are zigzag
//! mapped first (0, -1, 1, -2, ... become 0, 1, 2, 3, ...) so small magnitudes stay short.
//!
//! The readers are total: truncated input, a varint longer than 10 bytes, or a 10th byte that
//! would overflow 64 bits all give [`Error::Decode`], never a panic.

use crate::error::{Error, Result};

/// Longest encoding of a `u64`: ceil(64 / 7) bytes.
pub const MAX_VARINT_LEN: usize = 10;

/// Maps a signed value to an unsigned one so that small magnitudes get small codes.
#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
#[inline]
pub fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// Appends `v` as an unsigned LEB128 varint.
#[inline]
pub fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` zigzag-mapped as an unsigned varint.
#[inline]
pub fn put_varint(out: &mut Vec<u8>, v: i64) {
    put_uvarint(out, zigzag(v));
}

/// Number of bytes [`put_uvarint`] writes for `v` (lets encoders compare sizes without writing).
#[inline]
pub fn uvarint_len(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Reads an unsigned varint from `bytes` at `*pos` and advances `*pos` past it.
/// On error `*pos` is left unchanged.
#[inline]
pub fn get_uvarint(bytes: &[u8], pos: &mut usize) -> Result<u64> {
    // Most varints of an index are one byte (small lengths, the symbol refs of a small file)
    // or two (the symbol refs of a file of 100,000 series, whose symbols number tens of
    // thousands: the long path for those was a tenth of a query node's scan of such a file).
    match bytes.get(*pos..) {
        Some(&[b, ..]) if b < 0x80 => {
            *pos += 1;
            Ok(u64::from(b))
        }
        Some(&[low, high, ..]) if high < 0x80 => {
            *pos += 2;
            Ok(u64::from(low & 0x7f) | u64::from(high) << 7)
        }
        _ => get_uvarint_long(bytes, pos),
    }
}

/// [`get_uvarint`] past its one- and two-byte cases, out of line so that the inlined cases
/// stay small.
#[cold]
fn get_uvarint_long(bytes: &[u8], pos: &mut usize) -> Result<u64> {
    let mut value: u64 = 0;
    let mut at = *pos;
    for i in 0..MAX_VARINT_LEN {
        let Some(&b) = bytes.get(at) else {
            return Err(Error::Decode(format!("truncated varint at byte {}", *pos)));
        };
        at += 1;
        if i == MAX_VARINT_LEN - 1 && b > 1 {
            return Err(Error::Decode(format!("varint at byte {} overflows 64 bits", *pos)));
        }
        value |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            *pos = at;
            return Ok(value);
        }
    }
    Err(Error::Decode(format!("varint at byte {} is longer than {MAX_VARINT_LEN} bytes", *pos)))
}

/// Reads a zigzag-mapped signed varint from `bytes` at `*pos` and advances `*pos` past it.
#[inline]
pub fn get_varint(bytes: &[u8], pos: &mut usize) -> Result<i64> {
    get_uvarint(bytes, pos).map(unzigzag)
}

/// Reads one byte at `*pos` and advances past it (a small helper the decoders share).
#[inline]
pub(crate) fn get_u8(bytes: &[u8], pos: &mut usize) -> Result<u8> {
    let b = bytes.get(*pos).copied().ok_or_else(|| Error::Decode(format!("truncated at byte {}", *pos)))?;
    *pos += 1;
    Ok(b)
}

/// Reads 8 little-endian bytes at `*pos` and advances past them.
#[inline]
pub(crate) fn get_u64_le(bytes: &[u8], pos: &mut usize) -> Result<u64> {
    let end = pos.checked_add(8).ok_or_else(|| Error::Decode("offset overflow".into()))?;
    let chunk: [u8; 8] = bytes
        .get(*pos..end)
        .and_then(|s| s.try_into().ok())
        .ok_or_else(|| Error::Decode(format!("truncated 8-byte field at byte {}", *pos)))?;
    *pos = end;
    Ok(u64::from_le_bytes(chunk))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_encodings() {
        let cases: &[(u64, &[u8])] = &[
            (0, &[0]),
            (1, &[1]),
            (127, &[0x7f]),
            (128, &[0x80, 0x01]),
            (300, &[0xac, 0x02]),
            (u64::MAX, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
        ];
        for &(v, want) in cases {
            let mut out = Vec::new();
            put_uvarint(&mut out, v);
            assert_eq!(out, want, "encoding {v}");
            assert_eq!(uvarint_len(v), want.len());
            let mut pos = 0;
            assert_eq!(get_uvarint(&out, &mut pos).unwrap(), v);
            assert_eq!(pos, want.len());
        }
    }

    #[test]
    fn zigzag_order() {
        let order: Vec<u64> = [0i64, -1, 1, -2, 2].iter().map(|&v| zigzag(v)).collect();
        assert_eq!(order, vec![0, 1, 2, 3, 4]);
        assert_eq!(zigzag(i64::MIN), u64::MAX);
        assert_eq!(zigzag(i64::MAX), u64::MAX - 1);
    }

    #[test]
    fn rejects_bad_input_without_moving() {
        let bad: &[&[u8]] = &[
            &[],
            &[0x80],
            &[0xff; 9],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02],
            &[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00],
        ];
        for b in bad {
            let mut pos = 0;
            assert!(matches!(get_uvarint(b, &mut pos), Err(Error::Decode(_))), "{b:?}");
            assert_eq!(pos, 0);
        }
        let mut pos = 5;
        assert!(get_uvarint(&[1, 2], &mut pos).is_err());
        assert!(get_u64_le(&[0; 7], &mut 0).is_err());
        assert!(get_u8(&[], &mut 0).is_err());
    }

    proptest! {
        #[test]
        fn uvarint_round_trip(v: u64, prefix in proptest::collection::vec(any::<u8>(), 0..4)) {
            let mut out = prefix.clone();
            put_uvarint(&mut out, v);
            prop_assert_eq!(out.len() - prefix.len(), uvarint_len(v));
            let mut pos = prefix.len();
            prop_assert_eq!(get_uvarint(&out, &mut pos).unwrap(), v);
            prop_assert_eq!(pos, out.len());
        }

        #[test]
        fn varint_round_trip(v: i64) {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            let mut pos = 0;
            prop_assert_eq!(get_varint(&out, &mut pos).unwrap(), v);
            prop_assert_eq!(unzigzag(zigzag(v)), v);
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..16), start in 0usize..20) {
            let mut pos = start;
            if get_uvarint(&bytes, &mut pos).is_ok() {
                prop_assert!(pos > start && pos <= bytes.len());
            } else {
                prop_assert_eq!(pos, start);
            }
        }
    }
}

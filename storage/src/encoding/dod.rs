//! Gorilla-style delta-of-delta timestamp coding, shared by [`XorChunk`](super::XorChunk) and
//! the block codec `TS_DOD`.
//!
//! Each timestamp after the first is coded as `dod = (t[i] - t[i-1]) - (t[i-1] - t[i-2])`, with
//! the delta before the first one taken as 0. All arithmetic wraps in 64 bits, which is a
//! bijection, so any `i64` sequence round-trips (e.g. `i64::MIN` followed by `i64::MAX`). A dod
//! is written as a unary bucket prefix (LSB-first) and the zigzag of the dod in that bucket's width:
//!
//! | prefix bits | payload            | covers (ms)             |
//! |-------------|--------------------|-------------------------|
//! | `0`         | none               | dod = 0 (regular)       |
//! | `1 0`       | 7-bit zigzag       | -64 ..= 63 (jitter)     |
//! | `1 1 0`     | 15-bit zigzag      | -16384 ..= 16383 (a missed scrape) |
//! | `1 1 1 0`   | 23-bit zigzag      | about ±70 minutes        |
//! | `1 1 1 1`   | 64-bit zigzag      | anything                |

use super::bits::{BitReader, BitWriter};
use super::varint::{unzigzag, zigzag};
use crate::error::Result;

/// Payload widths of buckets 1..=3; bucket 4 is the 64-bit escape.
pub(crate) const BUCKET_BITS: [u32; 3] = [7, 15, 23];
/// Prefix length of the escape bucket (four 1 bits, no terminating 0).
const ESCAPE_ONES: u32 = 4;

/// Writes one delta-of-delta.
#[inline]
pub(crate) fn write_dod(w: &mut BitWriter<'_>, dod: i64) {
    if dod == 0 {
        w.write(0, 1);
        return;
    }
    let z = zigzag(dod);
    for (b, width) in (1u32..).zip(BUCKET_BITS) {
        if z >> width == 0 {
            // b ones, a zero, then the payload: one write of at most 4 + 23 bits.
            let prefix = (1u64 << b) - 1;
            w.write(prefix | (z << (b + 1)), b + 1 + width);
            return;
        }
    }
    w.write(0b1111, ESCAPE_ONES);
    w.write(z, 64);
}

/// Reads one delta-of-delta written by [`write_dod`].
#[inline]
pub(crate) fn read_dod(r: &mut BitReader<'_>) -> Result<i64> {
    let bucket = r.read_ones(ESCAPE_ONES)?;
    let width = match bucket {
        0 => return Ok(0),
        1..=3 => BUCKET_BITS.get(bucket as usize - 1).copied().unwrap_or(64),
        _ => 64,
    };
    r.read(width).map(unzigzag)
}

/// Number of bits [`write_dod`] uses for `dod` (for size estimates).
#[cfg(test)]
pub(crate) fn dod_bits(dod: i64) -> u32 {
    if dod == 0 {
        return 1;
    }
    let z = zigzag(dod);
    for (b, width) in (1u32..).zip(BUCKET_BITS) {
        if z >> width == 0 {
            return b + 1 + width;
        }
    }
    ESCAPE_ONES + 64
}

/// Running state of a timestamp sequence: the previous timestamp and delta.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct DodState {
    /// The last timestamp written or read.
    pub(crate) t: i64,
    /// The last delta (0 before the second timestamp).
    pub(crate) delta: i64,
}

impl DodState {
    /// State after the first timestamp `t0`.
    pub(crate) fn start(t0: i64) -> Self {
        DodState { t: t0, delta: 0 }
    }

    /// Encodes `t` as the next timestamp.
    #[inline]
    pub(crate) fn push(&mut self, w: &mut BitWriter<'_>, t: i64) {
        let delta = t.wrapping_sub(self.t);
        write_dod(w, delta.wrapping_sub(self.delta));
        self.t = t;
        self.delta = delta;
    }

    /// Decodes the next timestamp.
    #[inline]
    pub(crate) fn next(&mut self, r: &mut BitReader<'_>) -> Result<i64> {
        let dod = read_dod(r)?;
        self.delta = self.delta.wrapping_add(dod);
        self.t = self.t.wrapping_add(self.delta);
        Ok(self.t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn dod_round_trip(dods in proptest::collection::vec(prop_oneof![
            Just(0i64), -70i64..70, -20000i64..20000, any::<i64>(), Just(i64::MIN), Just(i64::MAX)
        ], 0..50)) {
            let mut buf = Vec::new();
            let mut w = BitWriter::new(&mut buf);
            let mut bits = 0u64;
            for &d in &dods {
                write_dod(&mut w, d);
                bits += u64::from(dod_bits(d));
                prop_assert_eq!(w.bit_len(), bits);
            }
            drop(w);
            let mut r = BitReader::with_limit(&buf, bits);
            for &d in &dods {
                prop_assert_eq!(read_dod(&mut r).unwrap(), d);
            }
        }
    }

    #[test]
    fn bucket_boundaries() {
        for (d, bits) in [(0, 1), (-64, 9), (63, 9), (64, 18), (-16384, 18), (16384, 27), (i64::MIN, 68)] {
            assert_eq!(dod_bits(d), bits, "dod {d}");
        }
    }
}

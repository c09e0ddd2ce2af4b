//! Bit-level reading and writing shared by every bit-packed codec.
//!
//! Bit order is LSB-first ("little-endian bits"): the first bit written is bit 0 of the first
//! byte, a field of width `n` occupies the next `n` bits with its least significant bit first.
//! This order lets the reader load 8 bytes as a little-endian `u64`, shift, and mask, and lets a
//! unary run be counted with one `trailing_zeros`/`trailing_ones`. A stream is padded with zero
//! bits to a whole byte.

use crate::error::{Error, Result};

/// Bits [`BitReader::peek_fast`] always returns valid: a byte-aligned 8-byte load shifted by up
/// to 7 bits keeps 57.
pub(crate) const PEEK_BITS: u32 = 57;

/// A mask of the low `n` bits (`n` in 0..=64).
#[inline(always)]
pub(crate) fn low_mask(n: u32) -> u64 {
    if n >= 64 { u64::MAX } else { (1u64 << n) - 1 }
}

/// Number of bits needed to hold `v` (0 for 0).
#[inline(always)]
pub(crate) fn bit_width(v: u64) -> u32 {
    64 - v.leading_zeros()
}

/// Appends bits to a byte vector that may already hold a partial last byte.
///
/// The writer does not own the vector, so the same code serves a block encoder (which writes
/// one stream and moves on) and [`XorChunk`](super::XorChunk) (which keeps its stream and its
/// bit length between appends). Bits collect in a 64-bit accumulator that is appended to the
/// vector a word at a time; the rest is flushed when the writer is dropped. After the drop,
/// `buf` ends with `ceil(bit_len / 8)` bytes of the stream, zero-padded in the last byte.
pub(crate) struct BitWriter<'a> {
    buf: &'a mut Vec<u8>,
    /// Pending bits, LSB first.
    acc: u64,
    /// Number of pending bits in `acc` (0..64).
    pending: u32,
    /// Bits written since the stream's first byte.
    bit_len: u64,
}

impl<'a> BitWriter<'a> {
    /// Starts a new stream at the end of `buf`.
    pub(crate) fn new(buf: &'a mut Vec<u8>) -> Self {
        BitWriter { buf, acc: 0, pending: 0, bit_len: 0 }
    }

    /// Continues a stream of `bit_len` bits that makes up the tail of `buf`.
    pub(crate) fn resume(buf: &'a mut Vec<u8>, bit_len: u64) -> Self {
        let pending = (bit_len % 8) as u32;
        // Take the partial last byte back into the accumulator.
        let acc = if pending == 0 { 0 } else { buf.pop().map_or(0, u64::from) };
        BitWriter { buf, acc, pending, bit_len }
    }

    /// Bits written to this stream so far.
    pub(crate) fn bit_len(&self) -> u64 {
        self.bit_len
    }

    /// Writes the low `n` bits of `value` (`n` in 0..=64; higher bits of `value` are ignored).
    #[inline(always)]
    pub(crate) fn write(&mut self, value: u64, n: u32) {
        let v = value & low_mask(n);
        self.bit_len += u64::from(n);
        let total = self.pending + n;
        if total < 64 {
            self.acc |= v << self.pending;
            self.pending = total;
        } else {
            // Fill the accumulator, emit it, keep the bits that did not fit.
            self.acc |= v << self.pending;
            self.buf.extend_from_slice(&self.acc.to_le_bytes());
            let used = 64 - self.pending;
            self.acc = v.checked_shr(used).unwrap_or(0);
            self.pending = total - 64;
        }
    }
}

impl Drop for BitWriter<'_> {
    fn drop(&mut self) {
        let bytes = self.acc.to_le_bytes();
        let n = self.pending.div_ceil(8) as usize;
        self.buf.extend_from_slice(bytes.get(..n).unwrap_or(&bytes));
    }
}

/// Reads bits from a byte slice, failing (never panicking) when asked for bits past the end.
#[derive(Clone, Debug)]
pub(crate) struct BitReader<'a> {
    data: &'a [u8],
    /// Position in bits from the start of `data`.
    pos: u64,
    /// Number of valid bits in `data` (may be less than `8 * data.len()` for an open chunk).
    limit: u64,
}

impl<'a> BitReader<'a> {
    /// Reads all of `data`.
    pub(crate) fn new(data: &'a [u8]) -> Self {
        BitReader { data, pos: 0, limit: data.len() as u64 * 8 }
    }

    /// Reads only the first `limit` bits of `data`.
    pub(crate) fn with_limit(data: &'a [u8], limit: u64) -> Self {
        BitReader { data, pos: 0, limit: limit.min(data.len() as u64 * 8) }
    }

    /// Bytes consumed so far, counting a partly read byte as consumed.
    pub(crate) fn bytes_consumed(&self) -> usize {
        self.pos.div_ceil(8) as usize
    }

    /// The next 64 bits without consuming them (zero padded past the end of `data`).
    #[inline(always)]
    fn peek(&self) -> u64 {
        let byte = (self.pos / 8) as usize;
        let shift = (self.pos % 8) as u32;
        let word = match self.data.get(byte..byte.saturating_add(8)) {
            Some(s) => s.try_into().map(u64::from_le_bytes).unwrap_or(0),
            None => {
                let mut b = [0u8; 8];
                let tail = self.data.get(byte..).unwrap_or(&[]);
                for (dst, src) in b.iter_mut().zip(tail) {
                    *dst = *src;
                }
                u64::from_le_bytes(b)
            }
        };
        let mut v = word >> shift;
        if shift != 0 {
            let next = self.data.get(byte.saturating_add(8)).copied().unwrap_or(0);
            v |= u64::from(next) << (64 - shift);
        }
        v
    }

    /// At least the next [`PEEK_BITS`] bits without consuming them (bits past the end of `data`
    /// read as zero; bits past `limit` are whatever `data` holds there). One unaligned load
    /// where [`BitReader::read`] does two plus the width and limit checks: the decoders' hot
    /// loops ([`super::xor_chunk`], Rice) take several fields from one peek, [`skip`] past
    /// them, and test [`overran`] once per value instead of once per field.
    ///
    /// [`skip`]: BitReader::skip
    /// [`overran`]: BitReader::overran
    #[inline(always)]
    pub(crate) fn peek_fast(&self) -> u64 {
        let byte = (self.pos / 8) as usize;
        let shift = (self.pos % 8) as u32;
        let word = match self.data.get(byte..byte.saturating_add(8)) {
            Some(s) => s.try_into().map(u64::from_le_bytes).unwrap_or(0),
            None => self.peek_tail(byte),
        };
        word >> shift
    }

    /// The bytes from `byte` to the end of `data`, zero padded to a word.
    #[cold]
    fn peek_tail(&self, byte: usize) -> u64 {
        let mut b = [0u8; 8];
        let tail = self.data.get(byte..).unwrap_or(&[]);
        for (dst, src) in b.iter_mut().zip(tail) {
            *dst = *src;
        }
        u64::from_le_bytes(b)
    }

    /// Consumes `n` bits without checking the limit (see [`BitReader::overran`]).
    #[inline(always)]
    pub(crate) fn skip(&mut self, n: u32) {
        self.pos += u64::from(n);
    }

    /// Bits left in the stream (0 once it has overrun).
    #[inline(always)]
    pub(crate) fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.pos)
    }

    /// True if more bits were consumed than the stream holds: what the fields taken with
    /// [`BitReader::peek_fast`] since the last test decoded is garbage, and the stream is
    /// truncated (or corrupt).
    #[inline(always)]
    pub(crate) fn overran(&self) -> bool {
        self.pos > self.limit
    }

    /// The error for a field of `want` bits that runs past the end of the stream.
    pub(crate) fn truncated(&self, want: u64) -> Error {
        Error::Decode(format!("bit stream truncated: need {want} bits at bit {} of {}", self.pos, self.limit))
    }

    /// Reads an `n`-bit field (`n` in 0..=64).
    #[inline(always)]
    pub(crate) fn read(&mut self, n: u32) -> Result<u64> {
        if n == 0 {
            return Ok(0);
        }
        if n > 64 {
            return Err(Error::Decode(format!("bit field width {n} exceeds 64")));
        }
        if self.limit.saturating_sub(self.pos) < u64::from(n) {
            return Err(self.truncated(u64::from(n)));
        }
        let v = self.peek() & low_mask(n);
        self.pos += u64::from(n);
        Ok(v)
    }

    /// Reads one bit.
    #[inline(always)]
    pub(crate) fn read_bit(&mut self) -> Result<bool> {
        self.read(1).map(|b| b == 1)
    }

    /// Counts and consumes a run of 1 bits, stopping after the terminating 0 bit or after `max`
    /// ones (then no terminator is read). `max` must be below 64.
    #[inline(always)]
    pub(crate) fn read_ones(&mut self, max: u32) -> Result<u32> {
        let ones = self.peek().trailing_ones().min(max);
        let used = if ones == max { ones } else { ones + 1 };
        if self.limit.saturating_sub(self.pos) < u64::from(used) {
            return Err(self.truncated(u64::from(used)));
        }
        self.pos += u64::from(used);
        Ok(ones)
    }

    /// Counts and consumes a run of 0 bits and the 1 bit that ends it; a run of `max` zeros is
    /// returned as `max` without a terminator (an escape). `max` must be below 64.
    #[inline(always)]
    pub(crate) fn read_zeros(&mut self, max: u32) -> Result<u32> {
        let zeros = self.peek().trailing_zeros().min(max);
        let used = if zeros == max { zeros } else { zeros + 1 };
        if self.limit.saturating_sub(self.pos) < u64::from(used) {
            return Err(self.truncated(u64::from(used)));
        }
        self.pos += u64::from(used);
        Ok(zeros)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn lsb_first_layout() {
        let mut buf = vec![0xAA];
        let mut w = BitWriter::new(&mut buf);
        w.write(0b1, 1);
        w.write(0b10, 2);
        w.write(0xFF, 8);
        assert_eq!(w.bit_len(), 11);
        drop(w);
        assert_eq!(buf, vec![0xAA, 0b1111_1101, 0b0000_0111]);
    }

    #[test]
    fn runs_and_escapes() {
        let mut buf = Vec::new();
        let mut w = BitWriter::new(&mut buf);
        w.write(0b0111, 4); // three ones then a zero
        w.write(0, 5); // escape run of five zeros
        w.write(0b1000, 4); // three zeros then a one
        drop(w);
        let mut r = BitReader::new(&buf);
        assert_eq!(r.read_ones(4).unwrap(), 3);
        assert_eq!(r.read_zeros(5).unwrap(), 5);
        assert_eq!(r.read_zeros(5).unwrap(), 3);
        assert_eq!(r.bytes_consumed(), 2);
        assert!(r.read(8).is_err());
    }

    proptest! {
        #[test]
        fn round_trip(fields in proptest::collection::vec((any::<u64>(), 0u32..=64), 0..64)) {
            let mut buf = Vec::new();
            let mut bit_len = 0;
            for &(v, n) in &fields {
                // A fresh writer per field exercises resume() the way XorChunk uses it.
                let mut w = BitWriter::resume(&mut buf, bit_len);
                w.write(v, n);
                bit_len = w.bit_len();
                drop(w);
            }
            prop_assert_eq!(buf.len() as u64, bit_len.div_ceil(8));
            let mut r = BitReader::with_limit(&buf, bit_len);
            for &(v, n) in &fields {
                prop_assert_eq!(r.read(n).unwrap(), v & low_mask(n));
            }
            prop_assert!(r.read(1).is_err());
        }

        #[test]
        fn reader_never_panics(data in proptest::collection::vec(any::<u8>(), 0..20), ops in proptest::collection::vec(0u32..80, 0..40)) {
            let mut r = BitReader::new(&data);
            for op in ops {
                let _ = match op % 3 { 0 => r.read(op).map(|_| 0), 1 => r.read_ones(op % 64), _ => r.read_zeros(op % 64) };
            }
        }
    }
}

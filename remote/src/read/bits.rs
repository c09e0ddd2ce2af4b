//! Bit-level writing and reading, most significant bit first, as Prometheus' `bstream`
//! (tsdb/chunkenc/bstream.go) lays bits out in an XOR chunk.
//!
//! Bits fill each byte from its highest bit down; the last byte is padded with zero bits. The
//! reader checks every read against the end of the input, so corrupt chunks end in an error,
//! never a panic.
//!
//! The writer reproduces one quirk of `bstream` so that our chunks are byte-identical to
//! Prometheus' own: `bstream.writeBits` writes each whole byte with `writeByte`, which always
//! appends a fresh byte after the one it fills. When a write ends on a byte boundary through
//! that path, Prometheus' stream ends in an extra all-zero byte (decoders ignore it, since the
//! sample count comes from the header). Prometheus 2.42 does this; later versions write most
//! bits through `writeBitsFast`, but the bytes stay readable either way.

/// Appends bits to a byte vector.
#[derive(Debug, Clone, Default)]
pub(crate) struct BitWriter {
    bytes: Vec<u8>,
    /// Unused low bits in the last byte (0 when a new byte must be started).
    free: u32,
    /// The last write ended on a byte boundary with a whole byte: Prometheus' stream would end
    /// in an empty byte here (see the module doc), which [`BitWriter::into_bytes`] adds.
    spare_byte: bool,
}

impl BitWriter {
    /// A writer whose output starts with `prefix` (whole bytes, e.g. a header to patch later).
    pub(crate) fn with_prefix(prefix: &[u8]) -> Self {
        BitWriter { bytes: prefix.to_vec(), free: 0, spare_byte: false }
    }

    /// Writes the low `n` bits of `value` (`n` in 0..=64), highest first.
    pub(crate) fn write_bits(&mut self, value: u64, n: u32) {
        let mut left = n.min(64);
        while left > 0 {
            if self.free == 0 {
                self.bytes.push(0);
                self.free = 8;
            }
            let take = left.min(self.free);
            let shift = left - take;
            let bits = ((value >> shift) & ((1u64 << take) - 1)) as u8;
            if let Some(last) = self.bytes.last_mut() {
                *last |= bits << (self.free - take);
            }
            self.free -= take;
            left -= take;
        }
        // `writeBits` ends with `writeByte` when `n` is a whole number of bytes, and with
        // `writeBit` otherwise.
        if n > 0 {
            self.spare_byte = n.is_multiple_of(8) && self.free == 0;
        }
    }

    /// Writes one bit.
    pub(crate) fn write_bit(&mut self, bit: bool) {
        self.write_bits(u64::from(bit), 1);
    }

    /// Mutable access to the first bytes, for patching a header.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.bytes
    }

    /// The finished bytes, as Prometheus' `bstream.bytes()` would hold them.
    pub(crate) fn into_bytes(mut self) -> Vec<u8> {
        if self.spare_byte {
            self.bytes.push(0);
        }
        self.bytes
    }
}

/// Reads bits from a byte slice; every read fails cleanly past the end.
#[derive(Debug, Clone)]
pub(crate) struct BitReader<'a> {
    bytes: &'a [u8],
    /// Position in bits from the start of `bytes`.
    pos: usize,
}

/// The input ended in the middle of a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UnexpectedEnd;

impl<'a> BitReader<'a> {
    /// A reader at the first bit of `bytes`.
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        BitReader { bytes, pos: 0 }
    }

    /// Reads `n` bits (`n` in 0..=64) as the low bits of the result.
    pub(crate) fn read_bits(&mut self, n: u32) -> Result<u64, UnexpectedEnd> {
        let n = n.min(64) as usize;
        if self.pos + n > self.bytes.len() * 8 {
            return Err(UnexpectedEnd);
        }
        let mut out = 0u64;
        let mut left = n;
        while left > 0 {
            let byte = *self.bytes.get(self.pos / 8).ok_or(UnexpectedEnd)?;
            let used = self.pos % 8;
            let avail = 8 - used;
            let take = left.min(avail);
            let bits = (u64::from(byte) >> (avail - take)) & ((1u64 << take) - 1);
            // `take` < 64, so the shift never overflows (a 64-bit read is 8 steps of 8).
            out = (out << take) | bits;
            self.pos += take;
            left -= take;
        }
        Ok(out)
    }

    /// Reads one bit.
    pub(crate) fn read_bit(&mut self) -> Result<bool, UnexpectedEnd> {
        self.read_bits(1).map(|b| b == 1)
    }

    /// Reads one (possibly unaligned) byte.
    pub(crate) fn read_byte(&mut self) -> Result<u8, UnexpectedEnd> {
        self.read_bits(8).map(|b| b as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_fill_bytes_from_the_top() {
        let mut w = BitWriter::default();
        w.write_bit(true);
        w.write_bits(0b01, 2);
        w.write_bits(0xABCD, 16);
        // 1 01 1010 1011 1100 1101 + 5 zero bits of padding.
        let bytes = w.into_bytes();
        assert_eq!(bytes, [0b1011_0101, 0b0111_1001, 0b1010_0000]);
        let mut r = BitReader::new(&bytes);
        assert!(r.read_bit().unwrap());
        assert_eq!(r.read_bits(2).unwrap(), 0b01);
        assert_eq!(r.read_bits(16).unwrap(), 0xABCD);
        assert_eq!(r.read_bits(6), Err(UnexpectedEnd));
        assert_eq!(r.read_bits(5).unwrap(), 0);
    }

    #[test]
    fn sixty_four_bit_values_round_trip_at_any_offset() {
        for offset in 0..8 {
            let mut w = BitWriter::default();
            w.write_bits(0, offset);
            w.write_bits(0x8123_4567_89AB_CDEF, 64);
            w.write_bits(0xFF, 8);
            let bytes = w.into_bytes();
            let mut r = BitReader::new(&bytes);
            assert_eq!(r.read_bits(offset).unwrap(), 0);
            assert_eq!(r.read_bits(64).unwrap(), 0x8123_4567_89AB_CDEF);
            assert_eq!(r.read_byte().unwrap(), 0xFF);
        }
    }

    #[test]
    fn a_whole_byte_write_ending_on_a_boundary_leaves_bstreams_spare_byte() {
        let mut w = BitWriter::default();
        w.write_bits(0xAB, 8);
        assert_eq!(w.clone().into_bytes(), [0xAB, 0], "writeByte appends the next byte");
        w.write_bit(true);
        assert_eq!(w.clone().into_bytes(), [0xAB, 0x80], "the next bit fills the spare byte");
        w.write_bits(0x7F, 7);
        assert_eq!(w.clone().into_bytes(), [0xAB, 0xFF], "bits written one by one leave none");
        w.write_bits(0, 4);
        w.write_bits(0xABC, 12);
        assert_eq!(w.into_bytes(), [0xAB, 0xFF, 0x0A, 0xBC], "nor do bits after the whole bytes");
    }

    #[test]
    fn writing_keeps_only_the_low_bits() {
        let mut w = BitWriter::with_prefix(&[7, 7]);
        w.write_bits(u64::MAX, 3);
        w.bytes_mut()[0] = 1;
        assert_eq!(w.into_bytes(), vec![1, 7, 0b1110_0000]);
    }
}

//! Prometheus' XOR chunk encoding (tsdb/chunkenc/xor.go), the `data` of a remote-read
//! [`Chunk`](super::proto::Chunk) of type XOR. This is Prometheus' format, which remote-read
//! clients decode; strata's own partition files use their own codecs.
//!
//! Layout (bits written most significant first, last byte zero-padded; Prometheus documents it
//! in `tsdb/docs/format/chunks.md` and `tsdb/docs/bstream.md`):
//!
//! ```text
//! ┌──────────────────────┬────────────────────────────────────────────────────────────┐
//! │ num samples <2 bytes, big-endian>                                                  │
//! ├──────────────────────┴────────────────────────────────────────────────────────────┤
//! │ sample 0: t <varint, zigzag> │ v <64 bits, IEEE 754>                               │
//! │ sample 1: t - t0 <uvarint>   │ v: XOR with the previous value (below)              │
//! │ sample n: delta of delta of t <0 | 10+14b | 110+17b | 1110+20b | 1111+64b> │ v XOR │
//! └───────────────────────────────────────────────────────────────────────────────────┘
//! value XOR x = bits(v) ^ bits(v_prev):
//!   x == 0                          → '0'
//!   leading/trailing zeros fit the previous window → '10' + the window's bits of x
//!   otherwise                       → '11' + leading <5 bits> + significant bits <6 bits,
//!                                      64 written as 0> + the significant bits of x
//! ```
//!
//! Values travel as bit patterns, so NaN payloads (Prometheus' stale marker
//! `0x7ff0000000000002`) and `-0.0` survive exactly.

use storage::Sample;

use super::bits::{BitReader, BitWriter, UnexpectedEnd};
use crate::{Error, Result};

/// Samples per chunk: Prometheus' target chunk size (its head aims at 120 and cuts at 240 at
/// the latest), small enough that a client decoding a chunk to reach one sample wastes little.
pub const SAMPLES_PER_CHUNK: usize = 120;

/// `leading` before any value has set the window (`0xff` in Prometheus).
pub(crate) const NO_WINDOW: u8 = 0xff;

/// Builds one XOR chunk sample by sample. Timestamps must increase (as every series read from
/// storage does); the format itself would accept any order.
#[derive(Debug, Clone)]
pub struct XorEncoder {
    w: BitWriter,
    num: u16,
    t: i64,
    v_bits: u64,
    t_delta: u64,
    leading: u8,
    trailing: u8,
    min_t: i64,
}

impl Default for XorEncoder {
    fn default() -> Self {
        Self::new()
    }
}

impl XorEncoder {
    /// An empty chunk.
    pub fn new() -> Self {
        XorEncoder {
            w: BitWriter::with_prefix(&[0, 0]),
            num: 0,
            t: 0,
            v_bits: 0,
            t_delta: 0,
            leading: NO_WINDOW,
            trailing: 0,
            min_t: 0,
        }
    }

    /// Samples appended so far.
    pub fn len(&self) -> usize {
        usize::from(self.num)
    }

    /// True before the first sample.
    pub fn is_empty(&self) -> bool {
        self.num == 0
    }

    /// Timestamps of the first and last sample, if any.
    pub fn time_range(&self) -> Option<(i64, i64)> {
        (self.num > 0).then_some((self.min_t, self.t))
    }

    /// Appends a sample. Returns false, appending nothing, when the chunk already holds the
    /// 65535 samples its 16-bit count can express.
    pub fn append(&mut self, t: i64, v: f64) -> bool {
        if self.num == u16::MAX {
            return false;
        }
        let v_bits = v.to_bits();
        let mut t_delta = 0;
        match self.num {
            0 => {
                write_uvarint(&mut self.w, zigzag(t));
                self.w.write_bits(v_bits, 64);
                self.min_t = t;
            }
            1 => {
                t_delta = t.wrapping_sub(self.t) as u64;
                write_uvarint(&mut self.w, t_delta);
                self.write_value(v_bits);
            }
            _ => {
                t_delta = t.wrapping_sub(self.t) as u64;
                let dod = t_delta.wrapping_sub(self.t_delta) as i64;
                if dod == 0 {
                    self.w.write_bit(false);
                } else if fits(dod, 14) {
                    self.w.write_bits(0b10, 2);
                    self.w.write_bits(dod as u64, 14);
                } else if fits(dod, 17) {
                    self.w.write_bits(0b110, 3);
                    self.w.write_bits(dod as u64, 17);
                } else if fits(dod, 20) {
                    self.w.write_bits(0b1110, 4);
                    self.w.write_bits(dod as u64, 20);
                } else {
                    self.w.write_bits(0b1111, 4);
                    self.w.write_bits(dod as u64, 64);
                }
                self.write_value(v_bits);
            }
        }
        self.t = t;
        self.v_bits = v_bits;
        self.t_delta = t_delta;
        self.num += 1;
        if let Some(header) = self.w.bytes_mut().get_mut(..2) {
            header.copy_from_slice(&self.num.to_be_bytes());
        }
        true
    }

    /// The XOR of a value with the previous one (see [`write_xor_value`]).
    fn write_value(&mut self, v_bits: u64) {
        write_xor_value(&mut self.w, v_bits, self.v_bits, &mut self.leading, &mut self.trailing);
    }

    /// The chunk's bytes.
    pub fn finish(self) -> Vec<u8> {
        self.w.into_bytes()
    }
}

/// Writes `v_bits` as its XOR with `prev_bits` (Prometheus' `xorWrite`), reusing the
/// leading/trailing-zero window in `leading`/`trailing` when the new significant bits fit in it
/// and updating it otherwise. `leading` is [`NO_WINDOW`] before any window was set. Shared by
/// the XOR chunk's values and the histogram chunks' sums (and float histograms' every field).
pub(crate) fn write_xor_value(
    w: &mut BitWriter,
    v_bits: u64,
    prev_bits: u64,
    leading: &mut u8,
    trailing: &mut u8,
) {
    let x = v_bits ^ prev_bits;
    if x == 0 {
        w.write_bit(false);
        return;
    }
    w.write_bit(true);
    // Clamped: the leading count travels in 5 bits.
    let new_leading = (x.leading_zeros() as u8).min(31);
    let new_trailing = x.trailing_zeros() as u8;
    if *leading != NO_WINDOW && new_leading >= *leading && new_trailing >= *trailing {
        w.write_bit(false);
        let width = 64 - u32::from(*leading) - u32::from(*trailing);
        w.write_bits(x >> *trailing, width);
    } else {
        *leading = new_leading;
        *trailing = new_trailing;
        w.write_bit(true);
        w.write_bits(u64::from(new_leading), 5);
        let significant = 64 - u32::from(new_leading) - u32::from(new_trailing);
        // 64 does not fit in 6 bits and is written as 0 (0 significant bits never occurs).
        w.write_bits(u64::from(significant), 6);
        w.write_bits(x >> new_trailing, significant);
    }
}

/// Whether `x` is in the range Prometheus' `bitRange(x, nbits)` accepts for a delta of delta
/// stored in `nbits` bits: `-(2^(n-1) - 1) ..= 2^(n-1)` (one more on the positive side than
/// two's complement, which the decoder's sign rule mirrors).
pub(crate) fn fits(x: i64, nbits: u32) -> bool {
    let half = 1i64 << (nbits - 1);
    -(half - 1) <= x && x <= half
}

/// Go's `binary.PutVarint` mapping of signed to unsigned.
fn zigzag(x: i64) -> u64 {
    ((x << 1) ^ (x >> 63)) as u64
}

fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// Go's `binary.PutUvarint`: 7 bits per byte, low groups first, high bit set on all but the last.
fn write_uvarint(w: &mut BitWriter, mut x: u64) {
    while x >= 0x80 {
        w.write_bits((x & 0x7f) | 0x80, 8);
        x >>= 7;
    }
    w.write_bits(x, 8);
}

/// Go's `binary.ReadUvarint`, including its overflow check (at most 10 bytes, the tenth ≤ 1).
fn read_uvarint(r: &mut BitReader<'_>) -> Result<u64> {
    let mut x = 0u64;
    for i in 0..10u32 {
        let b = r.read_byte().map_err(truncated)?;
        if b < 0x80 {
            if i == 9 && b > 1 {
                return Err(corrupt("varint overflows 64 bits"));
            }
            return Ok(x | (u64::from(b) << (7 * i)));
        }
        x |= u64::from(b & 0x7f) << (7 * i);
    }
    Err(corrupt("varint overflows 64 bits"))
}

fn corrupt(why: &str) -> Error {
    Error::CorruptResponse(format!("XOR chunk: {why}"))
}

fn truncated(_: UnexpectedEnd) -> Error {
    corrupt("data ends before the sample count in its header")
}

/// Iterates the samples of an XOR chunk. After the first error it yields nothing more.
#[derive(Debug, Clone)]
pub struct XorIter<'a> {
    r: BitReader<'a>,
    total: u16,
    read: u16,
    t: i64,
    v_bits: u64,
    t_delta: u64,
    leading: u8,
    trailing: u8,
    failed: bool,
}

impl<'a> XorIter<'a> {
    /// An iterator over `data`; fails at once if the 2-byte header is missing.
    pub fn new(data: &'a [u8]) -> Result<Self> {
        let (header, body) =
            data.split_first_chunk::<2>().ok_or_else(|| corrupt("shorter than its header"))?;
        let total = u16::from_be_bytes(*header);
        Ok(XorIter {
            r: BitReader::new(body),
            total,
            read: 0,
            t: 0,
            v_bits: 0,
            t_delta: 0,
            leading: 0,
            trailing: 0,
            failed: false,
        })
    }

    /// The sample count the header declares.
    pub fn declared_len(&self) -> usize {
        usize::from(self.total)
    }

    fn next_sample(&mut self) -> Result<Sample> {
        match self.read {
            0 => {
                self.t = unzigzag(read_uvarint(&mut self.r)?);
                self.v_bits = self.r.read_bits(64).map_err(truncated)?;
            }
            1 => {
                self.t_delta = read_uvarint(&mut self.r)?;
                self.t = self.t.wrapping_add(self.t_delta as i64);
                self.read_value()?;
            }
            _ => {
                let mut prefix = 0u8;
                for _ in 0..4 {
                    prefix <<= 1;
                    if !self.r.read_bit().map_err(truncated)? {
                        break;
                    }
                    prefix |= 1;
                }
                let dod = match prefix {
                    0b0 => 0,
                    0b10 => self.read_signed(14)?,
                    0b110 => self.read_signed(17)?,
                    0b1110 => self.read_signed(20)?,
                    _ => self.r.read_bits(64).map_err(truncated)? as i64,
                };
                self.t_delta = (self.t_delta as i64).wrapping_add(dod) as u64;
                self.t = self.t.wrapping_add(self.t_delta as i64);
                self.read_value()?;
            }
        }
        self.read += 1;
        Ok(Sample::new(self.t, f64::from_bits(self.v_bits)))
    }

    /// A delta of delta in `n` bits, with the sign rule matching [`fits`].
    fn read_signed(&mut self, n: u32) -> Result<i64> {
        let bits = self.r.read_bits(n).map_err(truncated)?;
        let value = if bits > (1u64 << (n - 1)) { bits as i64 - (1i64 << n) } else { bits as i64 };
        Ok(value)
    }

    fn read_value(&mut self) -> Result<()> {
        if !self.r.read_bit().map_err(truncated)? {
            return Ok(());
        }
        if self.r.read_bit().map_err(truncated)? {
            let leading = self.r.read_bits(5).map_err(truncated)? as u8;
            let mut significant = self.r.read_bits(6).map_err(truncated)? as u8;
            if significant == 0 {
                significant = 64;
            }
            self.trailing = 64u8
                .checked_sub(leading)
                .and_then(|rest| rest.checked_sub(significant))
                .ok_or_else(|| corrupt("value window wider than 64 bits"))?;
            self.leading = leading;
        }
        let width = 64 - u32::from(self.leading) - u32::from(self.trailing);
        let bits = self.r.read_bits(width).map_err(truncated)?;
        self.v_bits ^= bits.checked_shl(u32::from(self.trailing)).unwrap_or(0);
        Ok(())
    }
}

impl Iterator for XorIter<'_> {
    type Item = Result<Sample>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.read == self.total {
            return None;
        }
        let sample = self.next_sample();
        self.failed = sample.is_err();
        Some(sample)
    }
}

/// Decodes a whole XOR chunk.
pub fn decode(data: &[u8]) -> Result<Vec<Sample>> {
    XorIter::new(data)?.collect()
}

#[cfg(test)]
mod tests;

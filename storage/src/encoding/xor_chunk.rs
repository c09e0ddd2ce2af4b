//! [`XorChunk`]: the appendable, compressed sample buffer of the in-memory head.
//!
//! The head keeps every recent sample in memory until a flush writes it to a partition file, so
//! it stores them compressed as they arrive: Gorilla delta-of-delta timestamps ([`super::dod`])
//! and XOR values ([`super::xor`]) in one bit stream. The stream starts with the first timestamp
//! and the first value's bits as 64 raw bits each, then one (dod, XOR) pair per later sample.
//! The stream lives only in memory, so its layout is not a file format and may change freely.
//!
//! Appends cost O(1) amortized. The buffer grows by a quarter at a time (not doubling) so the
//! slack capacity counted by [`XorChunk::memory_bytes`] stays small next to the data.

use super::bits::{BitReader, BitWriter, PEEK_BITS, low_mask};
use super::dod::{BUCKET_BITS, DodState};
use super::varint::unzigzag;
use super::xor::XorState;
use crate::types::Sample;

/// Smallest growth step of the bit buffer, in bytes.
const MIN_GROWTH_BYTES: usize = 16;
/// Room for the largest single append: 64+64 bits for the first sample, or 68 + 78 bits later.
const MAX_APPEND_BYTES: usize = 19;

/// An appendable Gorilla chunk of samples in increasing time order.
///
/// `Clone` copies the buffer, which is how a head hands a consistent view to a reader while it
/// keeps appending.
#[derive(Clone, Debug, Default)]
pub struct XorChunk {
    /// The bit stream; bits past `bit_len` in the last byte are zero.
    bits: Vec<u8>,
    bit_len: u64,
    len: usize,
    first_t: i64,
    ts: DodState,
    /// Value coder state; `None` until the first append.
    vals: Option<XorState>,
}

impl XorChunk {
    /// An empty chunk (no allocation until the first append).
    pub fn new() -> Self {
        XorChunk::default()
    }

    /// Appends a sample. The caller guarantees `t` is greater than [`last_t`](Self::last_t);
    /// the encoding itself accepts any `t` (timestamps wrap in 64 bits), so a violation gives
    /// back exactly what was appended, just out of order.
    pub fn append(&mut self, t: i64, v: f64) {
        self.reserve_for_append();
        let mut w = BitWriter::resume(&mut self.bits, self.bit_len);
        match self.vals.as_mut() {
            None => {
                w.write(t as u64, 64);
                w.write(v.to_bits(), 64);
                self.first_t = t;
                self.ts = DodState::start(t);
                self.vals = Some(XorState::start(v.to_bits()));
            }
            Some(vals) => {
                self.ts.push(&mut w, t);
                vals.push(&mut w, v.to_bits());
            }
        }
        self.bit_len = w.bit_len();
        self.len += 1;
    }

    /// Appends samples in increasing time order, each after [`last_t`](Self::last_t): the same
    /// stream and the same buffer growth as appending them one by one, with one bit writer for
    /// as many samples as the buffer has room for (a write request brings a series several
    /// samples at a time).
    pub fn append_many(&mut self, samples: &[Sample]) {
        let mut rest = samples;
        if self.vals.is_none() {
            let Some((first, tail)) = rest.split_first() else { return };
            self.append(first.t, first.v);
            rest = tail;
        }
        while !rest.is_empty() {
            self.reserve_for_append();
            // Appends that surely fit without growing: growth then happens at the same appends
            // as it would one by one.
            let room = (self.bits.capacity() - self.bits.len()) / MAX_APPEND_BYTES;
            let (now, later) = rest.split_at(room.clamp(1, rest.len()));
            let Some(vals) = self.vals.as_mut() else { return };
            let mut w = BitWriter::resume(&mut self.bits, self.bit_len);
            for s in now {
                self.ts.push(&mut w, s.t);
                vals.push(&mut w, s.v.to_bits());
            }
            self.bit_len = w.bit_len();
            self.len += now.len();
            rest = later;
        }
    }

    /// Grows the buffer by a quarter (at least [`MIN_GROWTH_BYTES`]) when the next append might
    /// not fit, instead of letting `Vec` double it.
    fn reserve_for_append(&mut self) {
        if self.bits.capacity() - self.bits.len() < MAX_APPEND_BYTES {
            let grow = (self.bits.len() / 4).max(MIN_GROWTH_BYTES).max(MAX_APPEND_BYTES);
            self.bits.reserve_exact(grow);
        }
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if no sample was appended.
    #[cfg(any(test, feature = "testing"))]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Timestamp of the first sample.
    pub fn first_t(&self) -> Option<i64> {
        self.vals.map(|_| self.first_t)
    }

    /// Timestamp of the last sample (the lower bound for the next append).
    pub fn last_t(&self) -> Option<i64> {
        self.vals.map(|_| self.ts.t)
    }

    /// Value of the last sample (bit-exact).
    pub fn last_v(&self) -> Option<f64> {
        self.vals.map(|s| f64::from_bits(s.prev()))
    }

    /// Iterates the samples in append order.
    pub fn iter(&self) -> XorIter<'_> {
        XorIter {
            reader: BitReader::with_limit(&self.bits, self.bit_len),
            remaining: self.len,
            ts: DodState::default(),
            vals: None,
        }
    }

    /// Appends the samples with `mint <= t <= maxt` to `out`, in order: what
    /// `out.extend(self.iter().filter(..))` gives, about 2.8 times faster (a query over a day
    /// of a freshly loaded head is mostly this loop). The bit position is the loop's critical
    /// path (where a sample starts depends on the widths of the one before), so a sample's
    /// timestamp and value are both taken from one [`BitReader::peek_fast`] word when they
    /// fit (always for regular timestamps and values of a few significant bits), the stream's
    /// bound is tested once per sample instead of once per field, and decoding stops at the
    /// first sample past `maxt`. A stream that ends early (only a bug can cause it, as for
    /// [`XorIter`]) ends the samples there.
    pub fn read_range(&self, mint: i64, maxt: i64, out: &mut Vec<Sample>) {
        let mut r = BitReader::with_limit(&self.bits, self.bit_len);
        let (Ok(first_t), Ok(first_v)) = (r.read(64), r.read(64)) else { return };
        if self.len == 0 {
            return;
        }
        let (mut t, mut delta, mut v) = (first_t as i64, 0i64, first_v);
        if t > maxt {
            return;
        }
        out.reserve(self.len);
        if t >= mint {
            out.push(Sample::new(t, f64::from_bits(v)));
        }
        // The XOR window (leading, trailing zeros), valid once a header has set it.
        let (mut lead, mut trail, mut has_window) = (0u32, 0u32, false);
        for _ in 1..self.len {
            let w = r.peek_fast();
            // Delta of delta: `ones` (0..=3) one bits, a zero, then a field of that bucket's
            // width (at most 27 bits in all); four ones escape to 64 bits, read on their own.
            let ones = w.trailing_ones();
            let (dod, used) = match ones {
                0 => (0, 1),
                1..=3 => {
                    let width = BUCKET_BITS.get(ones as usize - 1).copied().unwrap_or(0);
                    (unzigzag((w >> (ones + 1)) & low_mask(width)), ones + 1 + width)
                }
                _ => {
                    r.skip(4);
                    let Ok(z) = r.read(64) else { return };
                    (unzigzag(z), 0)
                }
            };
            delta = delta.wrapping_add(dod);
            t = t.wrapping_add(delta);
            // Value: `0` repeats it, `10` reuses the window, `11` sets a new one (a 12-bit
            // header), then the XOR's significant bits, from the same word if they fit.
            let (w, used, avail) =
                if used == 0 { (r.peek_fast(), 0, PEEK_BITS) } else { (w >> used, used, PEEK_BITS - used) };
            if w & 1 == 0 {
                r.skip(used + 1);
            } else {
                let (width, shift) = if w & 2 == 0 {
                    if !has_window {
                        return;
                    }
                    (64 - lead - trail, 2)
                } else {
                    let (l, sig) = (((w >> 2) & 0x3f) as u32, ((w >> 8) & 0x3f) as u32 + 1);
                    if l + sig > 64 {
                        return;
                    }
                    (lead, trail, has_window) = (l, 64 - l - sig, true);
                    (sig, 14)
                };
                if shift + width <= avail {
                    r.skip(used + shift + width);
                    v ^= ((w >> shift) & low_mask(width)) << trail;
                } else {
                    r.skip(used + shift);
                    let Ok(x) = r.read(width) else { return };
                    v ^= x << trail;
                }
            }
            if r.overran() || t > maxt {
                return;
            }
            if t >= mint {
                out.push(Sample::new(t, f64::from_bits(v)));
            }
        }
    }

    /// Heap bytes held by this chunk (its buffer's capacity), for head memory accounting.
    /// The struct itself (`size_of::<XorChunk>()`) is the caller's to count.
    pub fn memory_bytes(&self) -> usize {
        self.bits.capacity()
    }

    /// Releases unused buffer capacity, e.g. when a chunk stops receiving appends.
    pub fn shrink_to_fit(&mut self) {
        self.bits.shrink_to_fit();
    }

    /// Size of the compressed stream in bytes (what the samples cost, without slack).
    #[cfg(any(test, feature = "testing"))]
    pub fn encoded_bytes(&self) -> usize {
        self.bits.len()
    }
}

/// Iterator over the samples of an [`XorChunk`], decoding as it goes.
#[derive(Clone, Debug)]
pub struct XorIter<'a> {
    reader: BitReader<'a>,
    remaining: usize,
    ts: DodState,
    vals: Option<XorState>,
}

impl XorIter<'_> {
    /// Decodes the next sample; `None` if the stream ends early, which only a bug can cause
    /// because the stream never leaves memory.
    fn decode_next(&mut self) -> Option<Sample> {
        match self.vals.as_mut() {
            None => {
                let t = self.reader.read(64).ok()? as i64;
                let v = self.reader.read(64).ok()?;
                self.ts = DodState::start(t);
                self.vals = Some(XorState::start(v));
                Some(Sample::new(t, f64::from_bits(v)))
            }
            Some(vals) => {
                let t = self.ts.next(&mut self.reader).ok()?;
                let v = vals.next(&mut self.reader).ok()?;
                Some(Sample::new(t, f64::from_bits(v)))
            }
        }
    }
}

impl Iterator for XorIter<'_> {
    type Item = Sample;

    fn next(&mut self) -> Option<Sample> {
        if self.remaining == 0 {
            return None;
        }
        let s = self.decode_next();
        self.remaining = if s.is_some() { self.remaining - 1 } else { 0 };
        s
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.remaining))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoding::test_support::{arb_samples, hash, regular_series};
    use proptest::prelude::*;

    fn check(samples: &[Sample]) {
        let mut c = XorChunk::new();
        for s in samples {
            c.append(s.t, s.v);
        }
        assert_eq!(c.len(), samples.len());
        assert_eq!(c.is_empty(), samples.is_empty());
        assert_eq!(c.first_t(), samples.first().map(|s| s.t));
        assert_eq!(c.last_t(), samples.last().map(|s| s.t));
        assert_eq!(c.last_v().map(f64::to_bits), samples.last().map(|s| s.v.to_bits()));
        let got: Vec<Sample> = c.iter().collect();
        assert_eq!(got, samples);
        let mut shrunk = c.clone();
        shrunk.shrink_to_fit();
        assert_eq!(shrunk.memory_bytes(), shrunk.encoded_bytes());
        assert_eq!(shrunk.iter().collect::<Vec<_>>(), samples);
        // In pieces of growing size: the same stream, length and buffer growth.
        let mut many = XorChunk::new();
        let (mut rest, mut size) = (samples, 1);
        while !rest.is_empty() {
            let (piece, tail) = rest.split_at(size.min(rest.len()));
            many.append_many(piece);
            (rest, size) = (tail, size + 1);
        }
        assert_eq!((&many.bits, many.bit_len, many.len), (&c.bits, c.bit_len, c.len));
        assert_eq!(many.bits.capacity(), c.bits.capacity(), "grows at the same appends");
        assert_eq!(many.iter().collect::<Vec<_>>(), samples);
    }

    #[test]
    fn empty_chunk() {
        let c = XorChunk::new();
        assert_eq!(c.iter().count(), 0);
        assert_eq!(c.memory_bytes(), 0);
        assert_eq!((c.first_t(), c.last_t(), c.last_v()), (None, None, None));
    }

    #[test]
    fn extremes_and_specials() {
        check(&[
            Sample::new(i64::MIN, f64::NAN),
            Sample::new(-1, crate::types::stale_nan()),
            Sample::new(0, -0.0),
            Sample::new(1, f64::INFINITY),
            Sample::new(i64::MAX - 1, f64::NEG_INFINITY),
            Sample::new(i64::MAX, f64::from_bits(1)),
        ]);
    }

    #[test]
    fn append_after_iterating_and_cloning() {
        let samples = regular_series(1000, 1_700_000_000_000, 15_000, |i| (i % 7) as f64);
        let mut c = XorChunk::new();
        for (i, s) in samples.iter().enumerate() {
            c.append(s.t, s.v);
            if i % 97 == 0 {
                assert_eq!(c.clone().iter().collect::<Vec<_>>(), &samples[..=i]);
            }
        }
        // Slack from quarter growth stays bounded.
        assert!(c.memory_bytes() <= c.encoded_bytes() * 5 / 4 + MIN_GROWTH_BYTES + MAX_APPEND_BYTES);
    }

    proptest! {
        #[test]
        fn round_trip(samples in arb_samples(1..300)) {
            check(&samples);
        }

        #[test]
        fn read_range_matches_filtered_iteration(samples in arb_samples(0..300), a in any::<u16>(), b in any::<u16>()) {
            let mut c = XorChunk::new();
            for s in &samples {
                c.append(s.t, s.v);
            }
            // Bounds at, between and beyond the samples' timestamps.
            let pick = |x: u16| match samples.len() {
                0 => i64::from(x),
                n => samples[usize::from(x) % n].t.saturating_add(i64::from(x % 3) - 1),
            };
            let (mint, maxt) = (pick(a).min(pick(b)), pick(a).max(pick(b)));
            for (mint, maxt) in [(mint, maxt), (i64::MIN, i64::MAX), (maxt, mint)] {
                let want: Vec<(i64, u64)> =
                    c.iter().filter(|s| s.t >= mint && s.t <= maxt).map(|s| (s.t, s.v.to_bits())).collect();
                let mut got = vec![Sample::new(-7, 1.5)];
                c.read_range(mint, maxt, &mut got);
                let got: Vec<(i64, u64)> = got[1..].iter().map(|s| (s.t, s.v.to_bits())).collect();
                prop_assert_eq!(got, want);
            }
            // A stream cut short (a bug) ends both at the same sample.
            let mut cut = c.clone();
            cut.bit_len = c.bit_len.saturating_sub(u64::from(a) % 200);
            let want: Vec<(i64, u64)> = cut.iter().map(|s| (s.t, s.v.to_bits())).collect();
            let mut got = Vec::new();
            cut.read_range(i64::MIN, i64::MAX, &mut got);
            let got: Vec<(i64, u64)> = got.iter().map(|s| (s.t, s.v.to_bits())).collect();
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn read_range_of_regular_series_and_wide_values() {
        // Long runs of window reuse, new windows wider than one peek, and dod escapes.
        let mut samples = regular_series(1500, 1_700_000_000_000, 10_000, |i| ((i * 7919) % 101) as f64);
        samples.extend(
            (0..300)
                .map(|i| Sample::new(1_800_000_000_000 + i * i * 1_000_003, f64::from_bits(hash(i as u64)))),
        );
        let mut c = XorChunk::new();
        for s in &samples {
            c.append(s.t, s.v);
        }
        let mut got = Vec::new();
        c.read_range(i64::MIN, i64::MAX, &mut got);
        assert_eq!(got.len(), samples.len());
        assert!(got.iter().zip(&samples).all(|(a, b)| a.t == b.t && a.v.to_bits() == b.v.to_bits()));
        got.clear();
        c.read_range(samples[100].t, samples[1600].t - 1, &mut got);
        assert_eq!(got.len(), 1500);
        assert_eq!(got[0].t, samples[100].t);
    }
}

//! [`BlockStats`]: what a query needs to aggregate a whole block without decoding it.
//!
//! Encoding (see `docs/format/block.md`): the time range and count as varints, then a header
//! word holding the storage class ([`super::float_class`]) of each of the five floats and a
//! flag for a non-zero stale count, then the floats. Integer-valued metrics take ~20 bytes.

use super::float_class::{FloatClass, read_float};
use super::varint::{get_uvarint, get_varint, put_uvarint, put_varint};
use crate::error::{Error, Result};
use crate::types::{Sample, is_stale};

/// Per-block statistics kept in the partition file index so queries can answer
/// `min/max/sum/count/last..._over_time` of a whole block without decoding it.
///
/// Stale markers are counted apart and excluded from every value statistic, because PromQL
/// never sees them as values. `PartialEq` compares floats by bits, except that any two NaNs are
/// equal: the payload of a NaN produced by arithmetic (a `sum` over NaNs) is unspecified.
#[derive(Debug, Clone, Copy)]
pub struct BlockStats {
    /// First timestamp (of any sample, stale markers included).
    pub min_t: i64,
    /// Last timestamp (of any sample, stale markers included).
    pub max_t: i64,
    /// Samples whose value is not the stale marker.
    pub count: u32,
    /// Stale markers in the block.
    pub stale_count: u32,
    /// Plain `f64` sum, in time order starting from `0.0`, of the non-stale values.
    pub sum: f64,
    /// Smallest non-stale value with Prometheus `min_over_time` semantics: a NaN is replaced by
    /// any later non-NaN value, so the result is NaN only if all values are NaN (or `count == 0`).
    pub min: f64,
    /// Largest non-stale value, with the same NaN rules as `min`.
    pub max: f64,
    /// First non-stale value (NaN if `count == 0`).
    pub first: f64,
    /// Last non-stale value (NaN if `count == 0`).
    pub last: f64,
    /// No non-stale value is below the non-stale value before it: `v[i] < v[i - 1]` is false
    /// for every pair, the test Prometheus' `rate`/`increase` use for a counter reset (a NaN
    /// compares false there too). A window over whole such blocks sees no reset inside any of
    /// them, only, perhaps, between them. Only partition files of format version 3 on store it;
    /// older statistics read as `false` (unknown), which only costs a decode.
    pub no_decrease: bool,
    /// Every non-stale value is an integer of magnitude below 2^53 and not -0.0, so `sum` is
    /// exact and can stand for the block's samples in an exact sum (`sum_over_time`,
    /// `avg_over_time`) without reading the block. Only partition files of format version 4
    /// store it; older statistics read as `false` (unknown), and a reader then looks at the
    /// block's header instead.
    pub integral: bool,
}

impl PartialEq for BlockStats {
    fn eq(&self, o: &Self) -> bool {
        (self.min_t, self.max_t, self.count, self.stale_count, self.no_decrease, self.integral)
            == (o.min_t, o.max_t, o.count, o.stale_count, o.no_decrease, o.integral)
            && self
                .floats()
                .iter()
                .zip(o.floats())
                .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()))
    }
}

/// Bit of the header word set when `stale_count` follows (most blocks have no stale marker).
const HAS_STALE: u64 = 1 << 10;

impl BlockStats {
    /// Computes the statistics of `samples` (in time order). An empty slice gives zero counts,
    /// `min_t = max_t = 0`, `sum = 0` and NaN for the other values.
    pub fn from_samples(samples: &[Sample]) -> BlockStats {
        let mut st = BlockStats {
            min_t: samples.first().map_or(0, |s| s.t),
            max_t: samples.last().map_or(0, |s| s.t),
            count: 0,
            stale_count: 0,
            sum: 0.0,
            min: f64::NAN,
            max: f64::NAN,
            first: f64::NAN,
            last: f64::NAN,
            no_decrease: true,
            integral: true,
        };
        for s in samples {
            let v = s.v;
            if is_stale(v) {
                st.stale_count = st.stale_count.saturating_add(1);
                continue;
            }
            if st.count == 0 {
                st.first = v;
                st.min = v;
                st.max = v;
            }
            if st.count > 0 && v < st.last {
                st.no_decrease = false;
            }
            st.integral &= super::scaled::is_small_integer(v);
            st.count = st.count.saturating_add(1);
            st.sum += v;
            // Prometheus: `if f < min || math.IsNaN(min) { min = f }`.
            if v < st.min || st.min.is_nan() {
                st.min = v;
            }
            if v > st.max || st.max.is_nan() {
                st.max = v;
            }
            st.last = v;
        }
        st
    }

    fn floats(&self) -> [f64; 5] {
        [self.sum, self.min, self.max, self.first, self.last]
    }

    /// The five floats' storage classes, and their 2-bit codes placed from bit `shift` of a
    /// header word (both encodings keep them there, at different offsets).
    fn classes(&self, shift: usize) -> ([FloatClass; 5], u64) {
        let classes = self.floats().map(FloatClass::of);
        let word = classes
            .iter()
            .enumerate()
            .fold(0u64, |acc, (i, c)| acc | u64::from(c.class()) << (shift + 2 * i));
        (classes, word)
    }

    /// Reads the five floats whose classes `word` holds from bit `shift` on, in the order
    /// `sum, min, max, first, last`.
    fn read_floats(word: u64, shift: usize, bytes: &[u8], at: &mut usize) -> Result<[f64; 5]> {
        let mut floats = [0.0; 5];
        for (i, f) in floats.iter_mut().enumerate() {
            *f = read_float(((word >> (shift + 2 * i)) & 3) as u8, bytes, at)?;
        }
        Ok(floats)
    }

    /// Appends the compact, self-delimiting encoding (typically 12–20 bytes) of partition files
    /// of format version 1, which has no room for [`no_decrease`](Self::no_decrease).
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.encode_relative(0, out);
    }

    /// Like [`encode`](Self::encode) but stores `min_t` relative to `base_t`, which the decoder
    /// must be given again. A file index that passes the previous block's `max_t` saves ~4
    /// bytes per block (a one-interval gap instead of a full epoch timestamp).
    pub fn encode_relative(&self, base_t: i64, out: &mut Vec<u8>) {
        put_varint(out, self.min_t.wrapping_sub(base_t));
        put_uvarint(out, self.max_t.wrapping_sub(self.min_t) as u64);
        put_uvarint(out, u64::from(self.count));
        let (classes, mut word) = self.classes(0);
        if self.stale_count != 0 {
            word |= HAS_STALE;
        }
        put_uvarint(out, word);
        if self.stale_count != 0 {
            put_uvarint(out, u64::from(self.stale_count));
        }
        for c in classes {
            c.write(out);
        }
    }

    /// Decodes what [`encode`](Self::encode) wrote at `*pos`, advancing `*pos` past it;
    /// `no_decrease` is false (not recorded).
    pub fn decode(bytes: &[u8], pos: &mut usize) -> Result<BlockStats> {
        Self::decode_relative(bytes, pos, 0)
    }

    /// Decodes what [`encode_relative`](Self::encode_relative) wrote with the same `base_t`.
    pub fn decode_relative(bytes: &[u8], pos: &mut usize, base_t: i64) -> Result<BlockStats> {
        let mut at = *pos;
        let min_t = get_varint(bytes, &mut at)?.wrapping_add(base_t);
        let max_t = min_t.wrapping_add(get_uvarint(bytes, &mut at)? as i64);
        let count = get_u32(bytes, &mut at)?;
        let word = get_uvarint(bytes, &mut at)?;
        if word & !(HAS_STALE | 0x3ff) != 0 {
            return Err(Error::Decode(format!("block stats header word {word:#x} has unknown bits")));
        }
        let stale_count = if word & HAS_STALE != 0 { get_u32(bytes, &mut at)? } else { 0 };
        let [sum, min, max, first, last] = Self::read_floats(word, 0, bytes, &mut at)?;
        *pos = at;
        Ok(BlockStats {
            min_t,
            max_t,
            count,
            stale_count,
            sum,
            min,
            max,
            first,
            last,
            no_decrease: false,
            integral: false,
        })
    }
}

/// What one block of a series leaves behind for the next block's statistics to be predicted
/// from, in a partition file's block list (format version 2, `docs/format/block.md`,
/// "Chained BlockStats"). Regular series repeat the same gap between blocks, the same time
/// span and the same count block after block (a 10 s scrape cut into hour blocks: 10 s, 3590 s,
/// 360 samples); a chained entry says "same as before" with a bit instead of 5-9 bytes.
///
/// Start each series' block list with [`StatsChain::default`] (the layout written now, format
/// version 4) or [`StatsChain::for_version`]; the encoder and the decoder advance their chains
/// in step.
#[derive(Debug, Clone, Copy)]
pub struct StatsChain {
    prev_max_t: i64,
    gap: i64,
    span: u64,
    count: u32,
    /// The partition file's format version (2 or later): which flags the word has, so where
    /// its float classes start.
    version: u32,
}

impl Default for StatsChain {
    fn default() -> Self {
        StatsChain::for_version(4)
    }
}

impl StatsChain {
    /// A chain at the start of a block list in a partition file of format `version` (2 or
    /// later; version 1 does not chain).
    pub fn for_version(version: u32) -> StatsChain {
        StatsChain { prev_max_t: 0, gap: 0, span: 0, count: 0, version }
    }

    fn advance(&mut self, st: &BlockStats) {
        *self = StatsChain {
            prev_max_t: st.max_t,
            gap: st.min_t.wrapping_sub(self.prev_max_t),
            span: st.max_t.wrapping_sub(st.min_t) as u64,
            count: st.count,
            version: self.version,
        };
    }

    /// Bit of the word where the float classes start: after the flags of its version.
    fn classes_at(&self) -> u32 {
        match self.version {
            ..=2 => 4,
            3 => 5,
            _ => 6,
        }
    }

    /// The word has the [`NO_DECREASE`] bit (version 3 on).
    fn has_no_decrease(&self) -> bool {
        self.version >= 3
    }

    /// The word has the [`INTEGRAL`] bit (version 4 on).
    fn has_integral(&self) -> bool {
        self.version >= 4
    }
}

/// Chained encoding's header word: the gap from the previous block, the span and the count
/// repeat the previous block's and are left out; `stale_count` follows; (version 3 on) the
/// block's values never decrease; (version 4 on) they are all integers. The float classes
/// follow, from bit 4 (version 2), 5 (version 3) or 6 (version 4) on, so a regular series of
/// non-negative integers has a one-byte word in every version.
const SAME_GAP: u64 = 1;
const SAME_SPAN: u64 = 1 << 1;
const SAME_COUNT: u64 = 1 << 2;
const CHAINED_STALE: u64 = 1 << 3;
const NO_DECREASE: u64 = 1 << 4;
const INTEGRAL: u64 = 1 << 5;

impl BlockStats {
    /// Appends the chained encoding (format versions 2 to 4, as `chain` says): a header word
    /// first, then only the time and count fields that differ from what `chain` predicts, then
    /// the stale count and the five floats as in [`encode`](Self::encode). Advances `chain`
    /// past this block.
    pub fn encode_chained(&self, chain: &mut StatsChain, out: &mut Vec<u8>) {
        let gap = self.min_t.wrapping_sub(chain.prev_max_t);
        let span = self.max_t.wrapping_sub(self.min_t) as u64;
        let (classes, mut word) = self.classes(chain.classes_at() as usize);
        if chain.has_no_decrease() && self.no_decrease {
            word |= NO_DECREASE;
        }
        if chain.has_integral() && self.integral {
            word |= INTEGRAL;
        }
        if gap == chain.gap {
            word |= SAME_GAP;
        }
        if span == chain.span {
            word |= SAME_SPAN;
        }
        if self.count == chain.count {
            word |= SAME_COUNT;
        }
        if self.stale_count != 0 {
            word |= CHAINED_STALE;
        }
        put_uvarint(out, word);
        if word & SAME_GAP == 0 {
            put_varint(out, gap);
        }
        if word & SAME_SPAN == 0 {
            put_uvarint(out, span);
        }
        if word & SAME_COUNT == 0 {
            put_uvarint(out, u64::from(self.count));
        }
        if self.stale_count != 0 {
            put_uvarint(out, u64::from(self.stale_count));
        }
        for c in classes {
            c.write(out);
        }
        chain.advance(self);
    }

    /// Decodes what [`encode_chained`](Self::encode_chained) wrote at `*pos` with a chain in
    /// the same state, advancing `*pos` and `chain`. On error neither moves.
    pub fn decode_chained(bytes: &[u8], pos: &mut usize, chain: &mut StatsChain) -> Result<BlockStats> {
        let mut at = *pos;
        let word = get_uvarint(bytes, &mut at)?;
        let classes_at = chain.classes_at();
        if word >> (classes_at + 10) != 0 {
            return Err(Error::Decode(format!("block stats header word {word:#x} has unknown bits")));
        }
        let gap = if word & SAME_GAP != 0 { chain.gap } else { get_varint(bytes, &mut at)? };
        let span = if word & SAME_SPAN != 0 { chain.span } else { get_uvarint(bytes, &mut at)? };
        let count = if word & SAME_COUNT != 0 { chain.count } else { get_u32(bytes, &mut at)? };
        let stale_count = if word & CHAINED_STALE != 0 { get_u32(bytes, &mut at)? } else { 0 };
        let min_t = chain.prev_max_t.wrapping_add(gap);
        let max_t = min_t.wrapping_add(span as i64);
        let [sum, min, max, first, last] = Self::read_floats(word, classes_at as usize, bytes, &mut at)?;
        let no_decrease = chain.has_no_decrease() && word & NO_DECREASE != 0;
        let integral = chain.has_integral() && word & INTEGRAL != 0;
        let st = BlockStats { min_t, max_t, count, stale_count, sum, min, max, first, last, no_decrease, integral };
        chain.advance(&st);
        *pos = at;
        Ok(st)
    }
}

fn get_u32(bytes: &[u8], pos: &mut usize) -> Result<u32> {
    let v = get_uvarint(bytes, pos)?;
    u32::try_from(v).map_err(|_| Error::Decode(format!("block stats count {v} exceeds u32")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoding::test_support::{arb_f64, arb_samples};
    use crate::types::stale_nan;
    use proptest::prelude::*;

    /// The obvious reference: filter out stale markers, then fold as Prometheus does.
    fn reference(samples: &[Sample]) -> BlockStats {
        let live: Vec<f64> = samples.iter().map(|s| s.v).filter(|v| !is_stale(*v)).collect();
        let mut min = live.first().copied().unwrap_or(f64::NAN);
        let mut max = min;
        for &f in &live {
            if f < min || min.is_nan() {
                min = f;
            }
            if f > max || max.is_nan() {
                max = f;
            }
        }
        BlockStats {
            min_t: samples.first().map_or(0, |s| s.t),
            max_t: samples.last().map_or(0, |s| s.t),
            count: live.len() as u32,
            stale_count: (samples.len() - live.len()) as u32,
            sum: live.iter().fold(0.0, |a, b| a + b),
            min,
            max,
            first: live.first().copied().unwrap_or(f64::NAN),
            last: live.last().copied().unwrap_or(f64::NAN),
            no_decrease: live.windows(2).all(|p| p[1].partial_cmp(&p[0]) != Some(std::cmp::Ordering::Less)),
            integral: live.iter().all(|v| v.fract() == 0.0 && v.abs() < 2f64.powi(53) && !(*v == 0.0 && v.is_sign_negative())),
        }
    }

    /// Round-trips the version 1 encoding, which keeps neither `no_decrease` nor `integral`.
    fn round_trip(st: &BlockStats) -> usize {
        let mut out = vec![0xEE];
        st.encode(&mut out);
        let len = out.len() - 1;
        out.push(0xAB);
        let mut pos = 1;
        let got = BlockStats::decode(&out, &mut pos).unwrap();
        assert_eq!(got, BlockStats { no_decrease: false, integral: false, ..*st });
        // The encoding keeps NaN payloads too.
        assert_eq!(got.floats().map(f64::to_bits), st.floats().map(f64::to_bits));
        assert_eq!(pos, out.len() - 1);
        len
    }

    #[test]
    fn prometheus_nan_rules() {
        let s = |vs: &[f64]| {
            let samples: Vec<Sample> =
                vs.iter().enumerate().map(|(i, &v)| Sample::new(i as i64, v)).collect();
            BlockStats::from_samples(&samples)
        };
        let st = s(&[f64::NAN, 3.0, f64::NAN, 1.0, stale_nan()]);
        assert_eq!((st.min, st.max, st.count, st.stale_count), (1.0, 3.0, 4, 1));
        assert!(st.sum.is_nan() && st.first.is_nan());
        assert_eq!(st.last, 1.0);
        let st = s(&[stale_nan(), stale_nan()]);
        assert_eq!((st.count, st.stale_count, st.sum), (0, 2, 0.0));
        assert!(st.min.is_nan() && st.max.is_nan() && st.first.is_nan() && st.last.is_nan());
        assert!(s(&[f64::NAN, f64::NAN]).min.is_nan());
    }

    #[test]
    fn integer_stats_are_small() {
        let samples: Vec<Sample> =
            (0..1024).map(|i| Sample::new(1_700_000_000_000 + i * 10_000, (i % 100) as f64)).collect();
        let len = round_trip(&BlockStats::from_samples(&samples));
        assert!(len <= 24, "{len} bytes");
    }

    #[test]
    fn relative_encoding_is_shorter_and_round_trips() {
        let samples: Vec<Sample> =
            (0..360).map(|i| Sample::new(1_700_000_000_000 + i * 10_000, (i % 100) as f64)).collect();
        let st = BlockStats::from_samples(&samples);
        let (mut abs, mut rel) = (Vec::new(), Vec::new());
        st.encode(&mut abs);
        st.encode_relative(1_700_000_000_000 - 10_000, &mut rel);
        assert!(rel.len() + 3 <= abs.len(), "{} vs {}", rel.len(), abs.len());
        let mut pos = 0;
        let got = BlockStats::decode_relative(&rel, &mut pos, 1_700_000_000_000 - 10_000).unwrap();
        assert_eq!(got, BlockStats { no_decrease: false, integral: false, ..st });
        assert_eq!(pos, rel.len());
    }

    #[test]
    fn rejects_bad_bytes() {
        let mut out = Vec::new();
        BlockStats::from_samples(&[Sample::new(1, 2.5)]).encode(&mut out);
        for cut in 0..out.len() {
            assert!(BlockStats::decode(&out[..cut], &mut 0).is_err(), "truncated at {cut}");
        }
        let mut bad_tags = Vec::new();
        for v in [0u64, 0, 1, 1 << 11] {
            put_uvarint(&mut bad_tags, v);
        }
        assert!(BlockStats::decode(&bad_tags, &mut 0).is_err());
    }

    fn arb_stats() -> impl Strategy<Value = BlockStats> {
        (any::<(i64, i64)>(), any::<(u32, u32)>(), proptest::array::uniform5(arb_f64()), any::<(bool, bool)>())
            .prop_map(|(t, c, f, (no_decrease, integral))| BlockStats {
                min_t: t.0,
                max_t: t.1,
                count: c.0,
                stale_count: c.1,
                sum: f[0],
                min: f[1],
                max: f[2],
                first: f[3],
                last: f[4],
                no_decrease,
                integral,
            })
    }

    /// Encodes a series' block list chained, decodes it back, checks every entry and that the
    /// decoder stops exactly where the encoder did. Returns the encoded length.
    fn chained_round_trip(list: &[BlockStats]) -> usize {
        let mut out = vec![0xEE];
        let mut chain = StatsChain::default();
        for st in list {
            st.encode_chained(&mut chain, &mut out);
        }
        let len = out.len() - 1;
        out.push(0xAB);
        let (mut pos, mut chain) = (1, StatsChain::default());
        for st in list {
            let got = BlockStats::decode_chained(&out, &mut pos, &mut chain).unwrap();
            assert_eq!(&got, st);
            assert_eq!(got.floats().map(f64::to_bits), st.floats().map(f64::to_bits));
        }
        assert_eq!(pos, out.len() - 1);
        len
    }

    /// A regular integer series cut into hour blocks: 10 s apart, 360 samples a block.
    fn hour_blocks(n: i64) -> Vec<BlockStats> {
        (0..n)
            .map(|b| {
                let samples: Vec<Sample> = (0..360)
                    .map(|i| Sample::new(1_700_000_010_000 + (b * 360 + i) * 10_000, ((b + i) % 90) as f64))
                    .collect();
                BlockStats::from_samples(&samples)
            })
            .collect()
    }

    #[test]
    fn chained_encoding_drops_repeated_fields() {
        let list = hour_blocks(24);
        let mut relative = Vec::new();
        let mut base_t = 0;
        for st in &list {
            st.encode_relative(base_t, &mut relative);
            base_t = st.max_t;
        }
        let chained = chained_round_trip(&list);
        // After the first two blocks, gap, span and count repeat: 8 bytes less per block.
        assert!(chained + 8 * 22 <= relative.len(), "{chained} vs {}", relative.len());
    }

    #[test]
    fn chained_rejects_bad_bytes() {
        let list = hour_blocks(3);
        let mut out = Vec::new();
        let mut chain = StatsChain::default();
        for st in &list {
            st.encode_chained(&mut chain, &mut out);
        }
        for cut in 0..out.len() {
            let (mut pos, mut chain) = (0, StatsChain::default());
            let all = (0..3)
                .try_for_each(|_| BlockStats::decode_chained(&out[..cut], &mut pos, &mut chain).map(drop));
            assert!(all.is_err(), "truncated at {cut}");
        }
        let mut bad_word = Vec::new();
        put_uvarint(&mut bad_word, 1 << 16);
        assert!(BlockStats::decode_chained(&bad_word, &mut 0, &mut StatsChain::default()).is_err());
        bad_word.clear();
        put_uvarint(&mut bad_word, 1 << 15);
        assert!(BlockStats::decode_chained(&bad_word, &mut 0, &mut StatsChain::for_version(3)).is_err());
        bad_word.clear();
        put_uvarint(&mut bad_word, 1 << 14);
        assert!(BlockStats::decode_chained(&bad_word, &mut 0, &mut StatsChain::for_version(2)).is_err());
    }

    /// A counter's hour blocks say they never decrease (format version 3 on) and hold integers
    /// (version 4), in the one-byte word of a regular integer series; older layouts have no
    /// room for the flags and read them false.
    #[test]
    fn chained_keeps_no_decrease_from_version_3_and_integral_from_version_4() {
        let list: Vec<BlockStats> = (0..4)
            .map(|b| {
                let samples: Vec<Sample> = (0..360)
                    .map(|i| {
                        Sample::new(1_700_000_010_000 + (b * 360 + i) * 10_000, ((b * 360 + i) * 7) as f64)
                    })
                    .collect();
                BlockStats::from_samples(&samples)
            })
            .collect();
        assert!(list.iter().all(|st| st.no_decrease && st.integral));
        let mut dropping = list.clone();
        dropping[1].no_decrease = false;
        dropping[2].integral = false;
        let (v4, v4_dropping) = (chained_round_trip(&list), chained_round_trip(&dropping));
        assert_eq!(v4, v4_dropping, "the flags cost no byte");
        let mut v3_len = 0;
        for version in [2, 3, 4] {
            let (mut out, mut chain) = (Vec::new(), StatsChain::for_version(version));
            for st in &list {
                st.encode_chained(&mut chain, &mut out);
            }
            let (mut pos, mut chain) = (0, StatsChain::for_version(version));
            for st in &list {
                let got = BlockStats::decode_chained(&out, &mut pos, &mut chain).unwrap();
                assert_eq!(got, BlockStats { no_decrease: version >= 3, integral: version >= 4, ..*st });
            }
            assert_eq!(pos, out.len());
            if version == 3 {
                v3_len = out.len();
            }
        }
        assert_eq!(v3_len, v4, "a regular integer series' word stays one byte");
    }

    proptest! {
        #[test]
        fn chained_lists_round_trip(list in proptest::collection::vec(arb_stats(), 0..12)) {
            chained_round_trip(&list);
        }

        #[test]
        fn chained_repeats_round_trip(st in arb_stats(), gaps in proptest::collection::vec(0i64..3, 1..8)) {
            // Runs of blocks that repeat some of the previous block's fields exercise each flag.
            let mut list = vec![st];
            for g in gaps {
                let prev = list[list.len() - 1];
                let mut next = prev;
                next.min_t = prev.max_t.wrapping_add(g);
                next.max_t = next.min_t.wrapping_add(prev.max_t.wrapping_sub(prev.min_t));
                next.count = if g == 2 { prev.count.wrapping_add(1) } else { prev.count };
                list.push(next);
            }
            chained_round_trip(&list);
        }

        #[test]
        fn chained_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let (mut pos, mut chain) = (0, StatsChain::default());
            while BlockStats::decode_chained(&bytes, &mut pos, &mut chain).is_ok() {
                prop_assert!(pos <= bytes.len());
                if pos == bytes.len() {
                    break;
                }
            }
        }
    }

    proptest! {
        #[test]
        fn matches_reference_and_round_trips(samples in arb_samples(1..200)) {
            let st = BlockStats::from_samples(&samples);
            prop_assert_eq!(st, reference(&samples));
            round_trip(&st);
        }

        #[test]
        fn arbitrary_fields_round_trip(
            t: (i64, i64), counts: (u32, u32), f in proptest::array::uniform5(arb_f64())
        ) {
            round_trip(&BlockStats {
                min_t: t.0, max_t: t.1, count: counts.0, stale_count: counts.1,
                sum: f[0], min: f[1], max: f[2], first: f[3], last: f[4], no_decrease: false,
                integral: false,
            });
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut pos = 0;
            if BlockStats::decode(&bytes, &mut pos).is_ok() {
                prop_assert!(pos <= bytes.len());
            }
        }
    }
}

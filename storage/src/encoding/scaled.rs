//! The scaled-integer value codec: most metrics are integers or have a few decimal digits, so a
//! block whose values are all `m / 10^e` for integers `m` (|m| <= 2^53) stores the integers
//! `m`, transformed to residuals and packed (FOR, Rice or Runs; see [`super::intseq`]). This is what
//! gets TSBS-like data far below Gorilla XOR's ~1 byte per sample.
//!
//! A value qualifies at exponent `e` only if decoding gives back its exact bits:
//! `(m as f64) / 10^e` (plain `m as f64` for `e = 0`) must equal it bit for bit, checked per
//! value. That rules out -0.0, NaN, ±Inf and values like `0.1 + 0.2`. Values that do not
//! qualify (typically the stale marker at the end of a series) are stored as *exceptions*:
//! their index and `bits XOR STALE_NAN_BITS` as uvarints (so a stale marker costs two bytes),
//! while the integer stream repeats the previous integer at that index.
//!
//! The integers are stored as an [`super::intseq`] sequence (every residual order and packing
//! is tried; the smallest wins). Layout (see `docs/format/block.md`):
//!
//! ```text
//! ┌─────────────────────────────────────────────┬────────────────────────────┬────────────────┐
//! │ params <u8>: e | has_exc << 5 | order << 6  │ n_exc <uvarint>?                            │
//! ├─────────────────────────────────────────────┴─────────────────────────────────────────────┤
//! │ n_exc x ( index gap <uvarint>, bits ^ STALE_NAN_BITS <uvarint> )                          │
//! ├───────────────────────────────────────────────────────────────────────────────────────────┤
//! │ integer sequence: seeds and residuals of `order`, packed as the block's value codec says  │
//! └───────────────────────────────────────────────────────────────────────────────────────────┘
//! ```

use super::intseq::{self, ALL_PACKINGS, ORDER_DELTA, ORDER_DOD, ORDER_GRID, ORDER_RAW, SeqPlan};
use super::varint::{get_u8, get_uvarint, put_uvarint, uvarint_len};
use crate::error::{Error, Result};
use crate::types::{STALE_NAN_BITS, Sample};

/// Largest decimal exponent tried (10^18 is exact in f64; beyond, |m| would exceed 2^53 for
/// any value above 0.01 anyway).
pub(crate) const MAX_EXPONENT: u8 = 18;

/// Exact powers of ten 10^0 ..= 10^18.
const POW10: [f64; MAX_EXPONENT as usize + 1] =
    [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18];

/// Integers beyond ±2^53 are not all representable as f64, so they never qualify.
const MAX_MANTISSA: f64 = 9_007_199_254_740_992.0;

/// Bit of the params byte set when an exception count follows.
const HAS_EXCEPTIONS: u8 = 0x20;
/// Bits of the params byte holding the exponent.
const EXPONENT_MASK: u8 = 0x1f;

/// Marks a value that qualifies at no exponent.
const NO_EXPONENT: u8 = u8::MAX;

/// Residual orders tried for values, fastest to decode first. (A grid, i.e. a linear trend, is
/// covered well enough by deltas of deltas and was never the smallest in the measured shapes.)
const ORDERS: [u8; 3] = [ORDER_DELTA, ORDER_RAW, ORDER_DOD];

/// The decoder's mapping from integer to value; the encoder checks candidates with it, so the
/// round trip is exact by construction.
#[inline]
fn descale(m: i64, pow: f64) -> f64 {
    // Dividing by 1.0 is exact, so skipping it for integers changes nothing but speed.
    if pow == 1.0 { m as f64 } else { m as f64 / pow }
}

/// The integer `m` with `v == m / 10^e` bit for bit, if there is one (`pow` is 10^e).
#[inline]
fn scale(v: f64, pow: f64) -> Option<i64> {
    let scaled = v * pow;
    if !scaled.is_finite() || scaled.abs() >= MAX_MANTISSA {
        return None;
    }
    let m = nearest_integer(scaled);
    (descale(m, pow).to_bits() == v.to_bits()).then_some(m)
}

/// `x` rounded to a nearest integer, for |x| < 2^53. Cheaper than `f64::round` (a libm call
/// on baseline x86-64); exactness does not depend on it because callers verify the result.
#[inline]
fn nearest_integer(x: f64) -> i64 {
    // From 2^52 on every f64 is an integer; below, adding ±0.5 and truncating rounds.
    if x.abs() >= MAX_MANTISSA / 2.0 { x as i64 } else { (x + 0.5f64.copysign(x)) as i64 }
}

/// Smallest exponent at which `v` round-trips exactly, with the integer, if any.
fn min_exponent(v: f64) -> Option<(u8, i64)> {
    // Integers, most values of most series, qualify at exponent 0 (what `scale(v, 1.0)` finds).
    if is_small_integer(v) {
        return Some((0, v as i64));
    }
    if !v.is_finite() {
        return None;
    }
    for (e, &pow) in (0u8..).zip(POW10.iter()) {
        if (v * pow).abs() >= MAX_MANTISSA {
            return None;
        }
        if let Some(m) = scale(v, pow) {
            return Some((e, m));
        }
    }
    None
}

/// The chosen encoding of one block's values.
#[derive(Debug)]
pub(crate) struct Plan {
    exponent: u8,
    seq: SeqPlan,
    /// Integers at every index (exceptions hold the previous integer).
    ms: Vec<i64>,
    /// Indexes and bits of the values stored as exceptions.
    exceptions: Vec<(usize, u64)>,
    /// Exact encoded size in bytes.
    len: usize,
}

impl Plan {
    /// Exact size in bytes of what [`Plan::write`] appends.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The packing id of the integer sequence (the block header records it in the codec id).
    pub(crate) fn packing(&self) -> u8 {
        self.seq.packing.id()
    }

    /// Appends the value section.
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        let start = out.len();
        let has_exceptions = if self.exceptions.is_empty() { 0 } else { HAS_EXCEPTIONS };
        out.push(self.exponent | has_exceptions | self.seq.order << 6);
        if !self.exceptions.is_empty() {
            put_uvarint(out, self.exceptions.len() as u64);
        }
        let mut next = 0;
        for &(i, bits) in &self.exceptions {
            put_uvarint(out, (i - next) as u64);
            put_uvarint(out, bits ^ STALE_NAN_BITS);
            next = i + 1;
        }
        intseq::write(&self.ms, &self.seq, out);
        debug_assert_eq!(out.len() - start, self.len, "scaled plan size estimate");
    }
}

/// Looks for the cheapest scaled encoding of `values`. Returns `None` when too many values do
/// not qualify for any exponent (then Gorilla XOR is the better codec), so noisy floats cost
/// little time here. `packing` pins the packing id (tests use it).
pub(crate) fn plan(values: &[f64], packing: Option<u8>) -> Option<Plan> {
    let n = values.len();
    // More exceptions than this and the block is not a scaled-integer block.
    let max_exceptions = n / 8 + 2;
    let mut exps = Vec::with_capacity(n);
    let mut hist = [0usize; MAX_EXPONENT as usize + 1];
    let mut misses = 0;
    for &v in values {
        let found = min_exponent(v);
        match found.and_then(|(e, _)| hist.get_mut(usize::from(e))) {
            Some(h) => *h += 1,
            None => {
                misses += 1;
                if misses > max_exceptions {
                    return None;
                }
            }
        }
        exps.push(found.unwrap_or((NO_EXPONENT, 0)));
    }
    let mut best: Option<Plan> = None;
    let mut covered = 0;
    let mut scratch = Vec::new();
    for (exponent, &count) in (0u8..).zip(hist.iter()) {
        covered += count;
        if count == 0 || n - covered > max_exceptions {
            continue;
        }
        let candidate = plan_at(values, &exps, exponent, packing, &mut scratch);
        if best.as_ref().is_none_or(|b| candidate.len < b.len) {
            best = Some(candidate);
        }
    }
    best
}

/// The cheapest plan at one exponent: values needing a larger one become exceptions.
fn plan_at(
    values: &[f64],
    exps: &[(u8, i64)],
    exponent: u8,
    packing: Option<u8>,
    scratch: &mut Vec<i64>,
) -> Plan {
    let pow = POW10.get(usize::from(exponent)).copied().unwrap_or(1.0);
    let mut exceptions = Vec::new();
    let mut ms = Vec::with_capacity(values.len());
    // A value that qualified at a smaller exponent usually qualifies at this one too, but not
    // always (its integer may pass 2^53), so each is checked again at this exponent.
    let fits = |(&v, &(e, m)): (&f64, &(u8, i64))| match e.cmp(&exponent) {
        std::cmp::Ordering::Equal => Some(m),
        std::cmp::Ordering::Less => scale(v, pow),
        std::cmp::Ordering::Greater => None,
    };
    // An exception repeats the previous integer; before the first qualifying value, that one.
    let mut prev = values.iter().zip(exps).find_map(fits).unwrap_or(0);
    for (i, pair) in values.iter().zip(exps).enumerate() {
        match fits(pair) {
            Some(m) => prev = m,
            None => exceptions.push((i, pair.0.to_bits())),
        }
        ms.push(prev);
    }
    let mut next = 0;
    let exceptions_len: usize = exceptions
        .iter()
        .map(|&(i, bits)| {
            let len = uvarint_len((i - next) as u64) + uvarint_len(bits ^ STALE_NAN_BITS);
            next = i + 1;
            len
        })
        .sum();
    let count_len = if exceptions.is_empty() { 0 } else { uvarint_len(exceptions.len() as u64) };
    let fixed = 1 + count_len + exceptions_len;

    let forced;
    let packings = match packing {
        Some(p) => {
            forced = [p];
            &forced[..]
        }
        None => &ALL_PACKINGS[..],
    };
    let seq = intseq::plan(&ms, &ORDERS, packings, scratch);
    Plan { exponent, len: fixed + seq.len, seq, ms, exceptions }
}

/// Minimum bytes of a scaled section of `n` values with packing id `packing` (for early
/// rejection of corrupt counts).
pub(crate) fn min_bytes(packing: u8, n: usize) -> usize {
    1 + [ORDER_RAW, ORDER_DELTA, ORDER_DOD, ORDER_GRID]
        .into_iter()
        .map(|order| intseq::min_bytes(order, packing, n))
        .min()
        .unwrap_or(0)
}

/// Decodes a scaled section whose integers are packed as `packing` at `*pos` into the values
/// of `out` (one per sample) and advances `*pos` past it.
/// True if `v` is an integer below 2^53 in magnitude and not -0.0: what the scaled codec stores
/// at exponent 0 without an exception.
pub(crate) fn is_small_integer(v: f64) -> bool {
    // Below 2^53 the conversion to i64 is exact for integers and truncates anything else (one
    // instruction, where `trunc` is a libm call on baseline x86-64).
    v.abs() < MAX_MANTISSA && (v as i64) as f64 == v && v.to_bits() != (-0.0f64).to_bits()
}

/// True if the scaled section at `*pos` stores integers (exponent 0) and its only exceptions are
/// the block's `stale_count` stale markers. Every stale marker is an exception (it qualifies at
/// no exponent), so equal counts mean no other value is one; every other value was checked by
/// [`scale`] to be an integer below 2^53 that is not -0.0. Reads the parameters only.
pub(crate) fn integral(bytes: &[u8], pos: &mut usize, stale_count: u32) -> bool {
    let Ok(params) = get_u8(bytes, pos) else { return false };
    if params & EXPONENT_MASK != 0 {
        return false;
    }
    let n_exc = if params & HAS_EXCEPTIONS != 0 {
        match get_uvarint(bytes, pos) {
            Ok(n) => n,
            Err(_) => return false,
        }
    } else {
        0
    };
    n_exc == u64::from(stale_count)
}

/// Decodes the first `out.len()` values of a section holding `n` (at least as many):
/// the packed integers are read only as far as `out` reaches, so a short prefix of a block
/// costs a short read. After a prefix shorter than `n`, `*pos` does not point past the section.
pub(crate) fn decode_prefix(
    packing: u8,
    bytes: &[u8],
    pos: &mut usize,
    n: usize,
    out: &mut [Sample],
) -> Result<()> {
    if out.len() > n {
        return Err(Error::Decode(format!("prefix of {} values from {n}", out.len())));
    }
    let head = read_head(bytes, pos, n)?;
    let pow = POW10.get(usize::from(head.exponent)).copied().unwrap_or(1.0);
    let mut slots = out.iter_mut();
    let wanted = slots.len();
    // One loop per exponent: the integer case skips the division (see `descale`).
    if head.exponent == 0 {
        intseq::read(head.order, packing, bytes, pos, n, wanted, |m| {
            if let Some(s) = slots.next() {
                s.v = m as f64;
            }
            Ok(())
        })?;
    } else {
        intseq::read(head.order, packing, bytes, pos, n, wanted, |m| {
            if let Some(s) = slots.next() {
                s.v = descale(m, pow);
            }
            Ok(())
        })?;
    }
    for exc in head.exceptions(bytes) {
        let (index, bits) = exc?;
        if let Some(s) = out.get_mut(index) {
            s.v = f64::from_bits(bits);
        }
    }
    Ok(())
}

/// The number of non-stale values among the first `take` (at most `n`) of a section holding
/// `n`, and their sum as an integer (wrapping), for a section whose every value is an integer
/// or a stale marker: exponent 0 and no exception but stale markers. `None` for any other
/// section, which the caller decodes instead. Nothing is written per value, so a block cut by a
/// window boundary costs only the reading of its integers up to the boundary.
pub(crate) fn sum_prefix(
    packing: u8,
    bytes: &[u8],
    pos: &mut usize,
    n: usize,
    take: usize,
) -> Result<Option<(u64, i64)>> {
    let take = take.min(n);
    let head = read_head(bytes, pos, n)?;
    if head.exponent != 0 {
        return Ok(None);
    }
    // The stale markers among the prefix: their slots in the integer stream repeat the
    // previous integer, which must not count.
    let mut skip = Vec::new();
    for exc in head.exceptions(bytes) {
        let (index, bits) = exc?;
        if bits != STALE_NAN_BITS {
            return Ok(None);
        }
        if index < take {
            skip.push(index);
        }
    }
    let mut sum = 0i64;
    intseq::read(head.order, packing, bytes, pos, n, take, |m| {
        sum = sum.wrapping_add(m);
        Ok(())
    })?;
    if !skip.is_empty() {
        // Rare (a series that went stale and came back inside the block): read the integers
        // at those slots again rather than test every index in the loop above.
        let mut at = 0usize;
        let mut next = skip.iter().copied().peekable();
        let mut again = head.integers_at;
        intseq::read(head.order, packing, bytes, &mut again, n, take, |m| {
            if next.next_if_eq(&at).is_some() {
                sum = sum.wrapping_sub(m);
            }
            at += 1;
            Ok(())
        })?;
    }
    Ok(Some(((take - skip.len()) as u64, sum)))
}

/// The parameters and exception list that precede a section's integers.
struct Head {
    exponent: u8,
    order: u8,
    n_exc: u64,
    /// Where the exception list starts.
    exceptions_at: usize,
    /// Where the integer sequence starts.
    integers_at: usize,
}

/// Reads and checks the parameters and the exception list (indexes below `n`), leaving `*pos`
/// at the integers.
fn read_head(bytes: &[u8], pos: &mut usize, n: usize) -> Result<Head> {
    let params = get_u8(bytes, pos)?;
    let (exponent, order) = (params & EXPONENT_MASK, params >> 6);
    if exponent > MAX_EXPONENT {
        return Err(Error::Decode(format!("scaled codec exponent {exponent} out of range")));
    }
    let n_exc = if params & HAS_EXCEPTIONS != 0 { get_uvarint(bytes, pos)? } else { 0 };
    if n_exc > n as u64 || n_exc.saturating_mul(2) > bytes.len().saturating_sub(*pos) as u64 {
        return Err(Error::Decode(format!("{n_exc} exceptions for {n} values do not fit the block")));
    }
    let exceptions_at = *pos;
    let mut index = 0u64;
    for _ in 0..n_exc {
        index = index.saturating_add(get_uvarint(bytes, pos)?);
        get_uvarint(bytes, pos)?;
        if index >= n as u64 {
            return Err(Error::Decode(format!("exception index {index} beyond {n} values")));
        }
        index += 1;
    }
    Ok(Head { exponent, order, n_exc, exceptions_at, integers_at: *pos })
}

impl Head {
    /// The exceptions as `(index, bits)`, read again from the checked list.
    fn exceptions<'a>(&self, bytes: &'a [u8]) -> impl Iterator<Item = Result<(usize, u64)>> + 'a {
        let mut at = self.exceptions_at;
        let mut index = 0usize;
        (0..self.n_exc).map(move |_| {
            index = index.saturating_add(get_uvarint(bytes, &mut at)? as usize);
            let bits = get_uvarint(bytes, &mut at)? ^ STALE_NAN_BITS;
            let this = index;
            index = index.saturating_add(1);
            Ok((this, bits))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoding::test_support::arb_values;
    use proptest::prelude::*;

    fn round_trip(values: &[f64], packing: Option<u8>) -> Option<Plan> {
        let plan = plan(values, packing)?;
        let mut out = vec![0xEE];
        plan.write(&mut out);
        assert_eq!(out.len() - 1, plan.len());
        out.push(0xAB);
        let mut samples: Vec<Sample> = values.iter().map(|_| Sample::new(0, 0.0)).collect();
        let mut pos = 1;
        decode_prefix(plan.packing(), &out, &mut pos, samples.len(), &mut samples).unwrap();
        assert_eq!(pos, out.len() - 1);
        let got: Vec<u64> = samples.iter().map(|s| s.v.to_bits()).collect();
        let want: Vec<u64> = values.iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, want);
        assert!(out.len() - 2 >= min_bytes(plan.packing(), values.len()));
        Some(plan)
    }

    #[test]
    fn exponents() {
        assert_eq!(min_exponent(42.0), Some((0, 42)));
        assert_eq!(min_exponent(-7.0), Some((0, -7)));
        assert_eq!(min_exponent(12.34), Some((2, 1234)));
        assert_eq!(min_exponent(-0.5), Some((1, -5)));
        assert_eq!(min_exponent(0.001), Some((3, 1)));
        assert_eq!(min_exponent(2f64.powi(52) + 1.0), Some((0, (1 << 52) + 1)));
        assert_eq!(min_exponent(-0.0), None);
        assert_eq!(min_exponent(0.1 + 0.2), None);
        assert_eq!(min_exponent(f64::NAN), None);
        assert_eq!(min_exponent(f64::INFINITY), None);
        assert_eq!(min_exponent(2f64.powi(53)), None);
        assert_eq!(min_exponent(2f64.powi(53) - 1.0), Some((0, (1 << 53) - 1)));
        assert_eq!(min_exponent(f64::from_bits(1)), None);
    }

    #[test]
    fn stale_marker_is_a_cheap_exception() {
        let mut values: Vec<f64> = (0..100).map(|i| (i % 10) as f64).collect();
        values.push(crate::types::stale_nan());
        let plan = round_trip(&values, None).unwrap();
        assert_eq!(plan.exceptions.len(), 1);
        let without = super::plan(&values[..100], None).unwrap();
        assert!(plan.len() <= without.len() + 3, "{} vs {}", plan.len(), without.len());
    }

    #[test]
    fn mostly_integers_keep_exponent_zero() {
        let mut values: Vec<f64> = (0..1000).map(|i| (i % 17) as f64).collect();
        values[500] = 0.5;
        let plan = round_trip(&values, None).unwrap();
        assert_eq!(plan.exponent, 0);
        assert_eq!(plan.exceptions.len(), 1);
    }

    #[test]
    fn noisy_floats_give_up() {
        let values: Vec<f64> = (0..1000).map(|i| (i as f64 * 0.7123).sin()).collect();
        assert!(plan(&values, None).is_none());
    }

    proptest! {
        #[test]
        fn round_trips(values in (1usize..300).prop_flat_map(arb_values)) {
            round_trip(&values, None);
            for packing in ALL_PACKINGS {
                round_trip(&values, Some(packing));
            }
        }

        #[test]
        fn decoder_never_panics(packing in 0u8..4, bytes in proptest::collection::vec(any::<u8>(), 0..64), n in 0usize..300) {
            let mut samples = vec![Sample::new(0, 0.0); n];
            let _ = decode_prefix(packing, &bytes, &mut 0, samples.len(), &mut samples);
        }
    }
}

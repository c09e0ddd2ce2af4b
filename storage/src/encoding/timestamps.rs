//! Timestamp codecs of a block (see `docs/format/block.md`):
//!
//! * [`TS_CONST`]: every interval is the same: `t0 <varint>`, `delta <uvarint>`.
//! * [`TS_DOD`]: `t0 <varint>` and a Gorilla delta-of-delta bit stream ([`super::dod`]).
//! * [`TS_SEQ`]: an integer sequence ([`super::intseq`]): a params byte `order | packing << 2`,
//!   then seeds and packed residuals. Offsets from a grid or intervals, FOR-packed, take a few
//!   bits per sample for jittery scrape timestamps; run-coded deltas of deltas take a few bytes
//!   per block for regular data with a missed scrape.
//! * [`TS_DELTA_VARINT`]: `t0 <varint>` and the intervals as uvarints; a simple fallback.
//!
//! Intervals are computed with wrapping `i64` arithmetic (an interval may exceed `i64::MAX`,
//! e.g. from `i64::MIN` to `i64::MAX`), which every codec inverts exactly. Decoders check that
//! timestamps strictly increase, so corrupt bytes never yield an unordered block.

use super::bits::{BitReader, BitWriter};
use super::dod::DodState;
use super::intseq::{self, ALL_PACKINGS, ORDER_DELTA, ORDER_DOD, ORDER_GRID};
use super::varint::{get_u8, get_uvarint, get_varint, put_uvarint, put_varint};
use crate::error::{Error, Result};
use crate::types::Sample;

/// Codec id: constant interval.
pub(crate) const TS_CONST: u8 = 0;
/// Codec id: Gorilla delta-of-delta bit stream.
pub(crate) const TS_DOD: u8 = 1;
/// Codec id: integer sequence with a chosen residual order and packing.
pub(crate) const TS_SEQ: u8 = 2;
/// Codec id: intervals as uvarints.
pub(crate) const TS_DELTA_VARINT: u8 = 3;
/// Codec id: no section at all, and no count in the block header: a constant interval whose
/// count and first and last timestamps are in the block's statistics in the file index
/// (partition files of format version 2; see [`decode_implied`]).
pub(crate) const TS_IMPLIED: u8 = 4;

/// Appends the timestamps (strictly increasing, non-empty) with the codec `force` (tests use it
/// to pin a codec; `TS_CONST` is honoured only for constant intervals) or, if `None`, the one
/// giving the fewest bytes. Returns the codec id used.
pub(crate) fn encode(ts: &[i64], out: &mut Vec<u8>, force: Option<u8>) -> u8 {
    let constant = constant_interval(ts).is_some();
    let force = force.filter(|&c| c != TS_CONST || constant);
    if let Some(codec) = force.or(constant.then_some(TS_CONST)) {
        encode_with(codec, ts, out);
        return codec;
    }
    // Try the general codecs and keep the smallest (ties go to the earlier, faster one).
    let mut best = (TS_DOD, Vec::new());
    encode_with(TS_DOD, ts, &mut best.1);
    for codec in [TS_SEQ, TS_DELTA_VARINT] {
        let mut buf = Vec::new();
        encode_with(codec, ts, &mut buf);
        if buf.len() < best.1.len() {
            best = (codec, buf);
        }
    }
    out.extend_from_slice(&best.1);
    best.0
}

/// The common interval if all intervals are equal (0 for a single timestamp).
pub(crate) fn constant_interval(ts: &[i64]) -> Option<u64> {
    let d = match ts {
        [a, b, ..] => b.wrapping_sub(*a),
        _ => 0,
    };
    ts.windows(2).all(|w| matches!(w, [a, b] if b.wrapping_sub(*a) == d)).then_some(d as u64)
}

fn intervals(ts: &[i64]) -> impl Iterator<Item = i64> + '_ {
    ts.windows(2).filter_map(|w| match w {
        [a, b] => Some(b.wrapping_sub(*a)),
        _ => None,
    })
}

fn encode_with(codec: u8, ts: &[i64], out: &mut Vec<u8>) {
    let first = ts.first().copied().unwrap_or(0);
    if codec == TS_SEQ {
        // The sequence's seeds include the first timestamp.
        let plan = intseq::plan(ts, &ORDERS, &ALL_PACKINGS, &mut Vec::new());
        out.push(plan.order | plan.packing.id() << 2);
        intseq::write(ts, &plan, out);
        return;
    }
    put_varint(out, first);
    match codec {
        TS_CONST => put_uvarint(out, constant_interval(ts).unwrap_or(0)),
        TS_DOD => {
            let mut w = BitWriter::new(out);
            let mut state = DodState::start(first);
            for &t in ts.iter().skip(1) {
                state.push(&mut w, t);
            }
        }
        _ => {
            for d in intervals(ts) {
                put_uvarint(out, d as u64);
            }
        }
    }
}

/// Residual orders tried for [`TS_SEQ`] (raw timestamps never pay off).
const ORDERS: [u8; 3] = [ORDER_DELTA, ORDER_GRID, ORDER_DOD];

/// Minimum bytes a section of `n` timestamps takes with `codec`, for early rejection of corrupt
/// counts (`None` for an unknown codec).
pub(crate) fn min_bytes(codec: u8, n: usize) -> Option<usize> {
    let rest = n.saturating_sub(1);
    match codec {
        TS_CONST => Some(2),
        TS_DOD => Some(1 + rest.div_ceil(8)),
        // Params, the first timestamp, then packed residuals (Runs may hold any count in 2 bytes).
        TS_SEQ => Some(2 + 2 * usize::from(rest > 0)),
        TS_DELTA_VARINT => Some(1 + rest),
        TS_IMPLIED => Some(0),
        _ => None,
    }
}

/// Decodes `n` timestamps at `*pos` with `codec`, pushing `Sample { t, v: 0.0 }` to `out`, and
/// advances `*pos` past the section. On error `out` may hold some of the samples.
/// Moves `*pos` past a [`TS_CONST`] section without producing timestamps; an error for any
/// other codec (their length is known only by decoding them) or bad bytes.
pub(crate) fn skip_const(codec: u8, bytes: &[u8], pos: &mut usize) -> Result<()> {
    if codec != TS_CONST {
        return Err(Error::Decode(format!("timestamp codec {codec} cannot be skipped")));
    }
    get_varint(bytes, pos)?;
    get_uvarint(bytes, pos)?;
    Ok(())
}

/// The `n` timestamps of a [`TS_IMPLIED`] block from its statistics: `min_t`, then steps of
/// `(max_t − min_t) / (n − 1)` up to `max_t`, pushed as `Sample { t, v: 0.0 }`; with `until`,
/// only those up to it. An error unless they are strictly increasing integers: `n = 1` needs
/// `min_t = max_t`, a larger `n` a positive span that `n − 1` divides.
/// The interval of `n` implied timestamps from `min_t` to `max_t`, or an error if they imply
/// none.
fn implied_step(min_t: i64, max_t: i64, n: usize) -> Result<i128> {
    let span = i128::from(max_t) - i128::from(min_t);
    let rest = n.saturating_sub(1) as i128;
    match rest {
        0 if span == 0 => Ok(0),
        r if r > 0 && span > 0 && span % r == 0 => Ok(span / r),
        _ => Err(Error::Decode(format!(
            "statistics {min_t}..={max_t} imply no constant interval for {n} timestamps"
        ))),
    }
}

/// How many of `n` timestamps from `min_t` every `step` lie at or before `until`.
fn implied_count(min_t: i64, step: i128, n: usize, until: i64) -> usize {
    if until < min_t {
        0
    } else if step > 0 {
        ((i128::from(until) - i128::from(min_t)) / step + 1).min(n as i128) as usize
    } else {
        n
    }
}

/// How many of the `n` implied timestamps from `min_t` to `max_t` lie at or before `until`
/// (what [`decode_implied`] would decode up to `until`), without decoding them.
pub(crate) fn implied_until(min_t: i64, max_t: i64, n: usize, until: i64) -> Result<usize> {
    Ok(implied_count(min_t, implied_step(min_t, max_t, n)?, n, until))
}

pub(crate) fn decode_implied(
    min_t: i64,
    max_t: i64,
    n: usize,
    until: Option<i64>,
    out: &mut Vec<Sample>,
) -> Result<()> {
    let step = implied_step(min_t, max_t, n)?;
    let take = match until {
        Some(u) => implied_count(min_t, step, n, u),
        None => n,
    };
    // `step` fits an i64 (it is at most the span, below 2^64) only as u64: wrapping
    // arithmetic gives the exact timestamps, all between min_t and max_t.
    let step = step as u64 as i64;
    out.extend((0..take as i64).map(|i| Sample::new(min_t.wrapping_add(step.wrapping_mul(i)), 0.0)));
    Ok(())
}

pub(crate) fn decode(
    codec: u8,
    bytes: &[u8],
    pos: &mut usize,
    n: usize,
    out: &mut Vec<Sample>,
) -> Result<()> {
    let mut prev: Option<i64> = None;
    let mut push = |t: i64| {
        if let Some(p) = prev.filter(|&p| t <= p) {
            return Err(Error::Decode(format!("timestamps not increasing: {t} after {p}")));
        }
        out.push(Sample::new(t, 0.0));
        prev = Some(t);
        Ok(())
    };
    if codec == TS_SEQ {
        let params = get_u8(bytes, pos)?;
        if params >> 4 != 0 {
            return Err(Error::Decode(format!("timestamp sequence params {params:#x} have unknown bits")));
        }
        return intseq::read(params & 3, params >> 2, bytes, pos, n, n, push);
    }
    let first = get_varint(bytes, pos)?;
    push(first)?;
    let rest = n.saturating_sub(1);
    match codec {
        TS_CONST => {
            let delta = get_uvarint(bytes, pos)?;
            let last = i128::from(first) + i128::from(delta) * rest as i128;
            if rest > 0 && (delta == 0 || last > i128::from(i64::MAX)) {
                return Err(Error::Decode(format!(
                    "constant interval {delta} x {rest} overflows from {first}"
                )));
            }
            // Checked above: the timestamps increase and do not overflow, so they go in
            // without `push`'s per-sample test (an exact-size loop the compiler unrolls).
            let step = delta as i64;
            out.extend((1..=rest as i64).map(|i| Sample::new(first.wrapping_add(step.wrapping_mul(i)), 0.0)));
        }
        TS_DOD => {
            let mut r = BitReader::new(bytes.get(*pos..).unwrap_or(&[]));
            let mut state = DodState::start(first);
            for _ in 0..rest {
                push(state.next(&mut r)?)?;
            }
            *pos += r.bytes_consumed();
        }
        TS_DELTA_VARINT => {
            let mut t = first;
            for _ in 0..rest {
                t = t.wrapping_add(get_uvarint(bytes, pos)? as i64);
                push(t)?;
            }
        }
        other => return Err(Error::Decode(format!("unknown timestamp codec {other}"))),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoding::test_support::{arb_timestamps, config, hash};
    use proptest::prelude::*;

    fn round_trip(ts: &[i64], codec: Option<u8>) -> u8 {
        let mut out = vec![0xEE];
        let used = encode(ts, &mut out, codec);
        out.push(0xAB);
        let mut pos = 1;
        let mut got = Vec::new();
        decode(used, &out, &mut pos, ts.len(), &mut got).unwrap();
        assert_eq!(pos, out.len() - 1, "section length");
        assert_eq!(got.iter().map(|s| s.t).collect::<Vec<_>>(), ts);
        assert!(out.len() - 2 >= min_bytes(used, ts.len()).unwrap());
        used
    }

    #[test]
    fn chooses_expected_codecs() {
        let regular: Vec<i64> = (0..1000).map(|i| 1_700_000_000_000 + i * 10_000).collect();
        assert_eq!(round_trip(&regular, None), TS_CONST);
        let mut gaps = regular.clone();
        gaps.remove(500);
        // Deltas of deltas, zero-run coded: a few bytes for the whole block.
        assert_eq!(round_trip(&gaps, None), TS_SEQ);
        let mut out = Vec::new();
        encode(&gaps, &mut out, None);
        assert!(out.len() <= 24, "{} bytes", out.len());
        let jitter: Vec<i64> = (0..1000).map(|i| i * 10_000 + (hash(i as u64) % 13) as i64).collect();
        assert_eq!(round_trip(&jitter, None), TS_SEQ);
        let wild: Vec<i64> = (0..100i64)
            .scan(0i64, |t, i| {
                *t += (1i64 << ((i * 7) % 40)) + (i * 31) % 1000;
                Some(*t)
            })
            .collect();
        assert_eq!(round_trip(&wild, None), TS_DELTA_VARINT);
    }

    #[test]
    fn extremes() {
        for codec in [TS_CONST, TS_DOD, TS_SEQ, TS_DELTA_VARINT] {
            round_trip(&[i64::MIN, i64::MAX], Some(codec));
            round_trip(&[i64::MAX], Some(codec));
        }
        for codec in [TS_DOD, TS_SEQ, TS_DELTA_VARINT] {
            round_trip(&[i64::MIN, -1, 0, i64::MAX - 1, i64::MAX], Some(codec));
        }
    }

    #[test]
    fn rejects_overflowing_constant_and_unordered() {
        let mut b = Vec::new();
        put_varint(&mut b, i64::MAX - 5);
        put_uvarint(&mut b, 3);
        assert!(decode(TS_CONST, &b, &mut 0, 3, &mut Vec::new()).is_err());
        let mut b = Vec::new();
        put_varint(&mut b, 0);
        put_uvarint(&mut b, 0);
        assert!(decode(TS_CONST, &b, &mut 0, 2, &mut Vec::new()).is_err());
        let mut b = Vec::new();
        put_varint(&mut b, 10);
        put_uvarint(&mut b, u64::MAX); // wraps to 9
        assert!(decode(TS_DELTA_VARINT, &b, &mut 0, 2, &mut Vec::new()).is_err());
    }

    proptest! {
        #![proptest_config(config(128))]
        #[test]
        fn every_codec_round_trips(ts in arb_timestamps(1..400)) {
            let auto = round_trip(&ts, None);
            for codec in [TS_DOD, TS_SEQ, TS_DELTA_VARINT] {
                round_trip(&ts, Some(codec));
            }
            if constant_interval(&ts).is_some() {
                prop_assert_eq!(auto, TS_CONST);
            }
        }

        #[test]
        fn decoders_never_panic(codec in 0u8..5, bytes in proptest::collection::vec(any::<u8>(), 0..64), n in 1usize..600) {
            let mut out = Vec::new();
            if decode(codec, &bytes, &mut 0, n, &mut out).is_ok() {
                prop_assert_eq!(out.len(), n);
                prop_assert!(out.windows(2).all(|w| w[0].t < w[1].t));
            }
        }
    }
}

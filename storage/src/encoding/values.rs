//! Value codecs of a block and the per-block choice between them:
//!
//! * [`VAL_CONST`]: every value has the same bits: the value once, as a class byte and a
//!   payload ([`super::float_class`]), e.g. 2 bytes for `1.0`.
//! * [`VAL_XOR`]: Gorilla XOR ([`super::xor`]): the first value's 64 bits, then the XOR bit
//!   stream. Correct for any bits; the fallback for noisy floats.
//! * [`VAL_SCALED_FOR`] / [`VAL_SCALED_RICE`] / [`VAL_SCALED_RUNS`]: integers or few-digit
//!   decimals as scaled integers ([`super::scaled`]) whose residuals are packed with
//!   frame-of-reference, Rice or zero-run coding ([`super::intpack`]).
//!
//! The encoder tries the applicable codecs and keeps the smallest output.

use super::bits::{BitReader, BitWriter};
use super::float_class::{FloatClass, read_float};
use super::scaled;
use super::varint::get_u8;
use super::xor::XorState;
use crate::error::{Error, Result};
use crate::types::{Sample, is_stale};

/// Codec id: all values identical.
pub(crate) const VAL_CONST: u8 = 0;
/// Codec id: Gorilla XOR.
pub(crate) const VAL_XOR: u8 = 1;
/// Codec id: scaled integers, frame-of-reference packed.
pub(crate) const VAL_SCALED_FOR: u8 = 2;
/// Codec id: scaled integers, Rice coded.
pub(crate) const VAL_SCALED_RICE: u8 = 3;
/// Codec id: scaled integers, zero-run coded.
pub(crate) const VAL_SCALED_RUNS: u8 = 4;

/// The packing id of a scaled codec id.
fn packing_of(codec: u8) -> u8 {
    codec.wrapping_sub(VAL_SCALED_FOR)
}

/// Appends the values (non-empty) with the codec `force` (tests pin codecs with it; an
/// inapplicable one falls back to the automatic choice) or the one giving the fewest bytes.
/// Returns the codec id used.
pub(crate) fn encode(values: &[f64], out: &mut Vec<u8>, force: Option<u8>) -> u8 {
    let first = values.first().map_or(0, |v| v.to_bits());
    let constant = values.iter().all(|v| v.to_bits() == first);
    match force {
        Some(VAL_CONST) if constant => return write_const(first, out),
        Some(VAL_XOR) => return write_xor(values, out),
        Some(codec @ (VAL_SCALED_FOR | VAL_SCALED_RICE | VAL_SCALED_RUNS)) => {
            if let Some(plan) = scaled::plan(values, Some(packing_of(codec))) {
                plan.write(out);
                return codec;
            }
        }
        _ if constant => return write_const(first, out),
        _ => {}
    }
    // Sized, not written: the XOR stream is kept only when it is the smallest.
    match scaled::plan(values, None) {
        Some(plan) if plan.len() <= xor_len(values) => {
            plan.write(out);
            VAL_SCALED_FOR + plan.packing()
        }
        _ => write_xor(values, out),
    }
}

/// Bytes [`write_xor`] appends for `values` (non-empty).
fn xor_len(values: &[f64]) -> usize {
    let first = values.first().map_or(0, |v| v.to_bits());
    let mut state = XorState::start(first);
    let bits: u64 = 64 + values.iter().skip(1).map(|v| u64::from(state.push_len(v.to_bits()))).sum::<u64>();
    bits.div_ceil(8) as usize
}

fn write_const(bits: u64, out: &mut Vec<u8>) -> u8 {
    let class = FloatClass::of(f64::from_bits(bits));
    out.push(class.class());
    class.write(out);
    VAL_CONST
}

fn write_xor(values: &[f64], out: &mut Vec<u8>) -> u8 {
    let first = values.first().map_or(0, |v| v.to_bits());
    let mut w = BitWriter::new(out);
    w.write(first, 64);
    let mut state = XorState::start(first);
    for v in values.iter().skip(1) {
        state.push(&mut w, v.to_bits());
    }
    VAL_XOR
}

/// Minimum bytes a section of `n` values takes with `codec`, for early rejection of corrupt
/// counts (`None` for an unknown codec).
pub(crate) fn min_bytes(codec: u8, n: usize) -> Option<usize> {
    match codec {
        VAL_CONST => Some(2),
        VAL_XOR => Some(8 + n.saturating_sub(1).div_ceil(8)),
        VAL_SCALED_FOR | VAL_SCALED_RICE | VAL_SCALED_RUNS => Some(scaled::min_bytes(packing_of(codec), n)),
        _ => None,
    }
}

/// True if the value section at `*pos` (codec `codec`) holds only integers below 2^53 in
/// magnitude, none of them -0.0, apart from its `stale_count` stale markers; see
/// [`super::block::integral_values`]. False when unknown without decoding.
pub(crate) fn integral(codec: u8, bytes: &[u8], pos: &mut usize, stale_count: u32) -> bool {
    match codec {
        VAL_CONST => {
            let (Ok(class), false) = (get_u8(bytes, pos), stale_count > 0) else { return false };
            read_float(class, bytes, pos).is_ok_and(scaled::is_small_integer)
        }
        VAL_SCALED_FOR | VAL_SCALED_RICE | VAL_SCALED_RUNS => scaled::integral(bytes, pos, stale_count),
        _ => false,
    }
}

/// Decodes the first `out.len()` of the `n` values of the value section at `*pos` into `out`
/// (one value per sample, timestamps untouched), reading no further than they need; `*pos` is
/// past the section only if `out.len() == n`.
pub(crate) fn decode_prefix(
    codec: u8,
    bytes: &[u8],
    pos: &mut usize,
    n: usize,
    out: &mut [Sample],
) -> Result<()> {
    match codec {
        VAL_CONST => {
            let class = get_u8(bytes, pos)?;
            let v = read_float(class, bytes, pos)?;
            out.iter_mut().for_each(|s| s.v = v);
        }
        VAL_XOR => {
            let mut r = BitReader::new(bytes.get(*pos..).unwrap_or(&[]));
            let mut slots = out.iter_mut();
            if let Some(s) = slots.next() {
                let first = r.read(64)?;
                s.v = f64::from_bits(first);
                let mut state = XorState::start(first);
                for s in slots {
                    s.v = f64::from_bits(state.next(&mut r)?);
                }
            }
            *pos += r.bytes_consumed();
        }
        VAL_SCALED_FOR | VAL_SCALED_RICE | VAL_SCALED_RUNS => {
            scaled::decode_prefix(packing_of(codec), bytes, pos, n, out)?
        }
        other => return Err(Error::Decode(format!("unknown value codec {other}"))),
    }
    Ok(())
}

/// The number of non-stale values among the first `take` (at most `n`) of the value section at
/// `*pos`, and their sum as an integer (wrapping), when every value of the section is an
/// integer below 2^53 (not -0.0) or a stale marker, told from the codec's parameters; `None`
/// otherwise (the caller decodes). See [`scaled::sum_prefix`].
pub(crate) fn sum_prefix(
    codec: u8,
    bytes: &[u8],
    pos: &mut usize,
    n: usize,
    take: usize,
) -> Result<Option<(u64, i64)>> {
    let take = take.min(n);
    match codec {
        VAL_CONST => {
            let class = get_u8(bytes, pos)?;
            let v = read_float(class, bytes, pos)?;
            Ok(if is_stale(v) {
                Some((0, 0))
            } else if scaled::is_small_integer(v) {
                Some((take as u64, (v as i64).wrapping_mul(take as i64)))
            } else {
                None
            })
        }
        VAL_SCALED_FOR | VAL_SCALED_RICE | VAL_SCALED_RUNS => {
            scaled::sum_prefix(packing_of(codec), bytes, pos, n, take)
        }
        VAL_XOR => Ok(None),
        other => Err(Error::Decode(format!("unknown value codec {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoding::test_support::{arb_values, config, hash};
    use proptest::prelude::*;

    fn round_trip(values: &[f64], force: Option<u8>) -> u8 {
        let mut out = vec![0xEE];
        let codec = encode(values, &mut out, force);
        out.push(0xAB);
        let mut samples = vec![Sample::new(0, 0.0); values.len()];
        let mut pos = 1;
        decode_prefix(codec, &out, &mut pos, samples.len(), &mut samples).unwrap();
        assert_eq!(pos, out.len() - 1);
        let got: Vec<u64> = samples.iter().map(|s| s.v.to_bits()).collect();
        let want: Vec<u64> = values.iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, want);
        assert!(out.len() - 2 >= min_bytes(codec, values.len()).unwrap());
        for take in [0, 1, values.len() / 3, values.len() - 1, values.len()] {
            check_sum_prefix(codec, &out, values, take);
        }
        codec
    }

    /// `sum_prefix` either declines or gives the count and exact sum of the prefix's non-stale
    /// values, and declines only when some value is neither an integer nor a stale marker.
    fn check_sum_prefix(codec: u8, out: &[u8], values: &[f64], take: usize) {
        let got = sum_prefix(codec, out, &mut 1, values.len(), take).unwrap();
        let live: Vec<f64> = values[..take].iter().copied().filter(|v| !is_stale(*v)).collect();
        match got {
            Some((count, sum)) => {
                assert_eq!(count, live.len() as u64, "codec {codec} take {take}");
                let want = live.iter().fold(0i64, |acc, v| acc.wrapping_add(*v as i64));
                assert!(live.iter().all(|v| scaled::is_small_integer(*v)), "codec {codec}: {live:?}");
                assert_eq!(sum, want, "codec {codec} take {take}");
            }
            None => assert!(
                codec == VAL_XOR || values.iter().any(|v| !is_stale(*v) && !scaled::is_small_integer(*v)),
                "codec {codec} declined {values:?}"
            ),
        }
    }

    #[test]
    fn chooses_expected_codecs() {
        assert_eq!(round_trip(&[f64::NAN; 50], None), VAL_CONST);
        assert_eq!(round_trip(&[-0.0, 0.0], None), VAL_XOR);
        let walk: Vec<f64> = (0..500u64)
            .scan(50i64, |v, i| {
                *v += (hash(i) % 3) as i64 - 1;
                Some(*v as f64)
            })
            .collect();
        assert_eq!(round_trip(&walk, None), VAL_SCALED_RICE);
        let noise: Vec<f64> = (0..500).map(|i| (hash(i) % 1000) as f64 / 100.0).collect();
        assert_eq!(round_trip(&noise, None), VAL_SCALED_FOR);
        let steps: Vec<f64> = (0..500).map(|i| [3.0, 250.0, 7.5][i / 200]).collect();
        assert_eq!(round_trip(&steps, None), VAL_SCALED_RUNS);
        let floats: Vec<f64> = (0..500).map(|i| (i as f64).sqrt()).collect();
        assert_eq!(round_trip(&floats, None), VAL_XOR);
    }

    proptest! {
        #![proptest_config(config(128))]
        #[test]
        fn every_codec_round_trips(values in (1usize..300).prop_flat_map(arb_values)) {
            for force in [None, Some(VAL_CONST), Some(VAL_XOR), Some(VAL_SCALED_FOR), Some(VAL_SCALED_RICE), Some(VAL_SCALED_RUNS)] {
                round_trip(&values, force);
            }
        }

        #[test]
        fn decoders_never_panic(codec in 0u8..6, bytes in proptest::collection::vec(any::<u8>(), 0..64), n in 0usize..300) {
            let mut samples = vec![Sample::new(0, 0.0); n];
            let _ = decode_prefix(codec, &bytes, &mut 0, samples.len(), &mut samples);
            let _ = sum_prefix(codec, &bytes, &mut 0, n, n / 2);
        }

        #[test]
        fn integer_prefix_sums(values in proptest::collection::vec(prop_oneof![
            8 => (-1000i64..1000).prop_map(|m| m as f64),
            1 => Just(f64::from_bits(crate::types::STALE_NAN_BITS)),
            1 => Just(0.5),
        ], 1..300), take in 0usize..300) {
            let take = take.min(values.len());
            for force in [None, Some(VAL_CONST), Some(VAL_SCALED_FOR), Some(VAL_SCALED_RICE), Some(VAL_SCALED_RUNS)] {
                let mut out = vec![0xEE];
                let codec = encode(&values, &mut out, force);
                check_sum_prefix(codec, &out, &values, take);
            }
        }
    }
}

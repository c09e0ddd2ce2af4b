//! Shared test helpers: proptest strategies for timestamps, values and whole sample blocks.

use crate::types::{STALE_NAN_BITS, Sample};
use proptest::prelude::*;
use std::ops::Range;

/// Proptest settings: `cases` by default, 16 times as many with `STRATA_SLOW_TESTS=1`.
pub(crate) fn config(cases: u32) -> ProptestConfig {
    let slow = std::env::var("STRATA_SLOW_TESTS").as_deref() == Ok("1");
    ProptestConfig { cases: if slow { cases * 16 } else { cases }, ..ProptestConfig::default() }
}

/// A deterministic pseudo-random number for index `i` (SplitMix64), for fixed test data.
pub(crate) fn hash(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A regular series: `n` samples from `start` every `step` ms, valued `f(i)`.
pub(crate) fn regular_series(n: usize, start: i64, step: i64, f: impl Fn(usize) -> f64) -> Vec<Sample> {
    (0..n).map(|i| Sample::new(start + step * i as i64, f(i))).collect()
}

/// Any f64 bit pattern, weighted towards the special ones.
pub(crate) fn arb_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        4 => any::<u64>().prop_map(f64::from_bits),
        1 => Just(f64::NAN),
        1 => Just(f64::from_bits(STALE_NAN_BITS)),
        1 => Just(f64::from_bits(0x7ff0_0000_0000_0001)), // signalling NaN payload
        1 => Just(f64::from_bits(0xfff8_0000_0000_0000)), // negative quiet NaN
        1 => Just(-0.0),
        1 => Just(0.0),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
        1 => (1u64..(1 << 52)).prop_map(f64::from_bits), // subnormals
        1 => Just(f64::MAX),
        1 => Just(f64::MIN_POSITIVE),
        2 => (-(1i64 << 53) + 1..(1i64 << 53)).prop_map(|m| m as f64),
        2 => (-100_000i64..100_000, 0i32..6).prop_map(|(m, k)| m as f64 / 10f64.powi(k)),
    ]
}

/// `n` strictly increasing timestamps in one of several shapes: regular, jittered, with gaps,
/// or arbitrary (including negative values and `i64` extremes).
pub(crate) fn arb_timestamps(n: Range<usize>) -> impl Strategy<Value = Vec<i64>> {
    let regular = (any::<i64>(), 1i64..100_000, 0u8..3, n.clone(), any::<u64>()).prop_map(
        |(start, step, shape, len, seed)| {
            let span = i128::from(step) * 2 * len as i128;
            let start = i128::from(start).min(i128::from(i64::MAX) - span) as i64;
            let mut rng = seed | 1;
            let mut t = start;
            (0..len)
                .map(|_| {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let jitter = match shape {
                        0 => 0,
                        1 => (rng % step.clamp(1, 40) as u64) as i64 - step.clamp(1, 40) / 2,
                        _ => (rng % 8 == 0) as i64 * step,
                    };
                    let this = t;
                    t = t.saturating_add((step + jitter).max(1));
                    this
                })
                .collect::<Vec<i64>>()
        },
    );
    let arbitrary = (
        n.prop_flat_map(|len| {
            proptest::collection::vec(prop_oneof![8 => any::<i64>(), 1 => -1000i64..1000], len)
        }),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(mut ts, with_min, with_max)| {
            let len = ts.len();
            ts.sort_unstable();
            ts.dedup();
            // Refill what dedup removed so the length is as asked.
            while ts.len() < len {
                match ts.last() {
                    Some(&t) if t < i64::MAX => ts.push(t + 1),
                    _ => ts.insert(0, ts.first().map_or(0, |t| t - 1)),
                }
            }
            if let (true, Some(first)) = (with_min, ts.first_mut()) {
                *first = i64::MIN;
            }
            if let (true, Some(last)) = (with_max, ts.last_mut()) {
                *last = i64::MAX;
            }
            ts
        });
    prop_oneof![regular, arbitrary]
        .prop_filter("strictly increasing", |ts| !ts.is_empty() && ts.windows(2).all(|w| w[0] < w[1]))
}

/// `n` values in one of several block shapes: arbitrary bits, an integer random walk, decimals,
/// a constant, integers mixed with specials, or large integers near 2^53.
pub(crate) fn arb_values(n: usize) -> impl Strategy<Value = Vec<f64>> {
    prop_oneof![
        proptest::collection::vec(arb_f64(), n),
        (-1000i64..1000, proptest::collection::vec(-3i64..=3, n)).prop_map(|(start, steps)| {
            steps
                .iter()
                .scan(start, |v, s| {
                    *v += s;
                    Some(*v as f64)
                })
                .collect()
        }),
        (0u32..4, proptest::collection::vec(-100_000i64..100_000, n))
            .prop_map(|(k, ms)| ms.iter().map(|&m| m as f64 / 10f64.powi(k as i32)).collect()),
        arb_f64().prop_map(move |v| vec![v; n]),
        proptest::collection::vec(prop_oneof![8 => (0i64..100).prop_map(|m| m as f64), 2 => arb_f64()], n),
        proptest::collection::vec((1i64 << 52)..(1i64 << 53), n)
            .prop_map(|v| v.iter().map(|&m| m as f64).collect()),
    ]
}

/// A block of samples: strictly increasing timestamps with values from [`arb_values`].
pub(crate) fn arb_samples(n: Range<usize>) -> impl Strategy<Value = Vec<Sample>> {
    arb_timestamps(n).prop_flat_map(|ts| {
        let len = ts.len();
        arb_values(len).prop_map(move |vs| ts.iter().zip(vs).map(|(&t, v)| Sample::new(t, v)).collect())
    })
}

//! Block round trips, golden bytes and corruption tests.

use super::*;
use crate::encoding::stats::StatsChain;
use crate::encoding::test_support::{arb_samples, config, hash, regular_series};
use crate::encoding::timestamps::{TS_CONST, TS_DELTA_VARINT, TS_DOD, TS_IMPLIED, TS_SEQ};
use crate::encoding::values::{VAL_CONST, VAL_SCALED_FOR, VAL_SCALED_RICE, VAL_SCALED_RUNS, VAL_XOR};
use crate::types::stale_nan;
use proptest::prelude::*;
use std::path::PathBuf;

fn decode_all(bytes: &[u8]) -> Result<Vec<Sample>> {
    let mut out = Vec::new();
    decode_block(bytes, &mut out)?;
    Ok(out)
}

/// Encodes with the given codecs, checks the round trip, the stats and the header; returns the
/// bytes.
fn check(samples: &[Sample], ts: Option<u8>, val: Option<u8>) -> Vec<u8> {
    let mut out = vec![0xEE];
    let stats = encode_block_with(samples, &mut out, ts, val);
    let block = out.split_off(1);
    assert_eq!(stats, BlockStats::from_samples(samples));
    let h = block_header(&block).unwrap();
    assert_eq!(h.count as usize, samples.len());
    // Existing contents of `out` are kept.
    let mut decoded = vec![Sample::new(-5, 1.0)];
    decode_block(&block, &mut decoded).unwrap();
    assert_eq!(decoded[0], Sample::new(-5, 1.0));
    assert_eq!(&decoded[1..], samples);
    block
}

const TS_CODECS: [u8; 4] = [TS_CONST, TS_DOD, TS_SEQ, TS_DELTA_VARINT];
const VAL_CODECS: [u8; 5] = [VAL_CONST, VAL_XOR, VAL_SCALED_FOR, VAL_SCALED_RICE, VAL_SCALED_RUNS];

proptest! {
    #![proptest_config(config(64))]
    #[test]
    fn round_trip_auto_and_every_codec(samples in arb_samples(1..300)) {
        check(&samples, None, None);
        for ts in TS_CODECS {
            for val in VAL_CODECS {
                check(&samples, Some(ts), Some(val));
            }
        }
    }

}

/// The smallest input found where the automatic choice was larger than a pinned pair (the
/// property `round_trip_full_blocks` checks): values alternating 0 and 1000. Their raw residuals
/// are half zeros, where Runs (a 2-bit run and a 12-bit value per pair) beats FOR and Rice (10
/// and 11+ bits per value), but the chooser skipped Runs whenever half the residuals or more were
/// non-zero, taking Rice's cost to be one bit per value.
#[test]
fn auto_choice_not_larger_than_pinned_runs_with_half_non_zero() {
    let samples = regular_series(4, 0, 10_000, |i| [0.0, 1000.0][i % 2]);
    let auto = check(&samples, None, None);
    assert_eq!(auto, check(&samples, None, Some(VAL_SCALED_RUNS)));
    for ts in TS_CODECS {
        for val in VAL_CODECS {
            assert!(auto.len() <= check(&samples, Some(ts), Some(val)).len(), "ts {ts} val {val}");
        }
    }
}

proptest! {
    #![proptest_config(config(12))]
    #[test]
    fn round_trip_full_blocks(samples in arb_samples(1024..1025)) {
        let auto = check(&samples, None, None);
        for ts in TS_CODECS {
            for val in VAL_CODECS {
                // The automatic choice is never larger than a pinned one.
                prop_assert!(auto.len() <= check(&samples, Some(ts), Some(val)).len());
            }
        }
    }

}

proptest! {
    #![proptest_config(config(512))]
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        check_corrupt(&bytes);
    }

    #[test]
    fn mutated_blocks_never_panic(
        samples in arb_samples(1..300),
        mutations in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..4), 1..6),
    ) {
        let mut bytes = Vec::new();
        encode_block(&samples, &mut bytes);
        for (at, byte, kind) in mutations {
            let i = at.index(bytes.len().max(1));
            match kind {
                0 if i < bytes.len() => bytes[i] ^= 1 << (byte % 8),
                1 if i < bytes.len() => bytes[i] = byte,
                2 => bytes.truncate(i),
                _ => bytes.insert(i.min(bytes.len()), byte),
            }
        }
        check_corrupt(&bytes);
    }
}

/// Decoding arbitrary bytes returns Ok or Decode, leaves `out` untouched on error, and a
/// successful decode is a well-formed block.
fn check_corrupt(bytes: &[u8]) {
    if let Ok(h) = block_header(bytes) {
        // A caller bounds constant blocks by their count before decoding (see decode_block).
        if h.count > 1 << 20 {
            return;
        }
    }
    let mut out = vec![Sample::new(7, 7.0)];
    match decode_block(bytes, &mut out) {
        Ok(()) => {
            let h = block_header(bytes).unwrap();
            assert_eq!(out.len() - 1, h.count as usize);
            assert!(out[1..].windows(2).all(|w| w[0].t < w[1].t));
        }
        Err(Error::Decode(_)) => assert_eq!(out, vec![Sample::new(7, 7.0)]),
        Err(e) => panic!("unexpected error kind: {e}"),
    }
}

#[test]
fn extremes() {
    let samples = [
        Sample::new(i64::MIN, f64::NAN),
        Sample::new(i64::MIN + 1, stale_nan()),
        Sample::new(-1, -0.0),
        Sample::new(0, f64::INFINITY),
        Sample::new(1, f64::from_bits(1)),
        Sample::new(i64::MAX, f64::NEG_INFINITY),
    ];
    check(&samples, None, None);
    for ts in TS_CODECS {
        for val in VAL_CODECS {
            check(&samples, Some(ts), Some(val));
        }
    }
    check(&[Sample::new(i64::MIN, 1.0), Sample::new(i64::MAX, 2.0)], Some(TS_CONST), None);
    check(&[Sample::new(i64::MAX, 1.0)], None, None);
}

#[test]
fn header_errors() {
    let bad: &[(&[u8], &str)] = &[
        (&[], "empty"),
        (&[0x00, 0x00], "zero count"),
        (&[0x04, 0x01, 0, 0], "unknown ts codec"),
        (&[0x60, 0x01, 0, 0], "unknown value codec"),
        (&[0x00, 0xff, 0xff, 0xff, 0xff, 0x10], "count above u32"),
        (&[0x11, 0xff, 0xff, 0x03, 0, 0], "count too large for the bytes"),
        (&[0x05, 0x01, 0, 0], "unknown value codec 5"),
    ];
    for (bytes, why) in bad {
        assert!(matches!(decode_all(bytes), Err(Error::Decode(_))), "{why}");
    }
    let mut ok = check(&regular_series(10, 0, 1000, |i| i as f64), None, None);
    ok.push(0);
    assert!(decode_all(&ok).is_err(), "trailing byte");
}

/// An indexed block round-trips with its statistics; with a constant interval it leaves out
/// its count and timestamps (codec 4) and is smaller than the self-contained block by them.
fn check_indexed(samples: &[Sample]) -> Vec<u8> {
    let mut out = vec![0xEE];
    let stats = encode_indexed_block(samples, &mut out);
    let block = out.split_off(1);
    assert_eq!(stats, BlockStats::from_samples(samples));
    let mut decoded = vec![Sample::new(-5, 1.0)];
    decode_indexed_block(&block, &stats, &mut decoded).unwrap();
    assert_eq!(&decoded[1..], samples);
    let mut plain = Vec::new();
    encode_block(samples, &mut plain);
    let implied = timestamps::constant_interval(&samples.iter().map(|s| s.t).collect::<Vec<_>>()).is_some();
    assert_eq!(block[0] & 0x0f == TS_IMPLIED, implied);
    if implied {
        // Same value section, without the count and the constant-interval section.
        assert!(block.len() + 3 <= plain.len(), "{} vs {}", block.len(), plain.len());
        assert!(decode_all(&block).is_err(), "codec 4 needs the statistics");
    } else {
        assert_eq!(block, plain);
    }
    block
}

proptest! {
    #![proptest_config(config(128))]
    #[test]
    fn indexed_blocks_round_trip(samples in arb_samples(1..300), regular in any::<bool>(), step in 1i64..100_000) {
        check_indexed(&samples);
        if regular {
            let t0 = samples[0].t.min(i64::MAX - 300 * step);
            let regular: Vec<Sample> =
                samples.iter().enumerate().map(|(i, s)| Sample::new(t0 + i as i64 * step, s.v)).collect();
            check_indexed(&regular);
        }
    }

    #[test]
    fn indexed_decode_with_any_stats_never_panics(
        samples in arb_samples(1..100),
        min_t: i64,
        span in prop_oneof![any::<i64>(), 0i64..1000],
        counts in (0u32..200, 0u32..4),
    ) {
        let mut bytes = Vec::new();
        encode_indexed_block(&samples, &mut bytes);
        let mut stats = BlockStats::from_samples(&samples);
        (stats.min_t, stats.max_t) = (min_t, min_t.wrapping_add(span));
        (stats.count, stats.stale_count) = counts;
        let mut out = vec![Sample::new(7, 7.0)];
        match decode_indexed_block(&bytes, &stats, &mut out) {
            Ok(()) => {
                prop_assert!(out[1..].windows(2).all(|w| w[0].t < w[1].t));
                if bytes[0] & 0x0f == TS_IMPLIED {
                    prop_assert_eq!(out[1].t, stats.min_t);
                }
            }
            Err(e) => {
                prop_assert!(matches!(e, Error::Decode(_)));
                prop_assert_eq!(out, vec![Sample::new(7, 7.0)]);
            }
        }
    }
}

proptest! {
    #![proptest_config(config(64))]
    /// A prefix up to any time is exactly the full decode's samples up to it, for every codec
    /// (the implied one included).
    #[test]
    fn prefix_decode_is_the_full_decode_cut(samples in arb_samples(1..300), cut in any::<prop::sample::Index>()) {
        let until = samples[cut.index(samples.len())].t;
        let mut blocks = Vec::new();
        for ts in TS_CODECS {
            for val in VAL_CODECS {
                let mut b = Vec::new();
                encode_block_with(&samples, &mut b, Some(ts), Some(val));
                blocks.push(b);
            }
        }
        let mut indexed = Vec::new();
        encode_indexed_block(&samples, &mut indexed);
        blocks.push(indexed);
        let stats = BlockStats::from_samples(&samples);
        for b in blocks {
            for until in [until, until.saturating_sub(1), i64::MIN, i64::MAX] {
                let mut got = vec![Sample::new(-5, 1.0)];
                decode_block_until(&b, Some(&stats), until, &mut got).unwrap();
                let want: Vec<Sample> = samples.iter().copied().filter(|s| s.t <= until).collect();
                prop_assert_eq!(&got[1..], &want[..]);
                // A self-contained block cuts the same without statistics (version 1 files).
                if b[0] & 0x0f != TS_IMPLIED {
                    let mut plain = Vec::new();
                    decode_block_until(&b, None, until, &mut plain).unwrap();
                    prop_assert_eq!(&plain[..], &want[..]);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(config(64))]
    /// Whether a block has a sample in a range, from its timestamps alone, is what decoding it
    /// says, for every codec (the implied one counted, with regular and irregular times) and
    /// ranges between, on, around and past its samples.
    #[test]
    fn time_in_range_is_the_decoded_answer(
        samples in arb_samples(1..300),
        a in any::<prop::sample::Index>(),
        b in any::<prop::sample::Index>(),
        regular in (-1_000_000i64..1_000_000, 1i64..20_000, 1usize..300),
    ) {
        let (start, step, n) = regular;
        for samples in [samples, regular_series(n, start, step, |i| i as f64)] {
            let (ta, tb) = (samples[a.index(samples.len())].t, samples[b.index(samples.len())].t);
            let mut blocks = Vec::new();
            for ts in TS_CODECS {
                let mut b = Vec::new();
                encode_block_with(&samples, &mut b, Some(ts), None);
                blocks.push(b);
            }
            let mut indexed = Vec::new();
            encode_indexed_block(&samples, &mut indexed);
            blocks.push(indexed);
            let stats = BlockStats::from_samples(&samples);
            let ranges = [
                (ta.min(tb), ta.max(tb)),
                (ta.saturating_add(1), tb.saturating_sub(1)),
                (ta.saturating_add(1), ta.saturating_add(1)),
                (i64::MIN, ta.saturating_sub(1)),
                (ta, i64::MAX),
                (i64::MIN, i64::MAX),
            ];
            for blk in &blocks {
                for (mint, maxt) in ranges {
                    let want = samples.iter().any(|s| s.t >= mint && s.t <= maxt);
                    prop_assert_eq!(block_has_time_in(blk, Some(&stats), mint, maxt).unwrap(), want, "{}..{}", mint, maxt);
                    if blk[0] & 0x0f != TS_IMPLIED {
                        prop_assert_eq!(block_has_time_in(blk, None, mint, maxt).unwrap(), want);
                    }
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(config(64))]
    /// The summed prefix of a block equals the decoded prefix folded: as many samples read, the
    /// same non-stale count and integer sum; it declines exactly the blocks that are not
    /// implied-timestamp blocks of integers and stale markers.
    #[test]
    fn prefix_sum_is_the_decoded_prefix_folded(
        values in proptest::collection::vec(prop_oneof![
            12 => (-5000i64..5000).prop_map(|m| m as f64),
            1 => Just(stale_nan()),
            1 => Just(2.5),
        ], 1..400),
        start in -1_000_000i64..1_000_000,
        step in 1i64..20_000,
        cut in any::<prop::sample::Index>(),
        irregular in any::<bool>(),
    ) {
        let mut samples = regular_series(values.len(), start, step, |i| values[i]);
        if irregular && let Some(last) = samples.last_mut() {
            // No longer a constant interval (for three samples or more): timestamps stored.
            last.t += 1;
        }
        let until = samples[cut.index(samples.len())].t;
        let mut b = Vec::new();
        let stats = encode_indexed_block(&samples, &mut b);
        for until in [until, until - 1, i64::MIN, i64::MAX] {
            let mut prefix = Vec::new();
            decode_block_until(&b, Some(&stats), until, &mut prefix).unwrap();
            let live: Vec<f64> = prefix.iter().map(|s| s.v).filter(|v| !crate::types::is_stale(*v)).collect();
            let eligible = b[0] & 0x0f == TS_IMPLIED && integral_indexed_values(&b, &stats);
            match sum_block_until(&b, &stats, until).unwrap() {
                Some(p) => {
                    prop_assert!(eligible);
                    prop_assert_eq!(p.read, prefix.len() as u64);
                    prop_assert_eq!(p.count, live.len() as u64);
                    prop_assert_eq!(p.sum as f64, live.iter().sum::<f64>());
                }
                None => prop_assert!(!eligible),
            }
        }
    }
}

#[test]
fn implied_timestamps_at_the_extremes() {
    check_indexed(&[Sample::new(i64::MIN, 1.0), Sample::new(i64::MAX, 2.0)]);
    check_indexed(&[Sample::new(i64::MAX, 1.0)]);
    check_indexed(&[Sample::new(i64::MIN, 1.0)]);
    check_indexed(&regular_series(1000, i64::MAX - 999, 1, |i| i as f64));
    let bytes = check_indexed(&regular_series(10, 0, 1000, |i| i as f64));
    let stats = BlockStats::from_samples(&regular_series(10, 0, 1000, |i| i as f64));
    // Statistics that imply no constant interval for their count are refused.
    for (min_t, max_t, count) in [(0, 9001, 10), (0, 0, 10), (5, 5, 2), (9000, 0, 10), (0, 9000, 0)] {
        let st = BlockStats { min_t, max_t, count, ..stats };
        assert!(
            matches!(decode_indexed_block(&bytes, &st, &mut Vec::new()), Err(Error::Decode(_))),
            "{st:?}"
        );
    }
}

#[test]
fn a_constant_block_is_tiny_for_any_count() {
    let samples = regular_series(100_000, 1_700_000_000_000, 10_000, |_| 1.0);
    let bytes = check(&samples, None, None);
    assert!(bytes.len() <= 20, "{} bytes", bytes.len());
}

// ---- golden bytes ----

/// Fixed inputs with the codecs they are pinned to: one file per codec, so a change to any
/// codec's bytes fails here (regenerate deliberately with `STRATA_BLESS=1`).
fn golden_cases() -> Vec<(&'static str, Vec<Sample>, u8, u8)> {
    let t0 = 1_700_000_000_000;
    let walk: Vec<f64> = (0..300u64)
        .scan(50i64, |v, i| {
            *v += [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, -1, -1, -1, 3, -3][(hash(i) % 16) as usize];
            Some(*v as f64)
        })
        .collect();
    let jitter: Vec<i64> = (0..300i64).map(|i| t0 + i * 15_000 + (hash(i as u64) % 23) as i64).collect();
    let mut gappy: Vec<i64> = (0..300i64).map(|i| t0 + i * 10_000).collect();
    gappy.retain(|t| (t / 10_000) % 97 != 0);
    let irregular: Vec<i64> = (0..100i64)
        .scan(-5_000_000i64, |t, i| {
            *t += 1 + (hash(i as u64) >> (20 + i % 40)) as i64;
            Some(*t)
        })
        .collect();
    let zip = |ts: &[i64], f: &dyn Fn(usize) -> f64| -> Vec<Sample> {
        ts.iter().enumerate().map(|(i, &t)| Sample::new(t, f(i))).collect()
    };
    vec![
        ("block_ts_const_val_const", regular_series(200, t0, 10_000, |_| 42.0), TS_CONST, VAL_CONST),
        ("block_ts_dod_val_xor", zip(&gappy, &|i| (i as f64 * 0.37).sin() * 1e3), TS_DOD, VAL_XOR),
        ("block_ts_seq_val_scaled_rice", zip(&jitter, &|i| walk[i]), TS_SEQ, VAL_SCALED_RICE),
        (
            "block_ts_delta_varint_val_scaled_for",
            zip(&irregular, &|i| (hash(i as u64) % 1024) as f64 / 100.0),
            TS_DELTA_VARINT,
            VAL_SCALED_FOR,
        ),
        (
            "block_val_scaled_exceptions",
            zip(&gappy, &|i| match i % 50 {
                49 => stale_nan(),
                25 => f64::NAN,
                _ => (i % 13) as f64 * 0.25,
            }),
            TS_SEQ,
            VAL_SCALED_FOR,
        ),
        (
            "block_ts_dod_val_scaled_runs",
            zip(&gappy, &|i| [3.0, 250.0, 7.5][i / 100]),
            TS_DOD,
            VAL_SCALED_RUNS,
        ),
        (
            "block_special_values",
            vec![
                Sample::new(i64::MIN, -0.0),
                Sample::new(-1, f64::NEG_INFINITY),
                Sample::new(0, stale_nan()),
                Sample::new(i64::MAX, f64::from_bits(0x7ff0_0000_0000_0001)),
            ],
            TS_DELTA_VARINT,
            VAL_XOR,
        ),
    ]
}

fn golden_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/format").join(format!("{name}.bin"))
}

fn compare_golden(name: &str, bytes: &[u8]) {
    let path = golden_path(name);
    if std::env::var("STRATA_BLESS").as_deref() == Ok("1") {
        std::fs::write(&path, bytes).unwrap();
        return;
    }
    let want = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with STRATA_BLESS=1 to create it)", path.display()));
    assert!(
        want == bytes,
        "{name}: encoding changed; if intended, rerun with STRATA_BLESS=1 and update docs/format/block.md"
    );
}

#[test]
fn golden_blocks() {
    for (name, samples, ts, val) in golden_cases() {
        let bytes = check(&samples, Some(ts), Some(val));
        let h = block_header(&bytes).unwrap();
        assert_eq!((h.ts_codec, h.value_codec), (ts, val), "{name} pinned codecs");
        compare_golden(name, &bytes);
        // Old bytes keep decoding to the same samples.
        assert_eq!(decode_all(&std::fs::read(golden_path(name)).unwrap()).unwrap(), samples, "{name}");
    }
}

/// An hour of 10 s samples of an integer walk, as a regular scrape leaves it: the block
/// partition files of format version 2 write for it, and its chained statistics.
#[test]
fn golden_indexed_block_and_chained_stats() {
    let walk = |b: usize| -> Vec<Sample> {
        let t0 = 1_700_000_010_000 + b as i64 * 3_600_000;
        (0..360u64)
            .scan(50i64 + b as i64, |v, i| {
                *v += [0, 0, 0, 1, 1, -1, -1, 2][(hash(i + 1000 * b as u64) % 8) as usize];
                Some(*v as f64)
            })
            .enumerate()
            .map(|(i, v)| Sample::new(t0 + i as i64 * 10_000, v))
            .collect()
    };
    let samples = walk(0);
    let bytes = check_indexed(&samples);
    assert_eq!(bytes[0], TS_IMPLIED | VAL_SCALED_FOR << 4);
    compare_golden("block_indexed_ts_implied_val_scaled_for", &bytes);
    let stats = BlockStats::from_samples(&samples);
    let mut old = Vec::new();
    decode_indexed_block(
        &std::fs::read(golden_path("block_indexed_ts_implied_val_scaled_for")).unwrap(),
        &stats,
        &mut old,
    )
    .unwrap();
    assert_eq!(old, samples);

    // Format version 2's chained statistics of four walk blocks; version 3's of the same and a
    // counter's block (whose values never decrease: the one bit version 3 adds); version 4's of
    // those and a block of decimals (the integral bit that version 4 adds is set on all others).
    let mut list: Vec<BlockStats> = (0..4).map(|b| BlockStats::from_samples(&walk(b))).collect();
    for (name, version) in
        [("block_stats_chained", 2), ("block_stats_chained_v3", 3), ("block_stats_chained_v4", 4)]
    {
        if version == 4 {
            let decimals: Vec<Sample> = walk(5).iter().map(|s| Sample::new(s.t, s.v / 4.0)).collect();
            list.push(BlockStats::from_samples(&decimals));
            assert!(list[..5].iter().all(|st| st.integral) && !list[5].integral);
        }
        if version == 3 {
            let mut counter = walk(4);
            let mut total = 0.0;
            for s in &mut counter {
                total += s.v.abs();
                s.v = total;
            }
            list.push(BlockStats::from_samples(&counter));
            assert!(list[4].no_decrease && !list[3].no_decrease);
        }
        let (mut bytes, mut chain) = (Vec::new(), StatsChain::for_version(version));
        for st in &list {
            st.encode_chained(&mut chain, &mut bytes);
        }
        compare_golden(name, &bytes);
        let file = std::fs::read(golden_path(name)).unwrap();
        let (mut pos, mut chain) = (0, StatsChain::for_version(version));
        for st in &list {
            let want = BlockStats { no_decrease: st.no_decrease && version >= 3, integral: st.integral && version >= 4, ..*st };
            assert_eq!(BlockStats::decode_chained(&file, &mut pos, &mut chain).unwrap(), want, "{name}");
        }
        assert_eq!(pos, file.len());
    }
}

#[test]
fn golden_stats() {
    let mut bytes = Vec::new();
    let mut all = Vec::new();
    for (_, samples, _, _) in golden_cases() {
        let st = BlockStats::from_samples(&samples);
        st.encode(&mut bytes);
        all.push(st);
    }
    compare_golden("block_stats", &bytes);
    let file = std::fs::read(golden_path("block_stats")).unwrap();
    let mut pos = 0;
    for st in all {
        // Version 1's encoding keeps neither `no_decrease` nor `integral`.
        let want = BlockStats { no_decrease: false, integral: false, ..st };
        assert_eq!(BlockStats::decode(&file, &mut pos).unwrap(), want);
    }
    assert_eq!(pos, file.len());
}

#[test]
fn automatic_choice_matches_golden_intent() {
    // The automatic choice picks the pinned codec for the inputs designed for it.
    for (name, samples, ts, val) in golden_cases() {
        let mut bytes = Vec::new();
        encode_block(&samples, &mut bytes);
        let h = block_header(&bytes).unwrap();
        if matches!(
            name,
            "block_ts_const_val_const"
                | "block_ts_seq_val_scaled_rice"
                | "block_ts_delta_varint_val_scaled_for"
        ) {
            assert_eq!((h.ts_codec, h.value_codec), (ts, val), "{name}");
        }
    }
}

/// `integral_values` vouches for integer blocks from their header, and never for a block with
/// a value that is not an integer below 2^53 (other than stale markers).
#[test]
fn integral_values_from_the_header() {
    let at = |vs: &[f64]| -> Vec<Sample> {
        vs.iter().enumerate().map(|(i, &v)| Sample::new(1_000 + i as i64 * 10_000, v)).collect()
    };
    let integral = |samples: &[Sample], val: Option<u8>| {
        let mut out = Vec::new();
        let stats = encode_block_with(samples, &mut out, None, val);
        integral_values(&out, stats.stale_count)
    };
    let walk: Vec<f64> = (0..300u64).map(|i| (hash(i) % 50) as f64 - 20.0).collect();
    assert!(integral(&at(&walk), None));
    for codec in [VAL_SCALED_FOR, VAL_SCALED_RICE, VAL_SCALED_RUNS] {
        assert!(integral(&at(&walk), Some(codec)), "codec {codec}");
    }
    let mut stale = walk.clone();
    stale.push(stale_nan());
    assert!(integral(&at(&stale), None), "a stale marker is not a value");
    assert!(integral(&at(&[7.0; 20]), None), "constant");
    for bad in [f64::NAN, 0.5, -0.0, f64::INFINITY, 9_007_199_254_740_992.0] {
        let mut vs = walk.clone();
        vs[100] = bad;
        assert!(!integral(&at(&vs), None), "{bad}");
        assert!(!integral(&at(&[bad; 20]), None), "constant {bad}");
    }
    assert!(!integral(&at(&walk), Some(VAL_XOR)), "XOR does not tell");
    // Timestamps other than a constant interval cannot be skipped without decoding them.
    let mut jitter = at(&walk);
    jitter[5].t += 1;
    assert!(!integral(&jitter, None));
    assert!(!integral_values(&[0x20, 5, 1], 0), "corrupt bytes");
}

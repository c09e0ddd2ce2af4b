use proptest::prelude::*;
use storage::STALE_NAN_BITS;

use crate::read::bits::BitReader;

use super::*;

fn encode(samples: &[(i64, u64)]) -> Vec<u8> {
    let mut e = XorEncoder::new();
    for (t, bits) in samples {
        assert!(e.append(*t, f64::from_bits(*bits)));
    }
    e.finish()
}

fn decode_bits(data: &[u8]) -> Vec<(i64, u64)> {
    decode(data).unwrap().iter().map(|s| (s.t, s.v.to_bits())).collect()
}

/// Worked out by hand from Prometheus' xor.go: see the comments for each field.
#[test]
fn golden_three_samples() {
    let data = encode(&[(1000, 1f64.to_bits()), (2000, 1f64.to_bits()), (3000, 2f64.to_bits())]);
    let expected = [
        0x00,
        0x03, // 3 samples
        0xD0,
        0x0F, // t0 = 1000: zigzag 2000 as a varint
        0x3F,
        0xF0,
        0,
        0,
        0,
        0,
        0,
        0, // v0 = 1.0
        0xE8,
        0x07, // t1 - t0 = 1000 as a uvarint
        // '0' v1 unchanged; '0' dod 0; '11' new window, leading 00001, 11 significant bits
        // 001011, bits 11111111111 (1.0 ^ 2.0 = 0x7FF0...); 6 bits of padding.
        0b0011_0000,
        0b1001_0111,
        0b1111_1111,
        0b1100_0000,
    ];
    assert_eq!(data, expected);
    assert_eq!(
        decode_bits(&data),
        vec![(1000, 1f64.to_bits()), (2000, 1f64.to_bits()), (3000, 2f64.to_bits())]
    );
}

/// A chunk Prometheus 2.42 itself wrote (taken from the `chunks/000001` file of a TSDB
/// snapshot after remote-writing these samples to it; tests/e2e/remote_read.rs repeats the
/// comparison live): stale marker, NaN, infinities, -0.0 and irregular timestamps.
#[test]
fn golden_prometheus_chunk() {
    let samples = golden_samples();
    let data = encode(&samples);
    assert_eq!(data, PROMETHEUS_CHUNK, "{data:02x?}");
    assert_eq!(decode_bits(PROMETHEUS_CHUNK), samples);
}

fn golden_samples() -> Vec<(i64, u64)> {
    let t0 = 1_700_000_000_000i64;
    let values = [
        1.0,
        1.0,
        2.5,
        f64::from_bits(STALE_NAN_BITS),
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0,
        0.0,
        123456789.125,
        1e-300,
        -42.0,
    ];
    // Gaps that exercise every delta-of-delta width: 0, 14, 17, 20 and 64 bits, both signs.
    let gaps = [15_000, 15_000, 15_001, 23_192, 15_000, 80_000, 15_000, 600_000, 1, 3_600_000, 7, 15_000];
    let mut t = t0;
    values
        .iter()
        .zip(gaps)
        .map(|(v, gap)| {
            t += gap;
            (t, v.to_bits())
        })
        .collect()
}

const PROMETHEUS_CHUNK: &[u8] = &[
    0x00, 0x0c, 0xb0, 0x8a, 0xad, 0xfe, 0xf9, 0x62, 0x3f, 0xf0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x98,
    0x75, 0x40, 0x00, 0xe1, 0x37, 0xff, 0xb3, 0xff, 0xf8, 0xbd, 0xff, 0xd0, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x0e, 0xf0, 0x00, 0x40, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xcf, 0xde, 0x88, 0x00, 0x80, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x1a, 0x04, 0x31, 0x80, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00, 0x04, 0x76, 0x94,
    0x61, 0x2f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xb6, 0xc2, 0x0e, 0x00, 0x7e, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x6d, 0xdc, 0xff, 0x86, 0x88, 0x33, 0xad, 0xe6, 0x8a, 0x9f, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xc9, 0x11, 0x87, 0xc3, 0xfc, 0x03, 0x80, 0x12, 0xb9, 0x67, 0x8f, 0x35, 0x9c, 0x3a, 0x91, 0xc0, 0x06,
    0x0f, 0x03, 0x70, 0xfe, 0x17, 0xc7, 0x9a, 0xc8,
];

#[test]
fn delta_of_delta_bucket_edges() {
    // The asymmetric ranges of bitRange: +2^(n-1) fits in n bits, -2^(n-1) does not.
    for (dod, prefix_ones, width) in [
        (0, 0, 0),
        (8192, 1, 14),
        (-8191, 1, 14),
        (-8192, 2, 17),
        (65536, 2, 17),
        (-65536, 3, 20),
        (524_288, 3, 20),
        (524_289, 4, 64),
        (-524_288, 4, 64),
    ] {
        let data = encode(&[(0, 0), (1_000_000, 0), (2_000_000 + dod, 0)]);
        // Header 2, t0 varint 1, v0 8, t1 - t0 uvarint 3 bytes; then v1's '0' bit.
        let mut r = BitReader::new(&data[14..]);
        assert!(!r.read_bit().unwrap());
        let mut ones = 0;
        while ones < 4 && r.read_bit().unwrap() {
            ones += 1;
        }
        assert_eq!(ones, prefix_ones, "dod {dod}");
        let raw = r.read_bits(width).unwrap();
        assert_eq!(raw, if width == 64 { dod as u64 } else { dod as u64 & ((1 << width) - 1) }, "dod {dod}");
        assert_eq!(decode_bits(&data)[2].0, 2_000_000 + dod, "dod {dod}");
    }
}

#[test]
fn special_values_round_trip_bit_exact() {
    let specials = [
        STALE_NAN_BITS,
        f64::NAN.to_bits(),
        0x7ff8_0000_0000_0001, // another NaN payload
        f64::INFINITY.to_bits(),
        f64::NEG_INFINITY.to_bits(),
        (-0.0f64).to_bits(),
        0,
        1,        // smallest subnormal
        u64::MAX, // a negative NaN with every payload bit set
        f64::MAX.to_bits(),
    ];
    let samples: Vec<(i64, u64)> =
        specials.iter().enumerate().map(|(i, b)| (i as i64 * 1000 - 5000, *b)).collect();
    assert_eq!(decode_bits(&encode(&samples)), samples);
}

#[test]
fn empty_and_single_sample_chunks() {
    let empty = XorEncoder::new();
    assert!(empty.is_empty() && empty.time_range().is_none());
    assert_eq!(empty.finish(), vec![0, 0]);
    assert!(decode(&[0, 0]).unwrap().is_empty());
    let one = encode(&[(-1, 42f64.to_bits())]);
    assert_eq!(decode_bits(&one), vec![(-1, 42f64.to_bits())]);
}

#[test]
fn the_count_saturates_at_u16_max() {
    let mut e = XorEncoder::new();
    for t in 0..u16::MAX as i64 {
        assert!(e.append(t, 1.0));
    }
    assert!(!e.append(1 << 20, 1.0));
    assert_eq!(e.len(), u16::MAX as usize);
    assert_eq!(decode(&e.finish()).unwrap().len(), u16::MAX as usize);
}

#[test]
fn corrupt_chunks_fail_cleanly() {
    assert!(decode(&[]).is_err());
    assert!(decode(&[0]).is_err());
    // Declares 3 samples, holds 1.
    let mut data = encode(&[(5, 1f64.to_bits())]);
    data[1] = 3;
    assert!(matches!(decode(&data), Err(Error::CorruptResponse(_))));
    // A window of 31 leading + 64 significant bits.
    let bad = [0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0b1111_1111, 0b0000_0000, 0];
    assert!(decode(&bad).is_err());
}

proptest! {
    #[test]
    fn any_series_round_trips(
        start in any::<i64>().prop_map(|t| t / 4),
        points in prop::collection::vec((0i64..=1 << 40, any::<u64>(), any::<bool>()), 1..300),
    ) {
        let mut t = start;
        let mut samples = Vec::new();
        let mut prev_bits = 0u64;
        for (gap, bits, repeat) in points {
            t = t.saturating_add(gap.max(1));
            // Repeated values exercise the '0' and window-reuse paths.
            let bits = if repeat { prev_bits } else { bits };
            prev_bits = bits;
            samples.push((t, bits));
        }
        let data = encode(&samples);
        prop_assert_eq!(decode_bits(&data), samples);
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode(&data);
    }

    #[test]
    fn truncation_is_an_error(cut in 0usize..100) {
        let samples: Vec<(i64, u64)> = (0..50).map(|i| (i * 1000 + i * i, (i as f64 * 1.5).to_bits())).collect();
        let data = encode(&samples);
        // Dropping a whole byte always loses part of a sample (padding is less than a byte).
        let cut = cut % (data.len() - 2);
        let decoded = decode(&data[..data.len() - 1 - cut]);
        prop_assert!(decoded.is_err());
    }
}

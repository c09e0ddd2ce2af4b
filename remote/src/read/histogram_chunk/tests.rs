use super::*;

fn bits_of(write: impl FnOnce(&mut BitWriter)) -> String {
    let mut w = BitWriter::default();
    write(&mut w);
    w.into_bytes().iter().map(|b| format!("{b:08b}")).collect()
}

/// `putVarbitInt`'s buckets at their edges: `bitRange` allows one more positive value than
/// two's complement.
#[test]
fn varbit_ints_pick_the_smallest_width() {
    let cases: &[(i64, &str)] = &[
        (0, "0"),
        (1, "10001"),
        (4, "10100"),
        (-3, "10101"),
        (5, "110000101"),
        (-4, "110111100"),
        (32, "110100000"),
        (33, "1110000100001"),
        (2048, "11110100000000000"),
        (131_072, "111110100000000000000000"),
        (16_777_216, "11111101000000000000000000000000"),
    ];
    for (v, want) in cases {
        let got = bits_of(|w| put_varbit_int(w, *v));
        assert!(got.starts_with(want), "{v}: {got} does not start with {want}");
        assert!(got[want.len()..].chars().all(|c| c == '0'), "{v}: padding of {got}");
    }
    let big = bits_of(|w| put_varbit_int(w, 1 << 60));
    assert!(big.starts_with("11111111"), "{big}");
    let mid = bits_of(|w| put_varbit_int(w, -(1 << 40)));
    assert!(mid.starts_with("11111110"), "{mid}");
}

#[test]
fn varbit_uints_use_the_whole_width() {
    assert!(bits_of(|w| put_varbit_uint(w, 7)).starts_with("10111"));
    assert!(bits_of(|w| put_varbit_uint(w, 8)).starts_with("110001000"));
    assert!(bits_of(|w| put_varbit_uint(w, u64::MAX)).starts_with(&format!("11111111{}", "1".repeat(64))));
}

/// `putZeroThreshold`: one byte for 0 and powers of two in `[2^-243, 2^10]`, else 255 and the
/// float.
#[test]
fn zero_thresholds() {
    // A lone whole byte ends in bstream's spare byte (see `bits`).
    let byte = |t: f64| bits_of(|w| write_zero_threshold(w, t));
    assert_eq!(byte(0.0), "0000000000000000");
    assert_eq!(byte(2f64.powi(-128)), format!("{:08b}00000000", 116));
    assert_eq!(byte(1024.0), format!("{:08b}00000000", 254));
    assert_eq!(byte(2f64.powi(-243)), format!("{:08b}00000000", 1));
    assert!(byte(2048.0).starts_with("11111111"));
    assert!(byte(2f64.powi(-244)).starts_with("11111111"));
    assert!(byte(0.001).starts_with(&format!("11111111{:064b}", 0.001f64.to_bits())));
}

/// `putCustomBound`: whole thousandths up to 33554.43 as `v·1000 + 1`, the rest as `0` + f64.
#[test]
fn custom_bounds() {
    let bound = |b: f64| bits_of(|w| write_custom_bound(w, b));
    assert!(bound(0.0).starts_with("10001"), "0 → 1");
    assert!(bound(0.005).starts_with("10110"), "0.005 → 6");
    assert!(bound(0.25).starts_with("1110011111011"), "0.25 → 251");
    assert!(bound(33554.43).starts_with(&format!("1111110{:025b}", 33_554_431)));
    assert!(bound(33554.431).starts_with(&format!("0{:064b}", 33554.431f64.to_bits())));
    assert!(bound(-1.0).starts_with(&format!("0{:064b}", (-1.0f64).to_bits())));
    assert!(bound(0.0001).starts_with("0"));
}

//! Byte-string helpers for the decoders' hot paths.

/// Equality of byte strings. Up to 16 bytes it uses two overlapping word compares instead of a
/// `memcmp` call: label names and values are mostly that short, and the call dominates there.
#[inline]
pub(crate) fn eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let n = a.len();
    let word =
        |s: &[u8], at: usize| s.get(at..at + 8).and_then(|w| w.try_into().ok()).map(u64::from_ne_bytes);
    let half =
        |s: &[u8], at: usize| s.get(at..at + 4).and_then(|w| w.try_into().ok()).map(u32::from_ne_bytes);
    match n {
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        4..=7 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        0..=3 => a.iter().zip(b).all(|(x, y)| x == y),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn eq_matches_slice_eq() {
        let samples: Vec<Vec<u8>> = (0..40).map(|n| (0..n).map(|i| (i * 7 % 251) as u8).collect()).collect();
        for a in &samples {
            for b in &samples {
                assert_eq!(super::eq(a, b), a == b);
            }
            let mut c = a.clone();
            for i in 0..c.len() {
                c[i] ^= 1;
                assert!(!super::eq(a, &c), "{a:?} {c:?}");
                c[i] ^= 1;
            }
        }
    }
}

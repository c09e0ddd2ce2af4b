//! Gorilla XOR value coding, shared by [`XorChunk`](super::XorChunk) and the block codec
//! `VAL_XOR`. It works on raw `f64` bits, so every value (NaN payloads, -0.0, ±Inf) round-trips.
//!
//! The first value is written as 64 raw bits. Each later value is XORed with the previous one:
//!
//! | bits (in stream order)               | meaning                                              |
//! |--------------------------------------|------------------------------------------------------|
//! | `0`                                  | same bits as the previous value                      |
//! | `1 0` + m bits                       | XOR fits the previous window: m = 64 - lead - trail  |
//! | `1 1` + 6 lead + 6 (len-1) + len bits | new window: leading zeros, length of meaningful bits |
//!
//! Unlike the Gorilla paper, the encoder opens a new window when that is shorter than reusing a
//! much wider old one (the decoder does not care which it chose).

use super::bits::{BitReader, BitWriter, low_mask};
use crate::error::{Error, Result};

/// Marks "no window yet" in [`XorState::leading`].
const NO_WINDOW: u8 = u8::MAX;

/// How one value is written: see the table at the top of this module.
enum Step {
    /// Same bits as the previous value.
    Same,
    /// The XOR's meaningful bits (`x`, shifted down) in the previous window of `window` bits.
    Reuse { x: u64, window: u32 },
    /// A new window: `lead` leading zeros, `sig` meaningful bits `x`.
    Open { x: u64, lead: u32, sig: u32 },
}

/// Running state of a value sequence: the previous bits and the current XOR window.
#[derive(Clone, Copy, Debug)]
pub(crate) struct XorState {
    prev: u64,
    leading: u8,
    trailing: u8,
}

impl XorState {
    /// State after the first value, whose bits are `first`.
    pub(crate) fn start(first: u64) -> Self {
        XorState { prev: first, leading: NO_WINDOW, trailing: 0 }
    }

    /// Bits of the last value written or read.
    pub(crate) fn prev(&self) -> u64 {
        self.prev
    }

    /// Encodes `bits` as the next value.
    #[inline]
    pub(crate) fn push(&mut self, w: &mut BitWriter<'_>, bits: u64) {
        match self.step(bits) {
            Step::Same => w.write(0, 1),
            Step::Reuse { x, window } => {
                w.write(0b01, 2);
                w.write(x, window);
            }
            Step::Open { x, lead, sig } => {
                w.write(0b11 | u64::from(lead) << 2 | u64::from(sig - 1) << 8, 14);
                w.write(x, sig);
            }
        }
    }

    /// The bits [`XorState::push`] would write for `bits`, with the same change of state: the
    /// block encoder sizes the XOR codec against the others without writing it.
    #[inline]
    pub(crate) fn push_len(&mut self, bits: u64) -> u32 {
        match self.step(bits) {
            Step::Same => 1,
            Step::Reuse { window, .. } => 2 + window,
            Step::Open { sig, .. } => 14 + sig,
        }
    }

    /// The encoder's choice for the next value, `bits`, with the state moved past it.
    #[inline]
    fn step(&mut self, bits: u64) -> Step {
        let x = bits ^ self.prev;
        self.prev = bits;
        if x == 0 {
            return Step::Same;
        }
        let lead = x.leading_zeros();
        let trail = x.trailing_zeros();
        let sig = 64 - lead - trail;
        if self.leading != NO_WINDOW {
            let (l, t) = (u32::from(self.leading), u32::from(self.trailing));
            let window = 64 - l - t;
            // Reuse costs 2 + window bits, a new window 14 + sig bits.
            if lead >= l && trail >= t && window <= sig + 12 {
                return Step::Reuse { x: x >> t, window };
            }
        }
        self.leading = lead as u8;
        self.trailing = trail as u8;
        Step::Open { x: x >> trail, lead, sig }
    }

    /// Decodes the next value's bits.
    #[inline]
    pub(crate) fn next(&mut self, r: &mut BitReader<'_>) -> Result<u64> {
        if !r.read_bit()? {
            return Ok(self.prev);
        }
        let x = if !r.read_bit()? {
            if self.leading == NO_WINDOW {
                return Err(Error::Decode("XOR value reuses a window before one was set".into()));
            }
            let (l, t) = (u32::from(self.leading), u32::from(self.trailing));
            r.read(64 - l - t)? << t
        } else {
            let header = r.read(12)?;
            let lead = (header & 0x3f) as u32;
            let sig = ((header >> 6) & 0x3f) as u32 + 1;
            if lead + sig > 64 {
                return Err(Error::Decode(format!("XOR window of {lead} + {sig} bits exceeds 64")));
            }
            let trail = 64 - lead - sig;
            self.leading = lead as u8;
            self.trailing = trail as u8;
            (r.read(sig)? & low_mask(sig)) << trail
        };
        self.prev ^= x;
        Ok(self.prev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(values: &[u64]) {
        let mut buf = Vec::new();
        let mut w = BitWriter::new(&mut buf);
        w.write(values[0], 64);
        let mut s = XorState::start(values[0]);
        let mut sized = XorState::start(values[0]);
        let mut len = 64u64;
        for &v in &values[1..] {
            s.push(&mut w, v);
            len += u64::from(sized.push_len(v));
        }
        let bits = w.bit_len();
        assert_eq!(len, bits, "push_len sizes what push writes");
        drop(w);
        let mut r = BitReader::with_limit(&buf, bits);
        let first = r.read(64).unwrap();
        assert_eq!(first, values[0]);
        let mut d = XorState::start(first);
        for &v in &values[1..] {
            assert_eq!(d.next(&mut r).unwrap(), v);
        }
        assert!(r.read(1).is_err(), "stream longer than the values");
    }

    #[test]
    fn special_values() {
        let specials = [
            0.0f64.to_bits(),
            (-0.0f64).to_bits(),
            f64::INFINITY.to_bits(),
            f64::NEG_INFINITY.to_bits(),
            f64::NAN.to_bits(),
            crate::types::STALE_NAN_BITS,
            0x7ff0_0000_0000_0001,
            1,
            u64::MAX,
            1.5f64.to_bits(),
            1.5f64.to_bits(),
        ];
        round_trip(&specials);
    }

    #[test]
    fn reuse_without_window_is_an_error() {
        // first value 0, then control bits "1 0" (reuse) with no window set.
        let mut buf = Vec::new();
        let mut w = BitWriter::new(&mut buf);
        w.write(0, 64);
        w.write(0b01, 2);
        drop(w);
        let mut r = BitReader::new(&buf);
        let first = r.read(64).unwrap();
        assert!(XorState::start(first).next(&mut r).is_err());
    }

    proptest! {
        #[test]
        fn arbitrary_bits(values in proptest::collection::vec(prop_oneof![
            any::<u64>(), (0u32..64).prop_map(|s| 1u64 << s), (0.0f64..100.0).prop_map(|f| f.round().to_bits())
        ], 1..100)) {
            round_trip(&values);
        }
    }
}

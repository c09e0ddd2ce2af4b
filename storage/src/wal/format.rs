//! The bytes of a WAL segment: a fixed header, then back-to-back record frames.
//! docs/format/wal.md is the reference; this module is its only encoder and decoder.
//!
//! Every function here is total: any byte slice yields a value or a reason, never a panic,
//! because recovery runs these over whatever a crash or a failing disk left behind.

use std::hash::{BuildHasher, RandomState};

/// First four bytes of every segment file.
pub(crate) const MAGIC: [u8; 4] = *b"STWL";
/// Format version written into new segments: segments form runs (see [`SegmentHeader`]).
pub(crate) const VERSION: u8 = 2;
/// The version before runs: every segment is its own run. Still read; never written.
pub(crate) const VERSION_1: u8 = 1;
/// Flag bit of a version-2 header: the segment starts a run.
const FLAG_STARTS_RUN: u8 = 1;
/// Bytes of the segment header: magic(4) version(1) flags(1) reserved(2) number(8) salt(4) crc(4).
pub(crate) const SEGMENT_HEADER_LEN: usize = 24;
/// Bytes of a record frame's header: len(4) payload_crc(4) header_crc(4).
pub(crate) const FRAME_HEADER_LEN: usize = 12;
/// Largest payload a frame can carry (its length field is a u32).
pub(crate) const MAX_PAYLOAD_LEN: usize = u32::MAX as usize;

/// What the header of a segment says about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegmentHeader {
    /// The segment's number; must equal the number in its file name.
    pub number: u64,
    /// Random per segment and mixed into every frame's header checksum, so bytes that merely
    /// look like a frame (inside a payload, or left from an older file) never validate.
    pub salt: u32,
    /// Whether the segment starts a run: a sequence of segments in which a series, once its
    /// record has defined it, stays defined, so the appender writes its labels once per run
    /// rather than once per segment. A segment that does not start one continues the run of
    /// the segment numbered one below it. Always true for a version-1 segment, which defines
    /// every series it uses.
    pub starts_run: bool,
}

impl SegmentHeader {
    /// A header for a new segment with a fresh random salt.
    pub fn new(number: u64, starts_run: bool) -> SegmentHeader {
        SegmentHeader { number, salt: new_salt(number), starts_run }
    }

    /// The header's bytes as they are written at the start of the segment file.
    pub fn encode(&self) -> [u8; SEGMENT_HEADER_LEN] {
        let mut out = [0u8; SEGMENT_HEADER_LEN];
        out[0..4].copy_from_slice(&MAGIC);
        out[4] = VERSION;
        out[5] = if self.starts_run { FLAG_STARTS_RUN } else { 0 };
        // Bytes 6..8 are reserved and zero.
        out[8..16].copy_from_slice(&self.number.to_le_bytes());
        out[16..20].copy_from_slice(&self.salt.to_le_bytes());
        let crc = crc32fast::hash(&out[0..20]);
        out[20..24].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Parses and verifies the header at the start of `data`; the error is a human reason.
    pub fn decode(data: &[u8]) -> Result<SegmentHeader, String> {
        let Some(head) = data.get(..SEGMENT_HEADER_LEN) else {
            return Err(format!("segment header incomplete: {} of {SEGMENT_HEADER_LEN} bytes", data.len()));
        };
        if head.get(..4) != Some(&MAGIC[..]) {
            return Err("bad segment magic".to_string());
        }
        let stored_crc = read_u32(head, SEGMENT_HEADER_LEN - 4).unwrap_or_default();
        let computed_crc = crc32fast::hash(head.get(..SEGMENT_HEADER_LEN - 4).unwrap_or_default());
        if stored_crc != computed_crc {
            return Err("segment header checksum mismatch".to_string());
        }
        let version = head.get(4).copied().unwrap_or_default();
        let starts_run = match version {
            VERSION_1 => true,
            VERSION => {
                let flags = head.get(5).copied().unwrap_or_default();
                if flags & !FLAG_STARTS_RUN != 0 {
                    return Err(format!("unknown segment header flags {flags:#04x}"));
                }
                flags & FLAG_STARTS_RUN != 0
            }
            _ => {
                return Err(format!(
                    "unsupported segment version {version} (this build reads {VERSION_1} and {VERSION})"
                ));
            }
        };
        let number = read_u64(head, 8).unwrap_or_default();
        let salt = read_u32(head, 16).unwrap_or_default();
        Ok(SegmentHeader { number, salt, starts_run })
    }
}

/// The 12-byte header that precedes `payload` in a segment salted with `salt`.
/// The caller guarantees `payload.len() <= MAX_PAYLOAD_LEN`.
pub(crate) fn frame_header(salt: u32, payload: &[u8]) -> [u8; FRAME_HEADER_LEN] {
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    let payload_crc = crc32fast::hash(payload);
    let mut out = [0u8; FRAME_HEADER_LEN];
    out[0..4].copy_from_slice(&len.to_le_bytes());
    out[4..8].copy_from_slice(&payload_crc.to_le_bytes());
    out[8..12].copy_from_slice(&header_crc(salt, len, payload_crc).to_le_bytes());
    out
}

/// What [`decode_frame`] found at an offset.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frame<'a> {
    /// A whole, verified record; the next frame starts at `next`.
    Record { payload: &'a [u8], next: usize },
    /// No valid record starts here (torn, zeroed or corrupted bytes), and why.
    Damaged(&'static str),
}

/// Decodes the frame at `offset` of a segment's bytes `data` (offset < data.len()).
pub(crate) fn decode_frame(data: &[u8], offset: usize, salt: u32) -> Frame<'_> {
    let header = offset.checked_add(FRAME_HEADER_LEN).and_then(|end| data.get(offset..end));
    let fields = header.map(|h| (read_u32(h, 0), read_u32(h, 4), read_u32(h, 8)));
    let Some((Some(len), Some(payload_crc), Some(stored_header_crc))) = fields else {
        return Frame::Damaged("frame header incomplete");
    };
    if header_crc(salt, len, payload_crc) != stored_header_crc {
        return Frame::Damaged("frame header checksum mismatch");
    }
    let start = offset + FRAME_HEADER_LEN; // cannot overflow: checked above
    let payload = start.checked_add(len as usize).and_then(|end| data.get(start..end));
    let Some(payload) = payload else {
        return Frame::Damaged("record longer than the segment");
    };
    if crc32fast::hash(payload) != payload_crc {
        return Frame::Damaged("record payload checksum mismatch");
    }
    Frame::Record { payload, next: start + payload.len() }
}

/// Whether any whole, valid record follows the damaged frame at `offset`.
///
/// Recovery uses it to tell a torn tail (nothing valid follows the damage) from corruption in
/// the middle of the log (valid records follow). When the damaged frame's header is intact
/// (the damage is in its payload) the next frame's position is known and checked first;
/// otherwise every later offset is tried.
pub(crate) fn valid_frame_follows(data: &[u8], offset: usize, salt: u32) -> bool {
    let next = offset.checked_add(FRAME_HEADER_LEN).and_then(|start| {
        let header = data.get(offset..start)?;
        let (len, payload_crc, stored) = (read_u32(header, 0)?, read_u32(header, 4)?, read_u32(header, 8)?);
        (header_crc(salt, len, payload_crc) == stored).then(|| start.checked_add(len as usize))?
    });
    if next.is_some_and(|next| matches!(decode_frame(data, next, salt), Frame::Record { .. })) {
        return true;
    }
    next_valid_frame(data, offset.saturating_add(1), salt).is_some()
}

/// The offset of the first whole, valid record starting at or after `from`, if any.
///
/// The salted header checksum makes a false match in random or adversarial bytes a 2^-32 event
/// per offset and rejects most offsets after hashing 12 bytes, so the scan is linear in the
/// bytes searched.
pub(crate) fn next_valid_frame(data: &[u8], from: usize, salt: u32) -> Option<usize> {
    let last_start = data.len().checked_sub(FRAME_HEADER_LEN)?;
    (from..=last_start).find(|&offset| matches!(decode_frame(data, offset, salt), Frame::Record { .. }))
}

/// The frame header checksum: CRC32 (IEEE) over salt, length and payload checksum, all LE.
fn header_crc(salt: u32, len: u32, payload_crc: u32) -> u32 {
    let mut bytes = [0u8; 12];
    bytes[0..4].copy_from_slice(&salt.to_le_bytes());
    bytes[4..8].copy_from_slice(&len.to_le_bytes());
    bytes[8..12].copy_from_slice(&payload_crc.to_le_bytes());
    crc32fast::hash(&bytes)
}

/// A random salt for which a zero-filled frame header does not validate, so a preallocated
/// or zeroed tail never reads as a run of empty records.
fn new_salt(number: u64) -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let state = RandomState::new();
    let mut attempt = 0u32;
    loop {
        let h = state.hash_one((number, nanos, std::process::id(), attempt));
        let salt = (h ^ (h >> 32)) as u32;
        if header_crc(salt, 0, 0) != 0 {
            return salt;
        }
        attempt += 1;
    }
}

fn read_u32(data: &[u8], offset: usize) -> Option<u32> {
    let bytes = data.get(offset..offset.checked_add(4)?)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}

fn read_u64(data: &[u8], offset: usize) -> Option<u64> {
    let bytes = data.get(offset..offset.checked_add(8)?)?;
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_detects_flips() {
        for starts_run in [true, false] {
            let h = SegmentHeader::new(42, starts_run);
            let bytes = h.encode();
            assert_eq!(SegmentHeader::decode(&bytes), Ok(h));
            for bit in 0..SEGMENT_HEADER_LEN * 8 {
                let mut b = bytes;
                b[bit / 8] ^= 1 << (bit % 8);
                assert!(SegmentHeader::decode(&b).is_err(), "flip of bit {bit} undetected");
            }
            assert!(SegmentHeader::decode(&bytes[..10]).is_err());
        }
    }

    /// The header bytes of docs/format/wal.md, byte for byte: a change here breaks every
    /// segment on disk.
    #[test]
    fn header_golden_bytes() {
        let starts = SegmentHeader { number: 7, salt: 0xdead_beef, starts_run: true };
        let continues = SegmentHeader { starts_run: false, ..starts };
        let golden = [
            (starts, "5354574c020100000700000000000000efbeadde0a84e30e"),
            (continues, "5354574c020000000700000000000000efbeaddee25f18b7"),
        ];
        for (header, hex) in golden {
            assert_eq!(to_hex(&header.encode()), hex);
            assert_eq!(SegmentHeader::decode(&from_hex(hex)), Ok(header));
        }
        // A version-1 header (as written before runs) is its own run.
        let v1 = from_hex("5354574c010000000700000000000000efbeadde10ebd09e");
        assert_eq!(SegmentHeader::decode(&v1), Ok(starts));
        // Unknown flags and versions are refused, even with a valid checksum.
        for (version, flags) in [(2u8, 2u8), (2, 0x81), (3, 1), (0, 0)] {
            let mut b = starts.encode();
            (b[4], b[5]) = (version, flags);
            let crc = crc32fast::hash(&b[..20]);
            b[20..].copy_from_slice(&crc.to_le_bytes());
            assert!(SegmentHeader::decode(&b).is_err(), "version {version} flags {flags}");
        }
    }

    fn to_hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn from_hex(hex: &str) -> Vec<u8> {
        (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn frame_round_trips_and_zeros_never_validate() {
        let salt = SegmentHeader::new(1, true).salt;
        let mut data = frame_header(salt, b"hello").to_vec();
        data.extend_from_slice(b"hello");
        assert_eq!(decode_frame(&data, 0, salt), Frame::Record { payload: b"hello", next: 17 });
        assert!(matches!(decode_frame(&data, 0, salt ^ 1), Frame::Damaged(_)));
        assert!(matches!(decode_frame(&[0u8; 64], 0, salt), Frame::Damaged(_)));
        assert_eq!(next_valid_frame(&[0u8; 64], 0, salt), None);
        let mut padded = vec![0u8; 7];
        padded.extend_from_slice(&data);
        assert_eq!(next_valid_frame(&padded, 0, salt), Some(7));
        // Damage in a payload: the next frame is found at its known position.
        let mut two = data.clone();
        two.extend_from_slice(&data);
        two[FRAME_HEADER_LEN] ^= 1;
        assert!(matches!(decode_frame(&two, 0, salt), Frame::Damaged(_)));
        assert!(valid_frame_follows(&two, 0, salt));
        assert!(!valid_frame_follows(&two[..data.len() + 5], 0, salt));
    }

    #[test]
    fn decoder_is_total_on_short_and_huge_lengths() {
        let salt = 7;
        for len in 0..FRAME_HEADER_LEN {
            assert!(matches!(decode_frame(&vec![0xff; len], 0, salt), Frame::Damaged(_)));
        }
        // A frame claiming 4 GiB in a tiny buffer.
        let mut data = frame_header(salt, b"").to_vec();
        data[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(decode_frame(&data, 0, salt), Frame::Damaged(_)));
        assert!(matches!(decode_frame(&data, usize::MAX - 2, salt), Frame::Damaged(_)));
    }
}

//! The framing of a `STREAMED_XOR_CHUNKS` response body, as Prometheus' `ChunkedWriter` and
//! `ChunkedReader` (storage/remote/chunked.go) define it:
//!
//! ```text
//! ┌───────────────────────┬──────────────────────────┬───────────────────────────────────┐
//! │ len <uvarint>         │ CRC32 <4 bytes, BE>      │ message <len bytes>                │
//! └───────────────────────┴──────────────────────────┴───────────────────────────────────┘
//! ```
//!
//! `message` is one encoded `ChunkedReadResponse`; the CRC is CRC-32 with the Castagnoli
//! polynomial (crc32c) over `message` only. Frames follow each other with nothing in between;
//! the body ends after the last frame.

use crate::{Error, Result};

/// Appends one frame holding `message` to `out`.
pub fn write_frame(message: &[u8], out: &mut Vec<u8>) {
    out.reserve(message.len() + 14);
    prost::encoding::encode_varint(message.len() as u64, out);
    out.extend_from_slice(&crc32c::crc32c(message).to_be_bytes());
    out.extend_from_slice(message);
}

/// One frame holding `message`, as a new buffer.
pub fn frame(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    write_frame(message, &mut out);
    out
}

/// Splits a complete response body into frame messages, verifying each checksum. Yields an
/// error (and then nothing) for a frame larger than `frame_bytes_max`, a truncated frame or a
/// checksum mismatch, as Prometheus' reader does.
#[derive(Debug, Clone)]
pub struct FrameReader<'a> {
    rest: &'a [u8],
    frame_bytes_max: usize,
    failed: bool,
}

impl<'a> FrameReader<'a> {
    /// A reader over `body` accepting messages up to `frame_bytes_max` bytes.
    pub fn new(body: &'a [u8], frame_bytes_max: usize) -> Self {
        FrameReader { rest: body, frame_bytes_max, failed: false }
    }

    fn next_frame(&mut self) -> Result<&'a [u8]> {
        let mut cursor = self.rest;
        let len = prost::encoding::decode_varint(&mut cursor)
            .map_err(|e| Error::CorruptResponse(format!("frame length: {e}")))?;
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        if len > self.frame_bytes_max {
            return Err(Error::CorruptResponse(format!(
                "frame of {len} bytes exceeds the limit of {} bytes",
                self.frame_bytes_max
            )));
        }
        let (crc, rest) = cursor
            .split_first_chunk::<4>()
            .ok_or_else(|| Error::CorruptResponse("truncated frame".into()))?;
        let (message, rest) =
            rest.split_at_checked(len).ok_or_else(|| Error::CorruptResponse("truncated frame".into()))?;
        if crc32c::crc32c(message) != u32::from_be_bytes(*crc) {
            return Err(Error::CorruptResponse("frame checksum mismatch".into()));
        }
        self.rest = rest;
        Ok(message)
    }
}

impl<'a> Iterator for FrameReader<'a> {
    type Item = Result<&'a [u8]>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.rest.is_empty() {
            return None;
        }
        let frame = self.next_frame();
        self.failed = frame.is_err();
        Some(frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_is_length_crc32c_message() {
        // crc32c("123456789") is the standard check value 0xE3069283.
        let f = frame(b"123456789");
        assert_eq!(f, [&[9u8, 0xE3, 0x06, 0x92, 0x83][..], b"123456789"].concat());
        let long = vec![0xAB; 300];
        let f = frame(&long);
        assert_eq!(&f[..2], &[0xAC, 0x02], "300 as a uvarint");
        assert_eq!(&f[2..6], &crc32c::crc32c(&long).to_be_bytes());
    }

    #[test]
    fn reader_splits_and_verifies() {
        let mut body = Vec::new();
        write_frame(b"one", &mut body);
        write_frame(&[7; 200], &mut body);
        let frames: Vec<&[u8]> = FrameReader::new(&body, 1 << 20).map(Result::unwrap).collect();
        assert_eq!(frames, vec![&b"one"[..], &[7; 200][..]]);

        let mut corrupt = body.clone();
        corrupt[6] ^= 1; // a byte of the first message
        let got: Vec<_> = FrameReader::new(&corrupt, 1 << 20).collect();
        assert_eq!(got.len(), 1);
        assert!(matches!(&got[0], Err(Error::CorruptResponse(m)) if m.contains("checksum")));

        let truncated = &body[..body.len() - 1];
        let got: Vec<_> = FrameReader::new(truncated, 1 << 20).collect();
        assert!(got[0].is_ok() && got[1].is_err());

        let got: Vec<_> = FrameReader::new(&body, 100).collect();
        assert!(got[0].is_ok() && got[1].is_err(), "200-byte frame over a 100-byte limit");
    }
}

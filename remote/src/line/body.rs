//! Request body decompression, bounded.

use std::io::Read;

use crate::{Error, Limits, Result};

/// Decompresses per Content-Encoding: absent, empty or `identity` pass through, `gzip` (also
/// `x-gzip`; concatenated members allowed) is inflated through a reader that stops one byte past
/// [`Limits::decoded_bytes_max`], so a gzip bomb costs at most that much memory before it is
/// rejected. The compressed size is checked against [`Limits::body_bytes_max`] first. Other
/// encodings are [`Error::UnsupportedMediaType`] (415).
pub fn decode_body(content_encoding: Option<&str>, body: &[u8], limits: &Limits) -> Result<Vec<u8>> {
    limits.check_body(body.len())?;
    match content_encoding.map(str::trim) {
        None | Some("") => identity(body, limits),
        Some(e) if e.eq_ignore_ascii_case("identity") => identity(body, limits),
        Some(e) if e.eq_ignore_ascii_case("gzip") || e.eq_ignore_ascii_case("x-gzip") => gunzip(body, limits),
        Some(e) => {
            Err(Error::UnsupportedMediaType(format!("Content-Encoding {e:?}, expected gzip or identity")))
        }
    }
}

fn identity(body: &[u8], limits: &Limits) -> Result<Vec<u8>> {
    limits.check_decoded(body.len())?;
    Ok(body.to_vec())
}

fn gunzip(body: &[u8], limits: &Limits) -> Result<Vec<u8>> {
    let max = limits.decoded_bytes_max;
    let bound = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let mut out = Vec::with_capacity(inflated_size_hint(body).min(max));
    flate2::read::MultiGzDecoder::new(body)
        .take(bound)
        .read_to_end(&mut out)
        .map_err(|e| Error::Gzip(e.to_string()))?;
    limits.check_decoded(out.len())?;
    Ok(out)
}

/// The size `body` probably inflates to, for sizing the output once: a gzip member ends with
/// the length of its input modulo 2^32 (RFC 1952's ISIZE), exact for one member under 4 GiB.
/// Growing the buffer by doubling instead copied it and faulted in fresh pages about ten times
/// per request (line protocol compresses 10-20 times). Only a hint: a lying trailer costs a
/// reallocation, never correctness, and the caller caps it at the decoded-size limit.
fn inflated_size_hint(body: &[u8]) -> usize {
    const MIN_GZIP_MEMBER: usize = 18;
    let fallback = body.len().saturating_mul(4);
    if body.len() < MIN_GZIP_MEMBER {
        return fallback;
    }
    match body.last_chunk::<4>() {
        Some(&isize) => (u32::from_le_bytes(isize) as usize).max(fallback),
        None => fallback,
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn passes_identity_and_inflates_gzip() {
        let l = Limits::default();
        assert_eq!(decode_body(None, b"cpu v=1", &l).unwrap(), b"cpu v=1");
        assert_eq!(decode_body(Some("identity"), b"x", &l).unwrap(), b"x");
        assert_eq!(decode_body(Some("gzip"), &gzip(b"cpu v=1\n"), &l).unwrap(), b"cpu v=1\n");
        let mut two = gzip(b"a v=1\n");
        two.extend(gzip(b"b v=2\n"));
        assert_eq!(decode_body(Some("GZIP"), &two, &l).unwrap(), b"a v=1\nb v=2\n");
    }

    #[test]
    fn sizes_the_output_from_the_gzip_trailer() {
        let text: Vec<u8> =
            (0..20_000).flat_map(|i| format!("cpu,host=h{i} v={i}i\n").into_bytes()).collect();
        let body = gzip(&text);
        assert!(body.len() * 4 < text.len(), "the data compresses more than 4 times");
        assert_eq!(inflated_size_hint(&body), text.len());
        // Short or trailerless input falls back to four times the body.
        assert_eq!(inflated_size_hint(b"x"), 4);
        let out = decode_body(Some("gzip"), &body, &Limits::default()).unwrap();
        assert_eq!(out, text);
        assert_eq!(out.capacity(), text.len(), "sized once, never grown");
    }

    #[test]
    fn rejects_bad_bodies() {
        let l = Limits { body_bytes_max: 100, decoded_bytes_max: 1000, ..Limits::default() };
        let status = |r: Result<Vec<u8>>| r.unwrap_err().status_hint();
        assert_eq!(status(decode_body(Some("br"), b"x", &l)), 415);
        assert_eq!(status(decode_body(Some("gzip"), b"not gzip", &l)), 400);
        assert_eq!(status(decode_body(None, &[b'x'; 101], &l)), 413);
        // A bomb: 10 MB of zeros compress to ~10 KB, over the body limit; raise it.
        let bomb = gzip(&vec![0u8; 10 << 20]);
        let l = Limits { body_bytes_max: 1 << 20, decoded_bytes_max: 1 << 20, ..Limits::default() };
        match decode_body(Some("gzip"), &bomb, &l) {
            Err(Error::LimitExceeded { limit, value, max }) => {
                assert_eq!(limit, crate::limits::DECODED_BYTES_MAX);
                // The reader stopped one byte past the bound instead of inflating 10 MB.
                assert_eq!(value, (1 << 20) + 1);
                assert_eq!(max, 1 << 20);
            }
            other => panic!("{other:?}"),
        }
    }
}

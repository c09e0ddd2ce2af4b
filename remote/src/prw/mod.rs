//! Prometheus remote write 1.0 and 2.0: content negotiation, snappy, protobuf, and our own
//! sender side.
//!
//! A body is a snappy *block* (not framed) holding a `prometheus.WriteRequest` (1.0) or an
//! `io.prometheus.write.v2.Request` (2.0), told apart only by the Content-Type header
//! ([`negotiate`]). [`decompress`] checks snappy's declared length against
//! [`Limits::decoded_bytes_max`] before allocating; [`decode_ref`] then decodes with a
//! zero-copy reader (`wire`) straight into a [`storage::BatchRef`] whose label strings are
//! slices of the decompressed bytes, ready for `storage::Db::append_ref`. [`decode`] does both
//! and copies the result into an owned [`storage::Batch`], for tests and tools. Label rules are
//! in `labels`.
//!
//! Spec: prometheus/docs `docs/specs/prw/remote_write_spec.md` (1.0) and
//! `remote_write_spec_2_0.md` (2.0).

mod encode;
mod histogram;
mod labels;
pub mod proto_v1;
pub mod proto_v2;
mod v1;
mod v2;
mod wire;
mod writer;

pub use encode::{encode, encode_uncompressed, histogram_message, is_integer};
pub use writer::V1Writer;

/// The inverse of [`histogram_message`]: a decoded `Histogram` message's timestamp and
/// histogram (`None`: a stale marker), checked as a written one is. `at` names it in an error
/// (`timeseries[3].histograms[0]`).
pub(crate) fn histogram_sample(
    h: &proto_v1::Histogram,
    at: impl FnOnce() -> String,
) -> crate::Result<(i64, Option<storage::FloatHistogram>)> {
    use prost::Message;
    match histogram::decode(&h.encode_to_vec()) {
        Ok(histogram::HistogramSample::Histogram(t, h)) => Ok((t, Some(h))),
        Ok(histogram::HistogramSample::Stale(t)) => Ok((t, None)),
        Err(e) => Err(v1::histogram_error(at(), e)),
    }
}

use crate::metadata::MetricMetadata;
use crate::{Error, Limits, Result};

/// The media type both versions use.
const PROTOBUF: &str = "application/x-protobuf";
/// The `proto=` parameter value naming the 1.0 message.
const PROTO_V1: &str = "prometheus.WriteRequest";
/// The `proto=` parameter value naming the 2.0 message.
const PROTO_V2: &str = "io.prometheus.write.v2.Request";

/// Which protobuf message a body holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// Remote write 1.0, `prometheus.WriteRequest`.
    V1,
    /// Remote write 2.0, `io.prometheus.write.v2.Request`.
    V2,
}

impl Version {
    /// The Content-Type a sender of this version uses (the spec's canonical values).
    pub fn content_type(self) -> &'static str {
        match self {
            Version::V1 => "application/x-protobuf",
            Version::V2 => "application/x-protobuf;proto=io.prometheus.write.v2.Request",
        }
    }

    /// The `X-Prometheus-Remote-Write-Version` request header a sender of this version sends.
    pub fn version_header(self) -> &'static str {
        match self {
            Version::V1 => "0.1.0",
            Version::V2 => "2.0.0",
        }
    }
}

/// Picks the message type from the Content-Type header: absent or empty,
/// `application/x-protobuf` and `...;proto=prometheus.WriteRequest` are 1.0,
/// `...;proto=io.prometheus.write.v2.Request` is 2.0. Anything else is
/// [`Error::UnsupportedMediaType`], which the server answers 415 so a 2.0 sender can fall back.
/// Media type and parameter names are case-insensitive; the `proto` value may be quoted.
pub fn negotiate(content_type: Option<&str>) -> Result<Version> {
    let Some(ct) = content_type.map(str::trim).filter(|s| !s.is_empty()) else {
        return Ok(Version::V1);
    };
    let mut parts = ct.split(';');
    let media = parts.next().unwrap_or_default().trim();
    if !media.eq_ignore_ascii_case(PROTOBUF) {
        return Err(Error::UnsupportedMediaType(format!("Content-Type {ct:?}, expected {PROTOBUF:?}")));
    }
    let mut version = Version::V1;
    for param in parts {
        let Some((key, value)) = param.split_once('=') else { continue };
        if !key.trim().eq_ignore_ascii_case("proto") {
            continue;
        }
        version = match value.trim().trim_matches('"') {
            PROTO_V1 => Version::V1,
            PROTO_V2 => Version::V2,
            other => {
                return Err(Error::UnsupportedMediaType(format!(
                    "protobuf message {other:?}, expected {PROTO_V1:?} or {PROTO_V2:?}"
                )));
            }
        };
    }
    Ok(version)
}

/// Accepts a Content-Encoding that is absent or `snappy` (case-insensitive); anything else is
/// [`Error::UnsupportedMediaType`] (415).
pub fn check_encoding(content_encoding: Option<&str>) -> Result<()> {
    match content_encoding.map(str::trim) {
        None | Some("") => Ok(()),
        Some(e) if e.eq_ignore_ascii_case("snappy") => Ok(()),
        Some(e) => Err(Error::UnsupportedMediaType(format!("Content-Encoding {e:?}, expected \"snappy\""))),
    }
}

/// What one request contained, with label strings borrowed from the decompressed request
/// ([`decode_ref`]).
#[derive(Debug, Clone, Default)]
pub struct DecodedRef<'a> {
    /// The float samples, by series; stale markers keep their exact bits.
    pub batch: storage::BatchRef<'a>,
    /// Metric metadata: 1.0 sends it per family; for 2.0 it is taken from the series (the first
    /// non-empty `Metadata` per `__name__`).
    pub metadata: Vec<MetricMetadata>,
    /// Float samples in the request (for `X-Prometheus-Remote-Write-Samples-Written`).
    pub samples: u64,
    /// Native histogram samples in the request (stored in the batch as histogram samples;
    /// stale markers among them as float stale markers).
    pub histograms: u64,
    /// Of `histograms`, the stale markers (stored as float stale markers).
    pub stale_histograms: u64,
    /// Exemplars in the request (not stored).
    pub exemplars: u64,
    /// 2.0 series carrying a created (start) timestamp, in `TimeSeries.created_timestamp` or
    /// in any `Sample.start_timestamp` (stored with the samples; a start timestamp after its
    /// sample's timestamp is dropped).
    pub created_timestamps: u64,
}

impl DecodedRef<'_> {
    /// An owned copy: every label string is allocated. Fails as appending the batch would for
    /// new series: with [`Error::InvalidLabels`] if a label string is not UTF-8 (the 1.0
    /// decoder leaves that check of the usual series to storage, see `v1`).
    pub fn into_owned(self) -> Result<Decoded> {
        let batch = self.batch.to_batch().map_err(|e| match e {
            storage::Error::InvalidLabels { series, reason } => Error::InvalidLabels { series, reason },
            other => Error::InvalidLabels { series: String::new(), reason: other.to_string() },
        })?;
        Ok(Decoded {
            batch,
            metadata: self.metadata,
            samples: self.samples,
            histograms: self.histograms,
            stale_histograms: self.stale_histograms,
            exemplars: self.exemplars,
            created_timestamps: self.created_timestamps,
        })
    }
}

/// What one request contained, owned ([`decode`]): the same as [`DecodedRef`] with the batch
/// copied out of the request.
#[derive(Debug, Clone, Default)]
pub struct Decoded {
    /// The float samples, by series; stale markers keep their exact bits.
    pub batch: storage::Batch,
    /// Metric metadata: 1.0 sends it per family; for 2.0 it is taken from the series (the first
    /// non-empty `Metadata` per `__name__`).
    pub metadata: Vec<MetricMetadata>,
    /// Float samples in the request (for `X-Prometheus-Remote-Write-Samples-Written`).
    pub samples: u64,
    /// Native histogram samples in the request (stored in the batch as histogram samples;
    /// stale markers among them as float stale markers).
    pub histograms: u64,
    /// Of `histograms`, the stale markers (stored as float stale markers).
    pub stale_histograms: u64,
    /// Exemplars in the request (not stored).
    pub exemplars: u64,
    /// 2.0 series carrying a created (start) timestamp, in `TimeSeries.created_timestamp` or
    /// in any `Sample.start_timestamp` (stored with the samples; a start timestamp after its
    /// sample's timestamp is dropped).
    pub created_timestamps: u64,
}

/// Decodes a snappy-compressed (block format) request body of `version` into owned data:
/// [`decompress`], [`decode_ref`], then a copy of every label string. Servers append
/// [`decode_ref`]'s result instead, which copies nothing.
///
/// Errors: [`Error::Snappy`], [`Error::Protobuf`], [`Error::InvalidLabels`] (empty or duplicate
/// label names, invalid UTF-8, missing or empty `__name__`, 2.0 references out of range) and
/// [`Error::LimitExceeded`]. The whole request is rejected on the first error: nothing of an
/// invalid request is stored, and the sender must not retry it.
pub fn decode(version: Version, body: &[u8], limits: &Limits) -> Result<Decoded> {
    let raw = decompress(body, limits)?;
    decode_ref(version, &raw, limits).and_then(DecodedRef::into_owned)
}

/// Compresses a request's protobuf bytes as a body: a snappy block. Fails only past snappy's
/// block limit (4 GiB - 1).
pub fn compress(raw: &[u8]) -> Result<Vec<u8>> {
    snap::raw::Encoder::new().compress_vec(raw).map_err(|e| Error::Snappy(e.to_string()))
}

/// Decompresses a snappy (block format) request body, within [`Limits::body_bytes_max`] and
/// [`Limits::decoded_bytes_max`] (checked against snappy's declared length before allocating).
pub fn decompress(body: &[u8], limits: &Limits) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    let n = decompress_into(body, limits, &mut buf)?.len();
    buf.truncate(n);
    Ok(buf)
}

/// [`decompress`] into `buf`, a buffer reused from request to request, returning the
/// decompressed bytes (the start of `buf`). Only the part of `buf` that has to grow is
/// zero-filled: zeroing a fresh buffer for every request costs about a tenth of decoding a
/// typical remote-write request.
pub fn decompress_into<'b>(body: &[u8], limits: &Limits, buf: &'b mut Vec<u8>) -> Result<&'b [u8]> {
    limits.check_body(body.len())?;
    let len = snap::raw::decompress_len(body).map_err(|e| Error::Snappy(e.to_string()))?;
    // Before allocating: a few bytes of header can declare gigabytes.
    limits.check_decoded(len)?;
    if buf.len() < len {
        buf.resize(len, 0);
    }
    let out = buf.get_mut(..len).ok_or_else(|| Error::Snappy("decompression buffer too small".into()))?;
    let n = snap::raw::Decoder::new().decompress(body, out).map_err(|e| Error::Snappy(e.to_string()))?;
    Ok(buf.get(..n).unwrap_or_default())
}

/// The decompressed size of a snappy block (from its header), checked against `limits`.
pub fn decompressed_len(body: &[u8], limits: &Limits) -> Result<usize> {
    limits.check_body(body.len())?;
    let len = snap::raw::decompress_len(body).map_err(|e| Error::Snappy(e.to_string()))?;
    limits.check_decoded(len)?;
    Ok(len)
}

/// [`decompress`] of several blocks into `buf`, one after the other, for a consumer that
/// decodes many at once (the ingest log's): `buf` is reused from batch to batch and only the
/// part that has to grow is zero-filled. Returns where each block's bytes are in `buf`, or why
/// it does not decompress.
pub fn decompress_many(
    blocks: &[&[u8]],
    limits: &Limits,
    buf: &mut Vec<u8>,
) -> Vec<Result<std::ops::Range<usize>>> {
    let lens: Vec<Result<usize>> = blocks.iter().map(|b| decompressed_len(b, limits)).collect();
    let total: usize = lens.iter().flatten().sum();
    if buf.len() < total {
        buf.resize(total, 0);
    }
    let mut at = 0;
    let mut decoder = snap::raw::Decoder::new();
    blocks
        .iter()
        .zip(lens)
        .map(|(block, len)| {
            let len = len?;
            let out = buf
                .get_mut(at..at + len)
                .ok_or_else(|| Error::Snappy("decompression buffer too small".into()))?;
            let n = decoder.decompress(block, out).map_err(|e| Error::Snappy(e.to_string()))?;
            let range = at..at + n;
            at += len;
            Ok(range)
        })
        .collect()
}

/// Decodes an uncompressed protobuf request of `version` (what [`decode`] does after snappy)
/// into owned data; for fuzzing and callers that decompress themselves.
pub fn decode_uncompressed(version: Version, buf: &[u8], limits: &Limits) -> Result<Decoded> {
    decode_ref(version, buf, limits).and_then(DecodedRef::into_owned)
}

/// Decodes an uncompressed protobuf request of `version` without copying label strings: the
/// batch borrows them from `buf`, and validation (label rules, limits) is the same as
/// [`decode`]'s, but for one check: the label strings of a 1.0 series in the usual encoding
/// may reach the batch unchecked as UTF-8. `storage::Db::append_ref` checks them for new
/// series and refuses the batch with `storage::Error::InvalidLabels` (the same message as
/// [`Error::InvalidLabels`]) if one is not UTF-8; a known series' bytes equal valid stored
/// strings. The server's path: [`decompress`], `decode_ref`, `Db::append_ref`.
pub fn decode_ref<'a>(version: Version, buf: &'a [u8], limits: &Limits) -> Result<DecodedRef<'a>> {
    limits.check_decoded(buf.len())?;
    match version {
        Version::V1 => v1::decode(buf, limits),
        Version::V2 => v2::decode(buf, limits),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decompress_into_reuses_the_buffer_and_returns_only_this_body() {
        let long = vec![7u8; 5000];
        let short = b"short body".to_vec();
        let compress = |b: &[u8]| snap::raw::Encoder::new().compress_vec(b).unwrap();
        let limits = Limits::default();
        let mut buf = Vec::new();
        assert_eq!(decompress_into(&compress(&long), &limits, &mut buf).unwrap(), &long[..]);
        let capacity = buf.capacity();
        assert_eq!(decompress_into(&compress(&short), &limits, &mut buf).unwrap(), &short[..]);
        assert_eq!(buf.capacity(), capacity, "no new allocation for a smaller body");
        assert!(decompress_into(b"\xff\xff\xff\xff\x0f", &limits, &mut buf).is_err());
        assert_eq!(decompress(&compress(&short), &limits).unwrap(), short);
    }

    #[test]
    fn decompress_many_puts_each_block_after_the_last() {
        let compress = |b: &[u8]| snap::raw::Encoder::new().compress_vec(b).unwrap();
        let (a, b) = (vec![1u8; 3000], b"second".to_vec());
        let blocks = [compress(&a), b"\xff\xff\xff\xff\x0f".to_vec(), compress(&b)];
        let refs: Vec<&[u8]> = blocks.iter().map(Vec::as_slice).collect();
        let mut buf = vec![9u8; 10];
        let ranges = decompress_many(&refs, &Limits::default(), &mut buf);
        assert_eq!(&buf[ranges[0].clone().unwrap()], &a[..]);
        assert!(ranges[1].is_err(), "a block that does not decompress is named, the others kept");
        assert_eq!(&buf[ranges[2].clone().unwrap()], &b[..]);
        let small = Limits { decoded_bytes_max: 100, ..Limits::default() };
        assert!(decompress_many(&refs[..1], &small, &mut buf)[0].is_err(), "limits apply per block");
    }

    #[test]
    fn negotiation_follows_the_spec() {
        let ok = [
            (None, Version::V1),
            (Some(""), Version::V1),
            (Some("application/x-protobuf"), Version::V1),
            (Some("Application/X-Protobuf"), Version::V1),
            (Some("application/x-protobuf;proto=prometheus.WriteRequest"), Version::V1),
            (Some("application/x-protobuf;proto=io.prometheus.write.v2.Request"), Version::V2),
            (Some("application/x-protobuf; proto=\"io.prometheus.write.v2.Request\""), Version::V2),
            (Some("application/x-protobuf; charset=utf-8"), Version::V1),
        ];
        for (ct, want) in ok {
            assert_eq!(negotiate(ct).unwrap(), want, "{ct:?}");
        }
        for ct in
            ["application/json", "text/plain", "application/x-protobuf;proto=io.prometheus.write.v3.Request"]
        {
            let err = negotiate(Some(ct)).unwrap_err();
            assert_eq!(err.status_hint(), 415, "{ct}: {err}");
        }
        for v in [Version::V1, Version::V2] {
            assert_eq!(negotiate(Some(v.content_type())).unwrap(), v);
        }
    }

    #[test]
    fn only_snappy_encoding_is_accepted() {
        assert!(check_encoding(None).is_ok());
        assert!(check_encoding(Some("snappy")).is_ok());
        assert!(check_encoding(Some("SNAPPY")).is_ok());
        for e in ["gzip", "zstd", "identity"] {
            assert_eq!(check_encoding(Some(e)).unwrap_err().status_hint(), 415);
        }
    }
}

//! Prometheus remote read: the request, the two response types, and the pieces a server
//! needs to answer them.
//!
//! A request is a snappy block holding a [`proto::ReadRequest`]: queries (matchers and a
//! closed time range `[start, end]` in ms, plus hints a server may ignore) and the response
//! types the client accepts. The server answers the first type in the client's list that it
//! supports ([`negotiate`]):
//!
//! * `SAMPLES`: one snappy-compressed [`proto::ReadResponse`] with raw samples
//!   ([`encode_samples_response`]).
//! * `STREAMED_XOR_CHUNKS`: a stream of [`frame`]s, each holding one
//!   [`proto::ChunkedReadResponse`] with some chunks of one series: [`xor`] chunks for floats,
//!   [`histogram_chunk`]s for native histograms ([`series_chunks`], [`series_frames`]).
//!
//! Spec: Prometheus' `prompb/remote.proto` and `storage/remote/{codec,chunked,read_handler}.go`.
//! The client half ([`encode_request`], [`decode_samples_response`], [`decode_chunked_body`])
//! exists for tests and tools that read from strata, and [`client`] for a query node reading
//! writers' recent data.

mod bits;
pub mod client;
pub mod frame;
pub mod histogram_chunk;
pub mod proto;
pub mod xor;

use prost::Message;
use storage::{HistogramSample, Labels, MatchOp, Matcher, Sample};

use crate::{Error, Limits, Result};
use proto::{Chunk, ChunkedReadResponse, ChunkedSeries, LabelMatcher, ReadRequest, ReadResponse};

/// The default of Prometheus' `--storage.remote.read-max-bytes-in-frame`: frames are cut once
/// their chunks pass this size (so a frame may exceed it by up to one chunk).
pub const DEFAULT_FRAME_BYTES_MAX: usize = 1 << 20;

/// The media type of a streamed response.
pub const STREAMED_CONTENT_TYPE: &str =
    "application/x-streamed-protobuf; proto=prometheus.ChunkedReadResponse";

/// The response types strata can produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseType {
    /// One snappy-compressed `ReadResponse` with raw samples.
    Samples,
    /// Framed `ChunkedReadResponse`s with XOR chunks.
    StreamedXorChunks,
}

/// Picks the first response type in the client's list that strata supports; an empty list
/// means `SAMPLES` (clients from before streaming). `None` when none is supported.
pub fn negotiate(accepted: &[i32]) -> Option<ResponseType> {
    if accepted.is_empty() {
        return Some(ResponseType::Samples);
    }
    accepted.iter().find_map(|t| match *t {
        proto::RESPONSE_SAMPLES => Some(ResponseType::Samples),
        proto::RESPONSE_STREAMED_XOR_CHUNKS => Some(ResponseType::StreamedXorChunks),
        _ => None,
    })
}

/// Decodes a snappy-compressed request body. The decompressed size is checked against
/// `limits.decoded_bytes_max` before allocating.
pub fn decode_request(body: &[u8], limits: &Limits) -> Result<ReadRequest> {
    limits.check_body(body.len())?;
    let len = snap::raw::decompress_len(body).map_err(|e| Error::Snappy(e.to_string()))?;
    limits.check_decoded(len)?;
    let raw = snap::raw::Decoder::new().decompress_vec(body).map_err(|e| Error::Snappy(e.to_string()))?;
    ReadRequest::decode(raw.as_slice()).map_err(|e| Error::Protobuf(e.to_string()))
}

/// The client side of [`decode_request`]: a request as a snappy-compressed body.
pub fn encode_request(request: &ReadRequest) -> Result<Vec<u8>> {
    snappy(&request.encode_to_vec())
}

/// Converts a query's matchers to storage matchers (regexes anchored as in Prometheus). Their
/// compiled regexes together may take at most [`storage::matcher::QUERY_REGEX_BYTES_MAX`].
pub fn matchers(pb: &[LabelMatcher]) -> Result<Vec<Matcher>> {
    let mut budget = storage::matcher::RegexBudget::default();
    pb.iter()
        .map(|m| {
            let op = match m.r#type {
                proto::MATCH_EQ => MatchOp::Equal,
                proto::MATCH_NEQ => MatchOp::NotEqual,
                proto::MATCH_RE => MatchOp::Regex,
                proto::MATCH_NRE => MatchOp::NotRegex,
                other => {
                    return Err(Error::InvalidMatcher(format!(
                        "unknown matcher type {other} for {:?}",
                        m.name
                    )));
                }
            };
            let matcher = Matcher::new(op, m.name.as_str(), m.value.as_str())
                .map_err(|e| Error::InvalidMatcher(e.to_string()))?;
            budget.charge(&matcher).map_err(Error::InvalidMatcher)?;
            Ok(matcher)
        })
        .collect()
}

/// A label set in its protobuf form (sorted by name, as storage keeps it).
pub fn labels_to_proto(labels: &Labels) -> Vec<proto::Label> {
    labels.iter().map(|l| proto::Label { name: l.name.to_string(), value: l.value.to_string() }).collect()
}

/// A series with its raw samples, values as exact bit patterns.
pub fn time_series(labels: &Labels, samples: &[Sample]) -> proto::TimeSeries {
    time_series_with_histograms(labels, samples, &[])
}

/// A series with its raw float samples and native histogram samples (as remote write sends
/// them: integer histograms when the counts allow, float histograms otherwise).
pub fn time_series_with_histograms(
    labels: &Labels,
    samples: &[Sample],
    histograms: &[HistogramSample],
) -> proto::TimeSeries {
    proto::TimeSeries {
        labels: labels_to_proto(labels),
        samples: samples
            .iter()
            .map(|s| proto::Sample { value_bits: s.v.to_bits(), timestamp: s.t })
            .collect(),
        exemplars: Vec::new(),
        histograms: histograms.iter().map(crate::prw::histogram_message).collect(),
    }
}

/// The `SAMPLES` response body: the encoded response, snappy-compressed.
pub fn encode_samples_response(response: &ReadResponse) -> Result<Vec<u8>> {
    snappy(&response.encode_to_vec())
}

/// The client side of [`encode_samples_response`].
pub fn decode_samples_response(body: &[u8]) -> Result<ReadResponse> {
    let raw = snap::raw::Decoder::new().decompress_vec(body).map_err(|e| Error::Snappy(e.to_string()))?;
    ReadResponse::decode(raw.as_slice()).map_err(|e| Error::Protobuf(e.to_string()))
}

fn snappy(raw: &[u8]) -> Result<Vec<u8>> {
    snap::raw::Encoder::new()
        .compress_vec(raw)
        .map_err(|e| Error::Unencodable(format!("{} bytes cannot be snappy-compressed: {e}", raw.len())))
}

/// Encodes a series' samples (timestamps increasing) as XOR chunks of at most
/// [`xor::SAMPLES_PER_CHUNK`] samples each, as Prometheus' head cuts them.
pub fn xor_chunks(samples: &[Sample]) -> Vec<Chunk> {
    samples
        .chunks(xor::SAMPLES_PER_CHUNK)
        .filter_map(|part| {
            let mut encoder = xor::XorEncoder::new();
            for s in part {
                encoder.append(s.t, s.v);
            }
            let (min_time_ms, max_time_ms) = encoder.time_range()?;
            Some(Chunk { min_time_ms, max_time_ms, r#type: proto::CHUNK_XOR, data: encoder.finish() })
        })
        .collect()
}

/// A series' float samples and native histogram samples (each in time order, never at the same
/// timestamp) as chunks in time order: each run of floats as XOR chunks ([`xor_chunks`]), each
/// run of histograms as histogram chunks ([`histogram_chunk::histogram_chunks`]), so a series
/// that turns from floats to histograms (or back) keeps its chunks ordered and apart.
pub fn series_chunks(samples: &[Sample], histograms: &[HistogramSample]) -> Vec<Chunk> {
    let mut chunks = Vec::new();
    let (mut floats, mut hists) = (samples, histograms);
    loop {
        match (floats.first(), hists.first()) {
            (None, None) => break,
            (Some(s), next) if next.is_none_or(|h| s.t < h.t) => {
                let until = next.map_or(i64::MAX, |h| h.t);
                let (run, rest) = floats.split_at(floats.iter().take_while(|s| s.t < until).count());
                chunks.extend(xor_chunks(run));
                floats = rest;
            }
            (next, _) => {
                // At least one: a float and a histogram at one timestamp (which storage never
                // returns) must not stop the loop.
                let until = next.map_or(i64::MAX, |s| s.t);
                let run = hists.iter().take_while(|h| h.t < until).count().max(1).min(hists.len());
                let (run, rest) = hists.split_at(run);
                chunks.extend(histogram_chunk::histogram_chunks(run));
                hists = rest;
            }
        }
    }
    chunks
}

/// Cuts one series' chunks into framed `ChunkedReadResponse`s and hands each frame to `emit`,
/// exactly as Prometheus' `StreamChunkedReadResponses`: one series per frame, a frame closed
/// once its chunks fill `frame_bytes_max` minus the size of the labels (so a frame exceeds the
/// bound by at most one chunk). A series without chunks sends nothing. Stops at the first
/// error `emit` returns (e.g. the client went away).
pub fn series_frames<E>(
    query_index: i64,
    labels: Vec<proto::Label>,
    chunks: Vec<Chunk>,
    frame_bytes_max: usize,
    mut emit: impl FnMut(Vec<u8>) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let labels_len: usize = labels.iter().map(Message::encoded_len).sum();
    let data_max = frame_bytes_max as i64 - labels_len as i64;
    let mut pending = Vec::new();
    let mut left = data_max;
    let total = chunks.len();
    for (i, chunk) in chunks.into_iter().enumerate() {
        left -= chunk.encoded_len() as i64;
        pending.push(chunk);
        let more = i + 1 < total;
        if left > 0 && more {
            continue;
        }
        let response = ChunkedReadResponse {
            chunked_series: vec![ChunkedSeries {
                labels: labels.clone(),
                chunks: std::mem::take(&mut pending),
            }],
            query_index,
        };
        emit(frame::frame(&response.encode_to_vec()))?;
        left = data_max;
    }
    Ok(())
}

/// The client side of the streamed response: every frame's message, decoded. Frames larger
/// than `frame_bytes_max` are refused, as Prometheus' reader refuses them.
pub fn decode_chunked_body(body: &[u8], frame_bytes_max: usize) -> Result<Vec<ChunkedReadResponse>> {
    frame::FrameReader::new(body, frame_bytes_max)
        .map(|message| {
            ChunkedReadResponse::decode(message?).map_err(|e| Error::CorruptResponse(e.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests;

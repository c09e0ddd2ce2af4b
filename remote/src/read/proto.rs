//! The remote-read protobuf messages (`prometheus.ReadRequest` and friends) as prost messages,
//! written by hand like [`crate::prw::proto_v1`].
//!
//! Field numbers and types follow Prometheus' `prompb/remote.proto` (ReadRequest, Query,
//! ReadResponse, QueryResult, ChunkedReadResponse) and `prompb/types.proto` (LabelMatcher,
//! ReadHints, Chunk, ChunkedSeries). Enums are declared as `int32`, their wire encoding, so an
//! unknown value from a newer client decodes instead of failing; the `*_TYPE`/`*_ENCODING`
//! constants name the values we know. `TimeSeries`, `Label` and `Sample` are shared with remote
//! write and come from [`crate::prw::proto_v1`].

pub use crate::prw::proto_v1::{Label, Sample, TimeSeries};

/// `ReadRequest.ResponseType.SAMPLES`: one snappy-compressed [`ReadResponse`] with raw samples.
pub const RESPONSE_SAMPLES: i32 = 0;
/// `ReadRequest.ResponseType.STREAMED_XOR_CHUNKS`: a stream of framed [`ChunkedReadResponse`]s
/// holding XOR chunks.
pub const RESPONSE_STREAMED_XOR_CHUNKS: i32 = 1;

/// `LabelMatcher.Type.EQ`
pub const MATCH_EQ: i32 = 0;
/// `LabelMatcher.Type.NEQ`
pub const MATCH_NEQ: i32 = 1;
/// `LabelMatcher.Type.RE`
pub const MATCH_RE: i32 = 2;
/// `LabelMatcher.Type.NRE`
pub const MATCH_NRE: i32 = 3;

/// `Chunk.Encoding.XOR`: float samples (see [`super::xor`]).
pub const CHUNK_XOR: i32 = 1;
/// `Chunk.Encoding.HISTOGRAM`: integer native histograms (see [`super::histogram_chunk`]).
pub const CHUNK_HISTOGRAM: i32 = 2;
/// `Chunk.Encoding.FLOAT_HISTOGRAM`: float native histograms (see [`super::histogram_chunk`]).
pub const CHUNK_FLOAT_HISTOGRAM: i32 = 3;

/// The request: one or more queries and the response types the client can read, in its order
/// of preference.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReadRequest {
    /// `repeated Query queries = 1`
    #[prost(message, repeated, tag = "1")]
    pub queries: Vec<Query>,
    /// `repeated ResponseType accepted_response_types = 2` (packed enum). Empty means
    /// [`RESPONSE_SAMPLES`], for clients older than streaming.
    #[prost(int32, repeated, tag = "2")]
    pub accepted_response_types: Vec<i32>,
}

/// One query: a time range and series matchers.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Query {
    /// `int64 start_timestamp_ms = 1`, inclusive.
    #[prost(int64, tag = "1")]
    pub start_timestamp_ms: i64,
    /// `int64 end_timestamp_ms = 2`, inclusive.
    #[prost(int64, tag = "2")]
    pub end_timestamp_ms: i64,
    /// `repeated LabelMatcher matchers = 3`
    #[prost(message, repeated, tag = "3")]
    pub matchers: Vec<LabelMatcher>,
    /// `ReadHints hints = 4`
    #[prost(message, optional, tag = "4")]
    pub hints: Option<ReadHints>,
}

/// A label matcher; `type` is one of the `MATCH_*` constants.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LabelMatcher {
    /// `Type type = 1`
    #[prost(int32, tag = "1")]
    pub r#type: i32,
    /// `string name = 2`
    #[prost(string, tag = "2")]
    pub name: String,
    /// `string value = 3`
    #[prost(string, tag = "3")]
    pub value: String,
}

/// What the PromQL expression that caused the query will do with the data. Hints only: a
/// server may ignore them and return raw samples.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReadHints {
    /// `int64 step_ms = 1`: query step size.
    #[prost(int64, tag = "1")]
    pub step_ms: i64,
    /// `string func = 2`: the surrounding function, e.g. `rate`, or `series` for metadata-only.
    #[prost(string, tag = "2")]
    pub func: String,
    /// `int64 start_ms = 3`
    #[prost(int64, tag = "3")]
    pub start_ms: i64,
    /// `int64 end_ms = 4`
    #[prost(int64, tag = "4")]
    pub end_ms: i64,
    /// `repeated string grouping = 5`: labels of the surrounding aggregation.
    #[prost(string, repeated, tag = "5")]
    pub grouping: Vec<String>,
    /// `bool by = 6`: `by` (true) or `without` (false) grouping.
    #[prost(bool, tag = "6")]
    pub by: bool,
    /// `int64 range_ms = 7`: range of a range vector selector.
    #[prost(int64, tag = "7")]
    pub range_ms: i64,
}

/// The [`RESPONSE_SAMPLES`] answer: one result per query, in query order.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReadResponse {
    /// `repeated QueryResult results = 1`
    #[prost(message, repeated, tag = "1")]
    pub results: Vec<QueryResult>,
}

/// The series one query selected, with their samples.
#[derive(Clone, PartialEq, prost::Message)]
pub struct QueryResult {
    /// `repeated TimeSeries timeseries = 1`
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
}

/// One frame of the [`RESPONSE_STREAMED_XOR_CHUNKS`] answer.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ChunkedReadResponse {
    /// `repeated ChunkedSeries chunked_series = 1`; Prometheus (and strata) send one series per
    /// frame, a series split over consecutive frames when large.
    #[prost(message, repeated, tag = "1")]
    pub chunked_series: Vec<ChunkedSeries>,
    /// `int64 query_index = 2`: which query of the request this frame answers.
    #[prost(int64, tag = "2")]
    pub query_index: i64,
}

/// A series with some of its chunks.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ChunkedSeries {
    /// `repeated Label labels = 1`, sorted by name.
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    /// `repeated Chunk chunks = 2`, in time order, not overlapping.
    #[prost(message, repeated, tag = "2")]
    pub chunks: Vec<Chunk>,
}

/// One encoded chunk of samples.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Chunk {
    /// `int64 min_time_ms = 1`: the first sample's timestamp.
    #[prost(int64, tag = "1")]
    pub min_time_ms: i64,
    /// `int64 max_time_ms = 2`: the last sample's timestamp.
    #[prost(int64, tag = "2")]
    pub max_time_ms: i64,
    /// `Encoding type = 3`: [`CHUNK_XOR`], [`CHUNK_HISTOGRAM`] or [`CHUNK_FLOAT_HISTOGRAM`].
    #[prost(int32, tag = "3")]
    pub r#type: i32,
    /// `bytes data = 4`: the chunk in the encoding's byte format (see [`super::xor`] and
    /// [`super::histogram_chunk`]).
    #[prost(bytes = "vec", tag = "4")]
    pub data: Vec<u8>,
}

//! `io.prometheus.write.v2.Request` (remote write 2.0) as prost messages, written by hand.
//!
//! Field numbers and types follow Prometheus' `prompb/io/prometheus/write/v2/types.proto`
//! (prometheus/prometheus@0a37a837) and the 2.0 spec (prometheus/docs `remote_write_spec_2_0.md`,
//! 2.0-rc.4). The spec's rc.4 moved the created timestamp from `TimeSeries.created_timestamp = 6`
//! to `Sample.start_timestamp = 3` (and reserved 6); both are declared here and the decoder
//! honours both. Enums are declared as `int32`, their wire encoding. The histogram message is the
//! same as in 1.0. The hot decode path is the zero-copy reader in `super::v2`.

pub use super::proto_v1::{BucketSpan, Histogram, histogram};

/// The request body: a symbol table and series that reference it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Request {
    /// `repeated string symbols = 4`; `symbols[0]` must be `""` (fields 1 to 3 are reserved so
    /// a 1.0 receiver decodes a 2.0 body as an empty request).
    #[prost(string, repeated, tag = "4")]
    pub symbols: Vec<String>,
    /// `repeated TimeSeries timeseries = 5`
    #[prost(message, repeated, tag = "5")]
    pub timeseries: Vec<TimeSeries>,
}

/// One series.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TimeSeries {
    /// `repeated uint32 labels_refs = 1`: name/value pairs of indexes into `symbols`.
    #[prost(uint32, repeated, tag = "1")]
    pub labels_refs: Vec<u32>,
    /// `repeated Sample samples = 2`
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
    /// `repeated Histogram histograms = 3`
    #[prost(message, repeated, tag = "3")]
    pub histograms: Vec<Histogram>,
    /// `repeated Exemplar exemplars = 4`
    #[prost(message, repeated, tag = "4")]
    pub exemplars: Vec<Exemplar>,
    /// `Metadata metadata = 5`
    #[prost(message, optional, tag = "5")]
    pub metadata: Option<Metadata>,
    /// `int64 created_timestamp = 6` (0 = unset; reserved since spec rc.4)
    #[prost(int64, tag = "6")]
    pub created_timestamp: i64,
}

/// An exemplar (counted by strata, not stored).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Exemplar {
    /// `repeated uint32 labels_refs = 1`
    #[prost(uint32, repeated, tag = "1")]
    pub labels_refs: Vec<u32>,
    /// `double value = 2`
    #[prost(double, tag = "2")]
    pub value: f64,
    /// `int64 timestamp = 3`
    #[prost(int64, tag = "3")]
    pub timestamp: i64,
}

/// A float sample.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    /// `double value = 1`, declared as `fixed64` (the same wire encoding) so the value travels
    /// as its bit pattern: proto3 omits a double equal to `0.0`, which would turn `-0.0` into
    /// `0.0` (Prometheus' gogo encoder does exactly that). Use `f64::to_bits`/`from_bits`.
    #[prost(fixed64, tag = "1")]
    pub value_bits: u64,
    /// `int64 timestamp = 2`, milliseconds since the epoch.
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
    /// `int64 start_timestamp = 3` (spec rc.4; 0 = unset)
    #[prost(int64, tag = "3")]
    pub start_timestamp: i64,
}

/// Metadata of the series' metric family.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Metadata {
    /// `MetricType type = 1` (METRIC_TYPE_UNSPECIFIED 0, COUNTER 1, GAUGE 2, HISTOGRAM 3,
    /// GAUGEHISTOGRAM 4, SUMMARY 5, INFO 6, STATESET 7)
    #[prost(int32, tag = "1")]
    pub r#type: i32,
    /// `uint32 help_ref = 3`
    #[prost(uint32, tag = "3")]
    pub help_ref: u32,
    /// `uint32 unit_ref = 4`
    #[prost(uint32, tag = "4")]
    pub unit_ref: u32,
}

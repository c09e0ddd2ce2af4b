//! `prometheus.WriteRequest` (remote write 1.0) as prost messages, written by hand.
//!
//! Field numbers and types follow Prometheus' `prompb/remote.proto` (WriteRequest: timeseries = 1,
//! field 2 reserved for Cortex, metadata = 3; prometheus/prometheus@01f1cf9a) and
//! `prompb/types.proto` (TimeSeries, Label, Sample: prometheus/prometheus@030ccfad; Exemplar,
//! Histogram, BucketSpan, MetricMetadata as in the current `main`, cross-checked against
//! VictoriaMetrics' `lib/prompb` decoder). Enums are declared as `int32`, which is their wire
//! encoding. The hot decode path is the zero-copy reader in `super::v1`; these types are used by
//! [`super::encode`] and by tests as an independent reference decoder.

/// The request body: series with their samples, and metadata per metric family.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WriteRequest {
    /// `repeated TimeSeries timeseries = 1`
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
    /// `repeated MetricMetadata metadata = 3` (2 is reserved)
    #[prost(message, repeated, tag = "3")]
    pub metadata: Vec<MetricMetadata>,
}

/// One series: its full label set and samples for it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TimeSeries {
    /// `repeated Label labels = 1`; the spec says sorted by name, senders may not comply.
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    /// `repeated Sample samples = 2`
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
    /// `repeated Exemplar exemplars = 3`
    #[prost(message, repeated, tag = "3")]
    pub exemplars: Vec<Exemplar>,
    /// `repeated Histogram histograms = 4`
    #[prost(message, repeated, tag = "4")]
    pub histograms: Vec<Histogram>,
}

/// A label pair.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Label {
    /// `string name = 1`
    #[prost(string, tag = "1")]
    pub name: String,
    /// `string value = 2`
    #[prost(string, tag = "2")]
    pub value: String,
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
}

/// An exemplar (counted by strata, not stored).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Exemplar {
    /// `repeated Label labels = 1`
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    /// `double value = 2`
    #[prost(double, tag = "2")]
    pub value: f64,
    /// `int64 timestamp = 3`
    #[prost(int64, tag = "3")]
    pub timestamp: i64,
}

/// A native histogram sample (counted by strata, not stored until native histograms are).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Histogram {
    /// `oneof count { uint64 count_int = 1; double count_float = 2; }`
    #[prost(oneof = "histogram::Count", tags = "1, 2")]
    pub count: Option<histogram::Count>,
    /// `double sum = 3`, as its bit pattern (`fixed64`, the same wire encoding) so that a sum
    /// of `-0.0` is sent: proto3 omits a double equal to `0.0` (see [`Sample`]).
    #[prost(fixed64, tag = "3")]
    pub sum_bits: u64,
    /// `sint32 schema = 4`
    #[prost(sint32, tag = "4")]
    pub schema: i32,
    /// `double zero_threshold = 5`, as its bit pattern, as `sum_bits`.
    #[prost(fixed64, tag = "5")]
    pub zero_threshold_bits: u64,
    /// `oneof zero_count { uint64 zero_count_int = 6; double zero_count_float = 7; }`
    #[prost(oneof = "histogram::ZeroCount", tags = "6, 7")]
    pub zero_count: Option<histogram::ZeroCount>,
    /// `repeated BucketSpan negative_spans = 8`
    #[prost(message, repeated, tag = "8")]
    pub negative_spans: Vec<BucketSpan>,
    /// `repeated sint64 negative_deltas = 9`
    #[prost(sint64, repeated, tag = "9")]
    pub negative_deltas: Vec<i64>,
    /// `repeated double negative_counts = 10`
    #[prost(double, repeated, tag = "10")]
    pub negative_counts: Vec<f64>,
    /// `repeated BucketSpan positive_spans = 11`
    #[prost(message, repeated, tag = "11")]
    pub positive_spans: Vec<BucketSpan>,
    /// `repeated sint64 positive_deltas = 12`
    #[prost(sint64, repeated, tag = "12")]
    pub positive_deltas: Vec<i64>,
    /// `repeated double positive_counts = 13`
    #[prost(double, repeated, tag = "13")]
    pub positive_counts: Vec<f64>,
    /// `ResetHint reset_hint = 14` (an enum; int32 on the wire)
    #[prost(int32, tag = "14")]
    pub reset_hint: i32,
    /// `int64 timestamp = 15`
    #[prost(int64, tag = "15")]
    pub timestamp: i64,
    /// `repeated double custom_values = 16`
    #[prost(double, repeated, tag = "16")]
    pub custom_values: Vec<f64>,
}

/// The `oneof` members of [`Histogram`].
pub mod histogram {
    /// Count of observations, integer or float histogram.
    #[derive(Clone, Copy, PartialEq, prost::Oneof)]
    pub enum Count {
        /// `uint64 count_int = 1`
        #[prost(uint64, tag = "1")]
        CountInt(u64),
        /// `double count_float = 2`
        #[prost(double, tag = "2")]
        CountFloat(f64),
    }

    /// Count in the zero bucket, integer or float histogram.
    #[derive(Clone, Copy, PartialEq, prost::Oneof)]
    pub enum ZeroCount {
        /// `uint64 zero_count_int = 6`
        #[prost(uint64, tag = "6")]
        ZeroCountInt(u64),
        /// `double zero_count_float = 7`
        #[prost(double, tag = "7")]
        ZeroCountFloat(f64),
    }
}

/// A run of consecutive buckets of a native histogram.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BucketSpan {
    /// `sint32 offset = 1`
    #[prost(sint32, tag = "1")]
    pub offset: i32,
    /// `uint32 length = 2`
    #[prost(uint32, tag = "2")]
    pub length: u32,
}

/// Type, help and unit of one metric family.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MetricMetadata {
    /// `MetricType type = 1` (UNKNOWN 0, COUNTER 1, GAUGE 2, HISTOGRAM 3, GAUGEHISTOGRAM 4,
    /// SUMMARY 5, INFO 6, STATESET 7)
    #[prost(int32, tag = "1")]
    pub r#type: i32,
    /// `string metric_family_name = 2`
    #[prost(string, tag = "2")]
    pub metric_family_name: String,
    /// `string help = 4`
    #[prost(string, tag = "4")]
    pub help: String,
    /// `string unit = 5`
    #[prost(string, tag = "5")]
    pub unit: String,
}

//! Metric metadata (type, help, unit) as both remote-write versions carry it.
//!
//! Version 1.0 sends one `MetricMetadata` per metric family beside the series; version 2.0
//! attaches a `Metadata` to every series. Both decode into [`MetricMetadata`], which the server
//! keeps for `/api/v1/metadata`.

/// The type of a metric family. The wire numbers are the same in both protocol versions
/// (`prometheus.MetricMetadata.MetricType` and `io.prometheus.write.v2.Metadata.MetricType`,
/// where 0 is `UNKNOWN` resp. `METRIC_TYPE_UNSPECIFIED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MetricType {
    /// No type given (wire value 0, or a value this version of strata does not know).
    #[default]
    Unknown,
    /// A monotonic counter.
    Counter,
    /// A value that goes up and down.
    Gauge,
    /// A (classic or native) histogram.
    Histogram,
    /// A histogram whose buckets may go down (OpenMetrics gaugehistogram).
    GaugeHistogram,
    /// A summary with quantiles.
    Summary,
    /// An info metric (OpenMetrics).
    Info,
    /// A state set (OpenMetrics).
    StateSet,
}

impl MetricType {
    /// The type for a wire value; unknown numbers become [`MetricType::Unknown`] rather than an
    /// error, because a newer sender may add types and metadata is advisory.
    pub fn from_wire(v: i32) -> Self {
        match v {
            1 => MetricType::Counter,
            2 => MetricType::Gauge,
            3 => MetricType::Histogram,
            4 => MetricType::GaugeHistogram,
            5 => MetricType::Summary,
            6 => MetricType::Info,
            7 => MetricType::StateSet,
            _ => MetricType::Unknown,
        }
    }

    /// The wire value (the same in remote write 1.0 and 2.0).
    pub fn to_wire(self) -> i32 {
        match self {
            MetricType::Unknown => 0,
            MetricType::Counter => 1,
            MetricType::Gauge => 2,
            MetricType::Histogram => 3,
            MetricType::GaugeHistogram => 4,
            MetricType::Summary => 5,
            MetricType::Info => 6,
            MetricType::StateSet => 7,
        }
    }

    /// The name Prometheus' `/api/v1/metadata` uses (`"counter"`, `"gaugehistogram"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            MetricType::Unknown => "unknown",
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
            MetricType::GaugeHistogram => "gaugehistogram",
            MetricType::Summary => "summary",
            MetricType::Info => "info",
            MetricType::StateSet => "stateset",
        }
    }
}

/// Type, help and unit of one metric family.
///
/// For remote write 2.0 the family name is the `__name__` of the series the metadata was
/// attached to (2.0 has no separate family name), and a request yields at most one entry per
/// name (the first one seen).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MetricMetadata {
    /// The metric family, e.g. `http_requests_total` or `http_request_duration_seconds`.
    pub metric_family_name: String,
    /// The metric type.
    pub metric_type: MetricType,
    /// The HELP text; empty if none was sent.
    pub help: String,
    /// The unit (OpenMetrics); empty if none was sent.
    pub unit: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_values_round_trip_and_unknown_numbers_degrade() {
        for v in 0..8 {
            assert_eq!(MetricType::from_wire(v).to_wire(), v);
        }
        assert_eq!(MetricType::from_wire(8), MetricType::Unknown);
        assert_eq!(MetricType::from_wire(-1), MetricType::Unknown);
        assert_eq!(MetricType::GaugeHistogram.as_str(), "gaugehistogram");
    }
}

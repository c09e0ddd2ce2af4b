//! Helpers shared by the integration tests that compare two ways of evaluating a query.

use promql::{QueryResult, Value};

/// The answer with float bits and in the order given, so NaN payloads, signed zeros and the
/// order of series count.
pub fn bits(r: &QueryResult) -> Vec<(String, i64, u64)> {
    match &r.value {
        Value::Matrix(m) => m
            .iter()
            .flat_map(|s| s.points.iter().map(|p| (format!("{:?}", s.labels), p.t, p.v.to_bits())))
            .collect(),
        Value::Vector(v) => v.iter().map(|s| (format!("{:?}", s.labels), s.t, s.v.to_bits())).collect(),
        Value::Scalar { t, v } => vec![(String::new(), *t, v.to_bits())],
        Value::String { t, v } => vec![(v.clone(), *t, 0)],
    }
}

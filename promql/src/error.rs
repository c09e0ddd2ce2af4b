//! The one error type of the engine.
//!
//! Variants map one-to-one to Prometheus' API `errorType`s so the HTTP layer can translate them
//! without looking at messages: [`Error::BadData`] is `bad_data` (HTTP 400),
//! [`Error::Execution`] is `execution` (422), [`Error::Timeout`] is `timeout` (503),
//! [`Error::TooManySamples`] and [`Error::TooManySeries`] are `execution` (422) as in Prometheus,
//! and [`Error::Storage`] is `internal` (500).

use thiserror::Error;

/// Result alias for the engine.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong while preparing or running a query.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// The query does not parse or type-check, or a parameter is invalid (`bad_data`).
    #[error("{0}")]
    BadData(String),
    /// The query is valid but failed while evaluating, e.g. duplicate output series (`execution`).
    #[error("{0}")]
    Execution(String),
    /// The query ran longer than `EngineOptions::timeout`.
    #[error("query timed out in {0}")]
    Timeout(&'static str),
    /// More samples than `EngineOptions::max_samples` were held in memory at once.
    #[error(
        "query processing would load too many samples into memory in {0} \
         (limit: max_samples; narrow the time range, the selectors, or raise the limit)"
    )]
    TooManySamples(&'static str),
    /// A selector matched more series than `EngineOptions::max_series`.
    #[error(
        "query selects too many series: {0} (limit: max_series, --query.max-series; narrow the selectors or raise the limit)"
    )]
    TooManySeries(usize),
    /// The storage layer failed.
    #[error("storage: {0}")]
    Storage(#[from] storage::Error),
    /// The query is not small enough to run under `EngineOptions::inline_points_max`; run it
    /// again without that option. Never an answer to a user (`internal` if it reached one).
    #[error("query too large to evaluate inline")]
    NotInline,
}

impl Error {
    /// The Prometheus HTTP API `errorType` for this error.
    pub fn error_type(&self) -> &'static str {
        match self {
            Error::BadData(_) => "bad_data",
            Error::Execution(_) | Error::TooManySamples(_) | Error::TooManySeries(_) => "execution",
            Error::Timeout(_) => "timeout",
            Error::Storage(_) | Error::NotInline => "internal",
        }
    }
}

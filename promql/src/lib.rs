//! strata's PromQL engine: Prometheus 3.x query semantics over [`storage::Querier`].
//!
//! A query goes through [`parser::parse`] (text to a type-checked tree, with a depth guard
//! against stack exhaustion) and is then evaluated over a grid of timestamps by the `eval`
//! module: selectors read each series once and slide their windows across the steps,
//! operators and functions work step by step on the results. [`Engine`] ties this together
//! behind two calls, [`Engine::instant`] and [`Engine::range`], that return a [`QueryResult`]
//! with the [`Value`], warnings/infos and statistics, or an [`Error`] whose
//! [`Error::error_type`] is the Prometheus API `errorType`.
//!
//! Series carry float and native histogram samples (Prometheus' float histograms, exponential
//! and custom-bucket schemas).

pub mod annotations;
mod engine;
pub mod error;
mod eval;
pub mod options;
pub mod parse_cache;
pub mod parser;
pub mod pool;
pub mod value;

pub use annotations::{Annotation, Level};
pub use engine::{EVAL_STACK_BYTES, Engine, declare_thread_stack};
pub use error::{Error, Result};
pub use eval::detect_histogram_reset;
pub use options::EngineOptions;
pub use parse_cache::ParseCache;
pub use pool::QueryPool;
pub use value::{HistogramPoint, Point, QueryResult, QueryStats, Sample, Series, Value};

//! Query results as returned to callers.

use std::time::Duration;

use storage::{FloatHistogram, Labels};

use crate::annotations::Annotation;

/// One point of a series: milliseconds and value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// Timestamp in milliseconds.
    pub t: i64,
    /// Value.
    pub v: f64,
}

/// An element of an instant vector.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Labels of the series.
    pub labels: Labels,
    /// The evaluation timestamp (ms).
    pub t: i64,
    /// Value (0 for a histogram sample).
    pub v: f64,
    /// The native histogram, for a histogram sample.
    pub h: Option<FloatHistogram>,
}

/// A native histogram point of a series.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramPoint {
    /// Timestamp in milliseconds.
    pub t: i64,
    /// The histogram.
    pub h: FloatHistogram,
}

/// A series of a matrix (range query result or range vector).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Labels of the series.
    pub labels: Labels,
    /// Float points in time order.
    pub points: Vec<Point>,
    /// Histogram points in time order (a timestamp has a float or a histogram, not both).
    pub histograms: Vec<HistogramPoint>,
}

/// The value of a query, shaped like Prometheus' `resultType`s.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `scalar`: one number at the evaluation time.
    Scalar {
        /// Evaluation time (ms).
        t: i64,
        /// Value.
        v: f64,
    },
    /// `string`.
    String {
        /// Evaluation time (ms).
        t: i64,
        /// Value.
        v: String,
    },
    /// `vector`: instant query result; order is the evaluation order (meaningful after
    /// `sort()`, `topk()`, ...).
    Vector(Vec<Sample>),
    /// `matrix`: range query result or a range vector, sorted by labels.
    Matrix(Vec<Series>),
}

/// Counters about one query's work.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueryStats {
    /// Samples read from storage (including samples outside the final windows' overlap).
    pub samples_read: u64,
    /// Series returned by selectors.
    pub series_selected: u64,
    /// Partition-file blocks answered from their statistics by push-down (no decoding).
    pub blocks_from_stats: u64,
    /// Partition-file blocks push-down had to decode.
    pub blocks_decoded: u64,
    /// Samples decoded from partition-file blocks or read one by one from the in-memory
    /// heads, by push-down and by the plain read alike. Not a part of `samples_read`: a
    /// decoded block's samples outside the range read count here and not there, and samples
    /// answered from block statistics may count there and not here.
    pub samples_decoded: u64,
    /// Largest number of samples held in memory at once.
    pub peak_samples: usize,
    /// Time spent parsing and preparing.
    pub prepare_time: Duration,
    /// Time spent evaluating (wall time on the query's thread; includes `select_time`).
    pub eval_time: Duration,
    /// Time spent resolving selectors to series: in `Querier::select` (the index's postings
    /// and label matching). Selection runs on the query's thread, so this is wall time within
    /// `eval_time`. It includes selections whose series another path then selected again (a
    /// push-down by group that storage declined).
    pub select_time: Duration,
    /// Time spent reading samples from storage, heads and partition files, decoding included:
    /// in `Querier::samples_scanned`, `histograms` and `start_timestamps`, and push-down's
    /// scans (`window_aggregates`, `group_extremes`), timed once per call (per series or per
    /// piece of a group, never per sample). Thread time, summed over the query's threads: the
    /// reads done on the query pool are timed on each thread and added up, so this may exceed
    /// `eval_time`. It includes reads whose results evaluation did not use (prefetched calls
    /// evaluation never reached, push-down scans that declined before the series was decoded).
    /// On a query that ran on one thread, `eval_time - select_time - read_time` is the
    /// engine's own evaluation (windows, functions, aggregation, operators); with the pool it
    /// is not, since `read_time` then counts several threads.
    pub read_time: Duration,
}

/// The outcome of a successful query.
#[derive(Debug, Clone)]
pub struct QueryResult {
    /// The value.
    pub value: Value,
    /// Warnings as Prometheus returns them: `PromQL warning: <message> (<line>:<column>)`.
    pub warnings: Vec<String>,
    /// Infos as Prometheus returns them: `PromQL info: <message> (<line>:<column>)`.
    pub infos: Vec<String>,
    /// The same annotations, structured (level, message, byte offset in the query).
    pub annotations: Vec<Annotation>,
    /// Statistics.
    pub stats: QueryStats,
}

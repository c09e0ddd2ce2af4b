//! The TSBS `cpu-only` devops workload, written by us to TSBS's schema and value model.
//!
//! * [`hosts`]: the ten tags of each simulated host (`hostname`, `region`, ... ), drawn from
//!   TSBS's value sets.
//! * [`generate`]: one row per host per interval, ten `usage_*` fields as clamped random walks
//!   (TSBS's model) or noisy full-precision floats (the other end of compression).
//! * [`encode`]: rows as Influx line protocol (what `tsbs_load_influx` sends) and as Prometheus
//!   remote-write requests (the same points as `cpu_usage_user{hostname=...}` series, which is
//!   how Prometheus-compatible systems expose Influx data).
//! * [`queries`]: the TSBS devops query types as PromQL with random hosts and windows.
//!
//! Everything is a pure function of the [`Dataset`] (scale, times, value model, seed), so the same
//! flags give the same bytes on every machine. The random numbers are our own (splitmix64), not
//! Go's `math/rand`: the model is TSBS's, the exact values are not.

pub mod encode;
pub mod gen_cmd;
pub mod generate;
pub mod hosts;
pub mod queries;

/// The measurement every row belongs to.
pub const MEASUREMENT: &str = "cpu";

/// The ten fields of a `cpu` row, in TSBS's order.
pub const FIELDS: [&str; 10] = [
    "usage_user",
    "usage_system",
    "usage_idle",
    "usage_nice",
    "usage_iowait",
    "usage_irq",
    "usage_softirq",
    "usage_steal",
    "usage_guest",
    "usage_guest_nice",
];

/// How field values are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ValueModel {
    /// TSBS: each field a random walk with N(0, 1) steps clamped to [0, 100], starting uniform
    /// in [0, 100), written truncated to an integer (`usage_user=58i`).
    Tsbs,
    /// Uniform full-precision floats in [0, 100), written with every digit: nearly
    /// incompressible values, the other end of what a compressor sees.
    Noisy,
}

impl ValueModel {
    /// The name used in reports and flags.
    pub fn name(self) -> &'static str {
        match self {
            ValueModel::Tsbs => "tsbs",
            ValueModel::Noisy => "noisy",
        }
    }
}

/// Everything that determines the generated data: the same `Dataset` gives the same bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dataset {
    /// Number of hosts (TSBS's `--scale`).
    pub hosts: usize,
    /// Timestamp of the first row, milliseconds since the Unix epoch.
    pub start_ms: i64,
    /// Time between two rows of one host, milliseconds (TSBS's `--log-interval`, 10 s).
    pub interval_ms: i64,
    /// Rows per host (TSBS's "epochs": duration / interval).
    pub epochs: usize,
    /// How field values are made.
    pub model: ValueModel,
    /// Seed of every random choice (tags, values, queries).
    pub seed: u64,
}

impl Dataset {
    /// Rows in the whole dataset.
    pub fn rows(&self) -> u64 {
        self.hosts as u64 * self.epochs as u64
    }

    /// Points (field values, i.e. samples) in the whole dataset: ten per row.
    pub fn points(&self) -> u64 {
        self.rows() * FIELDS.len() as u64
    }

    /// Timestamp of the last row, milliseconds.
    pub fn last_ms(&self) -> i64 {
        self.start_ms + (self.epochs.saturating_sub(1) as i64) * self.interval_ms
    }

    /// The end of the covered time range (one interval past the last row), milliseconds.
    pub fn end_ms(&self) -> i64 {
        self.start_ms + self.epochs as i64 * self.interval_ms
    }
}

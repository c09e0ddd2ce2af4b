//! Helpers shared by the integration tests that compare two ways of evaluating a query.

use promql::{QueryResult, Value};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use storage::{Batch, Db, Labels, Options, Sample, stale_nan};

/// The time random series start at, and their sample spacing.
pub const BASE: i64 = 1_699_999_200_000;
pub const MINUTE: i64 = 60_000;

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

/// Checks that two evaluations of the same question agree, inside a proptest: equal answers
/// (float bits and series order, see [`bits`]) and warnings, or equal errors. `what` names the
/// question in the failure.
pub fn agree(
    a: promql::Result<QueryResult>,
    b: promql::Result<QueryResult>,
    what: &str,
) -> Result<(), TestCaseError> {
    match (a, b) {
        (Ok(a), Ok(b)) => {
            prop_assert_eq!(bits(&a), bits(&b), "{}", what);
            prop_assert_eq!(a.warnings, b.warnings, "{}", what);
        }
        (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string(), "{}", what),
        (a, b) => prop_assert!(false, "{}: {:?} vs {:?}", what, a.map(|r| bits(&r)), b.map(|r| bits(&r))),
    }
    Ok(())
}

/// A sample value: mostly small integers, some of any bits, huge values, stale markers, NaN,
/// infinities and signed zero.
pub fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        6 => (-3i32..4).prop_map(f64::from),
        2 => any::<f64>(),
        1 => prop_oneof![Just(1.0e308), Just(-1.5e308), Just(f64::MAX)],
        1 => Just(stale_nan()),
        1 => prop_oneof![
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(-0.0),
            Just(0.1),
        ],
    ]
}

/// A series: which metric (`m` or `n`), its `s` and `h` labels, and samples at minute offsets.
pub type SeriesSpec = (bool, u8, u8, Vec<(u16, f64)>);

/// A random series of up to 60 samples in the first 4 hours after [`BASE`].
pub fn series() -> impl Strategy<Value = SeriesSpec> {
    (any::<bool>(), 0u8..6, 0u8..3, proptest::collection::vec((0u16..240, value()), 0..60))
}

/// Appends `specs` to `db`, samples sorted and deduplicated by time.
pub fn load(db: &Db, specs: &[SeriesSpec]) {
    let mut batch = Batch::new();
    for (is_m, s, h, samples) in specs {
        let name = if *is_m { "m" } else { "n" };
        let labels = Labels::from_pairs(&[("__name__", name), ("s", &s.to_string()), ("h", &h.to_string())]);
        let mut samples: Vec<Sample> =
            samples.iter().map(|&(min, v)| Sample::new(BASE + i64::from(min) * MINUTE, v)).collect();
        samples.sort_by_key(|s| s.t);
        samples.dedup_by_key(|s| s.t);
        batch.push(labels, samples);
    }
    db.append(&batch).unwrap();
}

/// A database in `dir` whose background maintenance never runs during a test.
pub fn open_db(dir: &std::path::Path) -> Db {
    let mut o = Options::new(dir);
    o.maintenance_interval = std::time::Duration::from_secs(3600);
    Db::open(o).unwrap()
}

/// A database in a new temporary directory (returned with it, to keep it) holding `specs`.
pub fn loaded_db(specs: &[SeriesSpec]) -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = open_db(dir.path());
    load(&db, specs);
    (dir, db)
}

/// A call a [`Watched`] store was asked to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// `select`.
    Select,
    /// `samples`.
    Samples,
    /// `window_aggregates`.
    Window,
    /// `group_extremes`.
    Group,
}

/// A [`storage::mem::MemStore`] that tells `watch` of each call before making it, and answers
/// push-down's calls by decoding (as storage's oracles do), so that the engine takes those
/// paths too. `ahead` is its [`storage::Querier::selects_ahead`].
pub struct Watched<F> {
    pub inner: storage::mem::MemStore,
    pub watch: F,
    pub ahead: bool,
}

impl<F: Fn(Call) + Send + Sync> storage::Querier for Watched<F> {
    fn select(
        &self,
        m: &[storage::Matcher],
        mint: i64,
        maxt: i64,
    ) -> storage::Result<Vec<storage::SeriesRef>> {
        (self.watch)(Call::Select);
        self.inner.select(m, mint, maxt)
    }
    fn selects_ahead(&self) -> bool {
        self.ahead
    }
    fn samples(
        &self,
        r: &storage::SeriesRef,
        mint: i64,
        maxt: i64,
        out: &mut Vec<Sample>,
    ) -> storage::Result<()> {
        (self.watch)(Call::Samples);
        self.inner.samples(r, mint, maxt, out)
    }
    fn window_aggregates(
        &self,
        series: &storage::SeriesRef,
        windows: &[(i64, i64)],
        _need: storage::window_agg::Need,
        out: &mut Vec<storage::window_agg::WindowAgg>,
        stats: &mut storage::window_agg::ScanStats,
    ) -> storage::Result<bool> {
        (self.watch)(Call::Window);
        storage::query::decode_window_aggregates(&self.inner, series, windows, out, stats)?;
        Ok(true)
    }
    fn group_extremes(
        &self,
        group: &[storage::SeriesRef],
        windows: &[(i64, i64)],
        which: storage::window_agg::Extreme,
        out: &mut Vec<Option<f64>>,
        stats: &mut storage::window_agg::ScanStats,
    ) -> storage::Result<bool> {
        (self.watch)(Call::Group);
        storage::query::decode_group_extremes(&self.inner, group, windows, which, out, stats)?;
        Ok(true)
    }
    fn label_names(&self, m: &[storage::Matcher], mint: i64, maxt: i64) -> storage::Result<Vec<String>> {
        self.inner.label_names(m, mint, maxt)
    }
    fn label_values(
        &self,
        n: &str,
        m: &[storage::Matcher],
        mint: i64,
        maxt: i64,
    ) -> storage::Result<Vec<String>> {
        self.inner.label_values(n, m, mint, maxt)
    }
}

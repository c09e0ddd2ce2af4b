//! Cardinality limits and the record of who creates series.
//!
//! A client that invents series without end (a request id or a timestamp in a label) would
//! otherwise grow the index until memory runs out. Three limits, each off when 0, each counted
//! per tenant (the value of [`TENANT_LABEL`]; series without it are the default tenant's), so
//! that one tenant's explosion never refuses another's series:
//!
//! - `max_series`: live series of the tenant in the index (those of partition files included);
//! - `max_series_per_metric`: live series of the tenant with one metric name (`__name__`); a
//!   series without a metric name is not subject to it;
//! - `max_new_series_per_day`: series the tenant created since 00:00 UTC. A UTC day, not a rolling 24 h
//!   window, so the count an operator sees in `/api/v1/status/tsdb` resets at a predictable
//!   moment and needs one counter, not a timestamp per series. The count starts at 0 when the
//!   process starts (series loaded from disk at startup are not new).
//!
//! A batch that would create a series beyond a limit is stored without that series: the
//! samples of existing series and of new series within the limits are stored, and the outcome
//! names the refused series and the limit, so the HTTP layer answers 400 (never 5xx: the same
//! batch would be refused again, and senders retry 5xx forever).
//!
//! **Check and create are one step.** With any limit set, an append first looks its series up
//! (the hit path, unchanged: one shared lock per series); the misses are then checked and
//! created under one mutex, so two appenders can never both see room for one more series and
//! both create it. Series are created nowhere else while the database is open (startup fills
//! the index before any append), and the index only shrinks behind the mutex's back (retention
//! removing series), which can only leave more room than was checked. Without limits, series
//! are created as before, on the sharded index alone.
//!
//! Whatever the limits, series created and refused today are counted per tenant and metric
//! name, so the metric behind a series explosion can be named (`/api/v1/status/tsdb`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::batch_ref::BatchRef;
use crate::error::Result;
use crate::index::{Index, Stat};
use crate::labels_ref::{LabelPair, LabelsRef, RawLabels};
use crate::types::{Labels, SeriesId, TENANT_LABEL};

/// Milliseconds in a UTC day.
const DAY_MS: i64 = 86_400_000;

/// Distinct metric names counted per day in each of the created and refused tallies; past it,
/// further names are counted together under [`OTHER_METRICS`], so a client sending endless
/// metric names cannot grow the tallies without bound.
pub const TRACKED_METRICS_MAX: usize = 10_000;

/// The name under which metrics past [`TRACKED_METRICS_MAX`] are counted.
pub const OTHER_METRICS: &str = "(other metrics)";

/// The configured limits; 0 means unlimited (the default).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SeriesLimits {
    /// Most live series in the database.
    pub max_series: u64,
    /// Most live series with one metric name.
    pub max_series_per_metric: u64,
    /// Most series created per UTC day.
    pub max_new_series_per_day: u64,
}

impl SeriesLimits {
    /// True if any limit is set (non-zero).
    pub fn any(&self) -> bool {
        self.max_series > 0 || self.max_series_per_metric > 0 || self.max_new_series_per_day > 0
    }

    /// The value of one limit.
    pub fn get(&self, limit: SeriesLimit) -> u64 {
        match limit {
            SeriesLimit::MaxSeries => self.max_series,
            SeriesLimit::MaxSeriesPerMetric => self.max_series_per_metric,
            SeriesLimit::MaxNewSeriesPerDay => self.max_new_series_per_day,
        }
    }
}

/// Which limit refused a series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SeriesLimit {
    /// [`SeriesLimits::max_series`].
    MaxSeries,
    /// [`SeriesLimits::max_series_per_metric`].
    MaxSeriesPerMetric,
    /// [`SeriesLimits::max_new_series_per_day`].
    MaxNewSeriesPerDay,
}

impl SeriesLimit {
    /// Every limit, in the order they are checked.
    pub const ALL: [SeriesLimit; 3] =
        [SeriesLimit::MaxSeries, SeriesLimit::MaxSeriesPerMetric, SeriesLimit::MaxNewSeriesPerDay];

    /// The limit's name, as `/metrics` labels it and error messages quote it.
    pub fn name(self) -> &'static str {
        match self {
            SeriesLimit::MaxSeries => "max_series",
            SeriesLimit::MaxSeriesPerMetric => "max_series_per_metric",
            SeriesLimit::MaxNewSeriesPerDay => "max_new_series_per_day",
        }
    }

    fn index(self) -> usize {
        match self {
            SeriesLimit::MaxSeries => 0,
            SeriesLimit::MaxSeriesPerMetric => 1,
            SeriesLimit::MaxNewSeriesPerDay => 2,
        }
    }
}

/// New series an append refused, per limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SeriesRejections {
    /// Refused by `max_series`.
    pub max_series: u64,
    /// Refused by `max_series_per_metric`.
    pub max_series_per_metric: u64,
    /// Refused by `max_new_series_per_day`.
    pub max_new_series_per_day: u64,
}

impl SeriesRejections {
    /// Series refused by any limit.
    pub fn total(&self) -> u64 {
        self.max_series + self.max_series_per_metric + self.max_new_series_per_day
    }

    /// Series refused by one limit.
    pub fn get(&self, limit: SeriesLimit) -> u64 {
        match limit {
            SeriesLimit::MaxSeries => self.max_series,
            SeriesLimit::MaxSeriesPerMetric => self.max_series_per_metric,
            SeriesLimit::MaxNewSeriesPerDay => self.max_new_series_per_day,
        }
    }

    fn add(&mut self, limit: SeriesLimit) {
        self.add_n(limit, 1);
    }

    fn add_n(&mut self, limit: SeriesLimit, n: u64) {
        match limit {
            SeriesLimit::MaxSeries => self.max_series += n,
            SeriesLimit::MaxSeriesPerMetric => self.max_series_per_metric += n,
            SeriesLimit::MaxNewSeriesPerDay => self.max_new_series_per_day += n,
        }
    }
}

/// The first series an append refused, for the error message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedSeries {
    /// Its labels.
    pub labels: Labels,
    /// The limit that refused it.
    pub limit: SeriesLimit,
    /// The limit's configured value.
    pub max: u64,
}

/// Who created series today: the answer to "which metric is exploding?".
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CardinalityStats {
    /// The limits in force.
    pub limits: SeriesLimits,
    /// Start of the current UTC day, in milliseconds since the epoch.
    pub day_start_ms: i64,
    /// Series created today (since the process started, if it started today).
    pub created_today: u64,
    /// New series refused today by a limit (each time a batch brought one).
    pub rejected_today: u64,
    /// The metric names that created the most series today, largest first.
    pub created_today_by_metric: Vec<Stat>,
    /// The metric names whose new series were refused most today, largest first.
    pub rejected_today_by_metric: Vec<Stat>,
    /// New series of these tenants refused since the process started, per limit.
    pub rejected_total: SeriesRejections,
}

/// Per-metric counts with a bounded number of names.
#[derive(Debug, Default)]
struct Tally {
    total: u64,
    by_metric: HashMap<String, u64>,
}

impl Tally {
    fn add(&mut self, metric: &str, n: u64) {
        self.total += n;
        if let Some(count) = self.by_metric.get_mut(metric) {
            *count += n;
            return;
        }
        let key = if self.by_metric.len() < TRACKED_METRICS_MAX { metric } else { OTHER_METRICS };
        *self.by_metric.entry(key.to_owned()).or_default() += n;
    }

    /// Adds `other`'s counts (a federated read's tenants, summed).
    fn merge(&mut self, other: &Tally) {
        for (metric, n) in &other.by_metric {
            self.add(metric, *n);
        }
    }

    /// The `limit` largest entries, largest first, ties by name.
    fn top(&self, limit: usize) -> Vec<Stat> {
        let mut out: Vec<Stat> =
            self.by_metric.iter().map(|(name, &value)| Stat { name: name.clone(), value }).collect();
        out.sort_unstable_by(|a, b| b.value.cmp(&a.value).then_with(|| a.name.cmp(&b.name)));
        out.truncate(limit);
        out
    }
}

/// One tenant's tallies of a day.
#[derive(Debug, Default)]
struct TenantDay {
    created: Tally,
    rejected: Tally,
}

/// Today's tallies, per tenant (`""`: the default tenant), and refusals since the process
/// started. Behind [`Cardinality::today`], whose lock also serialises limited creations.
#[derive(Debug, Default)]
struct Today {
    /// Days since the epoch (UTC) these tallies are for.
    day: i64,
    tenants: HashMap<String, TenantDay>,
    /// Refusals since the process started, per tenant.
    rejected_total: HashMap<String, SeriesRejections>,
}

impl Today {
    /// Starts a new day's tallies if `now_ms` is past the current one.
    fn roll(&mut self, now_ms: i64) {
        let day = now_ms.div_euclid(DAY_MS);
        if day != self.day {
            self.day = day;
            self.tenants.clear();
        }
    }

    /// The tallies of `tenant` (a series' tenant label value, `""` for the default tenant).
    fn tenant(&mut self, tenant: &str) -> &mut TenantDay {
        // Called per series created: the key's allocation is small beside the series'.
        self.tenants.entry(tenant.to_string()).or_default()
    }
}

/// The series ids of one append's entries: `None` for an entry without samples or whose series
/// a limit refused.
pub(crate) struct Resolved {
    pub ids: Vec<Option<SeriesId>>,
    pub created: u64,
    pub rejected: SeriesRejections,
    pub first_rejected: Option<RejectedSeries>,
}

/// The limits of a database and its record of series creation.
#[derive(Debug, Default)]
pub(crate) struct Cardinality {
    limits: SeriesLimits,
    today: Mutex<Today>,
    rejected_total: [AtomicU64; 3],
}

/// A series' metric name for the tallies (`""` if it has none).
fn metric_of<'a>(labels: &LabelsRef<'a>) -> &'a str {
    labels.metric_name().unwrap_or("")
}

/// A series' tenant for the tallies (`""`: the default tenant).
fn tenant_of<'a>(labels: &LabelsRef<'a>) -> &'a str {
    labels.get(TENANT_LABEL).unwrap_or("")
}

impl Cardinality {
    pub(crate) fn new(limits: SeriesLimits) -> Self {
        Cardinality { limits, ..Cardinality::default() }
    }

    /// Resolves the series of every entry of `batch` to an id, creating new series unless a limit
    /// refuses them. `now_ms` decides the UTC day.
    ///
    /// Known series are found by their label bytes, unchecked: bytes equal to a stored series'
    /// labels are valid UTF-8. The labels of new series are checked, all before any is created:
    /// if one is not UTF-8 this fails with [`crate::Error::InvalidLabels`] and creates nothing.
    pub(crate) fn resolve(&self, index: &Index, batch: &BatchRef<'_>, now_ms: i64) -> Result<Resolved> {
        let mut out = Resolved {
            ids: Vec::with_capacity(batch.len()),
            created: 0,
            rejected: SeriesRejections::default(),
            first_rejected: None,
        };
        // The hit path: known series need no lock beyond the index's own.
        let mut misses = Vec::new();
        for (i, (labels, samples)) in batch.iter().enumerate() {
            if samples.is_empty() {
                out.ids.push(None);
                continue;
            }
            let (id, hash) = index.get_raw_hashed(labels);
            if id.is_none() {
                misses.push((i, hash));
            }
            out.ids.push(id);
        }
        if misses.is_empty() {
            return Ok(out);
        }
        let entries: Vec<RawLabels<'_>> = batch.iter().map(|(labels, _)| labels).collect();
        let mut new: Vec<(usize, u64, Vec<LabelPair<'_>>)> = Vec::with_capacity(misses.len());
        for (i, hash) in misses {
            if let Some(labels) = entries.get(i) {
                new.push((i, hash, labels.to_str_pairs()?));
            }
        }
        if !self.limits.any() {
            let mut created: Vec<(&str, &str)> = Vec::new();
            for (i, hash, pairs) in &new {
                let labels = LabelsRef::new_unchecked(pairs);
                let (id, is_new) = index.get_or_create_hashed(*hash, labels);
                if is_new {
                    created.push((tenant_of(&labels), metric_of(&labels)));
                }
                out.ids[*i] = Some(id);
            }
            if !created.is_empty() {
                out.created = created.len() as u64;
                let mut today = self.today.lock();
                today.roll(now_ms);
                for (tenant, metric) in created {
                    today.tenant(tenant).created.add(metric, 1);
                }
            }
            return Ok(out);
        }
        let mut today = self.today.lock();
        today.roll(now_ms);
        for (i, hash, pairs) in &new {
            let (i, hash, labels) = (*i, *hash, LabelsRef::new_unchecked(pairs));
            // Created meanwhile by another appender, or earlier in this batch.
            if let Some(id) = index.get_hashed(hash, labels) {
                out.ids[i] = Some(id);
                continue;
            }
            let (tenant, metric) = (tenant_of(&labels), metric_of(&labels));
            let created_today = today.tenants.get(tenant).map_or(0, |t| t.created.total);
            match self.refusal(index, tenant, metric, created_today) {
                None => {
                    let (id, is_new) = index.get_or_create_hashed(hash, labels);
                    if is_new {
                        out.created += 1;
                        today.tenant(tenant).created.add(metric, 1);
                    }
                    out.ids[i] = Some(id);
                }
                Some(limit) => {
                    out.rejected.add(limit);
                    today.tenant(tenant).rejected.add(metric, 1);
                    today.rejected_total.entry(tenant.to_string()).or_default().add(limit);
                    if out.first_rejected.is_none() {
                        out.first_rejected = Some(RejectedSeries {
                            labels: labels.to_labels(),
                            limit,
                            max: self.limits.get(limit),
                        });
                    }
                }
            }
        }
        drop(today);
        for limit in SeriesLimit::ALL {
            self.rejected_total[limit.index()].fetch_add(out.rejected.get(limit), Ordering::Relaxed);
        }
        Ok(out)
    }

    /// The first limit creating one more series of `metric` for `tenant` (`""`: the default
    /// tenant) would exceed, if any. Called under the `today` lock, with `created_today` (the
    /// tenant's) read under it.
    fn refusal(&self, index: &Index, tenant: &str, metric: &str, created_today: u64) -> Option<SeriesLimit> {
        let l = &self.limits;
        let tenant = (!tenant.is_empty()).then_some(tenant);
        // The database's count bounds the tenant's: only when it reaches a limit is the
        // tenant's own counted.
        if l.max_series > 0
            && index.len() as u64 >= l.max_series
            && index.tenant_series_count(tenant) as u64 >= l.max_series
        {
            return Some(SeriesLimit::MaxSeries);
        }
        if l.max_series_per_metric > 0
            && !metric.is_empty()
            && index.metric_series_count(metric) as u64 >= l.max_series_per_metric
            && index.tenant_metric_series_count(tenant, metric) as u64 >= l.max_series_per_metric
        {
            return Some(SeriesLimit::MaxSeriesPerMetric);
        }
        if l.max_new_series_per_day > 0 && created_today >= l.max_new_series_per_day {
            return Some(SeriesLimit::MaxNewSeriesPerDay);
        }
        None
    }

    /// New series refused since the process started, per limit.
    pub(crate) fn rejected_total(&self) -> SeriesRejections {
        let load = |limit: SeriesLimit| self.rejected_total[limit.index()].load(Ordering::Relaxed);
        SeriesRejections {
            max_series: load(SeriesLimit::MaxSeries),
            max_series_per_metric: load(SeriesLimit::MaxSeriesPerMetric),
            max_new_series_per_day: load(SeriesLimit::MaxNewSeriesPerDay),
        }
    }

    /// Today's tallies of `tenants` (`None`: the default tenant) summed, with the `limit`
    /// largest entries per list.
    pub(crate) fn stats(&self, tenants: &[Option<&str>], limit: usize, now_ms: i64) -> CardinalityStats {
        let mut today = self.today.lock();
        today.roll(now_ms);
        let (mut created, mut rejected) = (Tally::default(), Tally::default());
        let mut rejected_total = SeriesRejections::default();
        for tenant in tenants {
            let tenant = tenant.unwrap_or_default();
            if let Some(day) = today.tenants.get(tenant) {
                created.merge(&day.created);
                rejected.merge(&day.rejected);
            }
            if let Some(r) = today.rejected_total.get(tenant) {
                for limit in SeriesLimit::ALL {
                    rejected_total.add_n(limit, r.get(limit));
                }
            }
        }
        CardinalityStats {
            limits: self.limits,
            day_start_ms: today.day.saturating_mul(DAY_MS),
            created_today: created.total,
            rejected_today: rejected.total,
            created_today_by_metric: created.top(limit),
            rejected_today_by_metric: rejected.top(limit),
            rejected_total,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Sample;

    const T: i64 = 1_700_000_000_000;

    fn batch(series: &[(&'static str, &'static str)]) -> BatchRef<'static> {
        let mut b = BatchRef::new();
        for &(name, host) in series {
            b.push([("__name__", name), ("host", host)], [Sample::new(T, 1.0)]);
        }
        b
    }

    fn created_ids(r: &Resolved) -> usize {
        r.ids.iter().flatten().count()
    }

    #[test]
    fn unlimited_creates_everything_and_tallies_by_metric() {
        let (index, card) = (Index::new(), Cardinality::new(SeriesLimits::default()));
        let r = card.resolve(&index, &batch(&[("a", "1"), ("a", "2"), ("b", "1"), ("a", "1")]), T).unwrap();
        assert_eq!((created_ids(&r), r.created, r.rejected.total()), (4, 3, 0));
        let s = card.stats(&[None], 10, T);
        assert_eq!(s.created_today, 3);
        assert_eq!(
            s.created_today_by_metric,
            vec![Stat { name: "a".into(), value: 2 }, Stat { name: "b".into(), value: 1 }]
        );
        // The next UTC day starts from zero.
        assert_eq!(card.stats(&[None], 10, T + DAY_MS).created_today, 0);
    }

    #[test]
    fn each_limit_refuses_new_series_and_keeps_existing_ones() {
        let index = Index::new();
        let card = Cardinality::new(SeriesLimits { max_series_per_metric: 2, ..SeriesLimits::default() });
        let r = card
            .resolve(&index, &batch(&[("a", "1"), ("a", "2"), ("a", "3"), ("b", "1"), ("a", "1")]), T)
            .unwrap();
        assert_eq!(r.ids.iter().map(Option::is_some).collect::<Vec<_>>(), [true, true, false, true, true]);
        assert_eq!(r.rejected.max_series_per_metric, 1);
        let first = r.first_rejected.unwrap();
        assert_eq!(
            (first.limit, first.max, first.labels.get("host")),
            (SeriesLimit::MaxSeriesPerMetric, 2, Some("3"))
        );

        let index = Index::new();
        let card = Cardinality::new(SeriesLimits { max_series: 2, ..SeriesLimits::default() });
        let r = card.resolve(&index, &batch(&[("a", "1"), ("b", "1"), ("c", "1")]), T).unwrap();
        assert_eq!((created_ids(&r), r.rejected.max_series), (2, 1));
        // Existing series are still resolved once the limit is reached.
        let r = card.resolve(&index, &batch(&[("b", "1"), ("d", "1")]), T).unwrap();
        assert_eq!(r.ids, vec![Some(1), None]);

        let index = Index::new();
        let card = Cardinality::new(SeriesLimits { max_new_series_per_day: 1, ..SeriesLimits::default() });
        assert_eq!(
            card.resolve(&index, &batch(&[("a", "1"), ("a", "2")]), T)
                .unwrap()
                .rejected
                .max_new_series_per_day,
            1
        );
        // A new UTC day gives a new allowance.
        let r = card.resolve(&index, &batch(&[("a", "2")]), T + DAY_MS).unwrap();
        assert_eq!(created_ids(&r), 1);
        let s = card.stats(&[None], 10, T + DAY_MS);
        assert_eq!((s.created_today, s.rejected_total.max_new_series_per_day), (1, 1));
    }

    /// Each limit counts one tenant's series: a tenant at its limit refuses its own new series
    /// only, and the tallies of each tenant are its own.
    #[test]
    fn limits_and_tallies_are_per_tenant() {
        fn of(tenant: &'static str, series: &[(&'static str, &'static str)]) -> BatchRef<'static> {
            let mut b = BatchRef::new();
            for &(name, host) in series {
                b.push([("__name__", name), ("host", host), (TENANT_LABEL, tenant)], [Sample::new(T, 1.0)]);
            }
            b
        }
        for limits in [
            SeriesLimits { max_series: 2, ..SeriesLimits::default() },
            SeriesLimits { max_series_per_metric: 2, ..SeriesLimits::default() },
            SeriesLimits { max_new_series_per_day: 2, ..SeriesLimits::default() },
        ] {
            let (index, card) = (Index::new(), Cardinality::new(limits));
            let three = [("a", "1"), ("a", "2"), ("a", "3")];
            // The default tenant ("" drops the label) and two others, three new series each.
            for tenant in ["", "x", "y"] {
                let r = card.resolve(&index, &of(tenant, &three), T).unwrap();
                assert_eq!((r.created, r.rejected.total()), (2, 1), "{limits:?} tenant {tenant:?}");
            }
            assert_eq!(index.len(), 6);
            for tenant in [None, Some("x"), Some("z")] {
                let s = card.stats(&[tenant], 10, T);
                let expected = if tenant == Some("z") { (0, 0) } else { (2, 1) };
                assert_eq!((s.created_today, s.rejected_today), expected, "{limits:?} {tenant:?}");
                assert_eq!(s.rejected_total.total(), expected.1);
            }
            let both = card.stats(&[Some("x"), Some("y")], 10, T);
            assert_eq!(both.created_today_by_metric, vec![Stat { name: "a".into(), value: 4 }]);
        }
    }

    #[test]
    fn tallies_are_bounded() {
        let mut t = Tally::default();
        for i in 0..TRACKED_METRICS_MAX + 5 {
            t.add(&format!("m{i}"), 1);
        }
        assert_eq!(t.by_metric.len(), TRACKED_METRICS_MAX + 1);
        assert_eq!(t.top(1), vec![Stat { name: OTHER_METRICS.into(), value: 5 }]);
        assert_eq!(t.total, TRACKED_METRICS_MAX as u64 + 5);
    }

    proptest::proptest! {
        /// Concurrent appenders creating overlapping series never push the index past a limit,
        /// and every series of the index is accounted for as created exactly once.
        #[test]
        fn concurrent_appenders_never_exceed_the_limits(
            max_series in 1u64..40,
            per_metric in 1u64..15,
            per_day in 1u64..40,
            threads in 2usize..5,
        ) {
            let index = Index::new();
            let card = Cardinality::new(SeriesLimits {
                max_series,
                max_series_per_metric: per_metric,
                max_new_series_per_day: per_day,
            });
            let created: u64 = std::thread::scope(|s| {
                let workers: Vec<_> = (0..threads)
                    .map(|t| {
                        let (index, card) = (&index, &card);
                        s.spawn(move || {
                            let mut created = 0;
                            for round in 0..20usize {
                                let hosts: Vec<String> = (0..4).map(|h| format!("{}", (t + round * 3 + h) % 30)).collect();
                                let mut b = BatchRef::new();
                                for (k, h) in hosts.iter().enumerate() {
                                    let metric = if k % 2 == 0 { "even" } else { "odd" };
                                    b.push([("__name__", metric), ("host", h.as_str())], [Sample::new(T, 1.0)]);
                                }
                                created += card.resolve(index, &b, T).unwrap().created;
                            }
                            created
                        })
                    })
                    .collect();
                workers.into_iter().map(|w| w.join().unwrap()).sum()
            });
            let total = index.len() as u64;
            proptest::prop_assert_eq!(total, created);
            proptest::prop_assert!(total <= max_series && total <= per_day);
            for metric in ["even", "odd"] {
                proptest::prop_assert!(index.metric_series_count(metric) as u64 <= per_metric);
            }
            proptest::prop_assert_eq!(card.stats(&[None], 5, T).created_today, created);
        }
    }
}

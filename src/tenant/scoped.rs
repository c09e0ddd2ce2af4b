//! [`Scoped`]: a [`Querier`] that sees one tenant's series (or a federated read's tenants) of
//! another, and shows them without the tenant label.
//!
//! Every selection and label lookup gets the scope's matcher ([`Scope::matcher`]); the series
//! it answers lose [`TENANT_LABEL`] (a federated read shows it as [`FEDERATED_LABEL`], moving a
//! series' own label of that name to [`ORIGINAL_FEDERATED_LABEL`], as Mimir does, and matchers
//! on those names are turned back). Reading samples passes the series through: storage reads
//! a series by its id, whatever labels it is shown with.

use storage::query::StartTimestamp;
use storage::window_agg::{Extreme, Need, ScanStats, WindowAgg};
use storage::{HistogramSample, Label, Labels, Matcher, Querier, Result, Sample, SeriesRef, TENANT_LABEL};

use super::{FEDERATED_LABEL, ORIGINAL_FEDERATED_LABEL, Scope};

/// `inner` as `scope` sees it.
pub struct Scoped<Q> {
    inner: Q,
    scope: Scope,
}

impl<Q: Querier> Scoped<Q> {
    /// `inner`, scoped.
    pub fn new(inner: Q, scope: Scope) -> Scoped<Q> {
        Scoped { inner, scope }
    }

    fn federated(&self) -> bool {
        self.scope.is_federated()
    }

    /// A series' labels as this scope shows them.
    fn shown(&self, labels: Labels) -> Labels {
        match &self.scope {
            // Series of the default tenant have no tenant label to hide.
            Scope::Default => labels,
            Scope::One(_) => super::hidden(labels),
            Scope::Many(_) => {
                let mut out = Vec::with_capacity(labels.len() + 1);
                for l in labels.iter() {
                    match &*l.name {
                        TENANT_LABEL => {
                            out.push(Label { name: FEDERATED_LABEL.into(), value: l.value.clone() })
                        }
                        FEDERATED_LABEL => {
                            out.push(Label { name: ORIGINAL_FEDERATED_LABEL.into(), value: l.value.clone() })
                        }
                        _ => out.push(l.clone()),
                    }
                }
                Labels::new(out)
            }
        }
    }

    /// Label names as shown.
    fn shown_names(&self, mut names: Vec<String>) -> Vec<String> {
        if self.federated() {
            for n in &mut names {
                if n == FEDERATED_LABEL {
                    *n = ORIGINAL_FEDERATED_LABEL.to_string();
                } else if n == TENANT_LABEL {
                    *n = FEDERATED_LABEL.to_string();
                }
            }
            names.sort_unstable();
        } else {
            names.retain(|n| n != TENANT_LABEL);
        }
        names
    }
}

impl<Q: Querier> Querier for Scoped<Q> {
    fn select(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<SeriesRef>> {
        // The scope's matcher must not make an unselective selector selective.
        storage::query::check_selective(matchers)?;
        let mut selected = self.inner.select(&self.scope.restrict(matchers)?, mint, maxt)?;
        if self.scope.is_default() {
            return Ok(selected);
        }
        for s in &mut selected {
            s.labels = self.shown(std::mem::take(&mut s.labels));
        }
        // Hiding one label every series has keeps their order; renaming it may not.
        if self.federated() {
            selected.sort_by(|a, b| a.labels.cmp(&b.labels));
        }
        Ok(selected)
    }

    fn selects_ahead(&self) -> bool {
        self.inner.selects_ahead()
    }

    fn prepare(&self, selections: &[(&[Matcher], i64, i64)]) -> Result<()> {
        let scoped: Vec<(Vec<Matcher>, i64, i64)> = selections
            .iter()
            .map(|(m, mint, maxt)| Ok((self.scope.restrict(m)?, *mint, *maxt)))
            .collect::<Result<_>>()?;
        let borrowed: Vec<(&[Matcher], i64, i64)> =
            scoped.iter().map(|(m, mint, maxt)| (m.as_slice(), *mint, *maxt)).collect();
        self.inner.prepare(&borrowed)
    }

    fn samples(&self, series: &SeriesRef, mint: i64, maxt: i64, out: &mut Vec<Sample>) -> Result<()> {
        self.inner.samples(series, mint, maxt, out)
    }

    fn samples_scanned(
        &self,
        series: &SeriesRef,
        mint: i64,
        maxt: i64,
        out: &mut Vec<Sample>,
        stats: &mut ScanStats,
    ) -> Result<()> {
        self.inner.samples_scanned(series, mint, maxt, out, stats)
    }

    fn samples_pruned(
        &self,
        series: &SeriesRef,
        mint: i64,
        maxt: i64,
        may_keep: &dyn Fn(f64, f64) -> bool,
        out: &mut Vec<Sample>,
        stats: &mut ScanStats,
    ) -> Result<()> {
        self.inner.samples_pruned(series, mint, maxt, may_keep, out, stats)
    }

    fn samples_latest(
        &self,
        series: &SeriesRef,
        mint: i64,
        maxt: i64,
        out: &mut Vec<Sample>,
        stats: &mut ScanStats,
    ) -> Result<()> {
        self.inner.samples_latest(series, mint, maxt, out, stats)
    }

    fn histograms(
        &self,
        series: &SeriesRef,
        mint: i64,
        maxt: i64,
        out: &mut Vec<HistogramSample>,
    ) -> Result<()> {
        self.inner.histograms(series, mint, maxt, out)
    }

    fn start_timestamps(
        &self,
        series: &SeriesRef,
        mint: i64,
        maxt: i64,
        out: &mut Vec<StartTimestamp>,
    ) -> Result<()> {
        self.inner.start_timestamps(series, mint, maxt, out)
    }

    fn window_aggregates(
        &self,
        series: &SeriesRef,
        windows: &[(i64, i64)],
        need: Need,
        out: &mut Vec<WindowAgg>,
        stats: &mut ScanStats,
    ) -> Result<bool> {
        self.inner.window_aggregates(series, windows, need, out, stats)
    }

    fn group_extremes(
        &self,
        group: &[SeriesRef],
        windows: &[(i64, i64)],
        which: Extreme,
        out: &mut Vec<Option<f64>>,
        stats: &mut ScanStats,
    ) -> Result<bool> {
        self.inner.group_extremes(group, windows, which, out, stats)
    }

    fn label_names(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<String>> {
        let names = self.inner.label_names(&self.scope.restrict(matchers)?, mint, maxt)?;
        Ok(self.shown_names(names))
    }

    fn label_values(&self, name: &str, matchers: &[Matcher], mint: i64, maxt: i64) -> Result<Vec<String>> {
        let stored = self.scope.stored_name(name);
        if stored == TENANT_LABEL && name == TENANT_LABEL {
            // Hidden from every scope (a federated read shows it under another name).
            return Ok(Vec::new());
        }
        self.inner.label_values(stored, &self.scope.restrict(matchers)?, mint, maxt)
    }
}

//! What a query node (`--role query`) reads besides the bucket: the data its writers
//! (`--query.writer URL`) hold and have not uploaded yet, by remote read.
//!
//! Each selection asks every writer for the series it selects, with the
//! `strata-bucket-records` header naming the bucket records the node holds, so that a writer
//! answers only from its heads and the files those records do not list
//! (`storage::Db::snapshot_unuploaded`). [`WithWriters`] merges the answers with the bucket's
//! view: a series both hold reads as one, and at a timestamp both hold the writer's sample
//! wins (it is the newer write, or the same one). A series with data from a writer is read
//! whole rather than answered from block statistics. A writer that does not answer fails the
//! query with 503, as a bucket that does not answer does: an answer without the newest data
//! would look complete.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use remote::read::client::{RECORDS_HEADER, ReadSeries, records_header};
use std::sync::Mutex;
use storage::query::StartTimestamp;
use storage::window_agg::{Extreme, Need, ScanStats, WindowAgg};
use storage::{HistogramSample, Labels, Matcher, Querier, Sample, SeriesId, SeriesRef};

use crate::tenant::Scope;
use crate::tenant::scoped::Scoped;

/// Ids of series only writers hold count down from here: a storage index never gets near.
const WRITER_ONLY_IDS: SeriesId = SeriesId::MAX;

/// The writers a query node reads recent data from.
#[derive(Debug, Clone)]
pub struct Writers {
    urls: Vec<String>,
    agent: ureq::Agent,
}

impl Writers {
    /// Writers at `urls` (`http://host:port`), each read with at most `timeout` per request.
    pub fn new(urls: Vec<String>, timeout: Duration) -> Writers {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .http_status_as_error(false)
            .build()
            .new_agent();
        Writers { urls, agent }
    }

    /// Sends each writer a request carrying `header: value` (a strong read's header), which
    /// the writer answers once it has caught up with the ingest log.
    pub fn catch_up(&self, header: &str, value: &str) -> Result<(), String> {
        for url in &self.urls {
            let endpoint = format!("{}/api/v1/status/buildinfo", url.trim_end_matches('/'));
            let response = self
                .agent
                .get(&endpoint)
                .header(header, value)
                .call()
                .map_err(|e| format!("writer {url}: {e}"))?;
            let status = response.status().as_u16();
            if status != 200 {
                let text = response.into_body().read_to_string().unwrap_or_default();
                return Err(format!("writer {url}: HTTP {status}: {}", text.trim()));
            }
        }
        Ok(())
    }

    /// The series every writer holds of `matchers` in `[mint, maxt]` that the bucket records
    /// `records` (the header's value) do not list, of the tenants `tenant` (an `X-Scope-OrgID`
    /// value; `None`: the default tenant) names, as they see them.
    fn read(
        &self,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
        records: &str,
        tenant: Option<&str>,
    ) -> storage::Result<Vec<ReadSeries>> {
        let body =
            remote::read::client::request(matchers, mint, maxt).map_err(|e| failed("", e.to_string()))?;
        let mut out = Vec::new();
        for url in &self.urls {
            let endpoint = format!("{}/api/v1/read", url.trim_end_matches('/'));
            let mut request = self
                .agent
                .post(&endpoint)
                .header("Content-Type", "application/x-protobuf")
                .header("Content-Encoding", "snappy")
                .header("X-Prometheus-Remote-Read-Version", "0.1.0")
                .header(RECORDS_HEADER, records);
            if let Some(tenant) = tenant {
                request = request.header(crate::tenant::HEADER.as_str(), tenant);
            }
            let response = request.send(&body[..]).map_err(|e| failed(url, e.to_string()))?;
            let status = response.status().as_u16();
            let mut answer = Vec::new();
            response
                .into_body()
                .into_reader()
                .read_to_end(&mut answer)
                .map_err(|e| failed(url, e.to_string()))?;
            if status != 200 {
                return Err(failed(
                    url,
                    format!("HTTP {status}: {}", String::from_utf8_lossy(&answer).trim()),
                ));
            }
            out.extend(remote::read::client::series(&answer).map_err(|e| failed(url, e.to_string()))?);
        }
        Ok(out)
    }
}

impl Writers {
    /// Sends the admin request `path` (a deletion, say) with the form `body` for the tenants
    /// `tenant` names (an `X-Scope-OrgID` value; `None`: the default tenant) to every writer,
    /// which applies it to its own prefix and answers once it is in the bucket. The first
    /// writer that does not answer 204: its URL and what went wrong.
    pub fn forward_admin(&self, path: &str, body: &[u8], tenant: Option<&str>) -> Result<(), String> {
        for url in &self.urls {
            let endpoint = format!("{}{path}", url.trim_end_matches('/'));
            let mut request =
                self.agent.post(&endpoint).header("Content-Type", "application/x-www-form-urlencoded");
            if let Some(tenant) = tenant {
                request = request.header(crate::tenant::HEADER.as_str(), tenant);
            }
            let response = request.send(body).map_err(|e| format!("writer {url}: {e}"))?;
            let status = response.status().as_u16();
            if status != 204 {
                let mut answer = String::new();
                let _ = response.into_body().into_reader().read_to_string(&mut answer);
                return Err(format!("writer {url}: HTTP {status}: {}", answer.trim()));
            }
        }
        Ok(())
    }

    /// The union of what every writer's `path` (`/api/v1/labels` or a label's values) answers
    /// for `matchers` in `[mint, maxt]` to the tenants `tenant` names: its whole data, a
    /// superset of what it has not uploaded.
    fn strings(
        &self,
        path: &str,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
        tenant: Option<&str>,
    ) -> storage::Result<Vec<String>> {
        let mut out = Vec::new();
        for url in &self.urls {
            let endpoint = format!("{}{path}", url.trim_end_matches('/'));
            let mut request = self.agent.get(&endpoint);
            if let Some(tenant) = tenant {
                request = request.header(crate::tenant::HEADER.as_str(), tenant);
            }
            // An open end (the API's default range) is left out rather than sent as a time
            // far outside what a writer's API takes.
            for (param, t) in [("start", mint), ("end", maxt)] {
                if t.unsigned_abs() < 1 << 50 {
                    request = request.query(param, format!("{}", t as f64 / 1000.0));
                }
            }
            if !matchers.is_empty() {
                request = request.query("match[]", selector(matchers));
            }
            let mut response = request.call().map_err(|e| failed(url, e.to_string()))?;
            let body = response.body_mut().read_to_string().map_err(|e| failed(url, e.to_string()))?;
            let answer: serde_json::Value =
                serde_json::from_str(&body).map_err(|e| failed(url, e.to_string()))?;
            let Some(data) = answer.get("data").and_then(|d| d.as_array()) else {
                return Err(failed(url, format!("unexpected answer: {body}")));
            };
            out.extend(data.iter().filter_map(|v| v.as_str().map(str::to_string)));
        }
        Ok(out)
    }
}

/// A label name as the path segment of `/api/v1/label/<name>/values`: as it is when it is a
/// plain name, else in Prometheus' `U__` escaping (`_` as `__`, other characters as `_<hex>_`).
fn label_path(name: &str) -> String {
    if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !name.contains("__") {
        return name.to_string();
    }
    let mut out = String::from("U__");
    for c in name.chars() {
        match c {
            '_' => out.push_str("__"),
            c if c.is_ascii_alphanumeric() => out.push(c),
            c => out.push_str(&format!("_{:x}_", c as u32)),
        }
    }
    out
}

/// `matchers` as a PromQL selector, for a writer's `match[]`.
fn selector(matchers: &[Matcher]) -> String {
    let quote = |s: &str| serde_json::Value::String(s.to_string()).to_string();
    let plain = |s: &str| {
        let mut c = s.chars();
        c.next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
            && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    let parts: Vec<String> = matchers
        .iter()
        .map(|m| {
            let op = match m.op {
                storage::MatchOp::Equal => "=",
                storage::MatchOp::NotEqual => "!=",
                storage::MatchOp::Regex => "=~",
                storage::MatchOp::NotRegex => "!~",
            };
            let name = if plain(&m.name) { m.name.clone() } else { quote(&m.name) };
            format!("{name}{op}{}", quote(&m.value))
        })
        .collect();
    format!("{{{}}}", parts.join(","))
}

/// A writer that could not be read: transient, so the query is answered with 503.
fn failed(url: &str, why: String) -> storage::Error {
    storage::Error::io(format!("reading recent data from writer {url}"), std::io::Error::other(why))
}

/// The bucket's view with the writers' recent data merged in: the `Querier` of one query on a
/// query node. Both sides are one scope's view: `bucket` scoped here, the writers by the
/// `X-Scope-OrgID` header sent along (`tenant`), so series merge by the labels they show.
pub struct WithWriters<'a, Q> {
    bucket: Q,
    writers: &'a Writers,
    records: String,
    tenant: Option<String>,
    read: Mutex<FromWriters>,
}

/// What the writers answered during one query.
#[derive(Default)]
struct FromWriters {
    /// Ids given to series no bucket file holds in the range selected.
    ids: HashMap<Labels, SeriesId>,
    /// The same ids, to tell them apart.
    writer_only: HashSet<SeriesId>,
    /// Each series' samples and histograms from writers, by the id the query knows it by.
    data: HashMap<SeriesId, (Vec<Sample>, Vec<HistogramSample>)>,
}

impl<'a, Q: Querier> WithWriters<'a, Q> {
    /// The query view of `bucket` (a query node's snapshot, which holds `records`, as the
    /// tenants of `tenant` see it) and `writers`.
    pub fn new(
        bucket: Q,
        records: &[(u64, u64)],
        writers: &'a Writers,
        tenant: Option<String>,
    ) -> WithWriters<'a, Q> {
        WithWriters {
            bucket,
            writers,
            records: records_header(records),
            tenant,
            read: Mutex::new(FromWriters::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FromWriters> {
        // Nothing panics while holding it; if something did, what it holds is still whole.
        self.read.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn writer_only(&self, id: SeriesId) -> bool {
        self.lock().writer_only.contains(&id)
    }

    fn has_writer_data(&self, id: SeriesId) -> bool {
        self.lock().data.contains_key(&id)
    }

    /// Appends to `out` what `bucket` reads of series `id` (unless only writers hold it) with
    /// what the writers answered of it in `[mint, maxt]` (`part` of their data) merged in.
    #[allow(clippy::too_many_arguments)]
    fn merged<T: Clone>(
        &self,
        id: SeriesId,
        out: &mut Vec<T>,
        part: impl Fn(&(Vec<Sample>, Vec<HistogramSample>)) -> &Vec<T>,
        t: impl Fn(&T) -> i64,
        mint: i64,
        maxt: i64,
        bucket: impl FnOnce(&mut Vec<T>) -> storage::Result<()>,
    ) -> storage::Result<()> {
        let from = out.len();
        let (recent, writer_only) = {
            let read = self.lock();
            let recent = read.data.get(&id).map(|d| {
                part(d).iter().filter(|x| (mint..=maxt).contains(&t(x))).cloned().collect::<Vec<T>>()
            });
            (recent, read.writer_only.contains(&id))
        };
        if !writer_only {
            bucket(out)?;
        }
        if let Some(recent) = recent {
            merge_into(out, from, recent, t);
        }
        Ok(())
    }
}

/// Merges `newer` into `out[from..]` (both ascending by time): one sample per timestamp,
/// `newer`'s where both have one.
fn merge_into<T: Clone>(out: &mut Vec<T>, from: usize, newer: Vec<T>, t: impl Fn(&T) -> i64) {
    if newer.is_empty() {
        return;
    }
    let older = out.split_off(from);
    let (mut i, mut j) = (0, 0);
    while i < older.len() || j < newer.len() {
        match (older.get(i), newer.get(j)) {
            (Some(a), Some(b)) if t(a) < t(b) => {
                out.push(a.clone());
                i += 1;
            }
            (Some(a), Some(b)) => {
                if t(a) == t(b) {
                    i += 1;
                }
                out.push(b.clone());
                j += 1;
            }
            (Some(a), None) => {
                out.push(a.clone());
                i += 1;
            }
            (None, Some(b)) => {
                out.push(b.clone());
                j += 1;
            }
            (None, None) => break,
        }
    }
}

impl<Q: Querier> Querier for WithWriters<'_, Q> {
    fn select(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> storage::Result<Vec<SeriesRef>> {
        let mut selected = self.bucket.select(matchers, mint, maxt)?;
        let recent = self.writers.read(matchers, mint, maxt, &self.records, self.tenant.as_deref())?;
        if recent.is_empty() {
            return Ok(selected);
        }
        let known = selected.len();
        let mut read = self.lock();
        for s in recent {
            if s.samples.is_empty() && s.histograms.is_empty() {
                continue;
            }
            let id = match selected[..known].binary_search_by(|r| r.labels.cmp(&s.labels)) {
                Ok(i) => selected[i].id,
                Err(_) => {
                    let next = WRITER_ONLY_IDS - read.ids.len() as SeriesId;
                    let id = *read.ids.entry(s.labels.clone()).or_insert(next);
                    read.writer_only.insert(id);
                    if !selected[known..].iter().any(|r| r.id == id) {
                        selected.push(SeriesRef { id, labels: s.labels.clone() });
                    }
                    id
                }
            };
            let (samples, histograms) = read.data.entry(id).or_default();
            merge_into(samples, 0, s.samples, |s| s.t);
            merge_into(histograms, 0, s.histograms, |h| h.t);
        }
        selected.sort_by(|a, b| a.labels.cmp(&b.labels));
        Ok(selected)
    }

    fn selects_ahead(&self) -> bool {
        self.bucket.selects_ahead()
    }

    fn prepare(&self, selections: &[(&[Matcher], i64, i64)]) -> storage::Result<()> {
        self.bucket.prepare(selections)
    }

    fn samples(
        &self,
        series: &SeriesRef,
        mint: i64,
        maxt: i64,
        out: &mut Vec<Sample>,
    ) -> storage::Result<()> {
        self.samples_scanned(series, mint, maxt, out, &mut ScanStats::default())
    }

    fn samples_scanned(
        &self,
        series: &SeriesRef,
        mint: i64,
        maxt: i64,
        out: &mut Vec<Sample>,
        stats: &mut ScanStats,
    ) -> storage::Result<()> {
        self.merged(
            series.id,
            out,
            |d| &d.0,
            |s| s.t,
            mint,
            maxt,
            |out| self.bucket.samples_scanned(series, mint, maxt, out, stats),
        )
    }

    fn samples_pruned(
        &self,
        series: &SeriesRef,
        mint: i64,
        maxt: i64,
        may_keep: &dyn Fn(f64, f64) -> bool,
        out: &mut Vec<Sample>,
        stats: &mut ScanStats,
    ) -> storage::Result<()> {
        match self.has_writer_data(series.id) {
            true => self.samples_scanned(series, mint, maxt, out, stats),
            false => self.bucket.samples_pruned(series, mint, maxt, may_keep, out, stats),
        }
    }

    fn samples_latest(
        &self,
        series: &SeriesRef,
        mint: i64,
        maxt: i64,
        out: &mut Vec<Sample>,
        stats: &mut ScanStats,
    ) -> storage::Result<()> {
        match self.has_writer_data(series.id) {
            true => self.samples_scanned(series, mint, maxt, out, stats),
            false => self.bucket.samples_latest(series, mint, maxt, out, stats),
        }
    }

    fn histograms(
        &self,
        series: &SeriesRef,
        mint: i64,
        maxt: i64,
        out: &mut Vec<HistogramSample>,
    ) -> storage::Result<()> {
        self.merged(
            series.id,
            out,
            |d| &d.1,
            |h| h.t,
            mint,
            maxt,
            |out| self.bucket.histograms(series, mint, maxt, out),
        )
    }

    fn start_timestamps(
        &self,
        series: &SeriesRef,
        mint: i64,
        maxt: i64,
        out: &mut Vec<StartTimestamp>,
    ) -> storage::Result<()> {
        // Remote read carries no start timestamps: a writer's recent samples have none here.
        if self.writer_only(series.id) {
            return Ok(());
        }
        self.bucket.start_timestamps(series, mint, maxt, out)
    }

    fn window_aggregates(
        &self,
        series: &SeriesRef,
        windows: &[(i64, i64)],
        need: Need,
        out: &mut Vec<WindowAgg>,
        stats: &mut ScanStats,
    ) -> storage::Result<bool> {
        match self.has_writer_data(series.id) {
            true => Ok(false),
            false => self.bucket.window_aggregates(series, windows, need, out, stats),
        }
    }

    fn group_extremes(
        &self,
        group: &[SeriesRef],
        windows: &[(i64, i64)],
        which: Extreme,
        out: &mut Vec<Option<f64>>,
        stats: &mut ScanStats,
    ) -> storage::Result<bool> {
        match group.iter().any(|s| self.has_writer_data(s.id)) {
            true => Ok(false),
            false => self.bucket.group_extremes(group, windows, which, out, stats),
        }
    }

    fn label_names(&self, matchers: &[Matcher], mint: i64, maxt: i64) -> storage::Result<Vec<String>> {
        let mut names = self.bucket.label_names(matchers, mint, maxt)?;
        names.extend(self.writers.strings("/api/v1/labels", matchers, mint, maxt, self.tenant.as_deref())?);
        names.sort_unstable();
        names.dedup();
        Ok(names)
    }

    fn label_values(
        &self,
        name: &str,
        matchers: &[Matcher],
        mint: i64,
        maxt: i64,
    ) -> storage::Result<Vec<String>> {
        let mut values = self.bucket.label_values(name, matchers, mint, maxt)?;
        let path = format!("/api/v1/label/{}/values", label_path(name));
        values.extend(self.writers.strings(&path, matchers, mint, maxt, self.tenant.as_deref())?);
        values.sort_unstable();
        values.dedup();
        Ok(values)
    }
}

/// The `Querier` of one query: the database's snapshot as `scope` sees it, with the writers'
/// recent data merged in on a query node that has writers; and what it reads from the bucket.
pub fn querier<'a>(
    db: &storage::Db,
    writers: Option<&'a Arc<Writers>>,
    scope: &Scope,
) -> (Box<dyn Querier + 'a>, storage::BucketReads) {
    // The records before the snapshot: a refresh in between then only gives the snapshot
    // newer files, whose data the writers also send (the merge keeps one copy). The other way
    // round, writers would leave out files the snapshot does not hold yet.
    let records = writers.is_some().then(|| db.followed_records());
    let snapshot = db.snapshot();
    let reads = snapshot.bucket_reads();
    let scoped = Scoped::new(snapshot, scope.clone());
    match (writers, records) {
        (Some(w), Some(records)) if db.reads_only() => {
            (Box::new(WithWriters::new(scoped, &records, w, scope.header_value())), reads)
        }
        _ => (Box::new(scoped), reads),
    }
}

#[cfg(test)]
mod tests {
    use super::merge_into;
    use storage::Sample;

    #[test]
    fn merging_keeps_one_sample_per_timestamp_the_newer_one() {
        let mut out = vec![Sample::new(0, 9.0), Sample::new(1, 1.0), Sample::new(3, 3.0)];
        merge_into(
            &mut out,
            1,
            vec![Sample::new(2, 20.0), Sample::new(3, 30.0), Sample::new(4, 40.0)],
            |s| s.t,
        );
        let got: Vec<(i64, f64)> = out.iter().map(|s| (s.t, s.v)).collect();
        assert_eq!(got, [(0, 9.0), (1, 1.0), (2, 20.0), (3, 30.0), (4, 40.0)]);
    }
}

//! The metadata endpoints: which series, label names and label values exist
//! (`/api/v1/series`, `/api/v1/labels`, `/api/v1/label/<name>/values`), metric metadata
//! (`/api/v1/metadata`), exemplars (`/api/v1/query_exemplars`) and the cardinality statistics of
//! `/api/v1/status/tsdb`.
//!
//! Grafana's metric and label browsers and its template variables call the first three on every
//! dashboard load, so they are answered from the series index without reading samples: storage's
//! [`Querier::label_names`] and [`Querier::label_values`] test only as many series for data in
//! the time range as the answer needs. Semantics follow Prometheus 3 (`web/api/v1/api.go`):
//! several `match[]` are a union; `start`/`end` keep series with a sample in the range
//! (default: all of time); `limit` truncates the sorted answer and adds the warning
//! [`encode::TRUNCATED`]; an empty answer is `[]`.

mod encode;
mod label_name;
mod tsdb_status;

#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::Router;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use promql::parser::ast::Expr;
use promql::parser::{ParseOptions, strings::go_quote};
use storage::{Labels, Matcher};

use crate::api::params::Params;
use crate::api::respond::{Success, json_bytes};
use crate::api::{blocking, db};
use crate::error::ApiError;
use crate::state::AppState;
use crate::tenant::Scope;

/// The routes of this module. GET everywhere, form POST where Prometheus accepts it too
/// (series, labels, exemplars; not label values, metadata or TSDB status).
pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/v1/series", get(series).post(series))
        .route("/api/v1/labels", get(label_names).post(label_names))
        .route("/api/v1/label/{name}/values", get(label_values))
        .route("/api/v1/metadata", get(metadata))
        .route("/api/v1/query_exemplars", get(query_exemplars).post(query_exemplars))
        .route("/api/v1/status/tsdb", get(tsdb_status::tsdb_status))
}

/// Keeps the first `limit` entries; true if some were dropped.
fn truncate<T>(list: &mut Vec<T>, limit: Option<usize>) -> bool {
    match limit {
        Some(limit) if list.len() > limit => {
            list.truncate(limit);
            true
        }
        _ => false,
    }
}

/// The warnings of an answer that `limit` may have cut short.
fn warnings(truncated: bool) -> &'static [&'static str] {
    if truncated { &[encode::TRUNCATED] } else { &[] }
}

/// `GET|POST /api/v1/series`: the label sets of the series selected by the (required) `match[]`
/// selectors that have data in `[start, end]`, sorted.
async fn series(
    State(state): State<Arc<AppState>>,
    scope: Scope,
    params: Params,
) -> Result<Response, ApiError> {
    if params.all("match[]").is_empty() {
        return Err(ApiError::BadData("no match[] parameter provided".into()));
    }
    let limit = params.limit()?;
    let (start, end) = params.time_range()?;
    let sets = params.matcher_sets(true)?;
    let db = db(&state)?;
    let writers = state.writers().cloned();
    let (list, truncated) = blocking(move || {
        // On a query node with writers, their series not uploaded yet too.
        let (querier, _) = crate::query_node::querier(&db, writers.as_ref(), &scope);
        let mut list: Vec<Labels> = Vec::new();
        for set in &sets {
            list.extend(querier.select(set, start, end)?.into_iter().map(|s| s.labels));
        }
        if sets.len() > 1 {
            list.sort_unstable();
            list.dedup();
        }
        let truncated = truncate(&mut list, limit);
        Ok((list, truncated))
    })
    .await?;
    Ok(json_bytes(encode::series(&list, warnings(truncated))))
}

/// Runs `lookup` once per `match[]` selector (once with no matchers if there is none) and
/// merges the sorted answers.
fn union(
    sets: &[Vec<Matcher>],
    mut lookup: impl FnMut(&[Matcher]) -> storage::Result<Vec<String>>,
) -> Result<Vec<String>, ApiError> {
    match sets {
        [] => Ok(lookup(&[])?),
        [one] => Ok(lookup(one)?),
        many => {
            let mut all = BTreeSet::new();
            for set in many {
                all.extend(lookup(set)?);
            }
            Ok(all.into_iter().collect())
        }
    }
}

/// `GET|POST /api/v1/labels`: label names of the series with data in `[start, end]`, of those
/// the optional `match[]` selectors select.
async fn label_names(
    State(state): State<Arc<AppState>>,
    scope: Scope,
    params: Params,
) -> Result<Response, ApiError> {
    let limit = params.limit()?;
    let (start, end) = params.time_range()?;
    let sets = params.matcher_sets(false)?;
    let db = db(&state)?;
    let writers = state.writers().cloned();
    let body = blocking(move || {
        let (querier, _) = crate::query_node::querier(&db, writers.as_ref(), &scope);
        let mut names = union(&sets, |m| querier.label_names(m, start, end))?;
        let truncated = truncate(&mut names, limit);
        Ok(encode::strings(&names, warnings(truncated)))
    })
    .await?;
    Ok(json_bytes(body))
}

/// `GET /api/v1/label/<name>/values`: the values of one label over the series with data in
/// `[start, end]`, of those the optional `match[]` selectors select. `<name>` may be
/// `U__`-escaped.
async fn label_values(
    State(state): State<Arc<AppState>>,
    scope: Scope,
    name: Result<Path<String>, PathRejection>,
    uri: Uri,
    params: Params,
) -> Result<Response, ApiError> {
    let name = match name {
        Ok(Path(segment)) => label_name::unescape(&segment),
        // Not UTF-8 after percent-decoding: name it as it was sent.
        Err(_) => {
            let raw = uri.path().trim_start_matches("/api/v1/label/").trim_end_matches("/values");
            return Err(ApiError::BadData(format!("invalid label name: {}", go_quote(raw))));
        }
    };
    if !label_name::is_valid(&name) {
        return Err(ApiError::BadData(format!("invalid label name: {}", go_quote(&name))));
    }
    let limit = params.limit()?;
    let (start, end) = params.time_range()?;
    let sets = params.matcher_sets(false)?;
    let db = db(&state)?;
    let writers = state.writers().cloned();
    // Encoded on the blocking thread too: a high-cardinality label has 100k values or more,
    // whose strings are then also freed by the thread that allocated them (cheaper).
    let body = blocking(move || {
        let (querier, _) = crate::query_node::querier(&db, writers.as_ref(), &scope);
        let mut values = union(&sets, |m| querier.label_values(&name, m, start, end))?;
        let truncated = truncate(&mut values, limit);
        Ok(encode::strings(&values, warnings(truncated)))
    })
    .await?;
    Ok(json_bytes(body))
}

/// An integer parameter of `/api/v1/metadata`, parsed like Go's `strconv.Atoi`; `default` when
/// absent.
fn metadata_int(params: &Params, name: &str, default: i64) -> Result<i64, ApiError> {
    match params.get(name) {
        None => Ok(default),
        Some(s) => s.parse().map_err(|_| ApiError::BadData(format!("{name} must be a number"))),
    }
}

/// `GET /api/v1/metadata`: type, help and unit per metric name, as received through remote
/// write (strata scrapes no targets). `metric` picks one name; `limit` caps the number of names
/// (negative: no cap; 0 gives `{}`, as in Prometheus); `limit_per_metric` caps the entries per
/// name, and strata keeps one entry per name.
async fn metadata(
    State(state): State<Arc<AppState>>,
    scope: Scope,
    params: Params,
) -> Result<Response, ApiError> {
    let limit = metadata_int(&params, "limit", -1)?;
    // Validated only: strata keeps one entry per name, which any cap of 1 or more keeps, and
    // Prometheus ignores a cap of 0 or less.
    metadata_int(&params, "limit_per_metric", -1)?;
    let metric = params.get("metric");
    let mut data = serde_json::Map::new();
    for m in state.metadata().all(&scope.tenants()) {
        if metric.is_some_and(|name| name != m.metric_family_name) {
            continue;
        }
        let entry = serde_json::json!({
            "type": m.metric_type.as_str(),
            "help": m.help,
            "unit": m.unit,
        });
        // A federated read's tenants may describe one metric differently: each description once.
        if let Some(serde_json::Value::Array(known)) = data.get_mut(&m.metric_family_name) {
            if !known.contains(&entry) {
                known.push(entry);
            }
            continue;
        }
        if usize::try_from(limit).is_ok_and(|limit| data.len() >= limit) {
            break;
        }
        data.insert(m.metric_family_name, serde_json::Value::Array(vec![entry]));
    }
    Ok(Success::new(serde_json::Value::Object(data)).into_response())
}

/// True if the expression reads any series (Prometheus' `parser.ExtractSelectors` is not empty).
fn has_selector(e: &Expr) -> bool {
    match e {
        Expr::Number(_) | Expr::String(_) => false,
        Expr::Vector(_) | Expr::Matrix(_) => true,
        Expr::Subquery(s) => has_selector(&s.expr),
        Expr::Paren(p) => has_selector(&p.expr),
        Expr::Unary(u) => has_selector(&u.expr),
        Expr::Binary(b) => has_selector(&b.lhs) || has_selector(&b.rhs),
        Expr::Aggregate(a) => has_selector(&a.expr) || a.param.as_ref().is_some_and(has_selector),
        Expr::Call(c) => c.args.iter().any(has_selector),
    }
}

/// `GET|POST /api/v1/query_exemplars`: parameters are validated exactly as Prometheus does
/// (`start`, `end`, `end` not before `start`, `query` parses). strata stores no exemplars
/// yet, so a query that reads series gets `[]`; one that reads none gets 204 No Content,
/// as from Prometheus.
async fn query_exemplars(params: Params) -> Result<Response, ApiError> {
    let (start, end) = params.time_range()?;
    if end < start {
        return Err(ApiError::BadData("end timestamp must not be before start timestamp".into()));
    }
    let query = params.get("query").unwrap_or_default();
    let expr = promql::parser::parse(query, &ParseOptions::default())
        .map_err(|e| ApiError::BadData(e.render(query)))?;
    if !has_selector(&expr) {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    Ok(Success::new(serde_json::Value::Array(Vec::new())).into_response())
}

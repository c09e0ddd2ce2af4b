//! `POST /write` (InfluxDB 1.x) and `POST /api/v2/write` (InfluxDB 2.x): Influx line protocol.
//!
//! Parameters: 1.x `db`, `rp`, `precision` (`ns`, `u`, `ms`, `s`, `m`, `h`; default `ns`),
//! `u`/`p` (credentials, checked by `crate::auth` before this handler runs); 2.x `bucket`, `org`,
//! `precision` (`ns`, `us`, `ms`, `s`). strata keeps one data store, so the database or bucket
//! only joins the list `SHOW DATABASES` prints. Bodies may be gzip-compressed
//! (`Content-Encoding: gzip`, as Telegraf sends them).
//!
//! Answers follow InfluxDB 1.x, in its `{"error":"..."}` dialect:
//!
//! | outcome | status |
//! |---|---|
//! | every line stored | 204 |
//! | some lines unparsable | 400 `partial write: unable to parse line N: ... dropped=K`; the good lines stored |
//! | no line parsable | 400 `unable to parse line N: ...`, nothing stored |
//! | samples older than retention keeps, or too far in the future | 400 `partial write: ...` naming them; the rest stored |
//! | new series over a cardinality limit (`--series-max`, ...) | 400 `partial write: ...` naming the limit, the metric and the line of the first refused series; the rest stored |
//! | no `db` (1.x) or `bucket` (2.x), or an empty one | 400 `database is required` / `bucket is required`, nothing read |
//! | unknown `precision` | 400 |
//! | an invalid `X-Scope-OrgID` (tenant) header, or one naming several tenants | 400, nothing read |
//! | unknown Content-Encoding | 415 |
//! | body over `--write-body-bytes-max`, or decompressing past `--write-decoded-bytes-max` | 413 |
//! | database opening, storage I/O failure, shutdown | 503 with `Retry-After` |

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{RawQuery, State};
use axum::http::header::CONTENT_ENCODING;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use remote::line::{self, LineError, Precision};

use super::{
    blocking, body_or_error, count_rejection, decode_error, finish_store, guard_decoder, header,
    store_deferred,
};
use crate::error::ApiError;
use crate::influx::version_headers;
use crate::metrics::Protocol;
use crate::state::AppState;
use crate::tenant::Scope;

/// How many unparsable lines an error message lists; the rest are counted. A garbage body
/// would otherwise produce an answer as large as itself.
const LISTED_LINE_ERRORS_MAX: usize = 10;

/// Which InfluxDB API a request came through; decides the parameter names and precisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    V1,
    V2,
}

/// `POST /write`.
pub async fn write_v1(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    write(&state, Api::V1, query, &headers, body).await
}

/// `POST /api/v2/write`.
pub async fn write_v2(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    write(&state, Api::V2, query, &headers, body).await
}

async fn write(
    state: &Arc<AppState>,
    api: Api,
    query: Option<String>,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let mut response = match accept(state, api, query, headers, body).await {
        Ok(None) => StatusCode::NO_CONTENT.into_response(),
        Ok(Some(partial)) => partial.into_influx_response(),
        Err(err) => count_rejection(state, Protocol::Influx, err).into_influx_response(),
    };
    response.headers_mut().extend(version_headers());
    response
}

/// Parses and stores one request. `Err` means nothing was stored; `Ok(Some(_))` is the 400 that
/// reports lines or samples that were not stored while the rest was.
async fn accept(
    state: &Arc<AppState>,
    api: Api,
    query: Option<String>,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Option<ApiError>, ApiError> {
    let params: Vec<(String, String)> = match query.as_deref() {
        Some(query) => serde_urlencoded::from_str(query)
            .map_err(|e| ApiError::BadData(format!("invalid query string: {e}")))?,
        None => Vec::new(),
    };
    let param = |name: &str| params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    // InfluxDB refuses a write that names no database before it reads anything else (1.x:
    // `database is required`; 2.x: `bucket is required`). strata keeps one store, so any name
    // will do, but a client that sends none is misconfigured for the InfluxDB it thinks it
    // talks to.
    let database = match api {
        Api::V1 => param("db").filter(|d| !d.is_empty()).ok_or("database is required"),
        Api::V2 => param("bucket").filter(|d| !d.is_empty()).ok_or("bucket is required"),
    };
    let database = database.map_err(|message| ApiError::BadData(message.into()))?;
    let precision = match (api, param("precision")) {
        (_, None | Some("")) => Precision::Ns,
        (Api::V1, Some(p)) => Precision::parse_v1(p).map_err(decode_error)?,
        (Api::V2, Some(p)) => Precision::parse_v2(p).map_err(decode_error)?,
    };
    let tenant = Scope::for_write(headers)?;
    state.databases().insert(tenant.as_deref(), database);

    let encoding = header(headers, CONTENT_ENCODING).map(str::to_owned);
    let limits = state.limits().clone();
    let body = body_or_error(body, &limits)?;
    let now_ns = now_ns();
    let state = Arc::clone(state);
    let slot = state.write_admission().decode_slot().await;
    // Parsed and stored on one thread: the batch borrows the (decompressed) body.
    let (outcome, bad_lines, errors, refused_line) = blocking(move || {
        let text =
            guard_decoder(|| line::decode_body(encoding.as_deref(), &body, &limits).map_err(decode_error))?;
        let mut parsed = guard_decoder(|| Ok(line::parse_ref(&text, precision, now_ns, &limits)))?;

        let metrics = state.metrics();
        metrics.count_samples_received(Protocol::Influx, parsed.fields);
        metrics.count_lines_rejected(parsed.bad_lines);
        metrics.count_string_fields_skipped(parsed.skipped_fields);

        if parsed.points == 0 && parsed.bad_lines > 0 {
            // Nothing parsed: InfluxDB answers the parse errors alone, without "partial write".
            return Err(ApiError::BadData(describe_line_errors(&parsed.errors, parsed.bad_lines)));
        }
        let mut batch = guard_decoder(|| Ok(parsed.batch()))?;
        let pending = store_deferred(&state, &mut batch, tenant.as_deref(), &body, &[])?;
        let refused_line = pending
            .outcome()
            .and_then(|o| o.first_rejected_series.as_ref())
            .and_then(|r| line_of_series(&text, &r.labels, tenant.as_deref(), precision, now_ns, &limits));
        // The request's memory goes before the wait for the fsync, the batch first (it borrows
        // the others).
        drop(batch);
        let (bad_lines, errors) = (parsed.bad_lines, std::mem::take(&mut parsed.errors));
        drop(parsed);
        drop(text);
        drop(slot);
        let outcome = finish_store(pending)?;
        Ok((outcome, bad_lines, errors, refused_line))
    })
    .await?;

    let rejected = super::rejected_samples_message(&outcome);
    if bad_lines == 0 && rejected.is_none() {
        return Ok(None);
    }
    let mut reasons = Vec::new();
    if bad_lines > 0 {
        reasons.push(describe_line_errors(&errors, bad_lines));
    }
    reasons.extend(rejected);
    if outcome.outside_retention > 0
        && let Some((_, sample)) = &outcome.first_rejected
        && let Some(hint) = precision_hint(api, precision, sample.t)
    {
        reasons.push(hint);
    }
    if let Some(line) = refused_line {
        reasons.push(format!("first refused series at line {line}"));
    }
    // InfluxDB's `dropped` counts points; here it is the unparsable lines plus the samples
    // storage refused, everything of the request that was not stored.
    let dropped = bad_lines + outcome.rejected();
    Ok(Some(ApiError::BadData(format!("partial write: {} dropped={dropped}", reasons.join("\n")))))
}

/// For a sample refused as older than retention whose timestamp lies before 2001: the
/// `precision` that would have read the number as written as a time between 2001 and 2286, if
/// another does. The usual mistake is Unix seconds (or milliseconds) under the default
/// nanosecond precision, which puts every point in January 1970.
fn precision_hint(api: Api, precision: Precision, t_ms: i64) -> Option<String> {
    const PLAUSIBLE_MS: std::ops::Range<f64> = 1e12..1e13;
    if t_ms as f64 >= PLAUSIBLE_MS.start {
        return None;
    }
    let ms_per_unit = |p: Precision| match p {
        Precision::Ns => 1e-6,
        Precision::Us => 1e-3,
        Precision::Ms => 1.0,
        Precision::S => 1e3,
        Precision::M => 60e3,
        Precision::H => 3600e3,
    };
    // The number as the line wrote it (to within the rounding to milliseconds).
    let written = t_ms as f64 / ms_per_unit(precision);
    let candidates = [Precision::S, Precision::Ms, Precision::Us, Precision::Ns];
    let fits = candidates
        .into_iter()
        .find(|&p| p != precision && PLAUSIBLE_MS.contains(&(written * ms_per_unit(p))))?;
    let name = match (api, fits) {
        (_, Precision::S) => "s",
        (_, Precision::Ms) => "ms",
        (Api::V1, Precision::Us) => "u",
        (_, Precision::Us) => "us",
        _ => "ns",
    };
    Some(format!(
        "hint: the first refused timestamp reads as {} with precision={}; if the timestamps are in another unit, \
         say so with precision={name} in the URL",
        super::rfc3339(t_ms),
        match (api, precision) {
            (_, Precision::Ns) => "ns",
            (_, Precision::Ms) => "ms",
            (_, Precision::S) => "s",
            (Api::V1, Precision::Us) => "u",
            (_, Precision::Us) => "us",
            (_, Precision::M) => "m",
            (_, Precision::H) => "h",
        }
    ))
}

/// InfluxDB's wording, one line per unparsable line: `unable to parse line N: reason`. At most
/// [`LISTED_LINE_ERRORS_MAX`] are listed; `bad_lines` counts them all.
fn describe_line_errors(errors: &[LineError], bad_lines: u64) -> String {
    let mut text = String::new();
    let listed = errors.iter().take(LISTED_LINE_ERRORS_MAX);
    for (i, err) in listed.enumerate() {
        if i > 0 {
            text.push('\n');
        }
        let _ = write!(text, "unable to parse line {}: {}", err.line, err.message);
    }
    let shown = errors.len().min(LISTED_LINE_ERRORS_MAX) as u64;
    if bad_lines > shown {
        let _ = write!(text, "\n(and {} more unparsable lines)", bad_lines - shown);
    }
    text
}

/// The number (from 1) of the first line of `text` that writes to the series `labels`: the line
/// a cardinality refusal names. Only called for a refused series, so re-parsing lines one by one
/// (until the first match) costs nothing on the normal path.
fn line_of_series(
    text: &[u8],
    labels: &storage::Labels,
    tenant: Option<&str>,
    precision: Precision,
    now_ns: i64,
    limits: &remote::Limits,
) -> Option<usize> {
    text.split(|&b| b == b'\n').enumerate().find_map(|(i, line)| {
        let parsed = line::parse_ref(line, precision, now_ns, limits);
        let mut batch = parsed.batch();
        batch.set_label(storage::TENANT_LABEL, tenant);
        batch.iter().any(|(series, _)| series == *labels).then_some(i + 1)
    })
}

/// The wall clock in nanoseconds since the epoch: the timestamp of lines that carry none.
fn now_ns() -> i64 {
    let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since_epoch.as_nanos()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(line: usize, message: &str) -> LineError {
        LineError { line, message: message.into() }
    }

    #[test]
    fn the_line_of_a_refused_series_is_found() {
        let text = b"cpu,host=a usage=1 1\n\n# comment\ncpu,host=b usage=2,idle=3 1\ncpu,host=b usage=4 2\n";
        let labels = storage::Labels::from_pairs(&[("__name__", "cpu_idle"), ("host", "b")]);
        let limits = remote::Limits::default();
        assert_eq!(line_of_series(text, &labels, None, Precision::Ns, 0, &limits), Some(4));
        let absent = storage::Labels::from_pairs(&[("__name__", "cpu_idle"), ("host", "c")]);
        assert_eq!(line_of_series(text, &absent, None, Precision::Ns, 0, &limits), None);
    }

    #[test]
    fn line_errors_use_influx_wording_and_are_capped() {
        let text = describe_line_errors(&[error(2, "missing fields"), error(5, "invalid number")], 2);
        assert_eq!(text, "unable to parse line 2: missing fields\nunable to parse line 5: invalid number");
        // The parser keeps only the first errors; the count covers all of them.
        let kept: Vec<LineError> = (1..=25).map(|n| error(n, "bad")).collect();
        let text = describe_line_errors(&kept, 1000);
        assert_eq!(text.lines().count(), LISTED_LINE_ERRORS_MAX + 1);
        assert!(text.ends_with("(and 990 more unparsable lines)"), "{text}");
    }
}

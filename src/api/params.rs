//! Request parameters as Prometheus reads them: the URL query string merged with an
//! `application/x-www-form-urlencoded` body, times as unix seconds or RFC 3339, durations as
//! seconds or Prometheus duration strings, and `match[]` series selectors.
//!
//! Prometheus handlers call Go's `r.ParseForm()` and `r.FormValue(name)`, so every endpoint
//! accepts its parameters in either place, and a value in the body wins over the same name in
//! the URL. Grafana relies on this: it POSTs forms and falls back to GET on a 400 or 405.
//! [`Params`] reproduces that, and the parsing helpers reproduce Prometheus' error messages
//! (`invalid parameter "start": cannot parse "x" to a valid timestamp`), which clients show
//! to users as they are.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::Method;
use axum::http::header::CONTENT_TYPE;
use storage::Matcher;

use crate::error::ApiError;

/// Largest form body read for a query-style request. Prometheus has no explicit limit; long
/// `match[]` lists from dashboards with many variables stay far below this.
pub const FORM_BODY_MAX: usize = 8 << 20;

/// Earliest timestamp Prometheus' API accepts, in ms (its `minTime`, the formatted value of which
/// Grafana and promtool send as "all of time").
pub const MIN_TIME_MS: i64 = (i64::MIN / 1000 + 62_135_596_801) * 1000;
/// Latest timestamp Prometheus' API accepts, in ms (its `maxTime`).
pub const MAX_TIME_MS: i64 = (i64::MAX / 1000 - 62_135_596_801) * 1000 + 999;
/// `MIN_TIME_MS` as Prometheus formats it; clients send this string verbatim.
const MIN_TIME_FORMATTED: &str = "-292273086-05-16T16:47:06Z";
/// `MAX_TIME_MS` as Prometheus formats it.
const MAX_TIME_FORMATTED: &str = "292277025-08-18T07:12:54.999999999Z";

/// All parameters of one request, in arrival order: form body first, then the URL query, so
/// [`Params::get`] returns the body's value when both have one (Go's `FormValue`).
#[derive(Debug, Clone, Default)]
pub struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    /// Parameters from a URL query string and an optional form body.
    pub fn from_parts(query: Option<&str>, form: Option<&[u8]>) -> Result<Self, ApiError> {
        let mut pairs = Vec::new();
        if let Some(body) = form {
            let parsed: Vec<(String, String)> = serde_urlencoded::from_bytes(body)
                .map_err(|e| ApiError::BadData(format!("error parsing form body: {e}")))?;
            pairs.extend(parsed);
        }
        if let Some(query) = query {
            let parsed: Vec<(String, String)> = serde_urlencoded::from_str(query)
                .map_err(|e| ApiError::BadData(format!("error parsing query string: {e}")))?;
            pairs.extend(parsed);
        }
        Ok(Params { pairs })
    }

    /// The first value of `name` (the body's if it has one), or `None`. An empty value counts as
    /// absent, as with Go's `FormValue(name) == ""` checks in Prometheus.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).filter(|v| !v.is_empty())
    }

    /// Every value of `name`, e.g. the repeated `match[]`.
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.pairs.iter().filter(|(k, _)| k == name).map(|(_, v)| v.as_str()).collect()
    }

    /// The value of a required parameter.
    pub fn required(&self, name: &str) -> Result<&str, ApiError> {
        self.get(name).ok_or_else(|| ApiError::BadData(format!("invalid parameter \"{name}\": missing")))
    }

    /// A time parameter in ms, or `default` if absent.
    pub fn time_or(&self, name: &str, default: i64) -> Result<i64, ApiError> {
        match self.get(name) {
            None => Ok(default),
            Some(s) => parse_time(s).map_err(|e| invalid(name, &e)),
        }
    }

    /// A required time parameter in ms.
    pub fn time(&self, name: &str) -> Result<i64, ApiError> {
        let s = self.required(name)?;
        parse_time(s).map_err(|e| invalid(name, &e))
    }

    /// A duration parameter in ms, if present.
    pub fn duration(&self, name: &str) -> Result<Option<i64>, ApiError> {
        self.get(name).map(|s| parse_duration_ms(s).map_err(|e| invalid(name, &e))).transpose()
    }

    /// `start` and `end` of the metadata endpoints, defaulting to all of time. Unlike the query
    /// endpoints, Prometheus does not refuse `end` before `start` here: no series has data in such
    /// a range, so the answer is simply empty.
    pub fn time_range(&self) -> Result<(i64, i64), ApiError> {
        Ok((self.time_or("start", MIN_TIME_MS)?, self.time_or("end", MAX_TIME_MS)?))
    }

    /// The `limit` parameter: `None` if absent or 0 (no limit), an error if negative or not an
    /// integer, as Prometheus 3's `parseLimitParam`.
    pub fn limit(&self) -> Result<Option<usize>, ApiError> {
        let Some(s) = self.get("limit") else { return Ok(None) };
        let n: i64 = s.parse().map_err(|_| {
            ApiError::BadData(format!("invalid parameter \"limit\": cannot parse \"{s}\" to a valid limit"))
        })?;
        if n < 0 {
            return Err(ApiError::BadData("invalid parameter \"limit\": limit must be non-negative".into()));
        }
        Ok(usize::try_from(n).ok().filter(|n| *n > 0))
    }

    /// Each `match[]` selector parsed into its matchers. `required` makes an empty list an error
    /// (`/api/v1/series`, delete_series), as in Prometheus.
    pub fn matcher_sets(&self, required: bool) -> Result<Vec<Vec<Matcher>>, ApiError> {
        let raw = self.all("match[]");
        if required && raw.is_empty() {
            return Err(ApiError::BadData("no match[] parameter provided".into()));
        }
        let mut budget = storage::matcher::RegexBudget::default();
        raw.into_iter()
            .map(|selector| {
                let matchers = parse_matchers(selector)?;
                // One selector's regexes are bounded by the parser; all of them together here.
                for m in &matchers {
                    budget.charge(m).map_err(ApiError::BadData)?;
                }
                Ok(matchers)
            })
            .collect()
    }
}

/// Parses one series selector (`up{job="x"}`, `{__name__=~"a.*"}`) as Prometheus'
/// `parser.ParseMetricSelector`, rejecting selectors every series would match.
pub fn parse_matchers(selector: &str) -> Result<Vec<Matcher>, ApiError> {
    let matchers =
        promql::parser::parse_metric_selector(selector).map_err(|e| ApiError::BadData(e.render(selector)))?;
    if matchers.iter().all(|m| m.matches_empty()) {
        return Err(ApiError::BadData("match[] must contain at least one non-empty matcher".into()));
    }
    Ok(matchers)
}

fn invalid(name: &str, why: &str) -> ApiError {
    ApiError::BadData(format!("invalid parameter \"{name}\": {why}"))
}

/// Parses a timestamp as Prometheus' `parseTime`: float unix seconds (rounded to the
/// millisecond), RFC 3339 with optional fraction and offset, or the formatted min/max times.
pub fn parse_time(s: &str) -> Result<i64, String> {
    if let Some(secs) = go_parse_float(s)
        && !s.eq_ignore_ascii_case("nan")
        && !s.to_ascii_lowercase().contains("inf")
    {
        return seconds_to_ms(secs).ok_or_else(|| format!("cannot parse \"{s}\" to a valid timestamp"));
    }
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Ok(t.timestamp_millis());
    }
    match s {
        MIN_TIME_FORMATTED => Ok(MIN_TIME_MS),
        MAX_TIME_FORMATTED => Ok(MAX_TIME_MS),
        _ => Err(format!("cannot parse \"{s}\" to a valid timestamp")),
    }
}

/// A decimal float as Go's `strconv.ParseFloat` reads one: Rust's syntax, plus underscores
/// between digits (`1_700_000_000`, as in Go literals). Hexadecimal floats (`0x1p4`), which Go
/// also reads, are refused.
fn go_parse_float(s: &str) -> Option<f64> {
    if !s.contains('_') {
        return s.parse().ok();
    }
    // Go's `underscoreOK`: each underscore between two digits.
    let b = s.as_bytes();
    let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    let ok = b.iter().enumerate().all(|(i, &c)| c != b'_' || (i > 0 && digit(i - 1) && digit(i + 1)));
    if !ok {
        return None;
    }
    s.replace('_', "").parse().ok()
}

/// Float seconds to ms the way Prometheus rounds them: the fraction to whole milliseconds.
fn seconds_to_ms(secs: f64) -> Option<i64> {
    if !secs.is_finite() {
        return None;
    }
    let whole = secs.trunc();
    let frac_ms = ((secs - whole) * 1000.0).round();
    let ms = whole * 1000.0 + frac_ms;
    // Beyond this Go's time arithmetic wraps; Prometheus clamps nothing either, so refuse.
    if ms >= i64::MIN as f64 && ms <= i64::MAX as f64 { Some(ms as i64) } else { None }
}

/// Parses a duration as Prometheus' API `parseDuration`: float seconds or a duration string
/// (`5m`, `1h30m`), in ms.
pub fn parse_duration_ms(s: &str) -> Result<i64, String> {
    if let Some(secs) = go_parse_float(s) {
        if !secs.is_finite() || (secs * 1e9).abs() >= i64::MAX as f64 {
            return Err(format!("cannot parse \"{s}\" to a valid duration. It overflows int64"));
        }
        return Ok((secs * 1000.0).round() as i64);
    }
    promql::parser::duration::parse_duration_ms(s)
        .map_err(|_| format!("cannot parse \"{s}\" to a valid duration"))
}

/// axum extractor for [`Params`]: reads the URL query and, for a POST with a form content type,
/// the body. Must be a handler's last extractor, since it consumes the body.
impl<S: Send + Sync> FromRequest<S> for Params {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let query = req.uri().query().map(str::to_owned);
        let is_form = req.method() == Method::POST
            && req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|ct| {
                ct.trim_start().to_ascii_lowercase().starts_with("application/x-www-form-urlencoded")
            });
        let body = if is_form {
            // The router's `DefaultBodyLimit` (FORM_BODY_MAX on the API routes) bounds this read.
            Some(
                Bytes::from_request(req, state)
                    .await
                    .map_err(|e| ApiError::BadData(format!("error reading form body: {e}")))?,
            )
        } else {
            None
        };
        Params::from_parts(query.as_deref(), body.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_as_prometheus() {
        assert_eq!(parse_time("4").unwrap(), 4000);
        assert_eq!(parse_time("1.5").unwrap(), 1500);
        assert_eq!(parse_time("1700000000.1234").unwrap(), 1_700_000_000_123);
        assert_eq!(parse_time("-1.5").unwrap(), -1500);
        assert_eq!(parse_time("2015-07-01T20:10:51.781Z").unwrap(), 1_435_781_451_781);
        assert_eq!(parse_time("2015-07-01T22:10:51.781+02:00").unwrap(), 1_435_781_451_781);
        assert_eq!(parse_time(MIN_TIME_FORMATTED).unwrap(), MIN_TIME_MS);
        assert_eq!(parse_time(MAX_TIME_FORMATTED).unwrap(), MAX_TIME_MS);
        for bad in ["", "x", "NaN", "Inf", "2015-07-01", "1e400"] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
        // Go's ParseFloat takes underscores between digits (Prometheus 2.42 answers
        // `time=1_000` at 1000 s), nowhere else.
        assert_eq!(parse_time("1_000").unwrap(), 1_000_000);
        assert_eq!(parse_time("1_700_000_000.5_5").unwrap(), 1_700_000_000_550);
        assert_eq!(parse_time("-1_0e1_0").unwrap(), -100_000_000_000_000);
        for bad in ["_1", "1_", "1__0", "1_.5", "1._5", "1e_5", "-_1", "0x1p4"] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_duration_ms("1_5").unwrap(), 15_000);
    }

    #[test]
    fn durations_parse_as_prometheus() {
        assert_eq!(parse_duration_ms("15").unwrap(), 15_000);
        assert_eq!(parse_duration_ms("0.5").unwrap(), 500);
        assert_eq!(parse_duration_ms("5m").unwrap(), 300_000);
        assert_eq!(parse_duration_ms("1h30m").unwrap(), 5_400_000);
        assert!(parse_duration_ms("1e300").unwrap_err().contains("overflows"));
        assert!(parse_duration_ms("5 minutes").is_err());
    }

    #[test]
    fn body_values_win_over_the_url_and_repeats_are_kept() {
        let p =
            Params::from_parts(Some("query=url&match[]=a&x="), Some(b"query=body&match%5B%5D=b")).unwrap();
        assert_eq!(p.get("query"), Some("body"));
        assert_eq!(p.all("match[]"), vec!["b", "a"]);
        assert_eq!(p.get("x"), None);
        assert!(p.required("x").unwrap_err().to_string().contains("invalid parameter \"x\""));
    }

    #[test]
    fn match_selectors_regexes_are_bounded_together() {
        // Each selector alone is within the parser's bound (about 5.8 MB compiled each).
        // No `&`, `+` or `%` in the selectors: they go into the query string as they are.
        let query: Vec<String> = (0..16).map(|i| format!(r#"match[]={{a=~"(?:\\pL{{120}}){i}"}}"#)).collect();
        let p = Params::from_parts(Some(&query[..2].join("&")), None).unwrap();
        assert_eq!(p.matcher_sets(true).unwrap().len(), 2);
        let p = Params::from_parts(Some(&query.join("&")), None).unwrap();
        let err = p.matcher_sets(true).unwrap_err().to_string();
        assert!(err.contains("MiB compiled"), "{err}");
    }

    #[test]
    fn limits_and_ranges_are_checked() {
        let p = |q: &str| Params::from_parts(Some(q), None).unwrap();
        assert_eq!(p("limit=0").limit().unwrap(), None);
        assert_eq!(p("limit=40000").limit().unwrap(), Some(40_000));
        assert!(p("limit=-1").limit().is_err());
        assert!(p("limit=x").limit().is_err());
        assert_eq!(p("").time_range().unwrap(), (MIN_TIME_MS, MAX_TIME_MS));
        assert_eq!(p("start=10&end=5").time_range().unwrap(), (10_000, 5_000));
        let err = p("start=yesterday").time_range().unwrap_err().to_string();
        assert_eq!(err, "invalid parameter \"start\": cannot parse \"yesterday\" to a valid timestamp");
    }

    #[test]
    fn selectors_must_select_something() {
        assert_eq!(parse_matchers("up{job=\"a\"}").unwrap().len(), 2);
        assert!(parse_matchers("{job=~\".*\"}").is_err());
        assert!(parse_matchers("up{").is_err());
        assert!(parse_matchers("rate(up[5m])").is_err());
    }
}

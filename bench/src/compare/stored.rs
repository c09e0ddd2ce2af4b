//! What a system stored, counted by query after its load (and its flush and merge), not taken
//! from the write answers: a system may acknowledge a write and drop samples (outside its
//! retention or window), or refuse a request of which it stored part.
//!
//! PromQL systems: per metric `cpu_<field>`, `sum(count_over_time(cpu_<field>[R]))` at the
//! dataset's end, `R` reaching one interval before its first row. VictoriaMetrics gets
//! `nocache=1`. When a metric has more points than one query may read (strata's and Prometheus'
//! `--query.max-samples` is 50 M by default), it is counted in ten disjoint parts, by the last
//! digit of `hostname`. InfluxDB 1.x: InfluxQL `SELECT count(*) FROM cpu`, summed over fields.

use super::answers;
use super::http::Http;
use super::query_run;
use super::servers::{INFLUX_DB, System};
use crate::tsbs::queries::{Api, Query};
use crate::tsbs::{Dataset, FIELDS, MEASUREMENT};

/// Points one counting query may read at most; a metric with more is counted in parts.
const POINTS_PER_QUERY_MAX: u64 = 40_000_000;

/// The counting queries of a PromQL system: their sum is the points stored.
pub fn promql_queries(ds: &Dataset) -> Vec<Query> {
    let time_ms = ds.end_ms();
    // (end - R, end] holds every row: R is a whole number of seconds above end - start.
    let range_s = (ds.end_ms() - ds.start_ms) / 1000 + (ds.interval_ms + 999) / 1000;
    let per_metric = ds.rows();
    let parts: Vec<String> = if per_metric > POINTS_PER_QUERY_MAX {
        (0..10).map(|d| format!("{{hostname=~\"host_[0-9]*{d}\"}}")).collect()
    } else {
        vec![String::new()]
    };
    FIELDS
        .iter()
        .flat_map(|field| {
            parts.iter().map(move |matcher| Query {
                kind: "stored points",
                promql: format!("sum(count_over_time({MEASUREMENT}_{field}{matcher}[{range_s}s]))"),
                api: Api::Instant { time_ms },
            })
        })
        .collect()
}

/// The points stored in the system at `base`.
pub fn count(http: &Http, system: System, base: &str, ds: &Dataset) -> Result<u64, String> {
    if system == System::InfluxDb {
        return influx_count(http, base);
    }
    let mut total = 0u64;
    for q in promql_queries(ds) {
        let body = http.get_ok(&query_run::url(system, base, &q))?;
        let answer = answers::parse(&body).map_err(|e| format!("{}: {e}", q.promql))?;
        // No series: nothing stored (`sum` of nothing is an empty vector).
        if let Some((_, points)) = answer.series().first() {
            let n = points.first().map_or(0.0, |p| p.1);
            if !(n.is_finite() && n >= 0.0 && n.fract() == 0.0) {
                return Err(format!("{}: not a count: {n}", q.promql));
            }
            total += n as u64;
        }
    }
    Ok(total)
}

/// `SELECT count(*) FROM cpu` in the benchmark database, summed over the fields.
fn influx_count(http: &Http, base: &str) -> Result<u64, String> {
    let url = format!("{base}/query?db={INFLUX_DB}&q=SELECT%20count(*)%20FROM%20{MEASUREMENT}");
    let body = http.get_ok(&url)?;
    influx_answer_count(&body)
}

/// The sum of the counts in an InfluxQL answer (`count_<field>` columns; `time` is skipped).
fn influx_answer_count(body: &[u8]) -> Result<u64, String> {
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("InfluxQL answer is not JSON: {e}"))?;
    let result = &v["results"][0];
    if let Some(e) = result["error"].as_str().or_else(|| v["error"].as_str()) {
        return Err(format!("InfluxQL: {e}"));
    }
    let mut total = 0u64;
    for series in result["series"].as_array().map(Vec::as_slice).unwrap_or_default() {
        let columns = series["columns"].as_array().ok_or("InfluxQL series without columns")?;
        for row in series["values"].as_array().ok_or("InfluxQL series without values")? {
            let row = row.as_array().ok_or("InfluxQL row is not an array")?;
            for (column, value) in columns.iter().zip(row) {
                if column.as_str() != Some("time") {
                    total +=
                        value.as_u64().ok_or_else(|| format!("InfluxQL count {value} is not a count"))?;
                }
            }
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tsbs::ValueModel;

    #[test]
    fn promql_counts_cover_the_whole_dataset_per_metric() {
        let ds = Dataset {
            hosts: 10,
            start_ms: 1_000_000_000_000,
            interval_ms: 10_000,
            epochs: 2160,
            model: ValueModel::Tsbs,
            seed: 1,
        };
        let qs = promql_queries(&ds);
        assert_eq!(qs.len(), 10);
        assert_eq!(qs[0].promql, "sum(count_over_time(cpu_usage_user[21610s]))");
        assert_eq!(qs[0].time_ms(), ds.end_ms());
        // The window (end - 21610 s, end] starts before the first row.
        assert!(ds.end_ms() - 21_610_000 < ds.start_ms);
        let big = Dataset { hosts: 100_000, ..ds };
        let qs = promql_queries(&big);
        assert_eq!(qs.len(), 100, "ten parts per metric");
        assert_eq!(qs[9].promql, "sum(count_over_time(cpu_usage_user{hostname=~\"host_[0-9]*9\"}[21610s]))");
    }

    #[test]
    fn influx_counts_sum_the_field_columns() {
        let body = br#"{"results":[{"statement_id":0,"series":[{"name":"cpu","columns":["time","count_usage_user","count_usage_system"],"values":[["1970-01-01T00:00:00Z",8640,8639]]}]}]}"#;
        assert_eq!(influx_answer_count(body), Ok(17_279));
        assert_eq!(influx_answer_count(br#"{"results":[{"statement_id":0}]}"#), Ok(0));
        assert!(
            influx_answer_count(br#"{"results":[{"statement_id":0,"error":"database not found"}]}"#).is_err()
        );
    }
}

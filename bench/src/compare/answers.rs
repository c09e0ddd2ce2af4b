//! Query answers in a comparable form: the Prometheus API's JSON reduced to sorted series of
//! `(timestamp, value)`, compared with a relative tolerance for float summation order.

use std::collections::BTreeMap;

use serde_json::Value;

/// One series of an answer: its labels and points (milliseconds, value).
pub type Series = (BTreeMap<String, String>, Vec<(i64, f64)>);

/// An answer: series sorted by labels (a vector's samples are one-point series; a scalar is a
/// series without labels).
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The series.
    pub series: Vec<Series>,
}

impl Answer {
    /// Points in the answer.
    pub fn points(&self) -> usize {
        self.series.iter().map(|(_, p)| p.len()).sum()
    }
}

fn point(v: &Value) -> Result<(i64, f64), String> {
    let pair = v.as_array().filter(|a| a.len() == 2).ok_or("a point is not [time, value]")?;
    let t = pair[0].as_f64().ok_or("point time is not a number")?;
    let s = pair[1].as_str().ok_or("point value is not a string")?;
    let v = match s {
        "NaN" => f64::NAN,
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        _ => s.parse::<f64>().map_err(|_| format!("point value {s:?}"))?,
    };
    Ok(((t * 1000.0).round() as i64, v))
}

fn labels(v: &Value) -> Result<BTreeMap<String, String>, String> {
    let m = v.as_object().ok_or("metric is not an object")?;
    m.iter()
        .map(|(k, v)| Ok((k.clone(), v.as_str().ok_or("label value is not a string")?.to_owned())))
        .collect()
}

/// Parses a `/api/v1/query` or `/api/v1/query_range` success answer.
pub fn parse(body: &[u8]) -> Result<Answer, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("answer is not JSON: {e}"))?;
    if v["status"] != "success" {
        return Err(format!("answer status {}: {}", v["status"], v["error"]));
    }
    let data = &v["data"];
    let result = &data["result"];
    let mut series: Vec<Series> = match data["resultType"].as_str() {
        Some("matrix") => result
            .as_array()
            .ok_or("matrix result is not an array")?
            .iter()
            .map(|s| {
                let values = s["values"].as_array().ok_or("series without values")?;
                Ok((labels(&s["metric"])?, values.iter().map(point).collect::<Result<_, String>>()?))
            })
            .collect::<Result<_, String>>()?,
        Some("vector") => result
            .as_array()
            .ok_or("vector result is not an array")?
            .iter()
            .map(|s| Ok((labels(&s["metric"])?, vec![point(&s["value"])?])))
            .collect::<Result<_, String>>()?,
        Some("scalar") => vec![(BTreeMap::new(), vec![point(result)?])],
        other => return Err(format!("unexpected resultType {other:?}")),
    };
    series.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Answer { series })
}

fn same_value(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn show(l: &BTreeMap<String, String>) -> String {
    let inner: Vec<String> = l.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    format!("{{{}}}", inner.join(", "))
}

/// The first difference between `expected` and `got`, described, or `None` if they agree.
pub fn diff(expected: &Answer, got: &Answer) -> Option<String> {
    if expected.series.len() != got.series.len() {
        let names = |a: &Answer| a.series.iter().take(3).map(|s| show(&s.0)).collect::<Vec<_>>().join(" ");
        return Some(format!(
            "{} series expected, {} got (expected {} …; got {} …)",
            expected.series.len(),
            got.series.len(),
            names(expected),
            names(got)
        ));
    }
    for ((el, ep), (gl, gp)) in expected.series.iter().zip(&got.series) {
        if el != gl {
            return Some(format!("series {} expected, {} got", show(el), show(gl)));
        }
        if ep.len() != gp.len() {
            return Some(format!("{}: {} points expected, {} got", show(el), ep.len(), gp.len()));
        }
        for ((et, ev), (gt, gv)) in ep.iter().zip(gp) {
            if et != gt || !same_value(*ev, *gv) {
                return Some(format!("{}: point ({et} ms, {ev}) expected, ({gt} ms, {gv}) got", show(el)));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matrix_and_vector_parse_sorted() {
        let m = br#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"hostname":"b"},"values":[[1.5,"2"],[2.5,"NaN"]]},
            {"metric":{"hostname":"a"},"values":[[1.5,"1"]]}]}}"#;
        let a = parse(m).unwrap();
        assert_eq!(a.series[0].0["hostname"], "a");
        assert_eq!(a.series[1].1[0], (1500, 2.0));
        assert_eq!(a.points(), 3);
        let v = br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[10,"3.25"]}]}}"#;
        assert_eq!(parse(v).unwrap().series, vec![(BTreeMap::new(), vec![(10_000, 3.25)])]);
        assert!(parse(br#"{"status":"error","error":"bad"}"#).is_err());
    }

    #[test]
    fn diff_finds_labels_points_and_values_but_forgives_rounding() {
        let a = parse(br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"x":"1"},"values":[[1,"0.1"],[2,"NaN"]]}]}}"#).unwrap();
        let close = parse(br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"x":"1"},"values":[[1,"0.10000000000000002"],[2,"NaN"]]}]}}"#).unwrap();
        assert_eq!(diff(&a, &close), None);
        let other_value = parse(br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"x":"1"},"values":[[1,"0.2"],[2,"NaN"]]}]}}"#).unwrap();
        assert!(diff(&a, &other_value).unwrap().contains("0.2"));
        let other_time = parse(br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"x":"1"},"values":[[1,"0.1"],[3,"NaN"]]}]}}"#).unwrap();
        assert!(diff(&a, &other_time).is_some());
        let other_labels = parse(br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"x":"2"},"values":[[1,"0.1"],[2,"NaN"]]}]}}"#).unwrap();
        assert!(diff(&a, &other_labels).unwrap().contains("x=\"2\""));
        let empty = parse(br#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#).unwrap();
        assert!(diff(&a, &empty).unwrap().contains("1 series expected, 0 got"));
    }
}

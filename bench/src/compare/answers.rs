//! Query answers in a comparable form: the Prometheus API's JSON reduced to sorted series of
//! `(timestamp, value)`, compared with a relative tolerance for float summation order; and the
//! metadata APIs' answers (label sets, label names, label values) as sorted lists, compared as
//! multisets: the order a system lists them in means nothing, a missing, extra or repeated entry
//! does.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::tsbs::queries::Api;

/// A label set.
pub type Labels = BTreeMap<String, String>;

/// One series of an answer: its labels and points (milliseconds, value).
pub type Series = (Labels, Vec<(i64, f64)>);

/// An answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A PromQL answer: series sorted by labels (a vector's samples are one-point series; a
    /// scalar is a series without labels).
    Promql(Vec<Series>),
    /// `/api/v1/series`: the label sets, sorted.
    LabelSets(Vec<Labels>),
    /// `/api/v1/labels` or `/api/v1/label/<name>/values`: the names or values, sorted.
    Strings(Vec<String>),
}

impl Answer {
    /// The series of a PromQL answer (none for a metadata answer).
    pub fn series(&self) -> &[Series] {
        match self {
            Answer::Promql(series) => series,
            Answer::LabelSets(_) | Answer::Strings(_) => &[],
        }
    }

    /// Series, label sets, names or values in the answer.
    pub fn entries(&self) -> usize {
        match self {
            Answer::Promql(series) => series.len(),
            Answer::LabelSets(sets) => sets.len(),
            Answer::Strings(strings) => strings.len(),
        }
    }

    /// What the answer lists, for messages.
    fn kind(&self) -> &'static str {
        match self {
            Answer::Promql(_) => "PromQL",
            Answer::LabelSets(_) => "label-set",
            Answer::Strings(_) => "names-or-values",
        }
    }

    /// Points in the answer (none in a metadata answer).
    pub fn points(&self) -> usize {
        self.series().iter().map(|(_, p)| p.len()).sum()
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

fn labels(v: &Value) -> Result<Labels, String> {
    let m = v.as_object().ok_or("metric is not an object")?;
    m.iter()
        .map(|(k, v)| Ok((k.clone(), v.as_str().ok_or("label value is not a string")?.to_owned())))
        .collect()
}

/// The `data` of a success answer.
fn success_data(body: &[u8]) -> Result<Value, String> {
    let mut v: Value = serde_json::from_slice(body).map_err(|e| format!("answer is not JSON: {e}"))?;
    if v["status"] != "success" {
        return Err(format!("answer status {}: {}", v["status"], v["error"]));
    }
    Ok(v["data"].take())
}

/// Parses the success answer of a request to `api`.
pub fn parse_for(api: &Api, body: &[u8]) -> Result<Answer, String> {
    match api {
        Api::Range { .. } | Api::Instant { .. } => parse(body),
        Api::Series { .. } => parse_label_sets(body),
        Api::LabelNames { .. } | Api::LabelValues { .. } => parse_strings(body),
    }
}

/// Parses a `/api/v1/series` success answer: `data` is a list of label sets.
fn parse_label_sets(body: &[u8]) -> Result<Answer, String> {
    let data = success_data(body)?;
    let mut sets: Vec<Labels> = list(&data)?.iter().map(labels).collect::<Result<_, _>>()?;
    sets.sort();
    Ok(Answer::LabelSets(sets))
}

/// Parses a `/api/v1/labels` or `/api/v1/label/<name>/values` success answer: `data` is a
/// list of strings.
fn parse_strings(body: &[u8]) -> Result<Answer, String> {
    let data = success_data(body)?;
    let mut strings: Vec<String> = list(&data)?
        .iter()
        .map(|s| s.as_str().map(str::to_owned).ok_or_else(|| format!("{s} is not a string")))
        .collect::<Result<_, _>>()?;
    strings.sort();
    Ok(Answer::Strings(strings))
}

/// The entries of a metadata answer's `data`: a list, or `null` for none (an encoding some
/// servers use for an empty answer; what it means is the same).
fn list(data: &Value) -> Result<&[Value], String> {
    match data {
        Value::Null => Ok(&[]),
        Value::Array(entries) => Ok(entries),
        other => Err(format!("data is not a list: {}", truncated(&other.to_string()))),
    }
}

fn truncated(s: &str) -> &str {
    s.get(..s.len().min(200)).unwrap_or(s)
}

/// Parses a `/api/v1/query` or `/api/v1/query_range` success answer.
pub fn parse(body: &[u8]) -> Result<Answer, String> {
    let data = success_data(body)?;
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
    Ok(Answer::Promql(series))
}

fn same_value(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn show(l: &Labels) -> String {
    let inner: Vec<String> = l.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    format!("{{{}}}", inner.join(", "))
}

/// The first difference between `expected` and `got`, described, or `None` if they agree.
pub fn diff(expected: &Answer, got: &Answer) -> Option<String> {
    match (expected, got) {
        (Answer::Promql(e), Answer::Promql(g)) => diff_series(e, g),
        (Answer::LabelSets(e), Answer::LabelSets(g)) => diff_lists("label sets", e, g, show),
        (Answer::Strings(e), Answer::Strings(g)) => diff_lists("entries", e, g, |s| format!("{s:?}")),
        _ => Some(format!("a {} answer expected, a {} answer got", expected.kind(), got.kind())),
    }
}

/// How many entries a difference names of each side.
const SHOWN: usize = 3;

/// The difference between two sorted lists taken as multisets: the entries only one of them
/// holds, else the entries one of them holds more often.
fn diff_lists<T: Ord>(what: &str, expected: &[T], got: &[T], show: impl Fn(&T) -> String) -> Option<String> {
    if expected == got {
        return None;
    }
    let (e, g): (BTreeSet<&T>, BTreeSet<&T>) = (expected.iter().collect(), got.iter().collect());
    let names = |items: &mut dyn Iterator<Item = &&T>| {
        let shown: Vec<String> = items.take(SHOWN).map(|t| show(t)).collect();
        shown.join(", ")
    };
    let (missing, extra) = (e.difference(&g).count(), g.difference(&e).count());
    let mut out = format!("{} {what} expected, {} got", expected.len(), got.len());
    if missing > 0 {
        out.push_str(&format!("; {missing} missing: {}", names(&mut e.difference(&g))));
    }
    if extra > 0 {
        out.push_str(&format!("; {extra} unexpected: {}", names(&mut g.difference(&e))));
    }
    if missing == 0 && extra == 0 {
        // The same entries, some repeated on one side.
        let repeated = |list: &[T]| list.windows(2).filter(|w| w[0] == w[1]).count();
        out.push_str(&format!(
            "; the same {what}, repeated {} times in the expected answer and {} in the other",
            repeated(expected),
            repeated(got)
        ));
    }
    Some(out)
}

/// The first difference between two PromQL answers.
fn diff_series(expected: &[Series], got: &[Series]) -> Option<String> {
    if expected.len() != got.len() {
        let names = |a: &[Series]| a.iter().take(SHOWN).map(|s| show(&s.0)).collect::<Vec<_>>().join(" ");
        return Some(format!(
            "{} series expected, {} got (expected {} …; got {} …)",
            expected.len(),
            got.len(),
            names(expected),
            names(got)
        ));
    }
    for ((el, ep), (gl, gp)) in expected.iter().zip(got) {
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
        assert_eq!(a.series()[0].0["hostname"], "a");
        assert_eq!(a.series()[1].1[0], (1500, 2.0));
        assert_eq!((a.entries(), a.points()), (2, 3));
        let v = br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[10,"3.25"]}]}}"#;
        assert_eq!(parse(v).unwrap(), Answer::Promql(vec![(BTreeMap::new(), vec![(10_000, 3.25)])]));
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

    const VALUES: Api = Api::LabelValues { label: "hostname", start_ms: 0, end_ms: 1 };
    const SERIES: Api = Api::Series { start_ms: 0, end_ms: 1 };

    fn strings(data: &str) -> Answer {
        parse_for(&VALUES, format!(r#"{{"status":"success","data":{data}}}"#).as_bytes()).unwrap()
    }

    fn label_sets(data: &str) -> Answer {
        parse_for(&SERIES, format!(r#"{{"status":"success","data":{data}}}"#).as_bytes()).unwrap()
    }

    #[test]
    fn label_values_in_any_order_are_equal_and_differing_sets_are_not() {
        let a = strings(r#"["host_2","host_10","host_1"]"#);
        assert_eq!(diff(&a, &strings(r#"["host_1","host_2","host_10"]"#)), None);
        assert_eq!((a.entries(), a.points()), (3, 0));
        let missing = diff(&a, &strings(r#"["host_10","host_1"]"#)).unwrap();
        assert!(missing.contains("3 entries expected, 2 got; 1 missing: \"host_2\""), "{missing}");
        let other = diff(&a, &strings(r#"["host_1","host_2","host_11"]"#)).unwrap();
        assert!(other.contains("1 missing: \"host_10\"; 1 unexpected: \"host_11\""), "{other}");
        let repeated = diff(&a, &strings(r#"["host_1","host_2","host_10","host_2"]"#)).unwrap();
        assert!(
            repeated.contains("repeated 0 times in the expected answer and 1 in the other"),
            "{repeated}"
        );
        // No values: `[]`, or `null` from a server that encodes an empty list so.
        assert_eq!(diff(&strings("[]"), &strings("null")), None);
        assert!(diff(&strings("[]"), &a).unwrap().contains("3 unexpected"));
    }

    #[test]
    fn series_label_sets_in_any_order_are_equal_and_differing_sets_are_not() {
        let a = label_sets(
            r#"[{"__name__":"cpu_usage_user","hostname":"host_1"},{"hostname":"host_1","__name__":"cpu_usage_idle"}]"#,
        );
        let reordered = label_sets(
            r#"[{"__name__":"cpu_usage_idle","hostname":"host_1"},{"hostname":"host_1","__name__":"cpu_usage_user"}]"#,
        );
        assert_eq!(diff(&a, &reordered), None);
        assert_eq!(a.entries(), 2);
        let other = label_sets(
            r#"[{"__name__":"cpu_usage_user","hostname":"host_1"},{"__name__":"cpu_usage_idle","hostname":"host_2"}]"#,
        );
        let d = diff(&a, &other).unwrap();
        assert!(d.contains(r#"1 missing: {__name__="cpu_usage_idle", hostname="host_1"}"#), "{d}");
        assert!(d.contains(r#"1 unexpected: {__name__="cpu_usage_idle", hostname="host_2"}"#), "{d}");
        // An answer of another kind never equals.
        assert!(diff(&a, &strings(r#"["host_1"]"#)).unwrap().contains("a label-set answer expected"));
    }

    #[test]
    fn metadata_answers_must_be_successes_and_lists() {
        assert!(parse_for(&VALUES, br#"{"status":"error","error":"bad"}"#).unwrap_err().contains("bad"));
        assert!(parse_for(&VALUES, br#"{"status":"success","data":{"a":1}}"#).is_err());
        assert!(parse_for(&VALUES, br#"{"status":"success","data":[1]}"#).is_err());
        assert!(parse_for(&SERIES, br#"{"status":"success","data":[{"a":1}]}"#).is_err());
        // A PromQL answer is parsed as one.
        let instant = Api::Instant { time_ms: 0 };
        let v = br#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
        assert_eq!(parse_for(&instant, v), Ok(Answer::Promql(Vec::new())));
    }
}

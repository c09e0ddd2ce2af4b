//! JSON answers of the metadata endpoints, written straight to bytes.
//!
//! A `/api/v1/series` answer over a large selection or the values of a high-cardinality label
//! can hold millions of strings; building a `serde_json::Value` of them first would double the
//! memory and the time. The envelope is the one [`Success`](crate::api::respond::Success)
//! writes: `{"status":"success","data":...,"warnings":[...]}`, warnings left out when empty.

use storage::Labels;

/// The warning Prometheus 3 adds when `limit` cut an answer short.
pub const TRUNCATED: &str = "results truncated due to limit";

/// Appends `s` as a JSON string, escaped exactly as serde_json escapes it.
fn string(out: &mut Vec<u8>, s: &str) {
    // Label names and values rarely need escaping (serde_json escapes only `"`, `\` and
    // control characters), and copying them as they are is several times faster on answers
    // with 100k values.
    if !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
        return;
    }
    // Writing a string to a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Wraps already-encoded `data` in the success envelope.
fn envelope(data: impl FnOnce(&mut Vec<u8>), warnings: &[&str], size_hint: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(size_hint + 64);
    out.extend_from_slice(b"{\"status\":\"success\",\"data\":");
    data(&mut out);
    if !warnings.is_empty() {
        out.extend_from_slice(b",\"warnings\":[");
        for (i, w) in warnings.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            string(&mut out, w);
        }
        out.push(b']');
    }
    out.push(b'}');
    out
}

/// `data` as a JSON array of strings (label names or values).
pub fn strings(list: &[String], warnings: &[&str]) -> Vec<u8> {
    let hint = list.iter().map(|s| s.len() + 3).sum();
    envelope(
        |out| {
            out.push(b'[');
            for (i, s) in list.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                string(out, s);
            }
            out.push(b']');
        },
        warnings,
        hint,
    )
}

/// `data` as a JSON array of label sets, each an object from label name to value in name order
/// (as Prometheus writes `labels.Labels`).
pub fn series(list: &[Labels], warnings: &[&str]) -> Vec<u8> {
    let hint =
        list.iter().map(|l| l.iter().map(|x| x.name.len() + x.value.len() + 6).sum::<usize>() + 2).sum();
    envelope(
        |out| {
            out.push(b'[');
            for (i, labels) in list.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.push(b'{');
                for (j, l) in labels.iter().enumerate() {
                    if j > 0 {
                        out.push(b',');
                    }
                    string(out, &l.name);
                    out.push(b':');
                    string(out, &l.value);
                }
                out.push(b'}');
            }
            out.push(b']');
        },
        warnings,
        hint,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_the_prometheus_envelope() {
        let s = |b: Vec<u8>| String::from_utf8(b).unwrap();
        assert_eq!(s(strings(&[], &[])), r#"{"status":"success","data":[]}"#);
        assert_eq!(
            s(strings(&["a\"b".into(), "c".into()], &[TRUNCATED])),
            r#"{"status":"success","data":["a\"b","c"],"warnings":["results truncated due to limit"]}"#
        );
        let l = Labels::from_pairs(&[("job", "x"), ("__name__", "up")]);
        assert_eq!(s(series(&[l], &[])), r#"{"status":"success","data":[{"__name__":"up","job":"x"}]}"#);
        assert_eq!(s(series(&[], &[])), r#"{"status":"success","data":[]}"#);
    }

    #[test]
    fn strings_are_escaped_as_serde_json_escapes_them() {
        let all: String = (0u8..=0x7f).map(char::from).chain("é\u{2028}€\u{1f600}".chars()).collect();
        let cases = ["", "plain", "a/b", "tab\there", "quote\"", "back\\slash", "\u{7f}", all.as_str()];
        for case in cases {
            let mut out = Vec::new();
            string(&mut out, case);
            assert_eq!(out, serde_json::to_vec(case).unwrap(), "{case:?}");
        }
    }
}

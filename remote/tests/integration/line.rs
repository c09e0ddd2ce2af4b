//! Influx line protocol: the syntax table, golden bodies, round trips through our writer, and
//! robustness on arbitrary bytes.

use std::collections::BTreeMap;

use proptest::prelude::*;
use remote::Limits;
use remote::line::{self, FieldValue, Point, Precision};

use crate::common;

/// Parses at nanosecond precision with "now" = 42 ms.
fn parse(body: &str) -> line::Parsed {
    line::parse(body.as_bytes(), Precision::Ns, 42_000_000, &Limits::default())
}

/// Samples as `labels @t = v`, then errors, then counts.
fn render(p: &line::Parsed) -> String {
    let mut out = String::new();
    for (labels, samples) in &p.batch.series {
        for s in samples {
            out += &format!("{labels} @{} = {:?}\n", s.t, s.v);
        }
    }
    for e in &p.errors {
        out += &format!("{e}\n");
    }
    out +=
        &format!("points={} fields={} skipped={} bad={}", p.points, p.fields, p.skipped_fields, p.bad_lines);
    out
}

fn check(body: &str, want: &str) {
    assert_eq!(render(&parse(body)), want, "body: {body:?}");
}

#[test]
fn basic_point() {
    check(
        "cpu,host=a,region=eu usage_user=1.5,usage_system=2i 1000000000\n",
        "cpu_usage_user{host=\"a\", region=\"eu\"} @1000 = 1.5\n\
         cpu_usage_system{host=\"a\", region=\"eu\"} @1000 = 2.0\n\
         points=1 fields=2 skipped=0 bad=0",
    );
}

#[test]
fn value_field_names_the_measurement() {
    check("temp value=21.5 5000000\n", "temp{} @5 = 21.5\npoints=1 fields=1 skipped=0 bad=0");
}

#[test]
fn missing_timestamp_uses_now() {
    check("m f=1", "m_f{} @42 = 1.0\npoints=1 fields=1 skipped=0 bad=0");
}

#[test]
fn field_types() {
    check(
        "m a=1i,b=2u,c=-3.5e1,d=t,e=FALSE,f=\"str\",g=.5,h=1.,i=1E3,j=True 0",
        "m_a{} @0 = 1.0\nm_b{} @0 = 2.0\nm_c{} @0 = -35.0\nm_d{} @0 = 1.0\nm_e{} @0 = 0.0\n\
         m_g{} @0 = 0.5\nm_h{} @0 = 1.0\nm_i{} @0 = 1000.0\nm_j{} @0 = 1.0\n\
         points=1 fields=9 skipped=1 bad=0",
    );
}

#[test]
fn escapes() {
    check(
        r#"my\ meas\,ure=x,tag\ key=va\,l\=ue\ x,path=C:\Windows fi\=eld\ 1=1,s="a \"quoted\" \\ string, with = signs" 0"#,
        "my_meas_ure_x_fi_eld_1{path=\"C:\\\\Windows\", tag_key=\"va,l=ue x\"} @0 = 1.0\n\
         points=1 fields=1 skipped=1 bad=0",
    );
}

#[test]
fn comments_blank_lines_crlf_and_spacing() {
    check(
        "# a comment\r\n\r\n  \n\tm f=1 1000000\r\n   # indented comment\nm  f=2   2000000  \r\nm f=3\r",
        "m_f{} @1 = 1.0\nm_f{} @2 = 2.0\nm_f{} @42 = 3.0\npoints=3 fields=3 skipped=0 bad=0",
    );
}

#[test]
fn repeated_series_are_grouped() {
    check(
        "m,h=a f=1 1000000\nm,h=b f=2 1000000\nm,h=a f=3 2000000\n",
        "m_f{h=\"a\"} @1 = 1.0\nm_f{h=\"a\"} @2 = 3.0\nm_f{h=\"b\"} @1 = 2.0\npoints=3 fields=3 skipped=0 bad=0",
    );
}

#[test]
fn tags_are_sorted_and_names_sanitized() {
    check(
        "net.if,Zone=z,b-c=1,1st=x rx-bytes=5i 0",
        "net_if_rx_bytes{Zone=\"z\", _1st=\"x\", b_c=\"1\"} @0 = 5.0\npoints=1 fields=1 skipped=0 bad=0",
    );
}

#[test]
fn string_field_with_newline_and_line_numbers() {
    check(
        "m s=\"two\nlines\",f=1 0\nbad line\nm f=2 0\n",
        "m_f{} @0 = 1.0\nm_f{} @0 = 2.0\nline 3: missing '=' after field key \"line\"\npoints=2 fields=2 skipped=1 bad=1",
    );
}

#[test]
fn precisions() {
    let cases = [
        (Precision::Ns, "1999999", 1),
        (Precision::Ns, "-1", -1),
        (Precision::Us, "1999", 1),
        (Precision::Ms, "7", 7),
        (Precision::S, "2", 2000),
        (Precision::M, "2", 120_000),
        (Precision::H, "1", 3_600_000),
    ];
    for (precision, ts, want) in cases {
        let body = format!("m f=1 {ts}");
        let p = line::parse(body.as_bytes(), precision, 0, &Limits::default());
        assert_eq!(p.batch.series[0].1[0].t, want, "{precision:?} {ts}");
    }
    let p = line::parse(b"m f=1 9223372036854775807", Precision::H, 0, &Limits::default());
    assert_eq!(
        render(&p),
        "line 1: timestamp 9223372036854775807 is out of range\npoints=0 fields=0 skipped=0 bad=1"
    );
    assert_eq!(Precision::parse_v1("u").unwrap(), Precision::Us);
    assert_eq!(Precision::parse_v1("h").unwrap(), Precision::H);
    assert_eq!(Precision::parse_v2("us").unwrap(), Precision::Us);
    assert_eq!(Precision::parse_v2("h").unwrap_err().status_hint(), 400);
    assert_eq!(Precision::parse_v1("x").unwrap_err().to_string(), "invalid precision \"x\"");
}

#[test]
fn bad_lines_are_reported_and_good_lines_kept() {
    let body = [
        "m f=1 0",           // 1 ok
        "m",                 // 2
        "m f",               // 3
        "m f= 0",            // 4
        "m f=abc 0",         // 5
        "m f=1 12x",         // 6
        "m f=1 0 extra",     // 7
        "m,t f=1",           // 8
        "m,t= f=1",          // 9
        ",t=1 f=1",          // 10
        "m,=1 f=1",          // 11
        "m =1",              // 12
        "m f=1 1",           // 13 ok
        "m f=1,f=2",         // 14 ok: the last value wins, as in InfluxDB
        "m,a=1,a=2 f=1",     // 15
        "m,a-b=1,a_b=2 f=1", // 16
        "m,__name__=x f=1",  // 17
        "m f=\"x\"y",        // 18
        "m f=1,",            // 19
        "m,t=a=b f=1",       // 20
        "m f=1 0",           // 21 ok
        "m f=\"open",        // 22: open until the end of the body
        "m f=2 0",           // 23 ok
    ]
    .join("\n");
    check(
        &body,
        "m_f{} @0 = 1.0\nm_f{} @0 = 1.0\nm_f{} @42 = 2.0\nm_f{} @0 = 1.0\nm_f{} @0 = 2.0\n\
         line 2: missing fields\n\
         line 3: missing '=' after field key \"f\"\n\
         line 4: missing value for field \"f\"\n\
         line 5: invalid value \"abc\" for field \"f\"\n\
         line 6: invalid timestamp \"12x\"\n\
         line 7: unexpected text after the timestamp\n\
         line 8: missing '=' in tag \"t\"\n\
         line 9: missing value for tag \"t\"\n\
         line 10: missing measurement\n\
         line 11: empty tag key\n\
         line 12: empty field key\n\
         line 15: two tags map to the label name \"a\"\n\
         line 16: two tags map to the label name \"a_b\"\n\
         line 17: tag key \"__name__\" would overwrite the metric name\n\
         line 18: unexpected character after closing quote in field \"f\"\n\
         line 19: missing field\n\
         line 20: unescaped '=' in the value of tag \"t\"\n\
         line 22: unterminated string in field \"f\"\n\
         points=5 fields=5 skipped=0 bad=18",
    );
}

#[test]
fn a_field_written_twice_keeps_its_last_value() {
    // InfluxDB 1.x stores `f=2` for `m f=1,f=2` (checked against influxd 1.6); the second line
    // takes the slow path (another field order than the group's first line).
    check(
        "m f=1,g=3,f=2 0\nm g=4,f=5,g=6,f=7 0\nm f=8,s=\"x\",f=9 0",
        "m_f{} @0 = 2.0\nm_f{} @0 = 7.0\nm_f{} @0 = 9.0\nm_g{} @0 = 3.0\nm_g{} @0 = 6.0\n\
         points=3 fields=5 skipped=1 bad=0",
    );
}

#[test]
fn a_failed_line_adds_nothing() {
    // The first field would be fine, the second is not: neither is stored.
    check(
        "m a=1,b=x 0\nm a=2 0",
        "m_a{} @0 = 2.0\nline 1: invalid value \"x\" for field \"b\"\npoints=1 fields=1 skipped=0 bad=1",
    );
}

#[test]
fn label_limits_are_line_errors() {
    let limits = Limits {
        labels_per_series_max: 2,
        label_name_bytes_max: 4,
        label_value_bytes_max: 6,
        ..Limits::default()
    };
    let body = "m,a=1,b=2 f=1 0\nm,abcde=1 f=1 0\nm,a=1234567 f=1 0\nmeasure f=1 0\nm,a=1 f=1 0";
    let p = line::parse(body.as_bytes(), Precision::Ns, 0, &limits);
    assert_eq!(
        render(&p),
        "m_f{a=\"1\"} @0 = 1.0\n\
         line 1: labels_per_series_max exceeded: 3 > 2 (raise the `labels_per_series_max` limit if this request is legitimate)\n\
         line 2: label_name_bytes_max exceeded: 5 > 4 (raise the `label_name_bytes_max` limit if this request is legitimate)\n\
         line 3: label_value_bytes_max exceeded: 7 > 6 (raise the `label_value_bytes_max` limit if this request is legitimate)\n\
         line 4: label_value_bytes_max exceeded: 9 > 6 (raise the `label_value_bytes_max` limit if this request is legitimate)\n\
         points=1 fields=1 skipped=0 bad=4"
    );
}

#[test]
fn error_list_is_bounded_and_summarized() {
    let body = "x\n".repeat(250) + "m f=1 0\n";
    let p = parse(&body);
    assert_eq!((p.errors.len(), p.bad_lines, p.points), (line::LINE_ERRORS_MAX, 250, 1));
    let msg = p.error_message().unwrap();
    assert!(
        msg.starts_with("partial write: 250 of 251 lines rejected: line 1: missing fields; line 2:"),
        "{msg}"
    );
    assert!(msg.ends_with("; ..."), "{msg}");
    assert_eq!(parse("m f=1").error_message(), None);
}

#[test]
fn golden_bodies() {
    for name in ["telegraf", "tsbs_cpu"] {
        let body = common::read(&format!("line/{name}.txt"));
        let p = line::parse(&body, Precision::Ns, 0, &Limits::default());
        common::golden(&format!("line/{name}.expected"), render(&p).as_bytes());
    }
}

#[test]
fn gzip_body_parses_like_plain() {
    use std::io::Write;
    let body = common::read("line/telegraf.txt");
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(&body).unwrap();
    let plain = line::decode_body(Some("gzip"), &e.finish().unwrap(), &Limits::default()).unwrap();
    assert_eq!(plain, body);
}

// ---- round trips through our writer ----

fn text(max: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("[a-zA-Z0-9_:.é日 ,=\"\\\\#\t-]{{1,{max}}}")).unwrap()
}

fn arb_value() -> impl Strategy<Value = FieldValue> {
    prop_oneof![
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(FieldValue::Float),
        any::<i64>().prop_map(FieldValue::Int),
        any::<u64>().prop_map(FieldValue::UInt),
        any::<bool>().prop_map(FieldValue::Bool),
        proptest::string::string_regex("[a-z \"\\\\\n,=]{0,8}").unwrap().prop_map(FieldValue::Str),
    ]
}

fn arb_point() -> impl Strategy<Value = Point> {
    (
        text(8),
        proptest::collection::btree_map(text(6), text(8), 0..4),
        proptest::collection::btree_map(text(6), arb_value(), 1..4),
        proptest::option::of(-(1i64 << 60)..(1i64 << 60)),
    )
        .prop_map(|(measurement, tags, fields, timestamp)| Point {
            measurement,
            tags: tags.into_iter().collect(),
            fields: fields.into_iter().collect(),
            timestamp,
        })
}

/// Reference sanitizer: characters outside the allowed set become `_`, digit-first gets `_`.
fn sanitize(s: &str, colon: bool) -> String {
    let out: String = s
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || (colon && c == ':') { c } else { '_' })
        .collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) { format!("_{out}") } else { out }
}

/// One expected sample: labels, timestamp, value.
type Expected = (BTreeMap<String, String>, i64, f64);

/// What a point must become, or `None` if strata must reject the line.
fn expected(p: &Point, now_ms: i64) -> Option<Vec<Expected>> {
    let mut tags = BTreeMap::new();
    for (k, v) in &p.tags {
        let name = sanitize(k, false);
        if name == "__name__" || tags.insert(name, v.clone()).is_some() {
            return None;
        }
    }
    let t = p.timestamp.map(|t| t.div_euclid(1_000_000)).unwrap_or(now_ms);
    let mut out = Vec::new();
    for (k, v) in &p.fields {
        let v = match v {
            FieldValue::Float(f) => *f,
            FieldValue::Int(i) => *i as f64,
            FieldValue::UInt(u) => *u as f64,
            FieldValue::Bool(b) => f64::from(u8::from(*b)),
            FieldValue::Str(_) => continue,
        };
        let name = if k == "value" {
            sanitize(&p.measurement, true)
        } else {
            sanitize(&format!("{}_{}", p.measurement, k), true)
        };
        let mut labels = tags.clone();
        labels.insert("__name__".into(), name);
        out.push((labels, t, v));
    }
    Some(out)
}

fn flatten(p: &line::Parsed) -> Vec<(BTreeMap<String, String>, i64, u64)> {
    let mut out = Vec::new();
    for (labels, samples) in &p.batch.series {
        let l: BTreeMap<String, String> =
            labels.iter().map(|l| (l.name.to_string(), l.value.to_string())).collect();
        for s in samples {
            out.push((l.clone(), s.t, s.v.to_bits()));
        }
    }
    out.sort();
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if std::env::var_os("STRATA_SLOW_TESTS").is_some() { 20_000 } else { 300 }))]

    #[test]
    fn round_trip(points in proptest::collection::vec(arb_point(), 1..8)) {
        let mut body = Vec::new();
        let mut want = Vec::new();
        let mut want_bad = 0;
        for p in &points {
            if line::write_point(&mut body, p).is_err() {
                continue;
            }
            match expected(p, 42) {
                Some(samples) => want.extend(samples.into_iter().map(|(l, t, v)| (l, t, v.to_bits()))),
                None => want_bad += 1,
            }
        }
        want.sort();
        let parsed = line::parse(&body, Precision::Ns, 42_000_000, &Limits::default());
        prop_assert_eq!(flatten(&parsed), want, "body: {:?}, errors: {:?}", String::from_utf8_lossy(&body), parsed.errors);
        prop_assert_eq!(parsed.bad_lines, want_bad, "{:?}", parsed.errors);
        prop_assert_eq!(parsed.fields as usize, parsed.batch.sample_count());
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let p = line::parse(&bytes, Precision::Ns, 0, &Limits::default());
        prop_assert_eq!(p.fields as usize, p.batch.sample_count());
    }

    #[test]
    fn line_noise_never_panics(body in "[a-z,= \"\\\\\n\r#0-9.eEiu_-]{0,200}") {
        let p = line::parse(body.as_bytes(), Precision::S, 0, &Limits::default());
        prop_assert_eq!(p.fields as usize, p.batch.sample_count());
        // Every line is either accepted, rejected or blank/comment.
        prop_assert!((p.points + p.bad_lines) as usize <= body.split('\n').count());
    }

    #[test]
    fn gzip_bombs_stop_at_the_bound(len in 1usize..200_000, max in 1usize..100_000) {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(&vec![b'a'; len]).unwrap();
        let gz = e.finish().unwrap();
        let limits = Limits { decoded_bytes_max: max, ..Limits::default() };
        match line::decode_body(Some("gzip"), &gz, &limits) {
            Ok(body) => prop_assert!(body.len() == len && len <= max),
            Err(remote::Error::LimitExceeded { value, .. }) => prop_assert!(len > max && value as usize == max + 1),
            Err(e) => prop_assert!(false, "{}", e),
        }
    }
}

#[test]
fn writer_refuses_what_it_cannot_express() {
    let p = |m: &str, tag: &str| Point {
        measurement: m.into(),
        tags: vec![("t".into(), tag.into())],
        fields: vec![("f".into(), FieldValue::Int(1))],
        timestamp: None,
    };
    let mut out = Vec::new();
    for bad in [p("", "x"), p("m", ""), p("m", "a\nb"), p("m", "a\\"), p("m", "a\\,b"), p("#m", "x")] {
        assert!(line::write_point(&mut out, &bad).is_err(), "{bad:?}");
    }
    assert!(out.is_empty());
    let nan = Point { fields: vec![("f".into(), FieldValue::Float(f64::NAN))], ..p("m", "x") };
    assert!(line::write_point(&mut out, &nan).is_err());
    line::write_point(&mut out, &p("m", "a\\\\,b\\x")).unwrap();
    assert_eq!(out, b"m,t=a\\\\\\,b\\x f=1i\n");
}

#[test]
fn many_fields_in_one_line_stay_linear() {
    // 100k distinct fields, in a different order on the second line: a linear search per
    // field would take minutes here.
    let fields: Vec<String> = (0..100_000).map(|i| format!("f{i}={i}i")).collect();
    let mut reversed = fields.clone();
    reversed.reverse();
    let body = format!("m {} 0\nm {} 1000000\n", fields.join(","), reversed.join(","));
    let p = parse(&body);
    assert_eq!((p.points, p.fields, p.bad_lines), (2, 200_000, 0));
    assert_eq!(p.batch.series.len(), 100_000);
    assert!(p.batch.series.iter().all(|(_, s)| s.len() == 2));
}

#[test]
fn error_messages_quote_at_most_a_snippet() {
    let body = format!("m f={} 0", "x".repeat(10_000));
    let p = parse(&body);
    assert!(p.errors[0].message.len() < 150, "{}", p.errors[0].message);
    assert!(p.errors[0].message.contains("xxx..."));
}

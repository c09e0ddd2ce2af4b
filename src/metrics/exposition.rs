//! The Prometheus text exposition format, version 0.0.4, written by hand.
//!
//! A family is announced once with `# HELP` and `# TYPE`, then its samples follow, one per line:
//! `name{label="value",...} value`. Histograms expand into cumulative `_bucket` samples with an
//! `le` label (ending with `le="+Inf"`), then `_sum` and `_count`. Label values escape `\`, `"`
//! and line feeds; help text escapes `\` and line feeds. Callers write families in a fixed order
//! and never announce a name twice (a test checks the whole of `/metrics` for that).

use std::fmt::Write as _;

use storage::buckets::BucketSnapshot;

/// The content type of the text exposition format.
pub const CONTENT_TYPE_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The metric types strata exposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Only goes up (resets on restart); the name ends in `_total`.
    Counter,
    /// Goes up and down.
    Gauge,
    /// Bucketed observations with their sum and count.
    Histogram,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// A text exposition being written.
#[derive(Debug, Default)]
pub(crate) struct Exposition {
    text: String,
}

impl Exposition {
    /// Starts a metric family with its help text and type.
    pub fn family(&mut self, name: &str, kind: Kind, help: &str) {
        // Writing into a String cannot fail.
        let _ = writeln!(self.text, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.text, "# TYPE {name} {}", kind.as_str());
    }

    /// A family with a single unlabelled integer sample.
    pub fn single(&mut self, name: &str, kind: Kind, help: &str, value: u64) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
    }

    /// A family with a single unlabelled float sample.
    pub fn single_f64(&mut self, name: &str, kind: Kind, help: &str, value: f64) {
        self.family(name, kind, help);
        self.sample_f64(name, &[], value);
    }

    /// One integer sample.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: u64) {
        self.series(name, labels, None);
        let _ = writeln!(self.text, " {value}");
    }

    /// One float sample.
    pub fn sample_f64(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.series(name, labels, None);
        self.text.push(' ');
        push_float(&mut self.text, value);
        self.text.push('\n');
    }

    /// The samples of one histogram series. Values and bounds in the snapshot are divided by
    /// `divisor` (1e9 turns nanoseconds into the seconds Prometheus wants; 1 keeps counts).
    pub fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &BucketSnapshot, divisor: f64) {
        let bucket = format!("{name}_bucket");
        let mut le = String::new();
        for (bound, count) in h.bounds.iter().zip(&h.cumulative) {
            le.clear();
            // Division, not multiplication by 1e-9: it rounds once, so 250000 ns prints 0.00025.
            push_float(&mut le, *bound as f64 / divisor);
            self.series(&bucket, labels, Some(&le));
            let _ = writeln!(self.text, " {count}");
        }
        self.series(&bucket, labels, Some("+Inf"));
        let _ = writeln!(self.text, " {}", h.count);
        self.sample_f64(&format!("{name}_sum"), labels, h.sum as f64 / divisor);
        self.sample(&format!("{name}_count"), labels, h.count);
    }

    /// The finished text.
    pub fn into_text(self) -> String {
        self.text
    }

    /// `name{labels}`, with `le` last when given.
    fn series(&mut self, name: &str, labels: &[(&str, &str)], le: Option<&str>) {
        self.text.push_str(name);
        if labels.is_empty() && le.is_none() {
            return;
        }
        self.text.push('{');
        let le = le.map(|v| ("le", v));
        for (i, (label, value)) in labels.iter().copied().chain(le).enumerate() {
            if i > 0 {
                self.text.push(',');
            }
            let _ = write!(self.text, "{label}=\"{}\"", escape_label_value(value));
        }
        self.text.push('}');
    }
}

/// A float as the format spells it: `NaN`, `+Inf`, `-Inf`, or Rust's shortest round-trip
/// decimal (never an exponent, which Go's ParseFloat would accept anyway).
fn push_float(out: &mut String, v: f64) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
    } else {
        let _ = write!(out, "{v}");
    }
}

/// Label values escape backslash, double quote and line feed.
fn escape_label_value(value: &str) -> String {
    value.replace('\\', r"\\").replace('"', "\\\"").replace('\n', r"\n")
}

/// Help text escapes backslash and line feed.
fn escape_help(help: &str) -> String {
    help.replace('\\', r"\\").replace('\n', r"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_output_of_every_kind() {
        static BOUNDS: &[u64] = &[250_000, 1_000_000_000];
        let h = BucketSnapshot { bounds: BOUNDS, cumulative: vec![1, 3], count: 4, sum: 7_500_000_000 };
        let mut out = Exposition::default();
        out.family("demo_requests_total", Kind::Counter, "Requests.\nSecond line with a \\.");
        out.sample("demo_requests_total", &[("handler", "/a"), ("code", "200")], 5);
        out.sample("demo_requests_total", &[("handler", "/b")], 0);
        out.single_f64("demo_temperature_celsius", Kind::Gauge, "A float.", -2.5);
        out.family("demo_duration_seconds", Kind::Histogram, "Durations.");
        out.histogram("demo_duration_seconds", &[("handler", "/a")], &h, 1e9);
        out.single("demo_up", Kind::Gauge, "No labels.", 1);
        let expected = "\
# HELP demo_requests_total Requests.\\nSecond line with a \\\\.
# TYPE demo_requests_total counter
demo_requests_total{handler=\"/a\",code=\"200\"} 5
demo_requests_total{handler=\"/b\"} 0
# HELP demo_temperature_celsius A float.
# TYPE demo_temperature_celsius gauge
demo_temperature_celsius -2.5
# HELP demo_duration_seconds Durations.
# TYPE demo_duration_seconds histogram
demo_duration_seconds_bucket{handler=\"/a\",le=\"0.00025\"} 1
demo_duration_seconds_bucket{handler=\"/a\",le=\"1\"} 3
demo_duration_seconds_bucket{handler=\"/a\",le=\"+Inf\"} 4
demo_duration_seconds_sum{handler=\"/a\"} 7.5
demo_duration_seconds_count{handler=\"/a\"} 4
# HELP demo_up No labels.
# TYPE demo_up gauge
demo_up 1
";
        assert_eq!(out.into_text(), expected);
    }

    #[test]
    fn unlabelled_histograms_have_only_le() {
        static BOUNDS: &[u64] = &[1, 2];
        let h = BucketSnapshot { bounds: BOUNDS, cumulative: vec![0, 2], count: 2, sum: 4 };
        let mut out = Exposition::default();
        out.histogram("batch_records", &[], &h, 1.0);
        assert_eq!(
            out.into_text(),
            "batch_records_bucket{le=\"1\"} 0\nbatch_records_bucket{le=\"2\"} 2\n\
             batch_records_bucket{le=\"+Inf\"} 2\nbatch_records_sum 4\nbatch_records_count 2\n"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        let mut out = Exposition::default();
        out.sample("m", &[("l", "a\"b\\c\nd")], 1);
        assert_eq!(out.into_text(), "m{l=\"a\\\"b\\\\c\\nd\"} 1\n");
    }

    #[test]
    fn special_floats_are_spelled_as_prometheus_does() {
        let mut out = Exposition::default();
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.1, 1e-7, 3.0] {
            out.sample_f64("m", &[], v);
        }
        assert_eq!(out.into_text(), "m NaN\nm +Inf\nm -Inf\nm 0.1\nm 0.0000001\nm 3\n");
    }
}

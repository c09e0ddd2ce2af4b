//! The oracle of the `line_parse` fuzz target, shared with
//! `remote/tests/integration/fuzz_corpus.rs`, which replays the named inputs (`fuzz/regressions/`)
//! through it in every `cargo test`.

use remote::Limits;
use remote::line::{self, Precision};

/// `line_parse`'s precision: the mode byte modulo 6.
pub fn line_precision(mode: u8) -> Precision {
    [Precision::Ns, Precision::Us, Precision::Ms, Precision::S, Precision::M, Precision::H]
        [usize::from(mode) % 6]
}

/// `line_parse`: the first byte picks the precision and (bit 0x80) tight label limits, the rest
/// is a line-protocol body. The parser must never panic, and whatever it accepts must be a
/// well-formed batch (sorted unique labels with a metric name, counts that add up).
pub fn line_parse(data: &[u8]) {
    let (mode, body) = data.split_first().map(|(m, b)| (*m, b)).unwrap_or((0, data));
    let limits = if mode & 0x80 != 0 {
        Limits {
            labels_per_series_max: 3,
            label_name_bytes_max: 5,
            label_value_bytes_max: 8,
            ..Limits::default()
        }
    } else {
        Limits::default()
    };
    let p = line::parse(body, line_precision(mode), 1_700_000_000_000_000_000, &limits);
    assert_eq!(p.fields as usize, p.batch.sample_count());
    assert!(p.errors.len() <= line::LINE_ERRORS_MAX);
    assert!(p.bad_lines as usize >= p.errors.len());
    assert!(p.errors.iter().all(|e| e.line >= 1));
    for (labels, samples) in &p.batch.series {
        assert!(!samples.is_empty());
        assert!(labels.metric_name().is_some_and(|n| !n.is_empty()));
        assert!(labels.len() <= limits.labels_per_series_max);
        let names: Vec<&str> = labels.iter().map(|l| l.name.as_ref()).collect();
        assert!(names.windows(2).all(|w| w[0] < w[1]), "{labels}");
        assert!(labels.iter().all(|l| !l.value.is_empty()));
    }
}

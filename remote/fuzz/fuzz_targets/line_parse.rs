//! Fuzzes the line-protocol parser: it must never panic, and whatever it accepts must be a
//! well-formed batch (sorted unique labels with a metric name, counts that add up).

#![no_main]

use libfuzzer_sys::fuzz_target;
use remote::Limits;
use remote::line::{self, Precision};

fuzz_target!(|data: &[u8]| {
    // The first byte picks the precision and whether to use tight label limits.
    let (mode, body) = data.split_first().map(|(m, b)| (*m, b)).unwrap_or((0, data));
    let precision = [Precision::Ns, Precision::Us, Precision::Ms, Precision::S, Precision::M, Precision::H]
        [usize::from(mode) % 6];
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
    let p = line::parse(body, precision, 1_700_000_000_000_000_000, &limits);
    assert_eq!(p.fields as usize, p.batch.sample_count());
    assert!(p.errors.len() <= line::LINE_ERRORS_MAX);
    assert!(p.bad_lines as usize >= p.errors.len());
    for e in &p.errors {
        assert!(e.line >= 1);
    }
    for (labels, samples) in &p.batch.series {
        assert!(!samples.is_empty());
        assert!(labels.metric_name().is_some_and(|n| !n.is_empty()));
        assert!(labels.len() <= limits.labels_per_series_max);
        let names: Vec<&str> = labels.iter().map(|l| l.name.as_ref()).collect();
        assert!(names.windows(2).all(|w| w[0] < w[1]), "{labels}");
        assert!(labels.iter().all(|l| !l.value.is_empty()));
    }
});

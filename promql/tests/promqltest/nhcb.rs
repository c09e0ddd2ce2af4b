//! `load_with_nhcb`: classic histograms (`_bucket`/`_count`/`_sum` float series) converted into
//! native histograms with custom buckets (schema -53), as FORMAT.md §3.5 describes.

use std::collections::BTreeMap;

use storage::{FloatHistogram, HistogramSample, Label, Labels, METRIC_NAME};

use crate::script::LoadSeries;
use crate::values::{Slot, parse_float};

/// The components of one classic histogram, per timestamp.
#[derive(Default)]
struct Parts {
    /// timestamp → `le` → cumulative count.
    buckets: BTreeMap<i64, Vec<(f64, f64)>>,
    count: BTreeMap<i64, f64>,
    sum: BTreeMap<i64, f64>,
}

/// The NHCB series (labels and samples) for the classic histograms among `series`.
pub fn convert(
    interval_ms: i64,
    series: &[LoadSeries],
) -> Result<Vec<(Labels, Vec<HistogramSample>)>, String> {
    let mut groups: BTreeMap<Labels, Parts> = BTreeMap::new();
    for s in series {
        let Some(name) = s.labels.metric_name() else { continue };
        let (base, kind) = if let Some(b) = name.strip_suffix("_bucket") {
            (b, 0)
        } else if let Some(b) = name.strip_suffix("_count") {
            (b, 1)
        } else if let Some(b) = name.strip_suffix("_sum") {
            (b, 2)
        } else {
            continue;
        };
        let le = s.labels.get("le").map(parse_float);
        if kind == 0 && !matches!(le, Some(Some(v)) if !v.is_nan()) {
            continue;
        }
        let mut labels: Vec<Label> = s
            .labels
            .iter()
            .filter(|l| l.name.as_ref() != "le" && l.name.as_ref() != METRIC_NAME)
            .cloned()
            .collect();
        labels.push(Label::new(METRIC_NAME, base));
        let parts = groups.entry(Labels::new(labels)).or_default();
        for (k, slot) in s.slots.iter().enumerate() {
            let Slot::Float(v) = slot else { continue };
            let t = k as i64 * interval_ms;
            match kind {
                0 => parts.buckets.entry(t).or_default().push((le.flatten().unwrap_or(f64::NAN), *v)),
                1 => {
                    parts.count.insert(t, *v);
                }
                _ => {
                    parts.sum.insert(t, *v);
                }
            }
        }
    }
    let mut out = Vec::new();
    for (labels, parts) in groups {
        let mut samples = Vec::new();
        for (t, mut buckets) in parts.buckets {
            buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
            let custom_values: Vec<f64> = buckets.iter().map(|b| b.0).filter(|b| b.is_finite()).collect();
            let top = buckets.last().map_or(0.0, |b| b.1);
            let count = parts.count.get(&t).copied().unwrap_or(top);
            if buckets.last().is_none_or(|b| b.0 != f64::INFINITY) {
                buckets.push((f64::INFINITY, count));
            }
            let mut positive = Vec::with_capacity(buckets.len());
            let mut prev = 0.0;
            for (i, (_, cum)) in buckets.iter().enumerate() {
                let c = cum - prev;
                if c < 0.0 {
                    return Err(format!("{labels}: cumulative bucket counts decrease at {t}"));
                }
                positive.push((i as i32, c));
                prev = *cum;
            }
            let h = FloatHistogram {
                schema: FloatHistogram::CUSTOM_BUCKETS_SCHEMA,
                count,
                sum: parts.sum.get(&t).copied().unwrap_or(0.0),
                positive,
                custom_values,
                ..FloatHistogram::default()
            };
            samples.push(HistogramSample { t, h });
        }
        if !samples.is_empty() {
            out.push((labels, samples));
        }
    }
    Ok(out)
}

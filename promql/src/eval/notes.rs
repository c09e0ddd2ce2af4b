//! Infos the evaluator attaches about the data it read, worded as Prometheus words them.
//!
//! A leaf: it knows labels, options and [`Annotations`], so the step-wise range functions and
//! the pushed-down ones in `pushdown` report the same text without depending on each other.

use storage::Labels;

use super::labels;
use crate::annotations::Annotations;
use crate::options::EngineOptions;

/// Info for `rate`/`increase` over a metric whose name does not look like a counter.
pub(crate) fn note_possible_non_counter(
    opts: &EngineOptions,
    annotations: &mut Annotations,
    l: &Labels,
    pos: usize,
) {
    let name = labels::metric_name(l);
    if name.is_empty() {
        return;
    }
    if opts.type_and_unit_labels {
        let t = l.get("__type__").unwrap_or("");
        if t != "counter" && t != "histogram" {
            annotations.info(
                format!(
                    "metric might not be a counter, __type__ label is not set to \"counter\" or \"histogram\", got {t:?}: {name:?}"
                ),
                pos,
            );
        }
    } else if !["_total", "_sum", "_count", "_bucket"].iter().any(|s| name.ends_with(s)) {
        annotations.info(
            format!(
                "metric might not be a counter, name does not end in _total/_sum/_count/_bucket: {name:?}"
            ),
            pos,
        );
    }
}

/// Info for a window of a float-only function that also held histograms.
pub(crate) fn note_ignored_histograms(a: &mut Annotations, l: &Labels, pos: usize) {
    a.info(
        format!(
            "ignored histograms in a range containing both floats and histograms for metric name {:?}",
            labels::metric_name(l)
        ),
        pos,
    );
}

//! SVG plots of a comparison: ingest rate over time, bytes per point, query latency per type.

use std::path::Path;

use plotters::prelude::*;

use super::RunResult;

const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

fn err(e: impl std::fmt::Display) -> String {
    format!("plot: {e}")
}

/// Points per second over time, one line per load, from the acknowledged-points timeline
/// (rates over windows of a 40th of the longest load, at least 0.25 s; a load shorter than
/// one window is drawn at its average rate).
pub fn ingest(path: &Path, runs: &[RunResult]) -> Result<(), String> {
    let longest = runs.iter().map(|r| r.load.secs).fold(0.0, f64::max);
    let window = (longest / 40.0).max(0.25);
    let lines: Vec<(String, Vec<(f64, f64)>)> = runs
        .iter()
        .filter(|r| r.error.is_none())
        .map(|r| {
            let mut line = rate_series(&r.load.timeline, window);
            if line.len() < 2 {
                line = vec![(0.0, r.load.rate()), (r.load.secs, r.load.rate())];
            }
            (r.label(), line)
        })
        .collect();
    let t_max = lines.iter().flat_map(|(_, l)| l.iter().map(|p| p.0)).fold(1.0, f64::max);
    let y_max = lines.iter().flat_map(|(_, l)| l.iter().map(|p| p.1)).fold(1.0, f64::max) * 1.1;
    let root = SVGBackend::new(path, (1000, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Ingest rate during the load (points/s over {window:.2} s windows)"),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..t_max, 0.0..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("seconds since the first request")
        .y_desc("points/s")
        .y_label_formatter(&|v| format!("{:.1}M", v / 1e6))
        .draw()
        .map_err(err)?;
    for (i, (label, line)) in lines.into_iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(line, color.stroke_width(2)))
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// Rates over windows of `window` seconds from a cumulative `(seconds, points)` timeline.
pub fn rate_series(timeline: &[(f64, u64)], window: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let mut last = match timeline.first() {
        Some(p) => *p,
        None => return out,
    };
    for &(t, n) in &timeline[1..] {
        if t - last.0 >= window || Some(&(t, n)) == timeline.last() {
            let dt = t - last.0;
            if dt > 0.0 {
                out.push((t, (n - last.1) as f64 / dt));
            }
            last = (t, n);
        }
    }
    out
}

/// Disk bytes per point of every load, as horizontal bars.
pub fn bytes_per_point(path: &Path, runs: &[RunResult]) -> Result<(), String> {
    let bars: Vec<(String, f64)> =
        runs.iter().filter(|r| r.error.is_none()).map(|r| (r.label(), r.bytes_per_point())).collect();
    let x_max = bars.iter().map(|b| b.1).fold(0.1, f64::max) * 1.15;
    let n = bars.len().max(1);
    let root = SVGBackend::new(path, (1000, 120 + 40 * n as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("Disk bytes per point after flush and merge", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(260)
        .build_cartesian_2d(0.0..x_max, (0..n).into_segmented())
        .map_err(err)?;
    let names: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc("bytes per point")
        .y_labels(n)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => names.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .draw()
        .map_err(err)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
            let color = PALETTE[i % PALETTE.len()];
            let mut bar = Rectangle::new(
                [(0.0, SegmentValue::Exact(i)), (*v, SegmentValue::Exact(i + 1))],
                color.filled(),
            );
            bar.set_margin(6, 6, 0, 0);
            bar
        }))
        .map_err(err)?;
    chart
        .draw_series(bars.iter().enumerate().map(|(i, (_, v))| {
            Text::new(format!(" {v:.3}"), (*v, SegmentValue::CenterOf(i)), ("sans-serif", 14))
        }))
        .map_err(err)?;
    root.present().map_err(err)
}

/// Median latency per query type at `clients` clients of every PromQL system: horizontal bars,
/// grouped by type, on a log scale.
pub fn query_latency(path: &Path, runs: &[RunResult], types: &[&str], clients: usize) -> Result<(), String> {
    let systems: Vec<&RunResult> = runs.iter().filter(|r| !r.timings.is_empty()).collect();
    let value = |r: &RunResult, kind: &str| {
        r.timings.iter().find(|t| t.kind == kind && t.clients == clients).map(|t| t.p50_ms.max(0.01))
    };
    let all: Vec<f64> = systems.iter().flat_map(|r| types.iter().filter_map(|k| value(r, k))).collect();
    let x_min = all.iter().copied().fold(f64::INFINITY, f64::min).min(1.0) / 2.0;
    let x_max = all.iter().copied().fold(1.0, f64::max) * 2.0;
    // One slot per (type, system) plus an empty slot between types; the first type on top.
    let group = systems.len() + 1;
    let slots = types.len() * group;
    let slot = |type_index: usize, s: usize| slots - 1 - (type_index * group + s);
    let root = SVGBackend::new(path, (1000, 80 + 14 * slots as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Query latency p50 per type, {clients} client(s) (ms, log scale)"),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(170)
        .build_cartesian_2d((x_min..x_max).log_scale(), (0..slots).into_segmented())
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(slots)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(j) if *j < slots && (slots - 1 - j) % group == (group - 2) / 2 => {
                types.get((slots - 1 - j) / group).map(|s| (*s).to_owned()).unwrap_or_default()
            }
            _ => String::new(),
        })
        .x_desc("ms")
        .draw()
        .map_err(err)?;
    for (s, run) in systems.iter().enumerate() {
        let color = PALETTE[s % PALETTE.len()];
        let bars: Vec<(usize, f64)> =
            types.iter().enumerate().filter_map(|(i, k)| value(run, k).map(|v| (slot(i, s), v))).collect();
        chart
            .draw_series(bars.into_iter().map(|(j, v)| {
                Rectangle::new(
                    [(x_min, SegmentValue::Exact(j)), (v, SegmentValue::Exact(j + 1))],
                    color.filled(),
                )
            }))
            .map_err(err)?
            .label(run.system.name())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_from_a_cumulative_timeline() {
        let t = [(0.0, 0), (0.5, 50), (1.0, 100), (1.5, 100), (2.0, 300), (2.2, 320)];
        let r = rate_series(&t, 1.0);
        assert_eq!(r[..2], [(1.0, 100.0), (2.0, 200.0)]);
        assert_eq!(r.len(), 3);
        assert!((r[2].1 - 100.0).abs() < 1e-6, "the last partial window: {r:?}");
        assert!(rate_series(&[], 1.0).is_empty());
    }
}

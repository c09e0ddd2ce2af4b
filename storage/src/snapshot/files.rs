//! Reading one series from the files of a partition: each file's run (its samples in range
//! without the tombstoned ones), merged with later files winning at a shared timestamp. Queries
//! read through these, and compaction reads its input files through them too.

use std::sync::Arc;

use super::LiveFile;
use crate::error::Result;
use crate::hist;
use crate::manifest::Tombstone;
use crate::matcher::matches_all;
use crate::merge::{SourceConcat, keep_from, merge_sources};
use crate::query::StartTimestamp;
use crate::start_ts;
use crate::types::{HistogramSample, Labels, Sample, SeriesId};
use crate::window_agg::ScanStats;

/// Reads a series from `files` (ascending seq) in `[mint, maxt]`, hiding tombstoned samples and
/// letting later files win at equal timestamps. The blocks it decodes and their samples are
/// added to `stats` (a query's statistics).
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_files(
    files: &[Arc<LiveFile>],
    tombs: &[Tombstone],
    id: SeriesId,
    labels: &Labels,
    mint: i64,
    maxt: i64,
    out: &mut Vec<Sample>,
    stats: &mut ScanStats,
) -> Result<()> {
    let mut merge = SourceConcat::new(out);
    for f in files {
        let from = out.len();
        if file_run_into(f, tombs, id, labels, mint, maxt, out, stats)? {
            merge.added(out, from);
        }
    }
    merge.finish(out);
    Ok(())
}

/// The series' samples in one file in `[mint, maxt]` without its tombstoned ones; None if the
/// file cannot hold any.
fn file_run(
    f: &LiveFile,
    tombs: &[Tombstone],
    id: SeriesId,
    labels: &Labels,
    mint: i64,
    maxt: i64,
) -> Result<Option<Vec<Sample>>> {
    let mut run = Vec::new();
    Ok(file_run_into(f, tombs, id, labels, mint, maxt, &mut run, &mut ScanStats::default())?.then_some(run))
}

/// [`file_run`] appended to `out`; false (nothing appended) if the file cannot hold any. The
/// blocks decoded and their samples are added to `stats`.
#[allow(clippy::too_many_arguments)]
fn file_run_into(
    f: &LiveFile,
    tombs: &[Tombstone],
    id: SeriesId,
    labels: &Labels,
    mint: i64,
    maxt: i64,
    out: &mut Vec<Sample>,
    stats: &mut ScanStats,
) -> Result<bool> {
    if f.entry.max_t < mint || f.entry.min_t > maxt || !f.file()?.contains(id) {
        return Ok(false);
    }
    let from = out.len();
    f.file()?.read_counted(id, mint, maxt, out, stats)?;
    for t in tombs.iter().filter(|t| t.applies_to(&f.entry) && matches_all(&t.matchers, labels)) {
        keep_from(out, from, |s| s.t < t.mint || s.t > t.maxt);
    }
    Ok(true)
}

/// [`read_files`], also appending the start timestamps of the merged samples to `starts`: each
/// sample's from the file whose copy of it wins, so a newer copy without one leaves the sample
/// without one, and a tombstoned sample takes its start timestamp with it. Series without start
/// timestamps in these files take [`read_files`]'s path.
#[allow(clippy::too_many_arguments)]
pub(crate) fn read_files_with_starts(
    files: &[Arc<LiveFile>],
    tombs: &[Tombstone],
    id: SeriesId,
    labels: &Labels,
    mint: i64,
    maxt: i64,
    out: &mut Vec<Sample>,
    starts: &mut Vec<StartTimestamp>,
) -> Result<()> {
    if !files.iter().any(|f| f.may_hold(|p| p.has_starts(id))) {
        return read_files(files, tombs, id, labels, mint, maxt, out, &mut ScanStats::default());
    }
    let mut sources = Vec::new();
    for f in files {
        let Some(run) = file_run(f, tombs, id, labels, mint, maxt)? else { continue };
        let mut st = Vec::new();
        f.file()?.read_starts(id, &run, &mut st)?;
        sources.push((run, st));
    }
    start_ts::merge(&sources, starts);
    merge_sources(sources.into_iter().map(|(run, _)| run).collect(), out);
    Ok(())
}

/// The merged histograms of a series in `files` in `[mint, maxt]`, appended to `out`: each
/// timestamp's from the file whose sample wins there (see [`crate::hist`]). Files without
/// histograms for the series still take part, since their floats may replace older
/// histograms. Returns at once when no file has histograms for the series.
pub(crate) fn read_files_histograms(
    files: &[Arc<LiveFile>],
    tombs: &[Tombstone],
    id: SeriesId,
    labels: &Labels,
    mint: i64,
    maxt: i64,
    out: &mut Vec<HistogramSample>,
) -> Result<()> {
    if !files.iter().any(|f| f.may_hold(|p| p.has_histograms(id))) {
        return Ok(());
    }
    let mut sources = Vec::new();
    for f in files {
        let Some(run) = file_run(f, tombs, id, labels, mint, maxt)? else { continue };
        let mut hs = Vec::new();
        f.file()?.read_histograms(id, &run, &mut hs)?;
        sources.push((run, hs));
    }
    hist::merge(sources, out);
    Ok(())
}

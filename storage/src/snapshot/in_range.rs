//! "Does this series have a sample in `[mint, maxt]`?", asked for many series of one snapshot.
//!
//! Every lookup (`select`, label names, label values) must leave out series without data in the
//! queried range, exactly: a series whose samples were all rejected, deleted or dropped by
//! retention, or that only has data elsewhere in time, is not in the answer. The sources that
//! can hold data in the range are worked out once per query, so the test per series is cheap:
//!
//! 1. the series' newest accepted timestamp (kept per series for the out-of-order window) is
//!    an upper bound of its data: below `mint`, the answer is no without looking further. It is
//!    also the time of a sample that still exists, unless something removed it: a deletion
//!    (so not after any [`Db::delete`](crate::Db::delete) in this process, nor while a
//!    tombstone is live) or retention (so not below the oldest partition kept). Short of those,
//!    a newest timestamp inside the range answers yes, which is the common case of a dashboard
//!    range ending now;
//! 2. the heads whose time bounds overlap the range, active head first: the series' chunk
//!    bounds there, decoding a chunk only if it straddles an end of the range;
//! 3. the partition files overlapping the range, newest first: a file entirely inside the
//!    range holds data in it for every series it contains (files hold no empty series), so
//!    membership (a binary search) is the answer; a file straddling the range has the series'
//!    block list read: a block whose first or last timestamp (both those of samples) is in the
//!    range answers yes, and only a block reaching past both ends of the range has its
//!    timestamps read (counted without decoding where they are implied by its statistics).
//!    Only tombstones that cover part of the range and apply to the file make the test read
//!    the samples themselves.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::LiveFile;
use super::Snapshot;
use super::files::read_files;
use crate::error::Result;
use crate::head::Head;
use crate::manifest::Tombstone;
use crate::matcher::matches_all;
use crate::partition::BlockMeta;
use crate::types::{Labels, SeriesId};
use crate::window_agg::ScanStats;

/// A partition file that may hold data in the range.
struct FileCheck<'a> {
    file: &'a Arc<LiveFile>,
    /// All of the file's samples lie in the range: containing the series is enough.
    covered: bool,
    /// Tombstones that apply to the file and cover part of the range.
    tombstones: Vec<&'a Tombstone>,
}

/// The sources of one snapshot that may hold data in `[mint, maxt]`.
pub(super) struct InRange<'a> {
    snap: &'a Snapshot,
    mint: i64,
    maxt: i64,
    heads: Vec<&'a Head>,
    files: Vec<FileCheck<'a>>,
    /// Newest timestamps at or above this are the times of existing samples (None: they may
    /// name removed samples).
    newest_exists_from: Option<i64>,
}

impl<'a> InRange<'a> {
    /// The sources of `snap` overlapping `[mint, maxt]` (none if `mint > maxt`).
    pub(super) fn new(snap: &'a Snapshot, mint: i64, maxt: i64) -> Self {
        let mut check =
            InRange { snap, mint, maxt, heads: Vec::new(), files: Vec::new(), newest_exists_from: None };
        if mint > maxt {
            return check;
        }
        let s = &snap.state;
        let overlaps = |(lo, hi): (i64, i64)| lo <= maxt && hi >= mint;
        check.heads = std::iter::once(&s.head)
            .chain(s.frozen.iter().rev().map(|f| &f.head))
            .filter(|h| h.time_bounds().is_some_and(overlaps))
            .map(|h| h.as_ref())
            .collect();
        for files in snap.partitions_in(mint, maxt).collect::<Vec<_>>().into_iter().rev() {
            for file in files.iter().rev() {
                let e = &file.entry;
                if !overlaps((e.min_t, e.max_t)) {
                    continue;
                }
                let tombstones = s
                    .tombstones
                    .iter()
                    .filter(|t| t.applies_to(e) && t.mint <= maxt && t.maxt >= mint)
                    .collect();
                check.files.push(FileCheck { file, covered: e.min_t >= mint && e.max_t <= maxt, tombstones });
            }
        }
        let nothing_deleted = s.tombstones.is_empty() && !snap.shared.deleted.load(Ordering::Acquire);
        // Retention removes whole partitions, oldest first: a sample in or after the oldest kept
        // partition was not removed by it. Without partitions, the heads hold all the data.
        let kept_from = match s.partitions.keys().next() {
            Some(&oldest) => Some(oldest),
            None => std::iter::once(&s.head)
                .chain(s.frozen.iter().map(|f| &f.head))
                .filter_map(|h| h.time_bounds().map(|b| b.0))
                .min(),
        };
        check.newest_exists_from = kept_from.filter(|_| nothing_deleted);
        check
    }

    /// True if no source overlaps the range: no series has data in it.
    pub(super) fn is_empty(&self) -> bool {
        self.heads.is_empty() && self.files.is_empty()
    }

    /// Whether series `id` has a sample in the range. `labels` are the series' labels if the
    /// caller has them; they are looked up only when a tombstone may hide data.
    pub(super) fn has_data(&self, id: SeriesId, labels: Option<&Labels>) -> Result<bool> {
        if self.is_empty() {
            return Ok(false);
        }
        let newest = self.snap.shared.series.max_t(id);
        if newest < self.mint {
            return Ok(false);
        }
        if newest <= self.maxt && self.newest_exists_from.is_some_and(|from| newest >= from) {
            return Ok(true);
        }
        if self.heads.iter().any(|h| h.overlaps(id, self.mint, self.maxt)) {
            return Ok(true);
        }
        let mut looked_up: Option<Option<Labels>> = None;
        for f in &self.files {
            let file = f.file.file()?;
            if f.covered && f.tombstones.is_empty() {
                if file.contains(id) {
                    return Ok(true);
                }
                continue;
            }
            // Empty if the series is not in the file or has no block overlapping the range.
            let blocks = file.blocks_in(id, self.mint, self.maxt)?;
            if blocks.is_empty() {
                continue;
            }
            if !f.tombstones.is_empty() {
                let labels = match labels {
                    Some(l) => Some(l),
                    None => looked_up.get_or_insert_with(|| self.snap.labels(id)).as_ref(),
                };
                // Removed from the index meanwhile: nothing to answer for.
                let Some(labels) = labels else { return Ok(false) };
                if f.tombstones.iter().any(|t| matches_all(&t.matchers, labels)) {
                    let (s, mut samples) = (&self.snap.state, Vec::new());
                    read_files(
                        std::slice::from_ref(f.file),
                        &s.tombstones,
                        id,
                        labels,
                        self.mint,
                        self.maxt,
                        &mut samples,
                        &mut ScanStats::default(),
                    )?;
                    if !samples.is_empty() {
                        return Ok(true);
                    }
                    continue;
                }
            }
            if f.covered || self.blocks_have_data(f.file, &blocks)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether one of a series' `blocks` in `file` has a sample in the range. A block's first
    /// and last timestamps are those of samples, so a block with either in the range answers
    /// without decoding; only a block reaching past both ends of the range has its timestamps
    /// looked at (counted where they are implied, never its values).
    fn blocks_have_data(&self, file: &LiveFile, blocks: &[BlockMeta]) -> Result<bool> {
        let in_range = |t: i64| t >= self.mint && t <= self.maxt;
        for b in blocks {
            let (lo, hi) = (b.stats.min_t, b.stats.max_t);
            if hi < self.mint || lo > self.maxt {
                continue;
            }
            if in_range(lo) || in_range(hi) {
                return Ok(true);
            }
            if file.file()?.block_has_time_in(b, self.mint, self.maxt)? {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

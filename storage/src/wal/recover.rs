//! Startup recovery: replay every record, repair a torn tail, refuse (or, when asked, cut off)
//! corruption in the middle of the log.
//!
//! Why a damaged record at the end of the last segment is a torn tail and anything else is
//! corruption: the writer fsyncs a segment completely before it creates the next one, and
//! acknowledges a record only after an fsync that covers it. So a crash can only leave
//! incomplete or garbage bytes after the last valid record of the newest segment. Damage that
//! has valid records after it, or sits in an older segment, did not come from a crash.
//!
//! Why a segment that continues a run must follow the run's previous segment: the writer
//! continues a run only into the segment numbered one above, after syncing the one below, and
//! the log is only ever cut where a run starts. A missing predecessor means records that later
//! ones may rely on are gone, which no crash does.

use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::fsutil;

use super::format::{self, Frame, SEGMENT_HEADER_LEN, SegmentHeader};
use super::segment;
use super::{Position, ReplayStats, WalOptions};

/// What recovery leaves for the writer.
pub(crate) struct Recovered {
    /// What was replayed and dropped.
    pub stats: ReplayStats,
    /// The number the first new segment must get: above every segment ever seen in the
    /// directory (recovered ones are never appended to) and not below `first_segment`.
    pub next_segment: u64,
}

/// Where a segment stops being readable.
#[derive(Debug)]
pub(super) struct Damage {
    /// Byte offset of the first bad frame (0 when the segment header is bad).
    pub offset: u64,
    /// What is wrong there.
    pub reason: String,
    /// Whether any valid record (or, after a bad header, any non-zero byte) follows it.
    pub data_follows: bool,
}

/// Runs recovery in `opts.dir` (which exists): deletes segments below `first_segment`, then
/// replays the rest in order through `replay`, repairing the directory as it goes.
pub(crate) fn recover(
    opts: &WalOptions,
    first_segment: u64,
    replay: &mut dyn FnMut(Position, &[u8]) -> Result<()>,
) -> Result<Recovered> {
    let mut segments = segment::list(&opts.dir)?;
    let highest_seen = segments.last().map(|(number, _)| *number);
    let flushed = segments.iter().take_while(|(number, _)| *number < first_segment).count();
    if flushed > 0 {
        for (_, path) in segments.drain(..flushed) {
            fsutil::remove_path(&path)?;
        }
        fsutil::sync_dir(&opts.dir)?;
    }

    if let (Some((first, _)), Some((last, _))) = (segments.first(), segments.last()) {
        opts.progress.begin(*first, *last);
    }
    let mut stats = ReplayStats::default();
    let mut data = Vec::new();
    // Whole segments without a record: what a start followed by a stop without writes leaves.
    let mut empty = Vec::new();
    let mut last = None;
    for (index, (number, path)) in segments.iter().enumerate() {
        opts.progress.reached(*number);
        read_whole(path, &mut data)?;
        stats.segments += 1;
        let records_before = stats.records;
        let Some(damage) = replay_segment(&data, *number, &mut last, &mut stats, replay)? else {
            if stats.records == records_before {
                empty.push(path);
            }
            continue;
        };
        let is_last = index + 1 == segments.len();
        let later = segments.get(index + 1..).unwrap_or_default();
        handle_damage(opts, path, data.len() as u64, damage, is_last, later, &mut stats)?;
        break;
    }
    opts.progress.finish();
    // Recovered segments are never appended to, and an empty one replays nothing: without
    // this, every restart between two flushes would leave one more behind (a flush removes
    // only segments below its own). Numbers are never reused (`next_segment` counts the
    // deleted ones), and a deletion lost to a crash leaves an empty segment, as before. No
    // segment continues the run of an empty one: the writer continues a run only after a
    // segment that holds a record.
    if !empty.is_empty() {
        for path in empty {
            fsutil::remove_path(path)?;
        }
        fsutil::sync_dir(&opts.dir)?;
    }

    let next_segment = highest_seen.map_or(1, |n| n.saturating_add(1)).max(first_segment).max(1);
    Ok(Recovered { stats, next_segment })
}

/// Replays the records of one segment's bytes; returns where it is damaged, if it is.
/// `last` is where the previous segment replayed (None before the first); once this
/// segment's header checks out it is set to this segment and its run.
pub(super) fn replay_segment(
    data: &[u8],
    number: u64,
    last: &mut Option<Position>,
    stats: &mut ReplayStats,
    replay: &mut dyn FnMut(Position, &[u8]) -> Result<()>,
) -> Result<Option<Damage>> {
    let header = SegmentHeader::decode(data).and_then(|h| {
        if h.number == number {
            Ok(h)
        } else {
            Err(format!("segment header says number {}, file name says {number}", h.number))
        }
    });
    let header = match header {
        Ok(h) => h,
        Err(reason) => {
            // Without a header there is no salt to verify frames with. A crash while creating
            // the segment leaves no records (they are written only after the header is synced),
            // so any non-zero byte past the header means data is being lost, not a torn tail.
            let data_follows =
                data.get(SEGMENT_HEADER_LEN..).is_some_and(|rest| rest.iter().any(|&b| b != 0));
            return Ok(Some(Damage { offset: 0, reason, data_follows }));
        }
    };
    let run = match *last {
        _ if header.starts_run => number,
        Some(previous) if previous.segment.checked_add(1) == Some(number) => previous.run,
        _ => {
            let reason = format!(
                "segment {number} continues a run, but segment {} before it is not in the log",
                number.saturating_sub(1)
            );
            return Ok(Some(Damage { offset: 0, reason, data_follows: true }));
        }
    };
    let at = Position { segment: number, run };
    *last = Some(at);
    let mut offset = SEGMENT_HEADER_LEN;
    while offset < data.len() {
        match format::decode_frame(data, offset, header.salt) {
            Frame::Record { payload, next } => {
                replay(at, payload)?;
                stats.records += 1;
                stats.bytes += (next - offset) as u64;
                offset = next;
            }
            Frame::Damaged(reason) => {
                let data_follows = format::valid_frame_follows(data, offset, header.salt);
                return Ok(Some(Damage { offset: offset as u64, reason: reason.to_string(), data_follows }));
            }
        }
    }
    Ok(None)
}

/// Truncates a torn tail, or refuses / cuts off corruption according to `opts.truncate_corrupt`.
fn handle_damage(
    opts: &WalOptions,
    path: &Path,
    len: u64,
    damage: Damage,
    is_last: bool,
    later: &[(u64, PathBuf)],
    stats: &mut ReplayStats,
) -> Result<()> {
    let tail_bytes = len.saturating_sub(damage.offset);
    if is_last && !damage.data_follows {
        tracing::warn!(
            segment = %path.display(),
            offset = damage.offset,
            dropped_bytes = tail_bytes,
            reason = %damage.reason,
            "WAL: truncating torn tail (unacknowledged writes interrupted by a crash)"
        );
        cut(opts, path, damage.offset)?;
        stats.truncated_bytes += tail_bytes;
        return Ok(());
    }
    let where_ = if is_last { "followed by valid records" } else { "in a segment that is not the newest" };
    if !opts.truncate_corrupt {
        return Err(Error::corruption(
            path,
            Some(damage.offset),
            format!(
                "WAL {} {where_}; refusing to drop acknowledged data (set the WAL truncate-corrupt \
                 option to truncate the log here)",
                damage.reason
            ),
        ));
    }
    let mut dropped_bytes = tail_bytes;
    for (_, later_path) in later {
        dropped_bytes += fs::metadata(later_path).map(|m| m.len()).unwrap_or_default();
        fsutil::remove_path(later_path)?;
    }
    cut(opts, path, damage.offset)?;
    fsutil::sync_dir(&opts.dir)?;
    stats.truncated_bytes += dropped_bytes;
    tracing::warn!(
        segment = %path.display(),
        offset = damage.offset,
        reason = %damage.reason,
        dropped_bytes,
        dropped_segments = ?later.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
        "WAL: corruption {where_}; truncating there as configured (records after it are lost)"
    );
    Ok(())
}

/// Durably shortens `path` to `offset` bytes; a segment without a valid header is removed.
fn cut(opts: &WalOptions, path: &Path, offset: u64) -> Result<()> {
    if offset == 0 {
        fsutil::remove_path(path)?;
        return fsutil::sync_dir(&opts.dir);
    }
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| Error::io(format!("open {} to truncate", path.display()), e))?;
    file.set_len(offset)
        .and_then(|()| {
            crate::powercut::syncing_file(&file);
            file.sync_all()
        })
        .map_err(|e| Error::io(format!("truncate {} to {offset} bytes", path.display()), e))
}

/// Reads the whole file into `buf` (reused across segments): one sequential read.
fn read_whole(path: &Path, buf: &mut Vec<u8>) -> Result<()> {
    buf.clear();
    File::open(path)
        .and_then(|mut f| f.read_to_end(buf))
        .map(drop)
        .map_err(|e| Error::io(format!("read WAL segment {}", path.display()), e))
}

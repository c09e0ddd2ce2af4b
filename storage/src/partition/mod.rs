//! Immutable partition files: the samples of one time partition, per series, as checksummed
//! blocks with statistics. Layout in `docs/format/partition.md`.
//!
//! A file is written once ([`FileWriter`]), renamed into place, listed in the manifest, and
//! then only read ([`PartitionFile`], through `mmap`) until compaction or retention replaces it.

mod block_lists;
mod chunks;
mod in_part;
mod reader;
mod writer;

#[cfg(test)]
pub(crate) use in_part::WHOLE_AFTER_SCANS;

pub use block_lists::kept_bytes as block_list_bytes;
pub use reader::{BlockMeta, PartitionFile};
pub use writer::{FileWriter, SeriesPart};

use crate::types::Sample;

/// File magic at offset 0.
pub const MAGIC: &[u8; 8] = b"STRATAPF";
/// Footer magic, the last 4 bytes.
pub const FOOTER_MAGIC: &[u8; 4] = b"SPF1";
/// Format version after the magic, the one written. Version 2 chains each block's statistics
/// on the previous block's and leaves a regular block's count and timestamps to them
/// (`docs/format/partition.md`). Version 3 adds a bit to each block's statistics: the block's
/// values never decrease, so `rate`/`increase` can take it whole (`BlockStats::no_decrease`).
/// Version 4 adds another: its values are all integers, so `sum_over_time` can take its `sum`
/// without reading it (`BlockStats::integral`). Version 5 lays the index out so that a reader
/// of a bucket object can fetch a part of it: the series table in chunks listed in a directory
/// with their checksums and metric-name ranges, the symbols and the directory after the
/// series table, where a read of the file's tail finds them (`chunks.rs`). Readers still open
/// versions 1 to 4.
pub const VERSION: u32 = 5;
/// Oldest format version readers open: version 1 stores statistics relative to the previous
/// block's last timestamp only, and every block carries its own count and timestamps.
pub const VERSION_MIN: u32 = 1;
/// Bytes of the header (magic + version).
pub const HEADER_LEN: usize = 12;
/// Bytes of the footer.
pub const FOOTER_LEN: usize = 32;
/// First byte of the optional start-timestamp table, which follows the series table when some
/// series of the file has start timestamps (`docs/format/start_timestamps.md`). A file without
/// any ends its index at the series table, as files did before the table existed.
pub const STARTS_TAG: u8 = b'S';
/// First byte of the optional histogram table (`docs/format/histograms.md`), after the
/// start-timestamp table if both are present; written only when some series has native
/// histograms.
pub const HISTS_TAG: u8 = b'H';
/// First byte of the series-chunk directory of a version 5 file, after the symbol table.
pub const DIRECTORY_TAG: u8 = b'D';

/// Splits sorted samples into blocks of at most `max` samples that lie inside one grid cell
/// `(k·grid_ms, (k+1)·grid_ms]`, e.g. one hour. The cells are open on the left like PromQL's
/// range windows `(t - range, t]`, so a query stepping on whole hours with a range of whole
/// hours covers whole blocks and can answer them from their statistics.
/// Partitions are closed on the left (`[d, d + partition_ms)`), so a sample exactly on a
/// partition start is written apart from the rest of its cell, a block of its own in the later
/// partition.
pub fn cut_blocks(samples: &[Sample], max: usize, grid_ms: i64) -> Vec<&[Sample]> {
    let max = max.max(1);
    let mut out = Vec::with_capacity(samples.len() / max + 1);
    let mut rest = samples;
    while let Some(first) = rest.first() {
        // The last timestamp of the first sample's cell; a binary search finds where the cell
        // (or the block's room) ends, rather than a division per sample.
        let cell_end = if grid_ms > 0 {
            grid_cell(first.t, grid_ms).saturating_add(1).saturating_mul(grid_ms)
        } else {
            i64::MAX
        };
        let room = &rest[..rest.len().min(max)];
        let n = room.partition_point(|s| s.t <= cell_end).max(1);
        let (block, tail) = rest.split_at(n);
        out.push(block);
        rest = tail;
    }
    out
}

/// The grid cell `(k·grid_ms, (k+1)·grid_ms]` that holds `t`, as `k` (0 for every `t` without a
/// grid).
pub fn grid_cell(t: i64, grid_ms: i64) -> i64 {
    if grid_ms > 0 { t.saturating_sub(1).div_euclid(grid_ms) } else { 0 }
}

#[cfg(test)]
mod tests;

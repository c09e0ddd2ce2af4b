//! Writes one partition file.

use std::collections::HashMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::encoding::varint::put_uvarint;
use crate::encoding::{BlockStats, StatsChain, encode_indexed_block};
use crate::error::{Error, Result};
use crate::fsutil;
use crate::query::StartTimestamp;
use crate::start_ts::StRuns;
use crate::types::{HistogramSample, Labels, Sample};

use super::chunks::{CHUNK_SERIES, ChunkEntry};
use super::{FOOTER_MAGIC, HISTS_TAG, MAGIC, STARTS_TAG, VERSION, cut_blocks};

/// One piece of a series given to [`FileWriter::add_series_blocks`].
#[derive(Debug, Clone, Copy)]
pub enum SeriesPart<'a> {
    /// Samples to cut into blocks and encode (sorted, unique timestamps).
    Samples(&'a [Sample]),
    /// One encoded block of a format-[`VERSION`] file: its bytes (without the CRC), already
    /// checked against the CRC that file stored ([`super::PartitionFile::checked_block`]), and
    /// its statistics, which its decoder reads (codec 4).
    Block {
        /// The encoded block.
        bytes: &'a [u8],
        /// Its CRC32, as stored after it.
        crc: u32,
        /// Its statistics.
        stats: BlockStats,
    },
}

/// The first and last timestamp of `parts` (given in time order), None if they hold no sample.
fn parts_time_range(parts: &[SeriesPart<'_>]) -> Option<(i64, i64)> {
    let bounds = |p: &SeriesPart<'_>| match *p {
        SeriesPart::Samples(s) => Some((s.first()?.t, s.last()?.t)),
        SeriesPart::Block { stats, .. } => Some((stats.min_t, stats.max_t)),
    };
    let lo = parts.iter().find_map(bounds)?.0;
    let hi = parts.iter().rev().find_map(bounds)?.1;
    Some((lo, hi))
}

/// Streams series into a new partition file. Blocks are written as series are added; the symbol
/// table and series index follow at [`FileWriter::finish`], which fsyncs and renames the file
/// into place. Series must be added in label order, each once.
pub struct FileWriter {
    path: PathBuf,
    tmp: PathBuf,
    out: BufWriter<File>,
    offset: u64,
    symbols: HashMap<Arc<str>, u32>,
    symbol_list: Vec<Arc<str>>,
    /// Encoded series entries (labels as symbol refs + block list), in order.
    series: Vec<u8>,
    series_count: u64,
    /// The series table's chunks so far: [`CHUNK_SERIES`] series each, the last one open.
    chunks: Vec<ChunkEntry>,
    /// Where in `series` the open chunk starts.
    chunk_start: usize,
    /// The start-timestamp table's entries (series ordinal delta, length, runs); empty when no
    /// series has start timestamps, and then the table is not written at all.
    starts: Vec<u8>,
    starts_count: u64,
    /// Ordinal of the last series with start timestamps, for the next entry's delta.
    starts_prev: u64,
    /// The histogram table's entries (series ordinal delta, offset, length), like `starts`.
    hists: Vec<u8>,
    hists_count: u64,
    hists_prev: u64,
    last_labels: Option<Labels>,
    block_samples_max: usize,
    block_grid_ms: i64,
    block_buf: Vec<u8>,
    entry_buf: Vec<u8>,
    /// Samples written.
    pub samples: u64,
    /// Blocks written, copied ones included.
    pub blocks: u64,
    /// Oldest and newest timestamps written.
    pub time_range: Option<(i64, i64)>,
}

impl FileWriter {
    /// Starts writing `path` (as `path.tmp` until finished).
    pub fn create(path: &Path, block_samples_max: usize, block_grid_ms: i64) -> Result<Self> {
        let tmp = fsutil::tmp_path(path);
        let f = fsutil::create_file(&tmp)?;
        let mut w = FileWriter {
            path: path.to_path_buf(),
            tmp,
            out: BufWriter::with_capacity(1 << 20, f),
            offset: 0,
            symbols: HashMap::new(),
            symbol_list: Vec::new(),
            series: Vec::new(),
            series_count: 0,
            chunks: Vec::new(),
            chunk_start: 0,
            starts: Vec::new(),
            starts_count: 0,
            starts_prev: 0,
            hists: Vec::new(),
            hists_count: 0,
            hists_prev: 0,
            last_labels: None,
            block_samples_max,
            block_grid_ms,
            block_buf: Vec::new(),
            entry_buf: Vec::new(),
            samples: 0,
            blocks: 0,
            time_range: None,
        };
        let mut header = Vec::with_capacity(super::HEADER_LEN);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&VERSION.to_le_bytes());
        w.write(&header)?;
        Ok(w)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        fsutil::write_file(&mut self.out, &self.tmp, bytes)?;
        self.offset += bytes.len() as u64;
        Ok(())
    }

    fn symbol(&mut self, s: &Arc<str>) -> u32 {
        if let Some(&i) = self.symbols.get(s) {
            return i;
        }
        let i = self.symbol_list.len() as u32;
        self.symbols.insert(s.clone(), i);
        self.symbol_list.push(s.clone());
        i
    }

    /// Adds one series with its samples (sorted by time, unique timestamps, non-empty).
    #[cfg(any(test, feature = "testing"))]
    pub fn add_series(&mut self, labels: &Labels, samples: &[Sample]) -> Result<()> {
        self.add_series_with_starts(labels, samples, &[])
    }

    /// [`FileWriter::add_series`] with the start timestamps of the samples that have one
    /// (sorted by time, each at a sample's timestamp), stored as runs in the file's
    /// start-timestamp table.
    #[cfg(any(test, feature = "testing"))]
    pub fn add_series_with_starts(
        &mut self,
        labels: &Labels,
        samples: &[Sample],
        starts: &[StartTimestamp],
    ) -> Result<()> {
        self.add_series_full(labels, samples, starts, &[])
    }

    /// [`FileWriter::add_series_with_starts`] with the histograms of the series' marker samples
    /// (sorted by time, each at a marker's timestamp; see [`crate::hist`]), written as
    /// histogram chunks after its blocks and listed in the file's histogram table.
    pub fn add_series_full(
        &mut self,
        labels: &Labels,
        samples: &[Sample],
        starts: &[StartTimestamp],
        hists: &[HistogramSample],
    ) -> Result<()> {
        if !self.write_series(labels, &[SeriesPart::Samples(samples)])? {
            return Ok(());
        }
        if !starts.is_empty() {
            let runs = StRuns::from_samples(samples, starts);
            if !runs.is_empty() {
                let mut bytes = Vec::new();
                runs.encode(&mut bytes);
                put_uvarint(&mut self.starts, self.series_count - self.starts_prev);
                put_uvarint(&mut self.starts, bytes.len() as u64);
                self.starts.extend_from_slice(&bytes);
                self.starts_prev = self.series_count;
                self.starts_count += 1;
            }
        }
        if !hists.is_empty() {
            let mut bytes = Vec::new();
            crate::hist::encode_chunks(hists, &mut bytes);
            let crc = crc32fast::hash(&bytes);
            bytes.extend_from_slice(&crc.to_le_bytes());
            let at = self.offset;
            self.write(&bytes)?;
            put_uvarint(&mut self.hists, self.series_count - self.hists_prev);
            put_uvarint(&mut self.hists, at);
            put_uvarint(&mut self.hists, bytes.len() as u64);
            self.hists_prev = self.series_count;
            self.hists_count += 1;
        }
        self.series_count += 1;
        Ok(())
    }

    /// Adds one series from parts in time order, none overlapping the next: runs of samples
    /// (sorted, unique timestamps), cut into blocks and encoded here, and blocks taken as they
    /// are from another file of format [`VERSION`] (compaction copies the blocks that no other
    /// input shares a grid cell with, instead of decoding and encoding them again). A copied
    /// block must lie inside one grid cell and hold at most `block_samples_max` samples, as
    /// [`cut_blocks`] would have cut it, so the file reads as if every block had been encoded
    /// here.
    pub fn add_series_blocks(&mut self, labels: &Labels, parts: &[SeriesPart<'_>]) -> Result<()> {
        if self.write_series(labels, parts)? {
            self.series_count += 1;
        }
        Ok(())
    }

    /// Writes the blocks of a series and its entry in the series table, but does not count it
    /// yet (the start-timestamp and histogram tables refer to it by its ordinal). False if
    /// `parts` hold no sample: nothing written.
    fn write_series(&mut self, labels: &Labels, parts: &[SeriesPart<'_>]) -> Result<bool> {
        let Some((lo, hi)) = parts_time_range(parts) else { return Ok(false) };
        if self.last_labels.as_ref().is_some_and(|l| l >= labels) {
            return Err(Error::InvalidInput(format!("series {labels} added out of label order")));
        }
        self.last_labels = Some(labels.clone());
        let mut entry = std::mem::take(&mut self.entry_buf);
        entry.clear();
        put_uvarint(&mut entry, labels.len() as u64);
        let mut name_ref = 0;
        for l in labels.iter() {
            let n = self.symbol(&l.name);
            let v = self.symbol(&l.value);
            if &*l.name == "__name__" && !l.value.is_empty() {
                name_ref = u64::from(v) + 1;
            }
            put_uvarint(&mut entry, u64::from(n));
            put_uvarint(&mut entry, u64::from(v));
        }
        // The newest timestamp, so startup learns each series' newest sample without decoding
        // block lists (the out-of-order window is measured from it).
        crate::encoding::varint::put_varint(&mut entry, hi);
        let mut blocks = 0u64;
        let mut list = Vec::new();
        let mut block = std::mem::take(&mut self.block_buf);
        // Blocks of a series are written back to back, so only the first offset is stored;
        // each block's statistics are chained on the previous block's (gap, span and count
        // usually repeat), and a regular block leaves its count and timestamps to them.
        put_uvarint(&mut list, self.offset);
        let mut chain = StatsChain::default();
        let mut samples = 0u64;
        for part in parts {
            match *part {
                SeriesPart::Samples(run) => {
                    for b in cut_blocks(run, self.block_samples_max, self.block_grid_ms) {
                        block.clear();
                        let stats: BlockStats = encode_indexed_block(b, &mut block);
                        let crc = crc32fast::hash(&block);
                        block.extend_from_slice(&crc.to_le_bytes());
                        self.write(&block)?;
                        put_uvarint(&mut list, (block.len() - 4) as u64);
                        stats.encode_chained(&mut chain, &mut list);
                        blocks += 1;
                    }
                    samples += run.len() as u64;
                }
                SeriesPart::Block { bytes, crc, stats } => {
                    self.write(bytes)?;
                    self.write(&crc.to_le_bytes())?;
                    put_uvarint(&mut list, bytes.len() as u64);
                    stats.encode_chained(&mut chain, &mut list);
                    blocks += 1;
                    samples += u64::from(stats.count) + u64::from(stats.stale_count);
                }
            }
        }
        self.block_buf = block;
        let mut head = Vec::with_capacity(10);
        put_uvarint(&mut head, blocks);
        put_uvarint(&mut entry, (head.len() + list.len()) as u64);
        entry.extend_from_slice(&head);
        entry.extend_from_slice(&list);
        self.chunk_add(name_ref);
        self.series.extend_from_slice(&entry);
        self.entry_buf = entry;
        self.samples += samples;
        self.blocks += blocks;
        self.time_range = Some(self.time_range.map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))));
        Ok(true)
    }

    /// Counts a series whose entry is about to be appended to `series` into the open chunk,
    /// closing the open chunk first if it is full.
    /// `name` is the series' metric name as the directory refers to it: its symbol + 1, 0 for
    /// none.
    fn chunk_add(&mut self, name: u64) {
        if self.chunks.last().is_none_or(|c| c.series as usize == CHUNK_SERIES) {
            self.close_chunk();
            self.chunk_start = self.series.len();
            self.chunks.push(ChunkEntry::new(name));
        }
        if let Some(c) = self.chunks.last_mut() {
            c.add(name, &self.symbol_list);
        }
    }

    /// Records the open chunk's length and checksum.
    fn close_chunk(&mut self) {
        if let Some(c) = self.chunks.last_mut()
            && c.len == 0
        {
            let bytes = self.series.get(self.chunk_start..).unwrap_or_default();
            c.len = bytes.len() as u64;
            c.crc = crc32fast::hash(bytes);
        }
    }

    /// Number of series added.
    pub fn series_count(&self) -> u64 {
        self.series_count
    }

    /// Writes the index and footer, fsyncs, and renames the file into place (durably). Returns
    /// the file size. Before this returns, a crash leaves only a `.tmp` file that startup removes.
    /// A failure before the rename removes the `.tmp`; after it (syncing the directory failed)
    /// the file stays under its final name, and the caller, which has not listed it in a
    /// manifest, removes it.
    pub fn finish(self) -> Result<u64> {
        let tmp = self.tmp.clone();
        let path = self.path.clone();
        let result = self.finish_inner();
        if result.is_err() && !path.exists() {
            let _ = fsutil::remove_path(&tmp);
        }
        result
    }

    fn finish_inner(mut self) -> Result<u64> {
        // The series table, then the symbols and the chunk directory, which a reader of the
        // file's tail finds together (`docs/format/partition.md`).
        self.close_chunk();
        let series_offset = self.offset;
        let mut idx = std::mem::take(&mut self.series);
        let symbols_offset = series_offset + idx.len() as u64;
        let tail_start = idx.len();
        put_uvarint(&mut idx, self.symbol_list.len() as u64);
        for s in &self.symbol_list {
            put_uvarint(&mut idx, s.len() as u64);
            idx.extend_from_slice(s.as_bytes());
        }
        super::chunks::encode_directory(self.series_count, &self.chunks, &mut idx);
        if self.starts_count > 0 {
            idx.push(STARTS_TAG);
            put_uvarint(&mut idx, self.starts_count);
            idx.extend_from_slice(&self.starts);
        }
        if self.hists_count > 0 {
            idx.push(HISTS_TAG);
            put_uvarint(&mut idx, self.hists_count);
            idx.extend_from_slice(&self.hists);
        }
        let tail_crc = crc32fast::hash(idx.get(tail_start..).unwrap_or_default());
        idx.extend_from_slice(&tail_crc.to_le_bytes());
        let mut crc = crc32fast::Hasher::new();
        crc.update(&idx);
        self.write(&idx)?;
        let index_end = self.offset;
        let mut footer = Vec::with_capacity(super::FOOTER_LEN);
        footer.extend_from_slice(&symbols_offset.to_le_bytes());
        footer.extend_from_slice(&series_offset.to_le_bytes());
        footer.extend_from_slice(&index_end.to_le_bytes());
        footer.extend_from_slice(&crc.finalize().to_le_bytes());
        footer.extend_from_slice(FOOTER_MAGIC);
        self.write(&footer)?;
        crate::failpoint::hit("flush.mid_file");
        let f = self
            .out
            .into_inner()
            .map_err(|e| Error::io(format!("flush {}", self.tmp.display()), e.into_error()))?;
        fsutil::sync_file(&f, &self.tmp)?;
        drop(f);
        crate::failpoint::hit("flush.before_rename");
        fsutil::rename_durable(&self.tmp, &self.path)?;
        Ok(self.offset)
    }

    /// Abandons the file, removing the temporary.
    pub fn abort(self) {
        let tmp = self.tmp.clone();
        drop(self);
        let _ = fsutil::remove_path(&tmp);
    }
}

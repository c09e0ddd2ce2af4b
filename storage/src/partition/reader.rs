//! Reads a partition file through `mmap`: of the local file, or of the local cache of a bucket
//! object (see `file_source`).

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;


use crate::encoding::varint::{get_uvarint, get_varint};
use crate::encoding::{
    BlockStats, PrefixSum, StatsChain, block_has_time_in, decode_block, decode_block_until, decode_indexed_block,
    integral_indexed_values, integral_values, sum_block_until,
};
use crate::error::{Error, Result};
use crate::file_source::FileBytes;
use crate::hist;
use crate::merge::keep_from;
use crate::query::StartTimestamp;
use crate::start_ts::StRuns;
use crate::types::{HistogramSample, Label, Labels, Sample, SeriesId};
use crate::window_agg::ScanStats;

use super::block_lists::BlockLists;
use super::chunks::{Chunk, decode_directory};
use super::in_part::{InPart, Resolve};
use super::{FOOTER_LEN, FOOTER_MAGIC, HEADER_LEN, HISTS_TAG, MAGIC, STARTS_TAG, VERSION, VERSION_MIN};
use crate::matcher::Matcher;

/// Where one block lives and what it holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BlockMeta {
    /// Byte offset of the block in the file.
    pub offset: u64,
    /// Encoded length, without the trailing CRC.
    pub len: u32,
    /// Statistics of the block's samples.
    pub stats: BlockStats,
}

/// An open partition file. Holds, per series, only its runtime id and where its block list is;
/// block lists are decoded when a query touches the series, so memory per series per file stays
/// at a few bytes however many blocks the series has. Decoded lists are kept for the next query
/// within a budget for the whole process ([`super::block_lists`]).
pub struct PartitionFile {
    path: PathBuf,
    /// The file's bytes: the index region is always present, data ranges are fetched through
    /// [`FileBytes::get`].
    bytes: FileBytes,
    /// (runtime series id, offset of its block list), sorted by id, for every series of a file
    /// read whole; empty for a file read in part, which keeps its own ([`InPart::series`]).
    series: Vec<(SeriesId, u32)>,
    /// For a file read in part: its chunks, and which of their series are entered.
    part: Option<InPart>,
    /// (runtime series id, offset of its start-timestamp runs), sorted by id, for the series
    /// that have start timestamps; empty for most files.
    starts: Vec<(SeriesId, u32)>,
    /// (runtime series id, (offset, length with CRC) of its histogram chunks in the data
    /// region), sorted by id, for the series that have native histograms; empty for most files.
    hists: Vec<(SeriesId, (u64, u32))>,
    /// Format version (`VERSION_MIN..=VERSION`): how block lists are encoded.
    version: u32,
    /// Block lists decoded for queries, kept within a process-wide budget.
    block_lists: BlockLists,
}

impl std::fmt::Debug for PartitionFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionFile").field("path", &self.path).field("series", &self.series_ids().len()).finish()
    }
}

/// What a file's header and footer say.
struct Footer {
    version: u32,
    symbols_offset: u64,
    series_offset: u64,
    index_end: u64,
    crc: u32,
}

impl Footer {
    /// Reads and checks the header and footer of the file `mmap` (of which the header and the
    /// footer must be present).
    fn read(path: &Path, mmap: &[u8]) -> Result<Footer> {
        let corrupt = |offset: Option<u64>, reason: &str| Error::corruption(path, offset, reason);
        let len = mmap.len();
        if len < HEADER_LEN + FOOTER_LEN {
            return Err(corrupt(None, "file shorter than header and footer"));
        }
        if mmap.get(..8) != Some(MAGIC.as_slice()) {
            return Err(corrupt(Some(0), "bad magic"));
        }
        let version = u32::from_le_bytes(read4(mmap, 8).ok_or_else(|| corrupt(Some(8), "short header"))?);
        if !(VERSION_MIN..=VERSION).contains(&version) {
            return Err(corrupt(Some(8), &format!("unsupported version {version}")));
        }
        let f = len - FOOTER_LEN;
        let footer = mmap.get(f..).ok_or_else(|| corrupt(None, "short footer"))?;
        if footer.get(28..32) != Some(FOOTER_MAGIC.as_slice()) {
            return Err(corrupt(Some(f as u64), "bad footer magic (file incomplete?)"));
        }
        let u64_at = |o: usize| footer.get(o..o + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
        let (Some(symbols_offset), Some(series_offset), Some(index_end)) = (u64_at(0), u64_at(8), u64_at(16))
        else {
            return Err(corrupt(Some(f as u64), "short footer"));
        };
        let crc =
            u32::from_le_bytes(read4(footer, 24).ok_or_else(|| corrupt(Some(f as u64), "short footer"))?);
        // Version 5 puts the series table first, the symbols after it.
        let (first, second) =
            if version >= 5 { (series_offset, symbols_offset) } else { (symbols_offset, series_offset) };
        if !(HEADER_LEN as u64 <= first && first <= second && second <= index_end && index_end == f as u64) {
            return Err(corrupt(Some(f as u64), "footer offsets out of range"));
        }
        Ok(Footer { version, symbols_offset, series_offset, index_end, crc })
    }

    /// Where the index starts.
    fn index_start(&self) -> u64 {
        self.symbols_offset.min(self.series_offset)
    }
}

/// The tail of a version 5 file's index, from the symbol table on: the symbols, the chunk
/// directory, and where the optional tables start (relative to `symbols_offset`).
struct Tail {
    symbols: Vec<Arc<str>>,
    chunks: Vec<Chunk>,
    tables_at: usize,
}

impl Tail {
    /// Reads and checks (its own checksum, the last 4 bytes of the index) the tail of the
    /// index `footer` describes, which `mmap` must hold.
    fn read(path: &Path, mmap: &[u8], footer: &Footer) -> Result<Tail> {
        let at = footer.symbols_offset;
        let corrupt = |reason: String| Error::corruption(path, Some(at), reason);
        let tail = mmap
            .get(at as usize..footer.index_end as usize)
            .filter(|t| t.len() >= 4)
            .ok_or_else(|| corrupt("index tail out of range".into()))?;
        let (tail, crc) = tail.split_at(tail.len() - 4);
        if crc32fast::hash(tail).to_le_bytes() != crc {
            return Err(corrupt("index tail checksum mismatch".into()));
        }
        let mut pos = 0;
        let symbols = read_symbols(tail, &mut pos).map_err(|e| corrupt(e.to_string()))?;
        let series = footer.series_offset as usize..at as usize;
        let chunks = decode_directory(tail, &mut pos, series, &symbols).map_err(|e| corrupt(e.to_string()))?;
        Ok(Tail { symbols, chunks, tables_at: pos })
    }
}

/// Reads the symbol table at `*pos`.
fn read_symbols(index: &[u8], pos: &mut usize) -> Result<Vec<Arc<str>>> {
    let nsym = get_uvarint(index, pos)?;
    if nsym > index.len() as u64 {
        return Err(Error::Decode("symbol count too large".into()));
    }
    let mut symbols: Vec<Arc<str>> = Vec::with_capacity(nsym as usize);
    for _ in 0..nsym {
        let n = get_uvarint(index, pos)? as usize;
        let b = index.get(*pos..pos.saturating_add(n)).ok_or_else(|| Error::Decode("symbol truncated".into()))?;
        *pos += n;
        let s = std::str::from_utf8(b).map_err(|_| Error::Decode("symbol not UTF-8".into()))?;
        symbols.push(Arc::from(s));
    }
    Ok(symbols)
}

/// Reads the series entry at `*pos` of `entries` (which start at file offset `base`): its
/// labels, newest timestamp and the file offset of its block list.
/// `refs` is scratch space, kept by the caller across entries.
fn read_entry(
    entries: &[u8],
    pos: &mut usize,
    base: usize,
    symbols: &[Arc<str>],
    refs: &mut Vec<(u32, u32)>,
) -> Result<(Labels, i64, u32)> {
    let (max_t, list_at) = read_entry_refs(entries, pos, base, symbols.len(), refs)?;
    let label = |&(n, v): &(u32, u32)| Label {
        name: Arc::clone(&symbols[n as usize]),
        value: Arc::clone(&symbols[v as usize]),
    };
    Ok((Labels::new(refs.iter().map(label).collect()), max_t, list_at))
}

/// [`read_entry`] leaving the labels as symbol refs, each checked to be below `symbols`, in
/// `refs` (cleared first): (newest timestamp, file offset of the block list).
pub(super) fn read_entry_refs(
    entries: &[u8],
    pos: &mut usize,
    base: usize,
    symbols: usize,
    refs: &mut Vec<(u32, u32)>,
) -> Result<(i64, u32)> {
    let sym = |i: u64| u32::try_from(i).ok().filter(|&i| (i as usize) < symbols);
    let n = get_uvarint(entries, pos)?;
    if n > 1024 {
        return Err(Error::Decode("too many labels".into()));
    }
    refs.clear();
    for _ in 0..n {
        let (name, value) = (get_uvarint(entries, pos)?, get_uvarint(entries, pos)?);
        let (Some(name), Some(value)) = (sym(name), sym(value)) else {
            return Err(Error::Decode("bad symbol ref".into()));
        };
        refs.push((name, value));
    }
    let max_t = get_varint(entries, pos)?;
    let list_len = get_uvarint(entries, pos)? as usize;
    let list_at = base + *pos;
    if pos.saturating_add(list_len) > entries.len() || list_at > u32::MAX as usize {
        return Err(Error::Decode("block list out of range".into()));
    }
    *pos += list_len;
    Ok((max_t, list_at as u32))
}


impl PartitionFile {
    /// Opens and verifies a file (magic, version, index checksum), resolving each series' labels
    /// to a runtime id with `resolve(labels, newest timestamp of the series in this file)`.
    pub fn open(path: &Path, resolve: impl FnMut(&Labels, i64) -> SeriesId) -> Result<Self> {
        Self::from_bytes(path, crate::file_source::map_partition_file(path)?, resolve)
    }

    /// [`PartitionFile::open`] for a file held in the bucket as `key` (`size` bytes), read
    /// through a local cache file at `cache_path`: opening fetches the header, the footer and
    /// the index, and blocks are fetched when first read.
    pub(crate) fn open_cached(
        bucket: Arc<crate::bucket::Bucket>,
        key: object_store::path::Path,
        cache_path: &Path,
        size: u64,
        resolve: impl FnMut(&Labels, i64) -> SeriesId,
    ) -> Result<Self> {
        let bytes = crate::file_source::cached_partition_file(bucket, key, cache_path, size)?;
        let footer = Self::fetch_tail(cache_path, &bytes)?;
        Self::fetch_whole_index(cache_path, bytes, &footer, resolve)
    }

    /// Opens a cached file whole once its footer is read: fetches the rest of its index, then
    /// reads it all.
    fn fetch_whole_index(
        path: &Path,
        bytes: FileBytes,
        footer: &Footer,
        resolve: impl FnMut(&Labels, i64) -> SeriesId,
    ) -> Result<Self> {
        bytes.prefetch(std::slice::from_ref(&(footer.index_start() as usize..bytes.all().len())))?;
        Self::from_bytes(path, bytes, resolve)
    }

    /// [`PartitionFile::open_cached`] fetching of a version 5 file only the tail of its index
    /// (symbols and chunk directory; with the header, in one request when the file's last
    /// 256 KiB hold them), and of its series table only the chunks [`PartitionFile::load_for`]
    /// is asked for, each series entering the index through `resolve` as its chunk loads. A
    /// file of an older version, or one with start timestamps or histograms (whose tables
    /// refer to every series), is opened whole.
    pub(crate) fn open_cached_in_part(
        bucket: Arc<crate::bucket::Bucket>,
        key: object_store::path::Path,
        cache_path: &Path,
        size: u64,
        resolve: Resolve,
    ) -> Result<Self> {
        let bytes = crate::file_source::cached_partition_file(bucket, key, cache_path, size)?;
        let footer = Self::fetch_tail(cache_path, &bytes)?;
        if footer.version >= 5 {
            bytes.prefetch(std::slice::from_ref(&(footer.symbols_offset as usize..bytes.all().len())))?;
            let tail = Tail::read(cache_path, bytes.all(), &footer)?;
            if footer.symbols_offset as usize + tail.tables_at + 4 == footer.index_end as usize {
                return Ok(PartitionFile {
                    path: cache_path.to_path_buf(),
                    bytes,
                    series: Vec::new(),
                    part: Some(InPart::new(tail.symbols, tail.chunks, resolve)),
                    starts: Vec::new(),
                    hists: Vec::new(),
                    version: footer.version,
                    block_lists: BlockLists::default(),
                });
            }
        }
        Self::fetch_whole_index(cache_path, bytes, &footer, |l, t| resolve(l, t))
    }

    /// Fetches a cached file's header and last 256 KiB (two requests at once, one for a small
    /// file) and reads its footer.
    fn fetch_tail(path: &Path, bytes: &FileBytes) -> Result<Footer> {
        let len = bytes.all().len();
        const TAIL: usize = 256 << 10;
        bytes.prefetch(&[0..HEADER_LEN.min(len), len.saturating_sub(TAIL.max(FOOTER_LEN))..len])?;
        Footer::read(path, bytes.all())
    }

    /// Enters, for a file read in part, every series of the file one of `selections` (sets of
    /// matchers; an empty set selects all) selects, fetching in one request the chunks of its
    /// series table that may hold one and are not fetched yet (see `in_part.rs`); nothing for a
    /// file read whole. A selection made after this finds every series of this file it may
    /// select in the index.
    pub(crate) fn load_for(&self, selections: &[&[Matcher]]) -> Result<()> {
        self.part.as_ref().map_or(Ok(()), |part| part.load_for(&self.path, &self.bytes, selections))
    }

    /// Whether [`PartitionFile::load_for`] has chunks to look at for `selections`.
    pub(crate) fn needs_load_for(&self, selections: &[&[Matcher]]) -> bool {
        self.part.as_ref().is_some_and(|part| part.needs_load_for(selections))
    }

    /// For a file read in part: whether chunks [`PartitionFile::load_for`] fetched hold series
    /// it did not enter, for [`PartitionFile::enter_fetched`], and the file is not queued for
    /// that yet (true marks it queued).
    pub(crate) fn queue_entering(&self) -> bool {
        self.part.as_ref().is_some_and(InPart::queue_entering)
    }

    /// Enters every series of the chunks fetched so far (of a file read in part).
    pub(crate) fn enter_fetched(&self) -> Result<()> {
        self.part.as_ref().map_or(Ok(()), |part| part.enter_fetched(&self.path, &self.bytes))
    }

    /// Undoes [`PartitionFile::queue_entering`]: nothing will enter the file's fetched series.
    pub(crate) fn unqueue(&self) {
        if let Some(part) = &self.part {
            part.unqueue();
        }
    }

    fn from_bytes(path: &Path, bytes: FileBytes, mut resolve: impl FnMut(&Labels, i64) -> SeriesId) -> Result<Self> {
        let mmap = bytes.all();
        let footer = Footer::read(path, mmap)?;
        let corrupt = |offset: Option<u64>, reason: &str| Error::corruption(path, offset, reason);
        let start = footer.index_start();
        let index =
            mmap.get(start as usize..footer.index_end as usize).ok_or_else(|| corrupt(None, "index range"))?;
        if crc32fast::hash(index) != footer.crc {
            return Err(corrupt(Some(start), "index checksum mismatch"));
        }
        let (series_off, sym_off) = (footer.series_offset, footer.symbols_offset);
        let dec = |e: Error| corrupt(Some(series_off), &e.to_string());
        let mut series = Vec::new();
        let mut refs = Vec::new();
        // Where the optional tables are: a slice of the index, its file offset, the position of
        // the first table in it; and where the data region ends.
        let (tables, tables_base, mut pos, data_end) = if footer.version >= 5 {
            let tail = Tail::read(path, mmap, &footer)?;
            for chunk in &tail.chunks {
                let entries = mmap.get(chunk.range.clone()).ok_or_else(|| corrupt(None, "series chunk range"))?;
                let mut p = 0;
                for _ in 0..chunk.series {
                    let (labels, max_t, list_at) =
                        read_entry(entries, &mut p, chunk.range.start, &tail.symbols, &mut refs).map_err(dec)?;
                    series.push((resolve(&labels, max_t), list_at));
                }
                if p != entries.len() {
                    return Err(corrupt(Some(chunk.range.start as u64), "series chunk longer than its series"));
                }
            }
            let tables = mmap.get(sym_off as usize..footer.index_end as usize - 4).unwrap_or_default();
            (tables, sym_off, tail.tables_at, series_off)
        } else {
            // The symbols, then the series table, counted.
            let mut pos = 0usize;
            let symbols = read_symbols(index, &mut pos).map_err(|e| corrupt(Some(sym_off), &e.to_string()))?;
            if sym_off + pos as u64 != series_off {
                return Err(corrupt(Some(sym_off), "symbol table length disagrees with footer"));
            }
            let nseries = get_uvarint(index, &mut pos).map_err(dec)?;
            if nseries > index.len() as u64 {
                return Err(corrupt(Some(series_off), "series count too large"));
            }
            series.reserve(nseries as usize);
            for _ in 0..nseries {
                let (labels, max_t, list_at) =
                    read_entry(index, &mut pos, sym_off as usize, &symbols, &mut refs).map_err(dec)?;
                series.push((resolve(&labels, max_t), list_at));
            }
            (index, sym_off, pos, sym_off)
        };
        // Optional tables, each starting with its tag byte, in tag order.
        let (mut starts, mut hists) = (Vec::new(), Vec::new());
        if tables.get(pos) == Some(&STARTS_TAG) {
            let at = pos;
            starts = read_starts_table(tables, &mut pos, tables_base as usize, &series)
                .map_err(|e| corrupt(Some(tables_base + at as u64), &format!("start timestamp table: {e}")))?;
        }
        if tables.get(pos) == Some(&HISTS_TAG) {
            let at = pos;
            hists = read_hists_table(tables, &mut pos, data_end, &series)
                .map_err(|e| corrupt(Some(tables_base + at as u64), &format!("histogram table: {e}")))?;
        }
        if pos != tables.len() {
            return Err(corrupt(Some(tables_base + pos as u64), "unknown section or trailing bytes in the index"));
        }
        series.sort_unstable_by_key(|(id, _)| *id);
        Ok(PartitionFile {
            path: path.to_path_buf(),
            bytes,
            series,
            part: None,
            starts,
            hists,
            version: footer.version,
            block_lists: BlockLists::default(),
        })
    }

    /// True if the series has native histograms in this file.
    pub fn has_histograms(&self, id: SeriesId) -> bool {
        self.hists.binary_search_by_key(&id, |(i, _)| *i).is_ok()
    }

    /// Appends the histograms of the marker samples among `samples` (samples of the series
    /// read from this file, sorted) to `out`.
    pub fn read_histograms(
        &self,
        id: SeriesId,
        samples: &[Sample],
        out: &mut Vec<HistogramSample>,
    ) -> Result<()> {
        let Ok(i) = self.hists.binary_search_by_key(&id, |(i, _)| *i) else { return Ok(()) };
        let (Some(first), Some(last)) = (samples.first(), samples.last()) else { return Ok(()) };
        let (at, len) = self.hists[i].1;
        let corrupt = |reason: String| Error::corruption(&self.path, Some(at), reason);
        let a = usize::try_from(at).map_err(|_| corrupt("histogram chunks out of the file".into()))?;
        self.fetch_footprint(a..a.saturating_add(len as usize))?;
        let bytes = self
            .bytes
            .get(a..a.saturating_add(len as usize))?
            .filter(|b| b.len() >= 4)
            .ok_or_else(|| corrupt("histogram chunks out of the file".into()))?;
        let (data, crc) = bytes.split_at(bytes.len() - 4);
        if crc32fast::hash(data).to_le_bytes() != crc {
            return Err(corrupt("histogram chunks checksum mismatch".into()));
        }
        let mut all = Vec::new();
        let mut pos = 0;
        hist::decode_chunks(data, &mut pos, first.t, last.t, &mut all).map_err(|e| corrupt(e.to_string()))?;
        let by_t = |t: i64| all.binary_search_by_key(&t, |h| h.t).ok().and_then(|k| all.get(k)).map(|h| &h.h);
        hist::resolve(samples, by_t, out);
        Ok(())
    }

    /// True if some sample of the series in this file has a start timestamp.
    pub fn has_starts(&self, id: SeriesId) -> bool {
        self.starts.binary_search_by_key(&id, |(i, _)| *i).is_ok()
    }

    /// The start-timestamp runs of a series (empty if it has none here).
    pub fn start_runs(&self, id: SeriesId) -> Result<StRuns> {
        let Ok(i) = self.starts.binary_search_by_key(&id, |(i, _)| *i) else { return Ok(StRuns::default()) };
        let at = self.starts[i].1 as usize;
        let buf = self.bytes.all().get(at..).unwrap_or_default();
        let mut pos = 0;
        StRuns::decode(buf, &mut pos)
            .map_err(|e| Error::corruption(&self.path, Some(at as u64), e.to_string()))
    }

    /// Appends the start timestamps of `samples` (samples of the series read from this file,
    /// sorted) that have one to `out`.
    pub fn read_starts(&self, id: SeriesId, samples: &[Sample], out: &mut Vec<StartTimestamp>) -> Result<()> {
        if self.has_starts(id) {
            self.start_runs(id)?.resolve(samples, out);
        }
        Ok(())
    }

    /// Bytes the file takes on the local disk (the fetched part of one read from the bucket).
    pub(crate) fn local_bytes(&self) -> u64 {
        self.bytes.local_bytes()
    }

    /// The whole file's bytes, fetched from the bucket first for a cached file: for a copy of
    /// the database (the admin snapshot) on a data directory that reads files from a bucket.
    pub(crate) fn whole(&self) -> Result<&[u8]> {
        let len = self.bytes.all().len();
        self.bytes.prefetch(std::slice::from_ref(&(0..len)))?;
        Ok(self.bytes.all())
    }

    /// True if the file is read from the bucket through the local cache.
    pub(crate) fn is_cached(&self) -> bool {
        self.bytes.is_cached()
    }

    /// When the file's data was last read, as an order (larger is later).
    pub(crate) fn last_read(&self) -> u64 {
        self.bytes.last_read()
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runtime ids of all series in the file (of a file read in part: of its loaded chunks),
    /// ascending.
    pub fn series_ids(&self) -> Vec<SeriesId> {
        let ids = |series: &[(SeriesId, u32)]| series.iter().map(|(id, _)| *id).collect();
        match &self.part {
            None => ids(&self.series),
            Some(part) => ids(&part.series.read()),
        }
    }

    /// True if the series is in this file (in a loaded chunk of a file read in part).
    pub fn contains(&self, id: SeriesId) -> bool {
        self.list_at(id).is_some()
    }

    /// Where the block list of series `id` is, if the file holds the series.
    fn list_at(&self, id: SeriesId) -> Option<u32> {
        let find = |series: &[(SeriesId, u32)]| {
            series.binary_search_by_key(&id, |(i, _)| *i).ok().map(|i| series[i].1)
        };
        match &self.part {
            None => find(&self.series),
            Some(part) => find(&part.series.read()),
        }
    }

    /// The block list of a series (empty if the series is not in this file), in time order.
    #[cfg(any(test, feature = "testing"))]
    pub fn blocks(&self, id: SeriesId) -> Result<Vec<BlockMeta>> {
        self.blocks_in(id, i64::MIN, i64::MAX)
    }

    /// The blocks of a series whose time range overlaps `[mint, maxt]`, in time order.
    ///
    /// The first read of a series' list decodes it whole and keeps it for later reads (see
    /// [`super::block_lists`]) while the process-wide budget has room; past the budget, or for
    /// a list that does not decode whole, the list is decoded only up to the first block that
    /// starts after `maxt`, as it is stored as a chain read from its start. A read of all time
    /// (compaction's, which then drops the file) uses a kept list but does not keep one.
    pub fn blocks_in(&self, id: SeriesId, mint: i64, maxt: i64) -> Result<Vec<BlockMeta>> {
        if let Some(out) = self.block_lists.with(id, |list| overlapping(list, mint, maxt)) {
            return Ok(out);
        }
        let Some(at) = self.list_at(id) else { return Ok(Vec::new()) };
        let whole = (mint, maxt) == (i64::MIN, i64::MAX);
        if !whole
            && BlockLists::has_room(self.list_len(at))
            && let Ok(list) = self.decode_blocks(at, i64::MAX)
        {
            let list: Arc<[BlockMeta]> = list.into();
            let out = overlapping(&list, mint, maxt);
            self.block_lists.keep(id, list);
            return Ok(out);
        }
        let mut out = self.decode_blocks(at, maxt)?;
        out.retain(|b| b.stats.max_t >= mint);
        Ok(out)
    }

    /// The block list kept for series `id`, if any.
    #[cfg(test)]
    pub(super) fn block_lists_kept(&self, id: SeriesId) -> Option<Arc<[BlockMeta]>> {
        self.block_lists.get(id)
    }

    /// The number of blocks in the block list at file offset `at` (0 if unreadable:
    /// [`Self::decode_blocks`] reports that).
    fn list_len(&self, at: u32) -> usize {
        let buf = self.bytes.all().get(at as usize..).unwrap_or_default();
        get_uvarint(buf, &mut 0).map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// Decodes the block list at file offset `at` up to the first block that starts after
    /// `maxt` (not included).
    fn decode_blocks(&self, at: u32, maxt: i64) -> Result<Vec<BlockMeta>> {
        let at = at as usize;
        let corrupt = |e: Error| Error::corruption(&self.path, Some(at as u64), e.to_string());
        let buf = self.bytes.all().get(at..).unwrap_or_default();
        let mut pos = 0;
        let n = get_uvarint(buf, &mut pos).map_err(corrupt)?;
        if n > buf.len() as u64 {
            return Err(Error::corruption(&self.path, Some(at as u64), "block count too large"));
        }
        let mut offset = get_uvarint(buf, &mut pos).map_err(corrupt)?;
        let mut base_t = 0i64;
        let mut chain = StatsChain::for_version(self.version);
        let mut out = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let len = get_uvarint(buf, &mut pos).map_err(corrupt)?;
            let stats = if self.version >= 2 {
                BlockStats::decode_chained(buf, &mut pos, &mut chain)
            } else {
                BlockStats::decode_relative(buf, &mut pos, base_t)
            }
            .map_err(corrupt)?;
            let len = u32::try_from(len)
                .map_err(|_| Error::corruption(&self.path, Some(at as u64), "block too long"))?;
            if stats.min_t > maxt {
                break;
            }
            out.push(BlockMeta { offset, len, stats });
            base_t = stats.max_t;
            offset = offset.saturating_add(u64::from(len) + 4);
        }
        Ok(out)
    }

    /// The file's format version (`VERSION_MIN..=VERSION`).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// A block's bytes and the CRC stored after them, checked, for copying the block into
    /// another file as it is.
    pub fn checked_block(&self, b: &BlockMeta) -> Result<(&[u8], u32)> {
        let start = b.offset as usize;
        let end = start.saturating_add(b.len as usize);
        let corrupt = |reason: &str| Error::corruption(&self.path, Some(b.offset), reason);
        self.fetch_footprint(start..end.saturating_add(4))?;
        let with_crc = self.bytes.get(start..end.saturating_add(4))?.ok_or_else(|| corrupt("block out of range"))?;
        let (bytes, crc) = with_crc.split_at(with_crc.len() - 4);
        let crc = u32::from_le_bytes(read4(crc, 0).ok_or_else(|| corrupt("block CRC missing"))?);
        if crc32fast::hash(bytes) != crc {
            return Err(corrupt("block checksum mismatch"));
        }
        Ok((bytes, crc))
    }

    /// Before a read of `range` that misses the local cache of a bucket file: fetches, with
    /// it, every block and histogram section of the series the current query selected that
    /// this file holds in the selected ranges (see [`crate::footprint`]), once per file per
    /// query. Nothing for a local file, a read the cache holds, or outside a query.
    fn fetch_footprint(&self, range: Range<usize>) -> Result<()> {
        if self.bytes.is_present(&range) {
            return Ok(());
        }
        let Some(footprint) = crate::footprint::current() else { return Ok(()) };
        let selections = footprint.first_miss(std::ptr::from_ref(self) as usize);
        if selections.is_empty() {
            return Ok(());
        }
        let mut ranges = vec![range];
        for (ids, mint, maxt) in &selections {
            let held = |id: &SeriesId| self.contains(*id);
            for &id in ids.iter().filter(|id| held(id)) {
                for b in self.blocks_in(id, *mint, *maxt)? {
                    let at = b.offset as usize;
                    ranges.push(at..at.saturating_add(b.len as usize + 4));
                }
                if let Ok(i) = self.hists.binary_search_by_key(&id, |(i, _)| *i) {
                    let (at, len) = self.hists[i].1;
                    ranges.push(at as usize..(at as usize).saturating_add(len as usize));
                }
            }
        }
        self.bytes.prefetch(&ranges)
    }

    /// A block's bytes, its checksum verified.
    fn block_bytes(&self, b: &BlockMeta) -> Result<&[u8]> {
        Ok(self.checked_block(b)?.0)
    }

    /// Decodes one block, verifying its checksum, appending its samples to `out`.
    pub fn read_block(&self, b: &BlockMeta, out: &mut Vec<Sample>) -> Result<()> {
        let bytes = self.block_bytes(b)?;
        let result = match self.index_stats(b) {
            Some(stats) => decode_indexed_block(bytes, stats, out),
            None => decode_block(bytes, out),
        };
        result.map_err(|e| Error::corruption(&self.path, Some(b.offset), e.to_string()))
    }

    /// Decodes the block's samples up to `until_t` (inclusive), verifying its checksum, and
    /// appends them to `out`; the values after them are not read.
    pub fn read_block_until(&self, b: &BlockMeta, until_t: i64, out: &mut Vec<Sample>) -> Result<()> {
        let bytes = self.block_bytes(b)?;
        decode_block_until(bytes, self.index_stats(b), until_t, out)
            .map_err(|e| Error::corruption(&self.path, Some(b.offset), e.to_string()))
    }

    /// Whether the block holds a sample in `[mint, maxt]`, verifying its checksum, from its
    /// timestamps alone (see [`block_has_time_in`]).
    pub fn block_has_time_in(&self, b: &BlockMeta, mint: i64, maxt: i64) -> Result<bool> {
        let bytes = self.block_bytes(b)?;
        block_has_time_in(bytes, self.index_stats(b), mint, maxt)
            .map_err(|e| Error::corruption(&self.path, Some(b.offset), e.to_string()))
    }

    /// The count and integer sum of the block's non-stale values up to `until_t` (inclusive),
    /// verifying its checksum, without writing samples: see [`sum_block_until`]. `None` for a
    /// block that needs decoding instead (version 1, timestamps not a constant interval, or
    /// values not all integers).
    pub fn sum_block_until(&self, b: &BlockMeta, until_t: i64) -> Result<Option<PrefixSum>> {
        let Some(stats) = self.index_stats(b) else { return Ok(None) };
        let bytes = self.block_bytes(b)?;
        sum_block_until(bytes, stats, until_t)
            .map_err(|e| Error::corruption(&self.path, Some(b.offset), e.to_string()))
    }

    /// Whether the block's non-stale values are all integers below 2^53 (not -0.0): then its
    /// `sum` statistic is exact and can stand for its samples in an exact sum. Format version 4
    /// records it in the statistics, so the block is not read. Older files tell as far as the
    /// block's header does without decoding ([`integral_values`]), after checking its checksum.
    pub fn block_integral(&self, b: &BlockMeta) -> Result<bool> {
        if b.stats.count == 0 {
            // Only stale markers: nothing to sum.
            return Ok(true);
        }
        if self.version >= 4 {
            return Ok(b.stats.integral);
        }
        let bytes = self.block_bytes(b)?;
        Ok(match self.index_stats(b) {
            Some(stats) => integral_indexed_values(bytes, stats),
            None => integral_values(bytes, b.stats.stale_count),
        })
    }

    /// The statistics a block's decoder may take its count and timestamps from: those of
    /// version 2 files; version 1 blocks are self-contained (and never use codec 4).
    fn index_stats<'b>(&self, b: &'b BlockMeta) -> Option<&'b BlockStats> {
        (self.version >= 2).then_some(&b.stats)
    }

    /// Appends the series' samples in `[mint, maxt]` to `out` (sorted, unique timestamps).
    #[cfg(any(test, feature = "testing"))]
    pub fn read(&self, id: SeriesId, mint: i64, maxt: i64, out: &mut Vec<Sample>) -> Result<()> {
        self.read_counted(id, mint, maxt, out, &mut ScanStats::default())
    }

    /// [`PartitionFile::read`], adding the blocks it decodes and their samples to `stats` (a
    /// query's statistics: what a plain read cost).
    pub fn read_counted(
        &self,
        id: SeriesId,
        mint: i64,
        maxt: i64,
        out: &mut Vec<Sample>,
        stats: &mut ScanStats,
    ) -> Result<()> {
        let blocks = self.blocks_in(id, mint, maxt)?;
        stats.blocks_decoded += blocks.len() as u64;
        // One allocation for all the blocks rather than one growth per block; bounded by what
        // the blocks' bytes can hold, as `decode_block` bounds it, so corrupt counts cannot
        // make it huge.
        let total: usize = blocks
            .iter()
            .map(|b| {
                let count = b.stats.count as usize + b.stats.stale_count as usize;
                count.min((b.len as usize).saturating_mul(64))
            })
            .sum();
        out.reserve(total);
        for b in &blocks {
            let from = out.len();
            // A block running past the range is read only up to its end (a 5-minute window
            // in an hour block reads the hour up to there, not all of it).
            if b.stats.max_t > maxt {
                self.read_block_until(b, maxt, out)?;
            } else {
                self.read_block(b, out)?;
            }
            stats.samples_decoded += (out.len() - from) as u64;
            if b.stats.min_t < mint || b.stats.max_t > maxt {
                keep_from(out, from, |s| s.t >= mint && s.t <= maxt);
            }
        }
        Ok(())
    }
}

/// The blocks of `list` (in time order) overlapping `[mint, maxt]`: up to the first that starts
/// after `maxt`, those that end at or after `mint`, as [`PartitionFile::blocks_in`] reads them.
fn overlapping(list: &[BlockMeta], mint: i64, maxt: i64) -> Vec<BlockMeta> {
    // A series' blocks in a file are in time order and do not overlap, so both ends ascend and
    // the blocks overlapping the range are one run: copied at once, into an exact allocation.
    let from = partition_point_from_end(list, |b| b.stats.max_t < mint);
    let to = from + partition_point_from_end(&list[from..], |b| b.stats.min_t <= maxt);
    list[from..to].to_vec()
}

/// [`slice::partition_point`] (the first index at which `pred`, true on a prefix of `list`, is
/// false), found by galloping back from the end: probes at 1, 3, 7, 15, ... from the end, then a
/// binary search between the last two.
///
/// Most queries read recent data, so the run they want ends a block or two from the end of a
/// series' list. A list is tens of blocks of 88 bytes, and a query over many series meets each
/// list cold: a binary search from the middle costs a cache miss per halving (a third of
/// lastpoint's CPU at 10,000 series), the end costs one or two. A range far back costs at most
/// about twice a binary search's probes, and its blocks are then copied anyway.
fn partition_point_from_end<T>(list: &[T], pred: impl Fn(&T) -> bool) -> usize {
    // `pred` is false on all of `list[hi..]`.
    let mut hi = list.len();
    let mut step = 1;
    while step <= hi {
        let i = hi - step;
        if pred(&list[i]) {
            return i + 1 + list[i + 1..hi].partition_point(&pred);
        }
        hi = i;
        step *= 2;
    }
    list[..hi].partition_point(&pred)
}

/// Reads the start-timestamp table at `pos` of the index (which starts at file offset `base`):
/// per series that has start timestamps, its runs' file offset, resolved to the runtime id of
/// the series at that ordinal in `series` (in file order). The runs are checked when read.
fn read_starts_table(
    index: &[u8],
    pos: &mut usize,
    base: usize,
    series: &[(SeriesId, u32)],
) -> Result<Vec<(SeriesId, u32)>> {
    if index.get(*pos) != Some(&STARTS_TAG) {
        return Err(Error::Decode("unknown section after the series table".into()));
    }
    *pos += 1;
    read_series_table(index, pos, series, |index, pos| {
        let len = get_uvarint(index, pos)? as usize;
        let at = base + *pos;
        if pos.saturating_add(len) > index.len() || at > u32::MAX as usize {
            return Err(Error::Decode("runs out of range".into()));
        }
        *pos += len;
        Ok(at as u32)
    })
}

/// Reads the histogram table (`docs/format/histograms.md`) at `*pos`: per series with
/// histograms, its ordinal delta, and where its chunks are in the data region (before the
/// index that starts at `data_end`).
fn read_hists_table(
    index: &[u8],
    pos: &mut usize,
    data_end: u64,
    series: &[(SeriesId, u32)],
) -> Result<Vec<(SeriesId, (u64, u32))>> {
    *pos += 1;
    read_series_table(index, pos, series, |index, pos| {
        let at = get_uvarint(index, pos)?;
        let len = get_uvarint(index, pos)?;
        if at.saturating_add(len) > data_end || len < 4 || len > u64::from(u32::MAX) {
            return Err(Error::Decode("histogram chunks out of the data region".into()));
        }
        Ok((at, len as u32))
    })
}

/// The layout the optional per-series tables share: a count, then per entry the delta of its
/// series ordinal (strictly increasing) and what `entry` reads. Resolves ordinals to the
/// runtime ids of `series` (in file order) and returns the entries sorted by id.
fn read_series_table<T>(
    index: &[u8],
    pos: &mut usize,
    series: &[(SeriesId, u32)],
    mut entry: impl FnMut(&[u8], &mut usize) -> Result<T>,
) -> Result<Vec<(SeriesId, T)>> {
    let n = get_uvarint(index, pos)?;
    if n > series.len() as u64 {
        return Err(Error::Decode(format!("{n} entries for {} series", series.len())));
    }
    let mut out = Vec::with_capacity(n as usize);
    let mut ordinal = 0u64;
    for i in 0..n {
        let delta = get_uvarint(index, pos)?;
        if i > 0 && delta == 0 {
            return Err(Error::Decode("series listed twice".into()));
        }
        ordinal = ordinal.saturating_add(delta);
        let value = entry(index, pos)?;
        let (id, _) = usize::try_from(ordinal)
            .ok()
            .and_then(|o| series.get(o))
            .ok_or_else(|| Error::Decode(format!("series ordinal {ordinal} out of range")))?;
        out.push((*id, value));
    }
    out.sort_unstable_by_key(|(id, _)| *id);
    Ok(out)
}

fn read4(buf: &[u8], at: usize) -> Option<[u8; 4]> {
    buf.get(at..at.checked_add(4)?).and_then(|b| b.try_into().ok())
}

#[cfg(test)]
mod search_tests {
    /// Galloping from the end finds what `partition_point` finds, for every split of every
    /// length up to 100 (past several gallops), at both ends too.
    #[test]
    fn from_the_end_agrees_with_partition_point() {
        for len in 0..100 {
            for split in 0..=len {
                let list: Vec<bool> = (0..len).map(|i| i < split).collect();
                assert_eq!(super::partition_point_from_end(&list, |&b| b), split, "{len} {split}");
            }
        }
    }
}

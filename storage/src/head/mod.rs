//! The in-memory head: recent samples per series, compressed as they arrive.
//!
//! Each series keeps a list of Gorilla [`XorChunk`]s for in-order samples (cut every
//! [`CHUNK_SAMPLES`] samples so a query for a recent window skips older chunks). Samples behind
//! the series' newest in-order sample, and rewrites of a timestamp, go to its out-of-order part
//! instead: a buffer of up to [`OOO_BUFFER`] writes, sorted into compressed runs when it fills,
//! runs merged [`RUNS_PER_LEVEL`] at a time as they pile up (so a series holds a logarithmic
//! number of them, and each sample is re-encoded a logarithmic number of times). Memory per out-of-order sample is thereby close to an in-order one's, so
//! a sender that writes everything out of order (a backfill, batches taken from one shared
//! queue) is bounded by the same flush thresholds. Reads merge the parts, out-of-order writes
//! winning at equal timestamps (last write wins); a flush writes the two parts to separate
//! files (`crate::db::flush`). The head is sharded by series id: an append locks only the shards
//! of the series it touches, and a read locks one shard for one series at a time. Within a
//! shard, series are found by indexing a table with the id ([`slots`]), not by hashing.
//!
//! Beside the shards, [`SeriesBounds`] keeps each series' oldest and newest timestamp in a vector
//! indexed by the (dense) series id, so "does this series have data in `[mint, maxt]`?", asked
//! for every candidate series of a metadata lookup, is two atomic loads in the common case
//! instead of a shard lock and a hash lookup.
//!
//! Start timestamps are kept beside the samples, per shard, only for the series that have any
//! ([`StRuns`]: one run per stretch of samples sharing one), so a series without them costs
//! nothing more.
//!
//! Native histograms are, like start timestamps, kept beside the samples per shard for the
//! series that have any: a map from time to histogram, valid where the series' float at that
//! time is the histogram marker ([`crate::hist`]). Uncompressed in the head; a flush writes
//! them as histogram chunks.
//!
//! A head is never emptied in place: a flush freezes it (appends go to a fresh head) and drops it
//! once its contents are committed to partition files.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::{Mutex, RwLock};

use crate::encoding::XorChunk;
use crate::hist;
use crate::merge::dedup_keep_last;
use crate::query::StartTimestamp;
use crate::start_ts::StRuns;
use crate::types::{FloatHistogram, HistogramSample, Sample, SeriesId};

mod slots;

use slots::IdSlots;

/// In-order samples per chunk before a new chunk is cut.
pub const CHUNK_SAMPLES: usize = 512;
const SHARDS: usize = 64;

/// Samples of one series in the head.
#[derive(Debug, Default)]
struct HeadSeries {
    /// In-order samples: strictly increasing timestamps across the chunks.
    chunks: Vec<XorChunk>,
    /// Samples that arrived behind `chunks`' newest, and rewrites; None for the usual series
    /// that has none (a pointer instead of the whole structure in every series).
    ooo: Option<Box<OutOfOrder>>,
}

/// Out-of-order samples written to a buffer and cut into compressed sorted runs.
///
/// Every out-of-order write of a timestamp happened after the in-order write of it (an
/// in-order append needs a timestamp past every in-order one, and an out-of-order write needs
/// one at or behind the newest), so these samples win over the in-order chunks; among them,
/// later runs win over earlier ones and the buffer over every run.
#[derive(Debug, Default)]
struct OutOfOrder {
    /// Sorted runs, oldest first; each holds one sample per timestamp. Levels never increase
    /// along the list and at most `RUNS_PER_LEVEL - 1` runs share one, so a series of `n`
    /// out-of-order samples holds at most `(RUNS_PER_LEVEL - 1) * log8(n / 32)` runs and each
    /// sample is merged about `log8(n / 32)` times.
    runs: Vec<Run>,
    /// The newest writes, in arrival order (later wins), at most [`OOO_BUFFER`].
    buf: Vec<Sample>,
    /// Oldest and newest timestamp held.
    min_t: i64,
    max_t: i64,
}

/// One sorted run of out-of-order samples, cut into chunks of at most [`CHUNK_SAMPLES`].
#[derive(Debug, Default)]
struct Run {
    chunks: Vec<XorChunk>,
    len: usize,
    /// 0 for a run cut from the buffer, `l + 1` for one merged from runs of level `l`.
    level: u32,
}

/// Out-of-order writes a series buffers uncompressed before they are sorted into a run
/// (Prometheus keeps 32 too: `out_of_order_cap_max`).
const OOO_BUFFER: usize = 32;

/// Runs of one level merged into one of the next. Merging decodes and re-encodes: with 8, a
/// backfill's samples are re-encoded about a third as often as with pairwise merges (a
/// shuffled 3-day TSBS load spent most of its extra time in them), for up to 7 runs per level
/// for a read to merge.
const RUNS_PER_LEVEL: usize = 8;

impl Run {
    /// A run of `samples` (sorted, one per timestamp) at `level`.
    fn from_sorted(samples: &[Sample], level: u32) -> Run {
        let mut run = Run { level, ..Run::default() };
        run.extend(samples);
        run
    }

    /// Appends `samples` (sorted, one per timestamp, all after the run's last).
    fn extend(&mut self, samples: &[Sample]) {
        for &s in samples {
            append_to_chunks(&mut self.chunks, s);
        }
        self.len += samples.len();
    }

    fn last_t(&self) -> Option<i64> {
        self.chunks.last().and_then(XorChunk::last_t)
    }

    fn read(&self, mint: i64, maxt: i64, out: &mut Vec<Sample>) {
        read_chunks(&self.chunks, mint, maxt, out);
    }

    fn memory_bytes(&self) -> usize {
        self.chunks.iter().map(|c| c.memory_bytes() + size_of::<XorChunk>()).sum::<usize>() + size_of::<Run>()
    }
}

impl OutOfOrder {
    fn new() -> Self {
        OutOfOrder { runs: Vec::new(), buf: Vec::new(), min_t: i64::MAX, max_t: i64::MIN }
    }

    fn push(&mut self, s: Sample) {
        self.min_t = self.min_t.min(s.t);
        self.max_t = self.max_t.max(s.t);
        self.buf.push(s);
        if self.buf.len() >= OOO_BUFFER {
            self.cut();
        }
    }

    /// Sorts the buffer into a run: appended to the newest run when it starts after it (a
    /// late sender's samples usually follow each other), a new run otherwise; then, while the
    /// newest [`RUNS_PER_LEVEL`] runs share a level, merges them into one of the next level.
    fn cut(&mut self) {
        let mut samples = std::mem::take(&mut self.buf);
        samples.sort_by_key(|s| s.t);
        dedup_keep_last(&mut samples, 0);
        match self.runs.last_mut() {
            Some(last) if last.last_t().is_some_and(|t| samples.first().is_some_and(|s| s.t > t)) => {
                last.extend(&samples)
            }
            _ => self.runs.push(Run::from_sorted(&samples, 0)),
        }
        samples.clear();
        self.buf = samples;
        while let Some(tail) =
            self.runs.len().checked_sub(RUNS_PER_LEVEL).and_then(|from| self.runs.get(from..))
        {
            let level = tail[0].level;
            if tail.iter().any(|r| r.level != level) {
                break;
            }
            let from = self.runs.len() - RUNS_PER_LEVEL;
            let mut merged = Vec::with_capacity(tail.iter().map(|r| r.len).sum());
            for r in tail {
                r.read(i64::MIN, i64::MAX, &mut merged);
            }
            // Sorted runs, oldest first: the stable sort merges them (it finds the runs), and
            // the newest copy of a timestamp is the last.
            merged.sort_by_key(|s| s.t);
            dedup_keep_last(&mut merged, 0);
            self.runs.truncate(from);
            self.runs.push(Run::from_sorted(&merged, level + 1));
        }
    }

    /// Appends the samples in `[mint, maxt]` in write order: the runs, oldest first, then the
    /// buffer. Not sorted: the caller sorts and keeps the last of each timestamp.
    fn read_unsorted(&self, mint: i64, maxt: i64, out: &mut Vec<Sample>) {
        if self.max_t < mint || self.min_t > maxt {
            return;
        }
        for r in &self.runs {
            r.read(mint, maxt, out);
        }
        out.extend(self.buf.iter().filter(|s| s.t >= mint && s.t <= maxt));
    }

    /// True if a sample lies in `[mint, maxt]`.
    fn overlaps(&self, mint: i64, maxt: i64) -> bool {
        if self.max_t < mint || self.min_t > maxt {
            return false;
        }
        self.buf.iter().any(|s| s.t >= mint && s.t <= maxt)
            || self.runs.iter().any(|r| chunks_overlap(&r.chunks, mint, maxt))
    }

    fn memory_bytes(&self) -> usize {
        self.runs.iter().map(Run::memory_bytes).sum::<usize>()
            + self.buf.capacity() * size_of::<Sample>()
            + size_of::<Self>()
    }
}

/// Which of a series' head samples a read wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// All of them, merged.
    All,
    /// Those written in order.
    InOrder,
    /// Those written out of order, merged (later wins).
    OutOfOrder,
}

/// Appends `s` (after every sample of `chunks`) to the last chunk, cutting a new one when it
/// holds [`CHUNK_SAMPLES`].
fn append_to_chunks(chunks: &mut Vec<XorChunk>, s: Sample) {
    append_run_to_chunks(chunks, &[s]);
}

/// Appends `samples` (strictly increasing, after the last chunk's) to the last chunk, starting
/// a new one (and shrinking the full one) every [`CHUNK_SAMPLES`].
fn append_run_to_chunks(chunks: &mut Vec<XorChunk>, samples: &[Sample]) {
    let mut rest = samples;
    while !rest.is_empty() {
        if chunks.last().is_none_or(|c| c.len() >= CHUNK_SAMPLES) {
            if let Some(c) = chunks.last_mut() {
                c.shrink_to_fit();
            }
            chunks.push(XorChunk::new());
        }
        let Some(c) = chunks.last_mut() else { return };
        let (now, later) = rest.split_at((CHUNK_SAMPLES - c.len()).min(rest.len()));
        c.append_many(now);
        rest = later;
    }
}

/// Appends the samples of sorted, non-overlapping `chunks` in `[mint, maxt]` to `out`.
fn read_chunks(chunks: &[XorChunk], mint: i64, maxt: i64, out: &mut Vec<Sample>) {
    for c in chunks {
        let (Some(lo), Some(hi)) = (c.first_t(), c.last_t()) else { continue };
        if hi < mint || lo > maxt {
            continue;
        }
        c.read_range(mint, maxt, out);
    }
}

/// True if one of `chunks` (each sorted) holds a sample in `[mint, maxt]`. A chunk's first and
/// last timestamps are sample times, so only a range strictly inside one chunk needs decoding.
fn chunks_overlap(chunks: &[XorChunk], mint: i64, maxt: i64) -> bool {
    chunks.iter().any(|c| match (c.first_t(), c.last_t()) {
        (Some(lo), Some(hi)) if lo <= maxt && hi >= mint => {
            lo >= mint || hi <= maxt || c.iter().any(|x| x.t >= mint && x.t <= maxt)
        }
        _ => false,
    })
}

impl HeadSeries {
    fn last(&self) -> Option<(i64, f64)> {
        let c = self.chunks.last()?;
        Some((c.last_t()?, c.last_v()?))
    }

    /// Appends one sample; true if it went to the out-of-order samples.
    fn append(&mut self, s: Sample) -> bool {
        let late = match self.last() {
            Some((t, _)) if s.t < t => true,
            // A retried batch rewrites the same value: nothing to do. A different value at the
            // same timestamp is a rewrite that must win over the chunk's value, and so is any
            // write of a timestamp that was rewritten before.
            Some((t, v)) if s.t == t => {
                if v.to_bits() == s.v.to_bits() && !self.ooo.as_ref().is_some_and(|o| o.overlaps(t, t)) {
                    return false;
                }
                true
            }
            _ => false,
        };
        if late {
            self.ooo.get_or_insert_with(|| Box::new(OutOfOrder::new())).push(s);
            return true;
        }
        append_to_chunks(&mut self.chunks, s);
        false
    }

    /// Appends a series' samples of one write (sorted by time); returns how many went to the
    /// out-of-order samples. The usual write, strictly increasing and after every in-order
    /// sample, goes to the chunks in one pass; anything else sample by sample.
    fn append_run(&mut self, samples: &[Sample]) -> u64 {
        let after_last = match (self.last(), samples.first()) {
            (Some((t, _)), Some(first)) => first.t > t,
            _ => true,
        };
        if after_last && samples.windows(2).all(|w| w[0].t < w[1].t) {
            append_run_to_chunks(&mut self.chunks, samples);
            return 0;
        }
        samples.iter().map(|s| u64::from(self.append(*s))).sum()
    }

    fn bounds(&self) -> Option<(i64, i64)> {
        let mut lo = self.chunks.first().and_then(|c| c.first_t());
        let mut hi = self.chunks.last().and_then(|c| c.last_t());
        if let Some(o) = self.ooo.as_ref().filter(|o| o.min_t <= o.max_t) {
            lo = Some(lo.map_or(o.min_t, |x| x.min(o.min_t)));
            hi = Some(hi.map_or(o.max_t, |x| x.max(o.max_t)));
        }
        lo.zip(hi)
    }

    /// Appends the samples of `part` in `[mint, maxt]`, sorted, one per timestamp, to `out`.
    fn read(&self, part: Part, mint: i64, maxt: i64, out: &mut Vec<Sample>) {
        let start = out.len();
        if part != Part::OutOfOrder {
            read_chunks(&self.chunks, mint, maxt, out);
        }
        let Some(ooo) = self.ooo.as_ref().filter(|_| part != Part::InOrder) else { return };
        let before = out.len();
        ooo.read_unsorted(mint, maxt, out);
        if out.len() > before {
            // In-order samples, then the runs oldest first, then the buffer in arrival order: a
            // stable sort by time (which merges these sorted stretches rather than sorting
            // from scratch) followed by keeping the last of each timestamp gives
            // last-write-wins.
            if let Some(tail) = out.get_mut(start..) {
                tail.sort_by_key(|s| s.t);
            }
            dedup_keep_last(out, start);
        }
    }

    fn memory_bytes(&self) -> usize {
        self.chunks.iter().map(|c| c.memory_bytes() + std::mem::size_of::<XorChunk>()).sum::<usize>()
            + self.ooo.as_ref().map_or(0, |o| o.memory_bytes())
            + std::mem::size_of::<Self>()
    }
}

/// A map keyed by series id. foldhash rather than the standard library's SipHash: ids are not
/// chosen by clients, and every appended series looks itself up here.
type IdMap<V> = HashMap<SeriesId, V, foldhash::fast::RandomState>;

/// One shard of the head: the series whose id falls in it.
struct Shard {
    series: IdSlots<HeadSeries>,
    /// Start-timestamp runs of the series that have any; most series have no entry.
    starts: IdMap<StRuns>,
    /// Histograms by time of the series that have any (see the module documentation).
    hists: IdMap<BTreeMap<i64, FloatHistogram>>,
}

impl Shard {
    /// Appends one series' samples; returns how many went to its out-of-order part.
    fn append(&mut self, a: &SeriesSamples<'_>) -> u64 {
        let id = a.id;
        let series = self.series.get_or_insert_with(id, HeadSeries::default);
        let mut late = 0u64;
        if a.starts.is_empty() && (self.starts.is_empty() || !self.starts.contains_key(&id)) {
            late += series.append_run(a.samples);
        } else {
            let runs = self.starts.entry(id).or_default();
            for (i, s) in a.samples.iter().enumerate() {
                let prev_newest = series.last().map(|(t, _)| t);
                late += u64::from(series.append(*s));
                runs.record(s.t, a.starts.get(i).copied().unwrap_or(0), prev_newest);
            }
            if runs.is_empty() {
                self.starts.remove(&id);
            }
        }
        late
    }
}

/// One series' share of [`Head::append_series`]: its samples, sorted by time, and their start
/// timestamps (empty when none has one, else one per sample, 0 for none). Each sample's write
/// also replaces the start timestamp recorded for its timestamp (last write wins).
#[derive(Debug, Clone, Copy)]
pub struct SeriesSamples<'a> {
    /// The series.
    pub id: SeriesId,
    /// Its samples, sorted by time.
    pub samples: &'a [Sample],
    /// Their start timestamps, or empty.
    pub starts: &'a [i64],
}

/// Ids per chunk of [`SeriesBounds`] (64 KiB of bounds per chunk).
const BOUNDS_CHUNK_BITS: u32 = 12;
const BOUNDS_CHUNK: usize = 1 << BOUNDS_CHUNK_BITS;

/// Oldest and newest timestamp of one series in this head (`i64::MAX`, `i64::MIN` while it has
/// none). Both are times of samples the head holds: the head never drops a sample, and a rewrite
/// keeps its timestamp.
struct Bounds {
    min_t: AtomicI64,
    max_t: AtomicI64,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds { min_t: AtomicI64::new(i64::MAX), max_t: AtomicI64::new(i64::MIN) }
    }
}

/// Per-series time bounds in chunks indexed by series id. Chunks are allocated when a series of
/// their id range first gets samples and never move, so readers take a shared lock and load two
/// atomics.
#[derive(Default)]
struct SeriesBounds {
    chunks: RwLock<Vec<Option<Box<[Bounds]>>>>,
}

impl SeriesBounds {
    fn split(id: SeriesId) -> (usize, usize) {
        let id = id as usize;
        (id >> BOUNDS_CHUNK_BITS, id & (BOUNDS_CHUNK - 1))
    }

    /// Widens the bounds of `id` to cover `[lo, hi]`. Called after the samples are in the
    /// shard, so bounds a reader sees are always backed by samples.
    fn widen(&self, id: SeriesId, lo: i64, hi: i64) {
        let (c, i) = Self::split(id);
        let update = |b: &Bounds| {
            b.min_t.fetch_min(lo, Ordering::Release);
            b.max_t.fetch_max(hi, Ordering::Release);
        };
        if let Some(b) = self.chunks.read().get(c).and_then(|ch| ch.as_ref()).and_then(|ch| ch.get(i)) {
            update(b);
            return;
        }
        let mut chunks = self.chunks.write();
        if chunks.len() <= c {
            chunks.resize_with(c + 1, || None);
        }
        if let Some(slot) = chunks.get_mut(c) {
            let chunk = slot.get_or_insert_with(|| (0..BOUNDS_CHUNK).map(|_| Bounds::default()).collect());
            if let Some(b) = chunk.get(i) {
                update(b);
            }
        }
    }

    /// [`SeriesBounds::widen`] for each `(id, lo, hi)`, under one shared lock where the
    /// chunks exist (an uncontended lock is still a write to a cache line both cores share).
    fn widen_each(&self, items: impl Iterator<Item = (SeriesId, i64, i64)>) {
        let mut missing = Vec::new();
        {
            let chunks = self.chunks.read();
            for (id, lo, hi) in items {
                let (c, i) = Self::split(id);
                match chunks.get(c).and_then(|ch| ch.as_ref()).and_then(|ch| ch.get(i)) {
                    Some(b) => {
                        // A series' oldest time rarely moves once it has one: a load is
                        // cheaper than a read-modify-write.
                        if lo < b.min_t.load(Ordering::Relaxed) {
                            b.min_t.fetch_min(lo, Ordering::Release);
                        }
                        b.max_t.fetch_max(hi, Ordering::Release);
                    }
                    None => missing.push((id, lo, hi)),
                }
            }
        }
        for (id, lo, hi) in missing {
            self.widen(id, lo, hi);
        }
    }

    /// The bounds of `id`, if it has samples.
    fn get(&self, id: SeriesId) -> Option<(i64, i64)> {
        let (c, i) = Self::split(id);
        let chunks = self.chunks.read();
        let b = chunks.get(c)?.as_ref()?.get(i)?;
        let (lo, hi) = (b.min_t.load(Ordering::Acquire), b.max_t.load(Ordering::Acquire));
        (lo <= hi).then_some((lo, hi))
    }

    fn memory_bytes(&self) -> usize {
        let chunks = self.chunks.read();
        chunks.iter().flatten().count() * BOUNDS_CHUNK * size_of::<Bounds>()
            + chunks.capacity() * size_of::<Option<Box<[Bounds]>>>()
    }
}

/// The in-memory head of the database.
pub struct Head {
    shards: Vec<Mutex<Shard>>,
    bounds: SeriesBounds,
    samples: AtomicU64,
    /// Of `samples`, those that went to the out-of-order samples.
    ooo_samples: AtomicU64,
    /// What the histograms held add to [`Head::flush_weight`].
    hist_weight: AtomicU64,
    min_t: AtomicI64,
    max_t: AtomicI64,
    /// Sum over the samples appended of their timestamps in seconds relative to `base_ms`
    /// (each clamped to ±2^32 s, so 2 billion samples cannot overflow): with `samples`, the
    /// mean time, which tells a head of old data from a live head with a few late samples.
    time_sum_s: AtomicI64,
    /// The wall clock when the head was created, in milliseconds since the epoch.
    base_ms: i64,
    created: Instant,
}

impl Default for Head {
    fn default() -> Self {
        Head::new()
    }
}

impl Head {
    /// An empty head.
    pub fn new() -> Self {
        Head {
            shards: (0..SHARDS)
                .map(|shard| {
                    Mutex::new(Shard {
                        series: IdSlots::new(shard, SHARDS),
                        starts: IdMap::default(),
                        hists: IdMap::default(),
                    })
                })
                .collect(),
            bounds: SeriesBounds::default(),
            samples: AtomicU64::new(0),
            ooo_samples: AtomicU64::new(0),
            hist_weight: AtomicU64::new(0),
            min_t: AtomicI64::new(i64::MAX),
            max_t: AtomicI64::new(i64::MIN),
            time_sum_s: AtomicI64::new(0),
            base_ms: crate::clock::now_ms(),
            created: Instant::now(),
        }
    }

    fn shard(&self, id: SeriesId) -> &Mutex<Shard> {
        &self.shards[id as usize % SHARDS]
    }

    /// Appends samples (sorted by time) of one series, without start timestamps (for tests;
    /// the database appends with [`Head::append_series`]).
    #[cfg(test)]
    pub fn append(&self, id: SeriesId, samples: &[Sample]) {
        self.append_with_starts(id, samples, &[]);
    }

    /// [`Head::append_series`] for one series.
    pub fn append_with_starts(&self, id: SeriesId, samples: &[Sample], starts: &[i64]) {
        self.append_series(&[SeriesSamples { id, samples, starts }]);
    }

    /// Appends the samples of many series (a write request's): each shard is locked once for
    /// all its series, and the head's totals are updated once. A request of 25,000 series
    /// with a few samples each (a remote-write sender's usual request) spent most of its head
    /// time on per-series lock and counter traffic that two cores contend for. A series listed
    /// twice is appended in list order, so its later samples win as in separate appends.
    pub fn append_series(&self, all: &[SeriesSamples<'_>]) {
        let mut by_shard = vec![0u32; all.len()];
        let mut ends = [0u32; SHARDS + 1];
        for s in all {
            ends[s.id as usize % SHARDS + 1] += 1;
        }
        for i in 0..SHARDS {
            ends[i + 1] += ends[i];
        }
        let mut next = ends;
        for (i, s) in all.iter().enumerate() {
            let slot = &mut next[s.id as usize % SHARDS];
            by_shard[*slot as usize] = i as u32;
            *slot += 1;
        }
        let mut late = 0u64;
        for (shard, range) in self.shards.iter().zip(ends.windows(2)) {
            let members = &by_shard[range[0] as usize..range[1] as usize];
            if members.is_empty() {
                continue;
            }
            let mut guard = shard.lock();
            for &i in members {
                if let Some(s) = all.get(i as usize) {
                    late += guard.append(s);
                }
            }
        }
        if late > 0 {
            self.ooo_samples.fetch_add(late, Ordering::Relaxed);
        }
        // Samples are sorted by time, but an unsorted slice must not make the bounds lie.
        // One pass for the bounds and the time sum. After the samples are in the shards, so
        // bounds a reader sees are always backed by samples.
        let (mut min_t, mut max_t, mut sum, mut count) = (i64::MAX, i64::MIN, 0i64, 0u64);
        self.bounds.widen_each(all.iter().filter_map(|s| {
            let (first, last) = (s.samples.first()?, s.samples.last()?);
            let (lo, hi, part) = s.samples.iter().fold((first.t, last.t, 0i64), |(lo, hi, sum), x| {
                (lo.min(x.t), hi.max(x.t), sum.saturating_add(self.relative_secs(x.t)))
            });
            (min_t, max_t) = (min_t.min(lo), max_t.max(hi));
            sum = sum.saturating_add(part);
            count += s.samples.len() as u64;
            Some((s.id, lo, hi))
        }));
        if count == 0 {
            return;
        }
        self.samples.fetch_add(count, Ordering::Relaxed);
        self.min_t.fetch_min(min_t, Ordering::Relaxed);
        self.max_t.fetch_max(max_t, Ordering::Relaxed);
        self.time_sum_s.fetch_add(sum, Ordering::Relaxed);
    }

    /// `t` in seconds after `base_ms`, clamped to ±2^32.
    fn relative_secs(&self, t: i64) -> i64 {
        const LIMIT: i64 = 1 << 32;
        (t.saturating_sub(self.base_ms) / 1000).clamp(-LIMIT, LIMIT)
    }

    /// Stores the histograms of histogram samples whose markers [`Head::append_with_starts`]
    /// just appended, in write order (a later one at an equal time wins).
    pub fn append_histograms(&self, id: SeriesId, hists: &[HistogramSample]) {
        if hists.is_empty() {
            return;
        }
        let mut weight = 0u64;
        {
            let mut shard = self.shard(id).lock();
            let map = shard.hists.entry(id).or_default();
            for h in hists {
                weight += (hist_bytes(&h.h) / HIST_BYTES_PER_SAMPLE) as u64;
                map.insert(h.t, h.h.clone());
            }
        }
        self.hist_weight.fetch_add(weight, Ordering::Relaxed);
    }

    /// What counts toward the flush threshold (`head_samples_max`): the samples, plus for each
    /// histogram its (uncompressed, in the head) size in float samples' worth of memory, so a
    /// head of histograms is flushed at about the memory a head of floats would be.
    pub fn flush_weight(&self) -> u64 {
        self.sample_count().saturating_add(self.hist_weight.load(Ordering::Relaxed))
    }

    /// True if the series has histograms here.
    pub fn has_histograms(&self, id: SeriesId) -> bool {
        self.shard(id).lock().hists.contains_key(&id)
    }

    /// Appends this series' samples in `[mint, maxt]` (markers included) to `samples`, and the
    /// histograms of its marker samples to `out`.
    pub fn read_histograms(
        &self,
        id: SeriesId,
        mint: i64,
        maxt: i64,
        samples: &mut Vec<Sample>,
        out: &mut Vec<HistogramSample>,
    ) {
        let shard = self.shard(id).lock();
        let Some(s) = shard.series.get(id) else { return };
        let from = samples.len();
        s.read(Part::All, mint, maxt, samples);
        if let Some(map) = shard.hists.get(&id) {
            hist::resolve(&samples[from..], |t| map.get(&t), out);
        }
    }

    /// Appends this series' samples in `[mint, maxt]` (sorted, one per timestamp) to `out`.
    pub fn read(&self, id: SeriesId, mint: i64, maxt: i64, out: &mut Vec<Sample>) {
        if let Some(s) = self.shard(id).lock().series.get(id) {
            s.read(Part::All, mint, maxt, out);
        }
    }

    /// The series' newest sample if it lies in `[mint, maxt]` and the series holds neither
    /// out-of-order samples nor histograms here: then it is the latest sample in the range, a
    /// float (or a stale marker), read without decoding (a chunk keeps its last sample). None
    /// otherwise, also when the series has none here.
    pub(crate) fn latest_in_order(&self, id: SeriesId, mint: i64, maxt: i64) -> Option<Sample> {
        let shard = self.shard(id).lock();
        if shard.hists.contains_key(&id) {
            return None;
        }
        let s = shard.series.get(id).filter(|s| s.ooo.is_none())?;
        let (t, v) = s.last()?;
        (mint <= t && t <= maxt).then_some(Sample::new(t, v))
    }

    /// The oldest and newest timestamps of the series' samples here (including rewrites and
    /// out-of-order samples), without locking a shard; None if it has none.
    pub(crate) fn series_bounds(&self, id: SeriesId) -> Option<(i64, i64)> {
        self.bounds.get(id)
    }

    /// [`Head::read`], also appending the start timestamps of the samples read to `starts`
    /// (those that have one, in time order).
    pub fn read_with_starts(
        &self,
        id: SeriesId,
        mint: i64,
        maxt: i64,
        out: &mut Vec<Sample>,
        starts: &mut Vec<StartTimestamp>,
    ) {
        let shard = self.shard(id).lock();
        let Some(s) = shard.series.get(id) else { return };
        let from = out.len();
        s.read(Part::All, mint, maxt, out);
        if let Some(runs) = shard.starts.get(&id) {
            runs.resolve(&out[from..], starts);
        }
    }

    /// True if some sample of the series here has a start timestamp (or had one that a
    /// rewrite left in place around it): the cheap test that lets reads skip start timestamps.
    pub fn has_starts(&self, id: SeriesId) -> bool {
        self.shard(id).lock().starts.contains_key(&id)
    }

    /// True if the series has any sample in `[mint, maxt]` here. Exact: a chunk that only
    /// straddles the range is decoded to look.
    ///
    /// The series' bounds answer without locking a shard unless the range lies strictly
    /// inside them: both bounds are sample times, so one of them in the range means yes.
    pub fn overlaps(&self, id: SeriesId, mint: i64, maxt: i64) -> bool {
        let Some((lo, hi)) = self.bounds.get(id) else { return false };
        if hi < mint || lo > maxt {
            return false;
        }
        if (lo >= mint && lo <= maxt) || (hi >= mint && hi <= maxt) {
            return true;
        }
        let shard = self.shard(id).lock();
        let Some(s) = shard.series.get(id) else { return false };
        // Only a range strictly inside one chunk needs decoding (a metadata or selector lookup
        // over a window of a long head used to decode the chunk straddling each end of the
        // window).
        s.ooo.as_ref().is_some_and(|o| o.overlaps(mint, maxt)) || chunks_overlap(&s.chunks, mint, maxt)
    }

    /// Samples appended (including rewrites).
    pub fn sample_count(&self) -> u64 {
        self.samples.load(Ordering::Relaxed)
    }

    /// Of [`Head::sample_count`], the samples that arrived behind their series' newest
    /// in-order sample (and rewrites), held in out-of-order runs.
    pub fn ooo_sample_count(&self) -> u64 {
        self.ooo_samples.load(Ordering::Relaxed)
    }

    /// The samples of `part` of one series in `[mint, maxt]` into `out.samples` (sorted, one
    /// per timestamp), their start timestamps into `out.starts` and the histograms of their
    /// markers into `out.hists`, each cleared first: what a flush writes of one series to one
    /// file. The in-order and out-of-order parts merged (out-of-order winning) give
    /// [`Part::All`].
    pub(crate) fn read_part(&self, id: SeriesId, part: Part, mint: i64, maxt: i64, out: &mut PartRead) {
        out.samples.clear();
        out.starts.clear();
        out.hists.clear();
        let shard = self.shard(id).lock();
        let Some(s) = shard.series.get(id) else { return };
        if part == Part::OutOfOrder && s.ooo.is_none() {
            return;
        }
        s.read(part, mint, maxt, &mut out.samples);
        if let Some(runs) = shard.starts.get(&id) {
            runs.resolve(&out.samples, &mut out.starts);
        }
        if let Some(map) = shard.hists.get(&id) {
            hist::resolve(&out.samples, |t| map.get(&t), &mut out.hists);
        }
    }

    /// Number of series with data in this head.
    pub fn series_count(&self) -> usize {
        self.shards.iter().map(|s| s.lock().series.len()).sum()
    }

    /// Number of in-order chunks held (Prometheus' `prometheus_tsdb_head_chunks`, shown by
    /// `/api/v1/status/tsdb`).
    pub fn chunk_count(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().series.values().map(|series| series.chunks.len()).sum::<usize>())
            .sum()
    }

    /// Oldest and newest timestamps appended, if any.
    pub fn time_bounds(&self) -> Option<(i64, i64)> {
        let lo = self.min_t.load(Ordering::Relaxed);
        let hi = self.max_t.load(Ordering::Relaxed);
        (lo <= hi).then_some((lo, hi))
    }

    /// The mean timestamp of the samples appended (to the second), if any.
    pub fn mean_time(&self) -> Option<i64> {
        let n = self.samples.load(Ordering::Relaxed);
        let sum = self.time_sum_s.load(Ordering::Relaxed);
        (n > 0).then(|| self.base_ms.saturating_add((sum / n as i64).saturating_mul(1000)))
    }

    /// When this head was created (a flush is due once it gets old).
    pub fn created(&self) -> Instant {
        self.created
    }

    /// Ids of all series with data here, ascending.
    pub fn series_ids(&self) -> Vec<SeriesId> {
        let mut ids: Vec<SeriesId> = self
            .shards
            .iter()
            .flat_map(|s| s.lock().series.iter().map(|(id, _)| id).collect::<Vec<_>>())
            .collect();
        ids.sort_unstable();
        ids
    }

    /// Starts of the partitions (of width `pms` ms) that hold at least one sample here.
    pub fn partitions(&self, pms: i64) -> std::collections::BTreeSet<i64> {
        let pms = pms.max(1);
        let part = |t: i64| t.div_euclid(pms) * pms;
        let mut out = std::collections::BTreeSet::new();
        let mut buf = Vec::new();
        for shard in &self.shards {
            let shard = shard.lock();
            for s in shard.series.values() {
                let Some((lo, hi)) = s.bounds() else { continue };
                if part(lo) == part(hi) {
                    out.insert(part(lo));
                } else {
                    // Rare: a series spanning partitions; find which ones actually hold data.
                    buf.clear();
                    s.read(Part::All, i64::MIN, i64::MAX, &mut buf);
                    out.extend(buf.iter().map(|x| part(x.t)));
                }
            }
        }
        out
    }

    /// Approximate heap bytes held by samples and per-series structures.
    pub fn memory_bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let s = s.lock();
                s.series.values().map(HeadSeries::memory_bytes).sum::<usize>()
                    + s.series.memory_bytes()
                    + s.starts.values().map(StRuns::memory_bytes).sum::<usize>()
                    + s.starts.capacity() * std::mem::size_of::<(SeriesId, StRuns)>()
                    + s.hists.values().map(hist_map_bytes).sum::<usize>()
            })
            .sum::<usize>()
            + self.bounds.memory_bytes()
    }
}

/// What [`Head::read_part`] reads of one series.
#[derive(Debug, Default)]
pub(crate) struct PartRead {
    pub samples: Vec<Sample>,
    pub starts: Vec<StartTimestamp>,
    pub hists: Vec<HistogramSample>,
}

/// Head bytes that weigh as much as one float sample toward the flush threshold (a float
/// sample costs one to two bytes in a Gorilla chunk; histograms are counted leniently).
const HIST_BYTES_PER_SAMPLE: usize = 8;

/// Approximate heap bytes of one histogram in the head (map entry included).
fn hist_bytes(h: &FloatHistogram) -> usize {
    64 + size_of::<FloatHistogram>()
        + (h.positive.capacity() + h.negative.capacity()) * size_of::<(i32, f64)>()
        + h.custom_values.capacity() * 8
}

/// Approximate heap bytes of a series' head histograms.
fn hist_map_bytes(m: &BTreeMap<i64, FloatHistogram>) -> usize {
    m.values().map(hist_bytes).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(h: &Head, id: SeriesId) -> Vec<(i64, f64)> {
        let mut out = Vec::new();
        h.read(id, i64::MIN, i64::MAX, &mut out);
        out.iter().map(|s| (s.t, s.v)).collect()
    }

    #[test]
    fn mean_time_is_the_mean_of_appended_timestamps_to_the_second() {
        let h = Head::new();
        assert_eq!(h.mean_time(), None);
        let t0 = 1_700_000_000_000;
        h.append(1, &[Sample::new(t0, 1.0), Sample::new(t0 + 10_000, 1.0)]);
        h.append(2, &[Sample::new(t0 + 20_000, 1.0), Sample::new(t0 + 30_000, 1.0)]);
        let mean = h.mean_time().unwrap();
        assert!((mean - (t0 + 15_000)).abs() <= 1000, "{mean}");
        // Absurd timestamps are clamped, never overflow.
        h.append(3, &[Sample::new(i64::MIN, 1.0), Sample::new(i64::MAX, 1.0)]);
        assert!(h.mean_time().is_some());
    }

    #[test]
    fn in_order_out_of_order_and_rewrites() {
        let h = Head::new();
        h.append(1, &[Sample::new(10, 1.0), Sample::new(20, 2.0)]);
        h.append(1, &[Sample::new(15, 1.5)]);
        h.append(1, &[Sample::new(20, 2.0)]); // retry: no-op
        h.append(1, &[Sample::new(10, 9.0)]); // rewrite wins
        h.append(1, &[Sample::new(30, 3.0)]);
        assert_eq!(read_all(&h, 1), vec![(10, 9.0), (15, 1.5), (20, 2.0), (30, 3.0)]);
        h.append(1, &[Sample::new(30, 4.0), Sample::new(30, 5.0)]);
        assert_eq!(read_all(&h, 1).last(), Some(&(30, 5.0)));
        let mut out = Vec::new();
        h.read(1, 11, 20, &mut out);
        assert_eq!(out.len(), 2);
        assert!(h.overlaps(1, 0, 10) && !h.overlaps(1, 31, 40) && !h.overlaps(2, 0, 100));
    }

    #[test]
    fn histograms_weigh_on_the_flush_threshold() {
        let h = Head::new();
        h.append(1, &[Sample::new(10, 1.0)]);
        assert_eq!(h.flush_weight(), 1);
        h.append(2, &[Sample::new(10, hist::marker())]);
        let fh = FloatHistogram { positive: vec![(1, 2.0); 10], ..FloatHistogram::default() };
        h.append_histograms(2, &[HistogramSample { t: 10, h: fh }]);
        assert!(h.flush_weight() > 2 + 10, "{}", h.flush_weight());
        let (mut samples, mut out) = (Vec::new(), Vec::new());
        h.read_histograms(2, i64::MIN, i64::MAX, &mut samples, &mut out);
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn chunks_are_cut() {
        let h = Head::new();
        let s: Vec<Sample> = (0..(CHUNK_SAMPLES as i64 * 3)).map(|i| Sample::new(i * 10, i as f64)).collect();
        h.append(4, &s);
        let mut out = Vec::new();
        h.read(4, 100, 200, &mut out);
        assert_eq!(out.len(), 11);
        assert_eq!(read_all(&h, 4).len(), s.len());
    }

    /// What the head must hold: per timestamp, the last value written.
    fn model(writes: &[Vec<(i64, u32)>]) -> Vec<(i64, u64)> {
        let mut m = BTreeMap::new();
        for b in writes {
            for &(t, v) in b {
                m.insert(t, f64::from(v).to_bits());
            }
        }
        m.into_iter().collect()
    }

    fn read_part_bits(h: &Head, id: SeriesId, part: Part, mint: i64, maxt: i64) -> Vec<(i64, u64)> {
        let mut r = PartRead::default();
        h.read_part(id, part, mint, maxt, &mut r);
        r.samples.iter().map(|s| (s.t, s.v.to_bits())).collect()
    }

    #[test]
    fn out_of_order_samples_are_compressed_into_few_runs() {
        let h = Head::new();
        h.append(1, &[Sample::new(1_000_000_000, 0.0)]);
        // A backfill, newest batch first: every sample is out of order, no two batches adjoin.
        for batch in (0..100i64).rev() {
            let s: Vec<Sample> =
                (0..100).map(|i| Sample::new((batch * 100 + i) * 10_000, (i % 7) as f64)).collect();
            h.append(1, &s);
        }
        assert_eq!(h.ooo_sample_count(), 10_000);
        let shard = h.shard(1).lock();
        let ooo = shard.series.get(1).and_then(|s| s.ooo.as_ref()).unwrap();
        // Levels never increase along the runs, at most 7 share one, and 10,000 samples need
        // no more than three levels (32 * 8^3 > 10,000).
        assert!(ooo.runs.windows(2).all(|w| w[0].level >= w[1].level));
        for level in 0..4 {
            assert!(ooo.runs.iter().filter(|r| r.level == level).count() < RUNS_PER_LEVEL);
        }
        assert!(
            ooo.runs.iter().all(|r| r.level < 3),
            "{:?}",
            ooo.runs.iter().map(|r| r.level).collect::<Vec<_>>()
        );
        // Regular timestamps and small integers: a few bits a sample, against 16 bytes raw.
        assert!(ooo.memory_bytes() < 10_000 * 3, "{} bytes", ooo.memory_bytes());
        drop(shard);
        assert_eq!(read_all(&h, 1).len(), 10_001);
    }

    proptest::proptest! {
        /// Any sequence of batches, in any order, with rewrites: every read gives the last
        /// write of each timestamp, the in-order and out-of-order parts merged (the latter
        /// winning) give the whole, and each part is sorted with one sample per timestamp.
        #[test]
        fn reads_give_the_last_write_of_each_timestamp(
            writes in proptest::collection::vec(
                proptest::collection::vec((0i64..3_000, 0u32..4), 1..80), 1..30),
            mint in 0i64..3_100,
            len in 0i64..3_000,
        ) {
            let h = Head::new();
            for b in &writes {
                let mut b: Vec<Sample> = b.iter().map(|&(t, v)| Sample::new(t, f64::from(v))).collect();
                b.sort_by_key(|s| s.t);
                h.append(3, &b);
            }
            // A batch is sorted (stable) before it is appended, so its own duplicates keep
            // their order: the model sees the same order of writes.
            let sorted: Vec<Vec<(i64, u32)>> = writes.iter().map(|b| {
                let mut b = b.clone();
                b.sort_by_key(|x| x.0);
                b
            }).collect();
            let want = model(&sorted);
            let maxt = mint + len;
            let all = read_part_bits(&h, 3, Part::All, i64::MIN, i64::MAX);
            proptest::prop_assert_eq!(&all, &want);
            let ranged = read_part_bits(&h, 3, Part::All, mint, maxt);
            let want_ranged: Vec<(i64, u64)> = want.iter().copied().filter(|x| x.0 >= mint && x.0 <= maxt).collect();
            proptest::prop_assert_eq!(&ranged, &want_ranged);
            let inorder = read_part_bits(&h, 3, Part::InOrder, mint, maxt);
            let ooo = read_part_bits(&h, 3, Part::OutOfOrder, mint, maxt);
            for part in [&inorder, &ooo] {
                proptest::prop_assert!(part.windows(2).all(|w| w[0].0 < w[1].0));
            }
            let mut merged: BTreeMap<i64, u64> = inorder.into_iter().collect();
            merged.extend(ooo);
            proptest::prop_assert_eq!(merged.into_iter().collect::<Vec<_>>(), want_ranged);
        }

        /// A write appended as a run leaves the series as appending its samples one by one:
        /// the same chunks (stream and cut) and the same out-of-order samples, whatever the
        /// writes (in order, overlapping, rewriting the newest timestamp, unsorted).
        #[test]
        fn a_run_appends_as_its_samples_do(
            writes in proptest::collection::vec(
                (proptest::collection::vec((0i64..3_000, 0u32..3), 1..40), proptest::bool::ANY), 1..40),
        ) {
            let (mut run, mut single) = (HeadSeries::default(), HeadSeries::default());
            let mut late = (0, 0);
            for (w, sorted) in &writes {
                let mut w: Vec<Sample> = w.iter().map(|&(t, v)| Sample::new(t, f64::from(v))).collect();
                if *sorted {
                    w.sort_by_key(|s| s.t);
                }
                late.0 += run.append_run(&w);
                late.1 += w.iter().map(|s| u64::from(single.append(*s))).sum::<u64>();
            }
            proptest::prop_assert_eq!(late.0, late.1);
            proptest::prop_assert_eq!(run.chunks.len(), single.chunks.len());
            for (a, b) in run.chunks.iter().zip(&single.chunks) {
                proptest::prop_assert_eq!(a.iter().collect::<Vec<_>>(), b.iter().collect::<Vec<_>>());
            }
            for part in [Part::InOrder, Part::OutOfOrder, Part::All] {
                let (mut a, mut b) = (Vec::new(), Vec::new());
                run.read(part, i64::MIN, i64::MAX, &mut a);
                single.read(part, i64::MIN, i64::MAX, &mut b);
                let bits = |v: &[Sample]| v.iter().map(|s| (s.t, s.v.to_bits())).collect::<Vec<_>>();
                proptest::prop_assert_eq!(bits(&a), bits(&b));
            }
        }

        /// One `append_series` of many series (some listed more than once, across shards)
        /// leaves the head as appending them one by one does: the same samples per series,
        /// later listings winning, and the same totals and bounds.
        #[test]
        fn append_series_equals_one_by_one(
            writes in proptest::collection::vec(
                (0u32..200, proptest::collection::vec((0i64..500, 0u32..4), 1..12)), 1..60),
        ) {
            let sorted: Vec<(SeriesId, Vec<Sample>)> = writes.iter().map(|(id, b)| {
                let mut b: Vec<Sample> = b.iter().map(|&(t, v)| Sample::new(t, f64::from(v))).collect();
                b.sort_by_key(|s| s.t);
                (*id * 7, b)
            }).collect();
            let (many, single) = (Head::new(), Head::new());
            let all: Vec<SeriesSamples<'_>> =
                sorted.iter().map(|(id, s)| SeriesSamples { id: *id, samples: s, starts: &[] }).collect();
            many.append_series(&all);
            for (id, s) in &sorted {
                single.append(*id, s);
            }
            for id in sorted.iter().map(|(id, _)| *id) {
                proptest::prop_assert_eq!(
                    read_part_bits(&many, id, Part::All, i64::MIN, i64::MAX),
                    read_part_bits(&single, id, Part::All, i64::MIN, i64::MAX)
                );
                proptest::prop_assert_eq!(many.bounds.get(id), single.bounds.get(id));
            }
            proptest::prop_assert_eq!(many.time_bounds(), single.time_bounds());
            // (Each head measures times from its own creation: compare with the sum itself.)
            let sum: i64 = sorted.iter().flat_map(|(_, s)| s).map(|x| many.relative_secs(x.t)).sum();
            proptest::prop_assert_eq!(many.time_sum_s.load(Ordering::Relaxed), sum);
            proptest::prop_assert_eq!(many.flush_weight(), single.flush_weight());
            proptest::prop_assert_eq!(
                many.ooo_samples.load(Ordering::Relaxed),
                single.ooo_samples.load(Ordering::Relaxed)
            );
        }

        /// `overlaps` (bounds first, chunks only when the range lies inside them) agrees with
        /// reading the samples, for in-order, out-of-order and rewritten samples.
        #[test]
        fn overlaps_agrees_with_read(
            batches in proptest::collection::vec(proptest::collection::vec(0i64..2_000, 1..40), 1..6),
            mint in 0i64..2_100,
            len in 0i64..600,
        ) {
            let h = Head::new();
            for b in &batches {
                let mut b: Vec<Sample> = b.iter().map(|&t| Sample::new(t, t as f64)).collect();
                b.sort_by_key(|s| s.t);
                h.append(7, &b);
            }
            let maxt = mint + len;
            let mut out = Vec::new();
            h.read(7, mint, maxt, &mut out);
            proptest::prop_assert_eq!(h.overlaps(7, mint, maxt), !out.is_empty());
            proptest::prop_assert!(!h.overlaps(8, i64::MIN, i64::MAX));
        }
    }
}

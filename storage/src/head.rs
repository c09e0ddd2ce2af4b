//! The in-memory head: recent samples per series, compressed as they arrive.
//!
//! Each series keeps a list of Gorilla [`XorChunk`]s for in-order samples (cut every
//! [`CHUNK_SAMPLES`] samples so a query for a recent window skips older chunks) and a small side
//! buffer for out-of-order samples and rewrites of an existing timestamp. Reads merge the two,
//! the side buffer winning at equal timestamps (last write wins). The head is sharded by series
//! id: an append locks only the shards of the series it touches, and a read locks one shard for
//! one series at a time.
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
use crate::query::StartTimestamp;
use crate::start_ts::StRuns;
use crate::types::{FloatHistogram, HistogramSample, Sample, SeriesId};

/// In-order samples per chunk before a new chunk is cut.
pub const CHUNK_SAMPLES: usize = 512;
const SHARDS: usize = 64;

/// Samples of one series in the head.
#[derive(Debug, Default)]
struct HeadSeries {
    chunks: Vec<XorChunk>,
    /// Out-of-order samples and rewrites, in arrival order (later entries win).
    ooo: Vec<Sample>,
}

impl HeadSeries {
    fn last(&self) -> Option<(i64, f64)> {
        let c = self.chunks.last()?;
        Some((c.last_t()?, c.last_v()?))
    }

    fn append(&mut self, s: Sample) {
        match self.last() {
            Some((t, _)) if s.t < t => self.ooo.push(s),
            Some((t, v)) if s.t == t => {
                // A retried batch rewrites the same value: nothing to do. A different value at
                // the same timestamp is a rewrite that must win over the chunk's value.
                if v.to_bits() != s.v.to_bits() || self.ooo.iter().any(|o| o.t == s.t) {
                    self.ooo.push(s);
                }
            }
            _ => {
                if self.chunks.last().is_none_or(|c| c.len() >= CHUNK_SAMPLES) {
                    if let Some(c) = self.chunks.last_mut() {
                        c.shrink_to_fit();
                    }
                    self.chunks.push(XorChunk::new());
                }
                if let Some(c) = self.chunks.last_mut() {
                    c.append(s.t, s.v);
                }
            }
        }
    }

    fn bounds(&self) -> Option<(i64, i64)> {
        let mut lo = self.chunks.first().and_then(|c| c.first_t());
        let mut hi = self.chunks.last().and_then(|c| c.last_t());
        for s in &self.ooo {
            lo = Some(lo.map_or(s.t, |x| x.min(s.t)));
            hi = Some(hi.map_or(s.t, |x| x.max(s.t)));
        }
        lo.zip(hi)
    }

    /// Appends samples in `[mint, maxt]`, sorted, one per timestamp, to `out`.
    fn read(&self, mint: i64, maxt: i64, out: &mut Vec<Sample>) {
        let start = out.len();
        for c in &self.chunks {
            let (Some(lo), Some(hi)) = (c.first_t(), c.last_t()) else { continue };
            if hi < mint || lo > maxt {
                continue;
            }
            c.read_range(mint, maxt, out);
        }
        if self.ooo.iter().any(|s| s.t >= mint && s.t <= maxt) {
            // Chunk samples first, then side-buffer samples in arrival order; a stable sort by
            // time followed by keeping the last of each timestamp gives last-write-wins.
            out.extend(self.ooo.iter().filter(|s| s.t >= mint && s.t <= maxt));
            let tail = &mut out[start..];
            tail.sort_by_key(|s| s.t);
            dedup_keep_last(out, start);
        }
    }

    fn memory_bytes(&self) -> usize {
        self.chunks.iter().map(|c| c.memory_bytes() + std::mem::size_of::<XorChunk>()).sum::<usize>()
            + self.ooo.capacity() * std::mem::size_of::<Sample>()
            + std::mem::size_of::<Self>()
    }
}

/// One shard of the head: the series whose id falls in it.
#[derive(Default)]
struct Shard {
    series: HashMap<SeriesId, HeadSeries>,
    /// Start-timestamp runs of the series that have any; most series have no entry.
    starts: HashMap<SeriesId, StRuns>,
    /// Histograms by time of the series that have any (see the module documentation).
    hists: HashMap<SeriesId, BTreeMap<i64, FloatHistogram>>,
}

/// Removes all but the last sample of each run of equal timestamps in `v[start..]` (sorted).
pub(crate) fn dedup_keep_last(v: &mut Vec<Sample>, start: usize) {
    let mut w = start;
    for r in start..v.len() {
        let s = v[r];
        if w > start && v[w - 1].t == s.t {
            v[w - 1] = s;
        } else {
            v[w] = s;
            w += 1;
        }
    }
    v.truncate(w);
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
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            bounds: SeriesBounds::default(),
            samples: AtomicU64::new(0),
            hist_weight: AtomicU64::new(0),
            min_t: AtomicI64::new(i64::MAX),
            max_t: AtomicI64::new(i64::MIN),
            time_sum_s: AtomicI64::new(0),
            base_ms: crate::db::now_ms(),
            created: Instant::now(),
        }
    }

    fn shard(&self, id: SeriesId) -> &Mutex<Shard> {
        &self.shards[id as usize % SHARDS]
    }

    /// Appends samples (sorted by time) of one series, without start timestamps.
    pub fn append(&self, id: SeriesId, samples: &[Sample]) {
        self.append_with_starts(id, samples, &[]);
    }

    /// Appends samples (sorted by time) of one series with their start timestamps: `starts`
    /// is empty (none has one) or holds one entry per sample, 0 for none. Each sample's write
    /// also replaces the start timestamp recorded for its timestamp (last write wins).
    pub fn append_with_starts(&self, id: SeriesId, samples: &[Sample], starts: &[i64]) {
        let (Some(first), Some(last)) = (samples.first(), samples.last()) else { return };
        {
            let mut guard = self.shard(id).lock();
            let shard = &mut *guard;
            let series = shard.series.entry(id).or_default();
            if starts.is_empty() && !shard.starts.contains_key(&id) {
                for s in samples {
                    series.append(*s);
                }
            } else {
                let runs = shard.starts.entry(id).or_default();
                for (i, s) in samples.iter().enumerate() {
                    let prev_newest = series.last().map(|(t, _)| t);
                    series.append(*s);
                    runs.record(s.t, starts.get(i).copied().unwrap_or(0), prev_newest);
                }
                if runs.is_empty() {
                    shard.starts.remove(&id);
                }
            }
        }
        // Samples are sorted by time, but an unsorted slice must not make the bounds lie.
        // One pass for the bounds and the time sum.
        let (lo, hi, sum) = samples.iter().fold((first.t, last.t, 0i64), |(lo, hi, sum), s| {
            (lo.min(s.t), hi.max(s.t), sum.saturating_add(self.relative_secs(s.t)))
        });
        self.bounds.widen(id, lo, hi);
        self.samples.fetch_add(samples.len() as u64, Ordering::Relaxed);
        self.min_t.fetch_min(first.t, Ordering::Relaxed);
        self.max_t.fetch_max(last.t, Ordering::Relaxed);
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
        let Some(s) = shard.series.get(&id) else { return };
        let from = samples.len();
        s.read(mint, maxt, samples);
        if let Some(map) = shard.hists.get(&id) {
            hist::resolve(&samples[from..], |t| map.get(&t), out);
        }
    }

    /// Appends this series' samples in `[mint, maxt]` (sorted, one per timestamp) to `out`.
    pub fn read(&self, id: SeriesId, mint: i64, maxt: i64, out: &mut Vec<Sample>) {
        if let Some(s) = self.shard(id).lock().series.get(&id) {
            s.read(mint, maxt, out);
        }
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
        let Some(s) = shard.series.get(&id) else { return };
        let from = out.len();
        s.read(mint, maxt, out);
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
        let Some(s) = shard.series.get(&id) else { return false };
        if s.ooo.iter().any(|x| x.t >= mint && x.t <= maxt) {
            return true;
        }
        // A chunk's first and last timestamps are sample times too: only a range strictly
        // inside one chunk needs decoding (a metadata or selector lookup over a window of a
        // long head used to decode the chunk straddling each end of the window).
        s.chunks.iter().any(|c| match (c.first_t(), c.last_t()) {
            (Some(lo), Some(hi)) if lo <= maxt && hi >= mint => {
                lo >= mint || hi <= maxt || c.iter().any(|x| x.t >= mint && x.t <= maxt)
            }
            _ => false,
        })
    }

    /// Samples appended (including rewrites).
    pub fn sample_count(&self) -> u64 {
        self.samples.load(Ordering::Relaxed)
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
        let mut ids: Vec<SeriesId> =
            self.shards.iter().flat_map(|s| s.lock().series.keys().copied().collect::<Vec<_>>()).collect();
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
                    s.read(i64::MIN, i64::MAX, &mut buf);
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
                    + s.series.capacity()
                        * (std::mem::size_of::<SeriesId>() + std::mem::size_of::<HeadSeries>())
                    + s.starts.values().map(StRuns::memory_bytes).sum::<usize>()
                    + s.starts.capacity() * std::mem::size_of::<(SeriesId, StRuns)>()
                    + s.hists.values().map(hist_map_bytes).sum::<usize>()
            })
            .sum::<usize>()
            + self.bounds.memory_bytes()
    }
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

    proptest::proptest! {
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

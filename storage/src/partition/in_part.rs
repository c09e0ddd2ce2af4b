//! A version 5 partition file read from a bucket in part (what a query node does): its series
//! table is fetched a chunk at a time, only the chunks a selection may need (`chunks.rs`), and
//! of a fetched chunk only the series some selection selects enter the index, until the chunk
//! has been scanned often enough that entering it whole costs less than scanning it again.
//!
//! Why: entering a series (its labels built and interned, its postings, its runtime id) costs
//! about 1.8 µs, testing a series entry's symbol refs against the matchers a tenth of that. A
//! cold query for 8 hosts named by all ten metrics of a 100,000-series file needs every chunk
//! fetched, and entered 100,000 series to answer from 80 of them: 180 ms of a 190 ms query. A
//! query node that reaches a month of such files for one host pays that once per file.
//!
//! What a selection fetched and did not enter is entered later, off the query path, by a
//! thread of its own (`snapshot/state.rs`), so that the next query with other matchers does not
//! scan again; a chunk scanned [`WHOLE_AFTER_SCANS`] times before that thread reached it is
//! entered whole by the next scan. A selection repeated (a dashboard's refresh) finds its
//! matchers among those already applied and scans nothing; a metric whose chunks are all
//! entered is known by name.

use std::collections::HashSet;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::{Mutex, RwLock};

use crate::error::{Error, Result};
use crate::file_source::FileBytes;
use crate::matcher::{MatchOp, Matcher};
use crate::types::{Label, Labels, SeriesId};

use super::chunks::{CHUNK_SERIES, Chunk, may_match};
use super::reader::read_entry_refs;

/// Maps a series' labels (and its newest timestamp in the file) to its runtime id, as the
/// series of a file read in part enter the index.
pub(crate) type Resolve = Box<dyn Fn(&Labels, i64) -> SeriesId + Send + Sync>;

/// Scans of a chunk that enter only the series their selections select; the next scan enters
/// the whole chunk, unless the file is queued for the thread that enters fetched chunks (see
/// the module docs), which then will. This bounds the scans of a hot chunk when that thread
/// cannot run (a scan costs about a tenth of entering the chunk).
pub(crate) const WHOLE_AFTER_SCANS: u8 = 8;

/// Selections remembered as applied, per file; beyond this the memory starts afresh.
const APPLIED_MAX: usize = 256;

/// Slots of an [`EntryTest`]'s cache of label-name symbols, each holding the last name whose
/// id maps to it (id modulo the slots): one look-up per label of an entry, where a search of
/// the names met so far compared up to all of them (a sixth of a query node's scan of a file
/// of 100,000 series with 11 labels each). Two names that share a slot are compared as strings
/// in turn.
const NAME_CACHE_SLOTS: usize = 64;

/// Symbols of a file up to which an [`EntryTest`] remembers each matcher's answer per value
/// symbol (a byte per symbol and matcher); beyond, values are compared each time.
const MEMO_SYMBOLS_MAX: usize = 1 << 16;

// A chunk's entered series are one bit each.
const _: () = assert!(CHUNK_SERIES <= 128);

/// See the module docs.
pub(super) struct InPart {
    pub symbols: Vec<Arc<str>>,
    pub chunks: Vec<Chunk>,
    /// What is fetched and entered. Held while a slice of chunks is entered (and the file's list
    /// of series extended), so a series is entered once.
    loaded: Mutex<Loaded>,
    /// Every series is entered: nothing left to look at.
    complete: AtomicBool,
    /// Queued for [`InPart::enter_fetched`], or being entered by it.
    queued: AtomicBool,
    resolve: Resolve,
    /// (runtime series id, offset of its block list) of the series entered so far, sorted by
    /// id, growing as selections enter series.
    pub series: RwLock<Vec<(SeriesId, u32)>>,
}

/// Per chunk of a file read in part, what is fetched and entered; and what needs no scan.
#[derive(Default)]
struct Loaded {
    /// Per chunk of the file.
    chunks: Vec<ChunkState>,
    /// Metric names whose series are all entered: a selection naming one (`__name__="x"`)
    /// needs nothing more, known without testing every chunk against it, which on a query
    /// node reaching a month of files is a few million tests per selection.
    names: HashSet<String>,
    /// Selections (their matchers written out) whose series are all entered.
    applied: HashSet<String>,
}

/// What is fetched and entered of one chunk.
#[derive(Default, Clone, Copy)]
struct ChunkState {
    /// Which of the chunk's series are in the index: bit i for its i-th series.
    entered: u128,
    /// Every series of the chunk is in the index.
    done: bool,
    /// The chunk's bytes are fetched and matched the directory's checksum.
    checked: bool,
    /// Scans that entered only some of the chunk's series.
    scans: u8,
}

impl Loaded {
    /// Every series of every chunk is in the index.
    fn all_done(&self) -> bool {
        self.chunks.iter().all(|c| c.done)
    }
}

impl InPart {
    pub fn new(symbols: Vec<Arc<str>>, chunks: Vec<Chunk>, resolve: Resolve) -> InPart {
        let n = chunks.len();
        let loaded = Loaded { chunks: vec![ChunkState::default(); n], ..Loaded::default() };
        InPart {
            symbols,
            chunks,
            loaded: Mutex::new(loaded),
            complete: AtomicBool::new(n == 0),
            queued: AtomicBool::new(false),
            resolve,
            series: RwLock::new(Vec::new()),
        }
    }

    /// Whether [`InPart::load_for`] has chunks to look at for `selections`.
    pub fn needs_load_for(&self, selections: &[&[Matcher]]) -> bool {
        !self.complete.load(Ordering::Acquire) && !self.wanted(&self.loaded.lock(), selections).0.is_empty()
    }

    /// Enters every series of the file that one of `selections` (sets of matchers; an empty
    /// set selects all) selects, fetching the chunks that may hold one and are not fetched yet
    /// in one request. A selection made after this finds those series in the index.
    pub fn load_for(&self, path: &Path, bytes: &FileBytes, selections: &[&[Matcher]]) -> Result<()> {
        if self.complete.load(Ordering::Acquire) {
            return Ok(());
        }
        let (want, open, ranges) = {
            let loaded = self.loaded.lock();
            let (want, open) = self.wanted(&loaded, selections);
            let ranges: Vec<Range<usize>> =
                want.iter().filter(|&&c| !loaded.chunks[c].checked).map(|&c| self.chunks[c].range.clone()).collect();
            (want, open, ranges)
        };
        // Not under the lock: another query's scan goes on meanwhile.
        bytes.prefetch(&ranges)?;
        let mut test = EntryTest::new(&open, self.symbols.len() <= MEMO_SYMBOLS_MAX);
        let (mut refs, mut new) = (Vec::new(), Vec::new());
        let mut loaded = self.loaded.lock();
        // (A chunk done meanwhile was entered whole, by another scan or the background thread.)
        let mut entered = Ok(());
        for &c in &want {
            if !loaded.chunks[c].done {
                entered = self.enter(c, &mut loaded, path, bytes, Some(&mut test), &mut refs, &mut new);
                if entered.is_err() {
                    break;
                }
            }
        }
        // The chunks entered before an error are marked so: their series go in the list.
        self.add_series(new);
        entered?;
        self.remember(&mut loaded, &open);
        if loaded.all_done() {
            self.complete.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// Whether fetched chunks hold series that no selection entered, with the file not queued
    /// for [`InPart::enter_fetched`] yet: marks it queued.
    pub fn queue_entering(&self) -> bool {
        if self.complete.load(Ordering::Acquire) {
            return false;
        }
        let left = {
            let loaded = self.loaded.lock();
            loaded.chunks.iter().any(|c| c.checked && !c.done)
        };
        left && !self.queued.swap(true, Ordering::AcqRel)
    }

    /// Enters the series of fetched chunks that no selection entered: the work a cold query
    /// left for later, done off the query path (see `snapshot/state.rs`). The series are
    /// entered into the index without the file's lock (entering is idempotent: a series gets
    /// the id it has), and only then added to the file's list and marked under it, the ones a
    /// scan entered meanwhile skipped; so queries' scans, which hold the lock, never wait for
    /// this and it waits for a scan once.
    pub fn enter_fetched(&self, path: &Path, bytes: &FileBytes) -> Result<()> {
        // Whatever happens here, a later load may queue the file again.
        let _unqueue = Unqueue(&self.queued);
        let todo: Vec<(usize, u128)> = {
            let loaded = self.loaded.lock();
            (0..self.chunks.len())
                .filter(|&c| loaded.chunks[c].checked && !loaded.chunks[c].done && self.chunks[c].series <= CHUNK_SERIES)
                .map(|c| (c, loaded.chunks[c].entered))
                .collect()
        };
        let mut refs = Vec::new();
        // (chunk, series bit, id, block list offset)
        let mut found: Vec<(usize, u128, SeriesId, u32)> = Vec::new();
        for &(c, entered) in &todo {
            let chunk = &self.chunks[c];
            let at = chunk.range.start;
            let corrupt = |reason: String| Error::corruption(path, Some(at as u64), reason);
            // Checked when first read, so present and sound.
            let entries = bytes.all().get(chunk.range.clone()).ok_or_else(|| corrupt("series chunk out of the file".into()))?;
            let mut pos = 0;
            for i in 0..chunk.series {
                let (max_t, list_at) = read_entry_refs(entries, &mut pos, at, self.symbols.len(), &mut refs)
                    .map_err(|e| corrupt(e.to_string()))?;
                let bit = 1u128 << i;
                if entered & bit == 0 {
                    found.push((c, bit, (self.resolve)(&labels_of(&refs, &self.symbols), max_t), list_at));
                }
            }
        }
        let mut loaded = self.loaded.lock();
        let mut new = Vec::with_capacity(found.len());
        for (c, bit, id, list_at) in found {
            if loaded.chunks[c].entered & bit == 0 {
                loaded.chunks[c].entered |= bit;
                new.push((id, list_at));
            }
        }
        for (c, _) in todo {
            loaded.chunks[c].done = true;
        }
        self.add_series(new);
        if loaded.all_done() {
            self.complete.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// Enters the series of fetched chunk `c` that `test` selects (all, without a test or
    /// once the chunk was scanned [`WHOLE_AFTER_SCANS`] times) and are not entered yet,
    /// appending them to `new` and marking them entered, or, on an error, neither; checks the
    /// chunk's bytes the first time.
    #[allow(clippy::too_many_arguments)]
    fn enter(
        &self,
        c: usize,
        loaded: &mut Loaded,
        path: &Path,
        bytes: &FileBytes,
        mut test: Option<&mut EntryTest<'_>>,
        refs: &mut Vec<(u32, u32)>,
        new: &mut Vec<(SeriesId, u32)>,
    ) -> Result<()> {
        let chunk = &self.chunks[c];
        let at = chunk.range.start;
        let corrupt = |reason: String| Error::corruption(path, Some(at as u64), reason);
        let entries =
            bytes.all().get(chunk.range.clone()).ok_or_else(|| corrupt("series chunk out of the file".into()))?;
        if !loaded.chunks[c].checked {
            if crc32fast::hash(entries) != chunk.crc {
                return Err(corrupt("series chunk checksum mismatch".into()));
            }
            loaded.chunks[c].checked = true;
        }
        let hot = loaded.chunks[c].scans >= WHOLE_AFTER_SCANS && !self.queued.load(Ordering::Acquire);
        let whole = test.is_none() || chunk.series > CHUNK_SERIES || hot;
        if let Some(t) = test.as_mut() {
            t.focus(chunk);
        }
        let mut entered = loaded.chunks[c].entered;
        let mut pos = 0;
        let from = new.len();
        for i in 0..chunk.series {
            let (max_t, list_at) = match read_entry_refs(entries, &mut pos, at, self.symbols.len(), refs) {
                Ok(got) => got,
                Err(e) => {
                    new.truncate(from);
                    return Err(corrupt(e.to_string()));
                }
            };
            let bit = if i < 128 { 1u128 << i } else { 0 };
            let selected = whole || test.as_mut().is_some_and(|t| t.selects(refs, &self.symbols));
            if entered & bit != 0 || !selected {
                continue;
            }
            new.push(((self.resolve)(&labels_of(refs, &self.symbols), max_t), list_at));
            entered |= bit;
        }
        if pos != entries.len() {
            new.truncate(from);
            return Err(corrupt("series chunk longer than its series".into()));
        }
        loaded.chunks[c].entered = entered;
        if whole || entered == all_of(chunk.series) {
            loaded.chunks[c].done = true;
        } else {
            loaded.chunks[c].scans = loaded.chunks[c].scans.saturating_add(1);
        }
        Ok(())
    }

    /// Takes the file off the queue of [`InPart::enter_fetched`] without entering anything:
    /// nothing will (no thread to do it).
    pub fn unqueue(&self) {
        self.queued.store(false, Ordering::Release);
    }

    /// Adds entered series to the file's list.
    fn add_series(&self, mut new: Vec<(SeriesId, u32)>) {
        if !new.is_empty() {
            new.sort_unstable_by_key(|(id, _)| *id);
            let mut series = self.series.write();
            series.extend(new);
            // Two sorted runs: the stable sort merges them in linear time.
            series.sort_by_key(|(id, _)| *id);
        }
    }

    /// The chunks that may hold a series one of `selections` selects and are not entered
    /// whole, and the selections that may still need some.
    fn wanted<'a>(&self, loaded: &Loaded, selections: &[&'a [Matcher]]) -> (Vec<usize>, Vec<&'a [Matcher]>) {
        let open: Vec<&[Matcher]> = selections
            .iter()
            .copied()
            .filter(|m| !equal_name(m).is_some_and(|n| loaded.names.contains(n)))
            .filter(|m| loaded.applied.is_empty() || !loaded.applied.contains(&written_out(m)))
            .collect();
        if open.is_empty() {
            return (Vec::new(), open);
        }
        let chunks = (0..self.chunks.len())
            .filter(|&c| !loaded.chunks[c].done && open.iter().any(|m| may_match(&self.chunks[c], m)))
            .collect();
        (chunks, open)
    }

    /// Records `applied` (just loaded for) as needing nothing more, and the metric names they
    /// name by equality whose chunks are now all entered.
    fn remember(&self, loaded: &mut Loaded, applied: &[&[Matcher]]) {
        for m in applied {
            if let Some(n) = equal_name(m) {
                let named = [Matcher::equal("__name__", n)];
                let all_in = self.chunks.iter().zip(&loaded.chunks).all(|(c, s)| s.done || !may_match(c, &named));
                if all_in {
                    loaded.names.insert(n.to_string());
                }
            }
        }
        if loaded.applied.len() + applied.len() > APPLIED_MAX {
            loaded.applied.clear();
        }
        loaded.applied.extend(applied.iter().map(|m| written_out(m)));
    }
}

/// Clears a file's queued flag when dropped.
struct Unqueue<'a>(&'a AtomicBool);

impl Drop for Unqueue<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// The metric name `matchers` ask for by equality, if that is their only `__name__` matcher
/// (the chunks that may hold their series are then exactly those that may hold the name).
fn equal_name(matchers: &[Matcher]) -> Option<&str> {
    let mut names = matchers.iter().filter(|m| m.name == "__name__");
    match (names.next(), names.next()) {
        (Some(m), None) if m.op == MatchOp::Equal => Some(m.value.as_str()),
        _ => None,
    }
}

/// A selection's matchers as one string, equal for equal matchers.
fn written_out(matchers: &[Matcher]) -> String {
    let mut s = String::new();
    for m in matchers {
        let op = match m.op {
            MatchOp::Equal => "=",
            MatchOp::NotEqual => "!=",
            MatchOp::Regex => "=~",
            MatchOp::NotRegex => "!~",
        };
        // Lengths first: no name or value can make two different lists read alike.
        s.push_str(&format!("{}:{}{op}{}:{}", m.name.len(), m.name, m.value.len(), m.value));
    }
    s
}

/// Bits of a chunk's series when all `n` are entered.
fn all_of(n: usize) -> u128 {
    if n >= 128 { u128::MAX } else { (1u128 << n) - 1 }
}

/// The labels of a series entry whose symbol refs (checked against `symbols`) are `refs`.
fn labels_of(refs: &[(u32, u32)], symbols: &[Arc<str>]) -> Labels {
    Labels::new(
        refs.iter()
            .map(|&(n, v)| Label { name: Arc::clone(&symbols[n as usize]), value: Arc::clone(&symbols[v as usize]) })
            .collect(),
    )
}

/// Tests series entries, as symbol refs, against selections: whether one selects the series.
/// Label names are matched once per symbol id, and in a file of up to [`MEMO_SYMBOLS_MAX`]
/// symbols each matcher tests a value symbol once, so a test is a few integer comparisons and
/// table look-ups (a metric's name and a host's name recur across the chunks).
struct EntryTest<'a> {
    selections: &'a [&'a [Matcher]],
    /// The distinct label names the matchers test.
    names: Vec<&'a str>,
    /// Per selection, per matcher: its name's index in `names`.
    slots: Vec<Vec<usize>>,
    /// Symbol ids met as label names, with their index in `names` (`usize::MAX`: none), each
    /// in slot id modulo [`NAME_CACHE_SLOTS`] (`u32::MAX`: empty).
    seen: [(u32, usize); NAME_CACHE_SLOTS],
    /// Per name of `names`: the value symbol of the series under test.
    values: Vec<Option<u32>>,
    /// Per selection: it may select a series of the chunk under test (by the chunk's range of
    /// metric names), so it is tested.
    active: Vec<bool>,
    /// Whether to fill `memo`.
    use_memo: bool,
    /// Per selection, per matcher: its answer per value symbol (index `symbols.len()` for an
    /// absent label): 0 not known yet, 1 no, 2 yes. Empty until first used.
    memo: Vec<Vec<Vec<u8>>>,
}

impl<'a> EntryTest<'a> {
    fn new(selections: &'a [&'a [Matcher]], use_memo: bool) -> EntryTest<'a> {
        let mut names: Vec<&str> = Vec::new();
        let slots = selections
            .iter()
            .map(|ms| {
                ms.iter()
                    .map(|m| match names.iter().position(|n| *n == m.name) {
                        Some(i) => i,
                        None => {
                            names.push(&m.name);
                            names.len() - 1
                        }
                    })
                    .collect()
            })
            .collect();
        let values = vec![None; names.len()];
        let memo = selections.iter().map(|ms| vec![Vec::new(); ms.len()]).collect();
        let active = vec![true; selections.len()];
        let seen = [(u32::MAX, usize::MAX); NAME_CACHE_SLOTS];
        EntryTest { selections, names, slots, seen, values, active, use_memo, memo }
    }

    /// Tests only the selections that may select a series of `chunk`, for its entries.
    fn focus(&mut self, chunk: &Chunk) {
        for (active, ms) in self.active.iter_mut().zip(self.selections) {
            *active = may_match(chunk, ms);
        }
    }

    /// Whether a selection selects the series whose label refs are `refs`.
    fn selects(&mut self, refs: &[(u32, u32)], symbols: &[Arc<str>]) -> bool {
        self.values.fill(None);
        for &(n, v) in refs {
            let cached = &mut self.seen[n as usize % NAME_CACHE_SLOTS];
            let slot = if cached.0 == n {
                cached.1
            } else {
                let name = &*symbols[n as usize];
                let slot = self.names.iter().position(|x| *x == name).unwrap_or(usize::MAX);
                *cached = (n, slot);
                slot
            };
            if let Some(value) = self.values.get_mut(slot) {
                *value = Some(v);
            }
        }
        let (absent, use_memo) = (symbols.len(), self.use_memo);
        let values = &self.values;
        let active = &self.active;
        let tested = self.selections.iter().zip(&self.slots).zip(&mut self.memo).zip(active);
        tested.filter(|(_, active)| **active).any(|(((ms, slots), memo), _)| {
            ms.iter().zip(slots).zip(memo).all(|((m, &slot), memo)| {
                let v = values[slot].map_or(absent, |v| v as usize);
                let test = || m.matches(symbols.get(v).map_or("", |s| s));
                if !use_memo {
                    return test();
                }
                if memo.is_empty() {
                    *memo = vec![0; absent + 1];
                }
                match memo[v] {
                    0 => {
                        let yes = test();
                        memo[v] = 1 + u8::from(yes);
                        yes
                    }
                    known => known == 2,
                }
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The entry test against the plain one on the built labels, for names present, absent,
    /// repeated across selections, and an empty selection.
    #[test]
    fn entry_tests_select_as_the_matchers_match() {
        let symbols: Vec<Arc<str>> = ["__name__", "cpu", "host", "a", "b", "dc", "x", "mem"].into_iter().map(Arc::from).collect();
        let series: Vec<Vec<(u32, u32)>> = vec![
            vec![(0, 1), (2, 3)],
            vec![(0, 1), (5, 6), (2, 4)],
            vec![(0, 7), (2, 3)],
            vec![(2, 4)],
        ];
        let m = |op, name: &str, v: &str| Matcher::new(op, name, v).unwrap();
        let cases: Vec<Vec<Vec<Matcher>>> = vec![
            vec![vec![m(MatchOp::Equal, "__name__", "cpu"), m(MatchOp::Equal, "host", "a")]],
            vec![vec![m(MatchOp::Equal, "dc", "")]],
            vec![vec![m(MatchOp::NotEqual, "dc", "")], vec![m(MatchOp::Regex, "host", "a|zz")]],
            vec![vec![m(MatchOp::NotRegex, "__name__", "c.*"), m(MatchOp::Equal, "host", "b")]],
            vec![vec![]],
            vec![vec![m(MatchOp::Equal, "nothere", "")]],
        ];
        for case in &cases {
            let selections: Vec<&[Matcher]> = case.iter().map(Vec::as_slice).collect();
            for use_memo in [true, false] {
                let mut test = EntryTest::new(&selections, use_memo);
                // Twice: the second time from what the memo remembered.
                for refs in series.iter().chain(&series) {
                    let labels = labels_of(refs, &symbols);
                    let want = selections.iter().any(|ms| crate::matcher::matches_all(ms, &labels));
                    assert_eq!(test.selects(refs, &symbols), want, "{case:?} {labels} memo {use_memo}");
                }
            }
        }
    }

    /// Label names whose symbol ids share a slot of the name cache (ids 64 apart) take it in
    /// turn, and each entry is still tested by the right names.
    #[test]
    fn names_sharing_a_cache_slot_are_told_apart() {
        let symbols: Vec<Arc<str>> = (0..200).map(|i| Arc::from(format!("s{i}"))).collect();
        // Names s1, s65 and s129 share slot 1; values are other symbols.
        let series: Vec<Vec<(u32, u32)>> = vec![
            vec![(1, 10), (65, 11), (129, 12)],
            vec![(1, 11), (65, 10)],
            vec![(65, 12), (129, 10)],
            vec![(129, 11), (1, 12)],
        ];
        let m = |name: &str, v: &str| Matcher::equal(name, v);
        let cases: Vec<Vec<Matcher>> = vec![
            vec![m("s1", "s10")],
            vec![m("s65", "s10")],
            vec![m("s129", "s10"), m("s65", "s12")],
            vec![m("s1", "s12"), m("s129", "s11")],
            vec![m("s1", "")],
        ];
        for case in &cases {
            let selections: Vec<&[Matcher]> = vec![case.as_slice()];
            for use_memo in [true, false] {
                let mut test = EntryTest::new(&selections, use_memo);
                for refs in series.iter().chain(&series) {
                    let labels = labels_of(refs, &symbols);
                    let want = crate::matcher::matches_all(case, &labels);
                    assert_eq!(test.selects(refs, &symbols), want, "{case:?} {labels} memo {use_memo}");
                }
            }
        }
    }

    #[test]
    fn selections_written_out_differ_when_they_differ() {
        let a = [Matcher::equal("a", "b=c")];
        let b = [Matcher::equal("a", "b"), Matcher::equal("c", "")];
        assert_ne!(written_out(&a), written_out(&b));
        assert_eq!(written_out(&a), written_out(&[Matcher::equal("a", "b=c")]));
        assert_eq!(all_of(3), 0b111);
        assert_eq!(all_of(128), u128::MAX);
    }
}

//! What one query selected, so that a partition file read from the bucket is fetched with one
//! request per query rather than one per series.
//!
//! A snapshot records each selection (its series and time range). While a thread serves one of
//! the snapshot's reads, the snapshot's footprint is that thread's [`current`] one. When a read
//! of a bucket file misses the local cache, the reader first fetches, in one ranged read, the
//! blocks of every series the query selected so far that the file holds in the selected range
//! ([`Footprint::first_miss`]), once per file and selection; later reads of the file by the
//! same query then find their blocks present. The engine makes all of a query's selections
//! before its first read where the querier asks for it (`Querier::selects_ahead`), so a query
//! of five selectors fetches from a file once, not five times. A query whose reads block
//! statistics answer misses nothing and so fetches nothing.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::types::SeriesId;

/// One selection: its series ids (sorted) and closed time range.
pub(crate) type Selection = (Arc<[SeriesId]>, i64, i64);

/// See the module docs.
#[derive(Default)]
pub(crate) struct Footprint {
    /// Each selection of the query.
    selections: Mutex<Vec<Selection>>,
    /// Per file (by the address of its reader): how many of the selections it was fetched for.
    fetched: Mutex<HashMap<usize, usize>>,
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Footprint>>> = const { RefCell::new(None) };
}

impl Footprint {
    /// Records a selection of `ids` in `[mint, maxt]`.
    pub(crate) fn selected(&self, mut ids: Vec<SeriesId>, mint: i64, maxt: i64) {
        if ids.is_empty() {
            return;
        }
        ids.sort_unstable();
        self.selections.lock().push((ids.into(), mint, maxt));
    }

    /// For a miss of file `file`: the selections it was not fetched for yet (none if it was
    /// fetched for all), which it now counts as fetched.
    pub(crate) fn first_miss(&self, file: usize) -> Vec<Selection> {
        let selections = self.selections.lock();
        let mut fetched = self.fetched.lock();
        let done = fetched.entry(file).or_insert(0);
        let new = selections.get(*done..).unwrap_or_default().to_vec();
        *done = selections.len();
        new
    }
}

/// Makes `footprint` the current thread's until the returned guard is dropped.
pub(crate) fn enter(footprint: &Arc<Footprint>) -> Entered {
    CURRENT.with(|c| *c.borrow_mut() = Some(Arc::clone(footprint)));
    Entered
}

/// Ends [`enter`]'s footprint, also when the read unwinds.
pub(crate) struct Entered;

impl Drop for Entered {
    fn drop(&mut self) {
        CURRENT.with(|c| *c.borrow_mut() = None);
    }
}

/// The footprint of the query this thread is reading for, if any.
pub(crate) fn current() -> Option<Arc<Footprint>> {
    CURRENT.with(|c| c.borrow().clone())
}

//! What one query selected, so that a partition file read from the bucket is fetched with one
//! request per query rather than one per series.
//!
//! A snapshot records each selection (its series and time range). While a thread serves one of
//! the snapshot's reads, the snapshot's footprint is that thread's [`current`] one. When a read
//! of a bucket file misses the local cache, the reader first fetches, in one ranged read, the
//! blocks of every series the query selected that the file holds in the selected range
//! ([`Footprint::first_miss`]), once per file per query; later reads of the file by the same
//! query then find their blocks present. A query whose reads block statistics answer misses
//! nothing and so fetches nothing.

use std::cell::RefCell;
use std::collections::HashSet;
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
    /// Files (by address of their reader) already fetched for this query.
    fetched: Mutex<HashSet<usize>>,
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

    /// For the first miss of file `file` in this query: each selection's ids and range (none
    /// after the first call for the file).
    pub(crate) fn first_miss(&self, file: usize) -> Vec<Selection> {
        if !self.fetched.lock().insert(file) {
            return Vec::new();
        }
        self.selections.lock().clone()
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

//! Injected I/O errors, for tests of what strata does when the disk fills up or fails.
//!
//! Every durable file operation of the storage crate (creating, writing, fsyncing and renaming
//! files, in the WAL, partition files and the manifest) asks [`check`] first. A test arms a
//! fault for one directory tree with [`inject`]; operations on paths under it then fail with
//! the chosen `errno` (`ENOSPC` by default), once, `n` times or until the returned guard is
//! dropped. Faults are scoped by directory so tests running in parallel in one process do not
//! disturb each other.
//!
//! Cost when nothing is armed (always, outside tests): one relaxed atomic load per operation,
//! next to a system call. So the hooks stay in release builds and end-to-end tests exercise the
//! same code that ships. Unlike [`crate::failpoint`], which aborts the process, these return
//! errors and let the process carry on.

// Without the `testing` feature only the hooks are called; arming faults ([`inject`], [`Fault`]) is
// for tests, which reach it through the feature.
#![cfg_attr(not(any(test, feature = "testing")), allow(dead_code))]

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

/// A kind of file operation a fault can hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Creating (opening for writing) a file or directory.
    Create,
    /// Writing bytes to a file.
    Write,
    /// fsync/fdatasync of a file or directory.
    Sync,
    /// Renaming a file into place.
    Rename,
}

impl Op {
    /// Every kind.
    pub const ALL: [Op; 4] = [Op::Create, Op::Write, Op::Sync, Op::Rename];
}

/// `ENOSPC`: no space left on device.
pub const ENOSPC: i32 = 28;
/// `EIO`: input/output error (what a failed fsync usually reports).
pub const EIO: i32 = 5;

/// What to fail, and how.
#[derive(Debug, Clone)]
pub struct Fault {
    ops: Vec<Op>,
    errno: i32,
    times: Option<u64>,
    name_contains: Option<String>,
    exact: bool,
}

impl Fault {
    /// Fails every operation of the kinds in `ops` with `ENOSPC`, until the guard is dropped.
    pub fn new(ops: &[Op]) -> Fault {
        Fault { ops: ops.to_vec(), errno: ENOSPC, times: None, name_contains: None, exact: false }
    }

    /// A full disk: every kind of operation fails with `ENOSPC`.
    pub fn disk_full() -> Fault {
        Fault::new(&Op::ALL)
    }

    /// Fails with this `errno` instead (e.g. [`EIO`]).
    pub fn errno(mut self, errno: i32) -> Fault {
        self.errno = errno;
        self
    }

    /// Fails only the next `n` matching operations, then lets them through.
    pub fn times(mut self, n: u64) -> Fault {
        self.times = Some(n);
        self
    }

    /// Fails only operations on the root path itself, not below it (e.g. syncing the data
    /// directory after the manifest rename).
    pub fn exact(mut self) -> Fault {
        self.exact = true;
        self
    }

    /// Fails only operations on paths whose text contains `s` (e.g. `"MANIFEST"`, `"/wal/"`).
    pub fn paths_containing(mut self, s: &str) -> Fault {
        self.name_contains = Some(s.to_string());
        self
    }
}

struct Armed {
    id: u64,
    root: PathBuf,
    fault: Fault,
    /// Errors injected so far.
    hits: Arc<AtomicU64>,
}

/// True while any fault is armed: the only thing [`check`] reads otherwise.
static ANY: AtomicBool = AtomicBool::new(false);
static FAULTS: Mutex<Vec<Armed>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// Keeps a fault armed; dropping it (or [`FaultGuard::clear`]) disarms it.
#[must_use = "the fault is disarmed when the guard is dropped"]
pub struct FaultGuard {
    id: u64,
    hits: Arc<AtomicU64>,
}

impl FaultGuard {
    /// Errors this fault has injected so far.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::SeqCst)
    }

    /// Disarms the fault now ("space came back").
    pub fn clear(self) {}
}

impl Drop for FaultGuard {
    fn drop(&mut self) {
        let mut faults = FAULTS.lock();
        faults.retain(|a| a.id != self.id);
        ANY.store(!faults.is_empty(), Ordering::SeqCst);
    }
}

/// Arms `fault` for every path under `root` (compared as given: pass the same path the
/// database was opened with).
pub fn inject(root: &Path, fault: Fault) -> FaultGuard {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let hits = Arc::new(AtomicU64::new(0));
    let mut faults = FAULTS.lock();
    faults.push(Armed { id, root: root.to_path_buf(), fault, hits: Arc::clone(&hits) });
    ANY.store(true, Ordering::SeqCst);
    FaultGuard { id, hits }
}

/// Called before each durable file operation: fails if an armed fault covers `op` on `path`.
#[inline]
pub(crate) fn check(op: Op, path: &Path) -> io::Result<()> {
    if !ANY.load(Ordering::Relaxed) {
        return Ok(());
    }
    check_armed(op, path)
}

#[cold]
fn check_armed(op: Op, path: &Path) -> io::Result<()> {
    let mut faults = FAULTS.lock();
    for a in faults.iter_mut() {
        let f = &mut a.fault;
        let under = if f.exact { path == a.root } else { path.starts_with(&a.root) };
        if !f.ops.contains(&op) || !under {
            continue;
        }
        if let Some(s) = &f.name_contains
            && !path.to_string_lossy().contains(s.as_str())
        {
            continue;
        }
        match &mut f.times {
            Some(0) => continue,
            Some(n) => *n -= 1,
            None => {}
        }
        a.hits.fetch_add(1, Ordering::SeqCst);
        return Err(io::Error::from_raw_os_error(f.errno));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scoped_counted_and_disarmed() {
        let root = Path::new("/nonexistent/fault-test-root");
        let other = Path::new("/nonexistent/other");
        let g = inject(root, Fault::new(&[Op::Sync]).times(2));
        assert!(check(Op::Write, &root.join("a")).is_ok());
        assert!(check(Op::Sync, &other.join("a")).is_ok());
        let e = check(Op::Sync, &root.join("a")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(ENOSPC));
        assert!(check(Op::Sync, &root.join("b")).is_err());
        assert!(check(Op::Sync, &root.join("c")).is_ok());
        assert_eq!(g.hits(), 2);
        let g2 = inject(root, Fault::disk_full().errno(EIO).paths_containing("MANIFEST"));
        assert!(check(Op::Create, &root.join("x")).is_ok());
        assert_eq!(check(Op::Create, &root.join("MANIFEST.tmp")).unwrap_err().raw_os_error(), Some(EIO));
        g2.clear();
        assert!(check(Op::Create, &root.join("MANIFEST.tmp")).is_ok());
        drop(g);
    }
}

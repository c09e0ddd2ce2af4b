//! A durability recorder, for tests that cut the power: what a directory tree would hold after
//! a power loss at any moment of a run.
//!
//! A SIGKILL loses nothing the process handed to the kernel; a power loss loses everything not
//! yet fsynced. To test the second without a machine to unplug, [`record`] arms a recorder for
//! one directory tree. The storage crate's file operations report to it (every fsync of a file
//! or directory, every rename and removal; [`crate::fsutil`] and the WAL call the hooks), and it
//! keeps the *durable image* the tree would come back as after a power cut, under the most
//! pessimistic model POSIX allows:
//!
//! - a file's bytes are those it had at its last fsync (read from the real file just before the
//!   fsync call; nothing written later survives, writes still in flight may be torn), and empty
//!   if it was never synced;
//! - a directory's entries (names created, renamed in or out, removed) are those it had at its
//!   last fsync; a fsync of a file does not make its name durable. Renaming a file over another
//!   leaves the other one in the image until the directory is synced.
//!
//! After each operation the image is kept ([`Recorder::ops`] of them), so a test can run a
//! workload once and then [`Recorder::materialise`] the tree as a power cut at any operation
//! would have left it, open a database there, and check what survived.
//!
//! Files are told apart by inode. An inode is "retired" when its last name is removed (or
//! renamed over), so a later file that reuses the number is a different file to the recorder.
//! The recorder assumes no injected faults: a hook runs before its system call and records it
//! as done.
//!
//! Cost when nothing is armed (always, outside tests): one relaxed atomic load per operation,
//! as for [`crate::fault`].

// Without the `testing` feature only the hooks are called; arming the recorder ([`record`], [`Recorder`]) is
// for tests, which reach it through the feature.
#![cfg_attr(not(any(test, feature = "testing")), allow(dead_code))]

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirEntryExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

/// A directory entry in the durable image: the identity it names, and whether it is a directory.
#[derive(Debug, Clone, Copy)]
struct Entry {
    id: u64,
    dir: bool,
}

/// What survives a power cut at one moment.
#[derive(Debug, Clone, Default)]
struct Image {
    /// File identity -> bytes at its last fsync.
    files: HashMap<u64, Arc<Vec<u8>>>,
    /// Directory identity -> entries at its last fsync.
    dirs: HashMap<u64, Arc<BTreeMap<String, Entry>>>,
}

struct State {
    root: PathBuf,
    root_id: u64,
    /// Live inode number -> identity.
    live: HashMap<u64, u64>,
    next_id: u64,
    /// `images[n]`: the image after `n` operations.
    images: Vec<Arc<Image>>,
}

impl State {
    fn id_of(&mut self, ino: u64) -> u64 {
        let next = &mut self.next_id;
        *self.live.entry(ino).or_insert_with(|| {
            *next += 1;
            *next
        })
    }

    fn last(&self) -> Image {
        self.images.last().map(|i| (**i).clone()).unwrap_or_default()
    }

    /// Forgets the identities of everything at `path` (a file or a whole tree), about to be
    /// unlinked.
    fn retire(&mut self, path: &Path) {
        let Ok(meta) = std::fs::symlink_metadata(path) else { return };
        if meta.is_dir()
            && let Ok(rd) = std::fs::read_dir(path)
        {
            for e in rd.flatten() {
                self.retire(&e.path());
            }
        }
        self.live.remove(&meta.ino());
    }

    /// Records one more operation: `image`, or an unchanged copy of the last one.
    fn push(&mut self, image: Option<Image>) {
        let next = match image {
            Some(i) => Arc::new(i),
            None => self.images.last().cloned().unwrap_or_default(),
        };
        self.images.push(next);
    }
}

struct Armed {
    id: u64,
    state: Arc<Mutex<State>>,
}

static ANY: AtomicBool = AtomicBool::new(false);
static RECORDERS: Mutex<Vec<Armed>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// Records the durable image of one directory tree while it lives; dropping it disarms.
#[must_use = "recording stops when the recorder is dropped"]
pub struct Recorder {
    id: u64,
    state: Arc<Mutex<State>>,
}

/// Starts recording for the existing directory `root` (compared as given: pass the same path the
/// database is opened with). What the tree holds now counts as durable (a database that
/// survived an earlier cut, say); operation 0 is that state.
pub fn record(root: &Path) -> io::Result<Recorder> {
    let ino = std::fs::metadata(root)?.ino();
    let mut state =
        State { root: root.to_path_buf(), root_id: 0, live: HashMap::new(), next_id: 0, images: Vec::new() };
    state.root_id = state.id_of(ino);
    let mut image = Image::default();
    let root_id = state.root_id;
    snapshot_tree(&mut state, &mut image, root, root_id)?;
    state.push(Some(image));
    let state = Arc::new(Mutex::new(state));
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let mut all = RECORDERS.lock();
    all.push(Armed { id, state: Arc::clone(&state) });
    ANY.store(true, Ordering::SeqCst);
    Ok(Recorder { id, state })
}

impl Recorder {
    /// Operations recorded so far (fsyncs of files and directories, renames, removals). A cut
    /// "at `n`" happens right after the `n`-th; `0` is before the first.
    pub fn ops(&self) -> u64 {
        self.state.lock().images.len() as u64 - 1
    }

    /// Writes into `dest` (created; must not exist) the tree as a power cut right after
    /// operation `n` leaves it: every file whose name was durable then, with its bytes at its
    /// last fsync before then (empty if none).
    pub fn materialise(&self, n: u64, dest: &Path) -> io::Result<()> {
        let (image, root_id) = {
            let s = self.state.lock();
            let i = s.images.get(n as usize).cloned().ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, format!("no operation {n} recorded"))
            })?;
            (i, s.root_id)
        };
        std::fs::create_dir(dest)?;
        write_dir(&image, root_id, dest)
    }
}

/// Adds everything under `dir` (identity `id`) to `image` as durable.
fn snapshot_tree(s: &mut State, image: &mut Image, dir: &Path, id: u64) -> io::Result<()> {
    let mut entries = BTreeMap::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let eid = s.id_of(e.ino());
        let is_dir = e.file_type()?.is_dir();
        if is_dir {
            snapshot_tree(s, image, &e.path(), eid)?;
        } else {
            image.files.insert(eid, Arc::new(std::fs::read(e.path())?));
        }
        entries.insert(e.file_name().to_string_lossy().into_owned(), Entry { id: eid, dir: is_dir });
    }
    image.dirs.insert(id, Arc::new(entries));
    Ok(())
}

fn write_dir(image: &Image, id: u64, dest: &Path) -> io::Result<()> {
    let Some(entries) = image.dirs.get(&id) else { return Ok(()) };
    for (name, e) in entries.iter() {
        let p = dest.join(name);
        if e.dir {
            std::fs::create_dir(&p)?;
            write_dir(image, e.id, &p)?;
        } else {
            let bytes = image.files.get(&e.id).map(|b| b.as_slice()).unwrap_or_default();
            std::fs::write(&p, bytes)?;
        }
    }
    Ok(())
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let mut all = RECORDERS.lock();
        all.retain(|a| a.id != self.id);
        ANY.store(!all.is_empty(), Ordering::SeqCst);
    }
}

/// Runs `f` on the state of every recorder whose root holds `path`.
#[cold]
fn each_under(path: &Path, mut f: impl FnMut(&mut State)) {
    let all = RECORDERS.lock();
    for a in all.iter() {
        let mut s = a.state.lock();
        if path.starts_with(&s.root) {
            f(&mut s);
        }
    }
}

/// Hook: `file` is about to be fsynced (data, or data and metadata).
#[inline]
pub(crate) fn syncing_file(file: &File) {
    if ANY.load(Ordering::Relaxed) {
        syncing_file_armed(file);
    }
}

#[cold]
fn syncing_file_armed(file: &File) {
    // The file's current name, and its bytes read through a fresh descriptor (the writer's may
    // be write-only).
    let fd_path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    let Ok(path) = std::fs::read_link(&fd_path) else { return };
    let Ok(meta) = file.metadata() else { return };
    each_under(&path, |s| {
        let id = s.id_of(meta.ino());
        let mut image = s.last();
        // Read under the lock: of two racing fsyncs, the later recorded is the later read.
        let bytes = std::fs::read(&fd_path).unwrap_or_default();
        image.files.insert(id, Arc::new(bytes));
        s.push(Some(image));
    });
}

/// Hook: directory `dir` is about to be fsynced.
#[inline]
pub(crate) fn syncing_dir(dir: &Path) {
    if ANY.load(Ordering::Relaxed) {
        syncing_dir_armed(dir);
    }
}

#[cold]
fn syncing_dir_armed(dir: &Path) {
    let Ok(meta) = std::fs::metadata(dir) else { return };
    each_under(dir, |s| {
        let id = s.id_of(meta.ino());
        let mut entries = BTreeMap::new();
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                let Ok(ft) = e.file_type() else { continue };
                let eid = s.id_of(e.ino());
                entries.insert(
                    e.file_name().to_string_lossy().into_owned(),
                    Entry { id: eid, dir: ft.is_dir() },
                );
            }
        }
        let mut image = s.last();
        image.dirs.insert(id, Arc::new(entries));
        s.push(Some(image));
    });
}

/// Hook: `from` is about to be renamed to `to` (whatever `to` names now loses that name).
#[inline]
pub(crate) fn renaming(from: &Path, to: &Path) {
    if ANY.load(Ordering::Relaxed) {
        renaming_armed(from, to);
    }
}

#[cold]
fn renaming_armed(from: &Path, to: &Path) {
    let same = match (std::fs::symlink_metadata(from), std::fs::symlink_metadata(to)) {
        (Ok(a), Ok(b)) => a.ino() == b.ino(),
        _ => false,
    };
    each_under(to, |s| {
        if !same {
            s.retire(to);
        }
        s.push(None);
    });
}

/// Hook: `path` (a file or a whole directory tree) is about to be removed.
#[inline]
pub(crate) fn removing(path: &Path) {
    if ANY.load(Ordering::Relaxed) {
        removing_armed(path);
    }
}

#[cold]
fn removing_armed(path: &Path) {
    each_under(path, |s| {
        s.retire(path);
        s.push(None);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fsutil;

    fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
        let mut out = BTreeMap::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                if p.is_dir() {
                    out.insert(format!("{rel}/"), Vec::new());
                    stack.push(p);
                } else {
                    out.insert(rel, std::fs::read(&p).unwrap());
                }
            }
        }
        out
    }

    fn cut(r: &Recorder, n: u64) -> BTreeMap<String, Vec<u8>> {
        let d = tempfile::tempdir().unwrap();
        let dest = d.path().join("img");
        r.materialise(n, &dest).unwrap();
        tree(&dest)
    }

    fn map(pairs: &[(&str, &[u8])]) -> BTreeMap<String, Vec<u8>> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_vec())).collect()
    }

    #[test]
    fn names_need_a_directory_sync_and_bytes_a_file_sync() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("db");
        std::fs::create_dir(&root).unwrap();
        let r = record(&root).unwrap();
        let a = root.join("a");
        let mut f = fsutil::create_file(&a).unwrap();
        fsutil::write_file(&mut f, &a, b"one").unwrap();
        fsutil::sync_file(&f, &a).unwrap(); // op 1: bytes durable, name not
        fsutil::write_file(&mut f, &a, b"two").unwrap();
        fsutil::sync_dir(&root).unwrap(); // op 2: name durable
        fsutil::write_atomic(&root.join("m"), b"v1").unwrap(); // ops 3-5: tmp sync, rename, dir sync
        fsutil::write_atomic(&root.join("m"), b"v2").unwrap(); // ops 6-8
        fsutil::remove_path(&a).unwrap(); // op 9: not durable yet
        fsutil::sync_dir(&root).unwrap(); // op 10
        assert_eq!(r.ops(), 10);
        assert_eq!(cut(&r, 0), map(&[]));
        assert_eq!(cut(&r, 1), map(&[]));
        assert_eq!(cut(&r, 2), map(&[("a", b"one")]));
        assert_eq!(cut(&r, 4), map(&[("a", b"one")]), "renamed but directory not synced");
        assert_eq!(cut(&r, 5), map(&[("a", b"one"), ("m", b"v1")]));
        assert_eq!(cut(&r, 7), map(&[("a", b"one"), ("m", b"v1")]), "old version until the directory sync");
        assert_eq!(cut(&r, 8), map(&[("a", b"one"), ("m", b"v2")]));
        assert_eq!(cut(&r, 9), map(&[("a", b"one"), ("m", b"v2")]));
        assert_eq!(cut(&r, 10), map(&[("m", b"v2")]));
        drop(f);
    }

    #[test]
    fn what_exists_when_recording_starts_is_durable() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("db");
        std::fs::create_dir_all(root.join("p")).unwrap();
        std::fs::write(root.join("p/x"), b"old").unwrap();
        let r = record(&root).unwrap();
        fsutil::remove_path(&root.join("p")).unwrap();
        assert_eq!(r.ops(), 1);
        assert_eq!(cut(&r, 1), map(&[("p/", b""), ("p/x", b"old")]));
    }

    #[test]
    fn subdirectories_and_unsynced_files() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("db");
        std::fs::create_dir(&root).unwrap();
        let r = record(&root).unwrap();
        let sub = root.join("p");
        fsutil::create_dir_durable(&sub).unwrap(); // op 1: root synced
        let x = sub.join("x");
        let mut f = fsutil::create_file(&x).unwrap();
        fsutil::write_file(&mut f, &x, b"data").unwrap();
        fsutil::sync_dir(&sub).unwrap(); // op 2: name durable, bytes not
        assert_eq!(cut(&r, 1), map(&[("p/", b"")]));
        assert_eq!(cut(&r, 2), map(&[("p/", b""), ("p/x", b"")]));
        drop(f);
        drop(r);
        // Disarmed: nothing recorded any more, nothing to see outside the root either.
        fsutil::sync_dir(&root).unwrap();
    }
}

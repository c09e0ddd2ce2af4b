//! Every durable file operation in one place. Each function says what survives a crash.
//!
//! The rule: a file becomes visible under its final name only after its bytes are synced, and a
//! rename is durable only after the directory is synced.

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};
use crate::fault::{self, Op};
use crate::powercut;

/// Fsyncs a directory so that creations, renames and deletions inside it survive a power loss.
pub fn sync_dir(dir: &Path) -> Result<()> {
    let f = File::open(dir).map_err(|e| Error::io(format!("open dir {}", dir.display()), e))?;
    fault::check(Op::Sync, dir)
        .and_then(|()| {
            powercut::syncing_dir(dir);
            f.sync_all()
        })
        .map_err(|e| Error::io(format!("fsync dir {}", dir.display()), e))
}

/// Creates `dir` and its parents, syncing the parent so the new directory entry is durable.
pub fn create_dir_durable(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    fault::check(Op::Create, dir)
        .and_then(|()| fs::create_dir_all(dir))
        .map_err(|e| Error::io(format!("create dir {}", dir.display()), e))?;
    // `data` has the parent "", which names no directory: its parent is the working directory.
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    sync_dir(parent)
}

/// A failed [`replace_atomic`]: what went wrong, and whether `path` already holds the new bytes.
#[derive(Debug)]
pub struct ReplaceError {
    /// The failure.
    pub error: Error,
    /// True when the rename happened but syncing the directory failed: `path` shows the new
    /// bytes now, yet after a power loss it may show the old ones. The caller must keep
    /// everything either version refers to.
    pub replaced: bool,
}

impl From<ReplaceError> for Error {
    fn from(e: ReplaceError) -> Error {
        e.error
    }
}

/// [`replace_atomic`] for tests, which do not care whether a failure left the new bytes in place.
#[cfg(test)]
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    replace_atomic(path, bytes).map_err(Error::from)
}

/// Atomically replaces `path` with `bytes`: writes `path.tmp`, fsyncs it, renames it over
/// `path`, fsyncs the directory. After a crash `path` holds either the old or the new bytes,
/// never a mix; a leftover `.tmp` is garbage that [`remove_tmp_files`] deletes. Tells on
/// failure whether the new bytes are already in place. A failure before the rename removes the
/// `.tmp` (a full disk should not be left fuller).
pub fn replace_atomic(path: &Path, bytes: &[u8]) -> std::result::Result<(), ReplaceError> {
    let tmp = tmp_path(path);
    let written = (|| -> Result<()> {
        let mut f = create_file(&tmp)?;
        write_file(&mut f, &tmp, bytes)?;
        sync_file(&f, &tmp)
    })();
    if let Err(error) = written {
        let _ = remove_path(&tmp);
        return Err(ReplaceError { error, replaced: false });
    }
    if let Err(error) = rename(&tmp, path) {
        let _ = remove_path(&tmp);
        return Err(ReplaceError { error, replaced: false });
    }
    sync_parents(&tmp, path).map_err(|error| ReplaceError { error, replaced: true })
}

/// Renames `from` to `to` and fsyncs the destination directory (and the source directory if
/// it differs), so the rename survives a power loss.
pub fn rename_durable(from: &Path, to: &Path) -> Result<()> {
    rename(from, to)?;
    sync_parents(from, to)
}

fn rename(from: &Path, to: &Path) -> Result<()> {
    fault::check(Op::Rename, to)
        .and_then(|()| {
            powercut::renaming(from, to);
            fs::rename(from, to)
        })
        .map_err(|e| Error::io(format!("rename {} -> {}", from.display(), to.display()), e))
}

/// Syncs the directory of `to`, and that of `from` if it differs: makes a rename durable.
fn sync_parents(from: &Path, to: &Path) -> Result<()> {
    let to_dir = to.parent().unwrap_or(Path::new("."));
    sync_dir(to_dir)?;
    if let Some(from_dir) = from.parent()
        && from_dir != to_dir
    {
        sync_dir(from_dir)?;
    }
    Ok(())
}

/// Creates (or truncates) `path` for writing.
pub fn create_file(path: &Path) -> Result<File> {
    fault::check(Op::Create, path)
        .and_then(|()| File::create(path))
        .map_err(|e| Error::io(format!("create {}", path.display()), e))
}

/// Writes all of `bytes` to `f` (named `path` in errors).
pub fn write_file(f: &mut impl Write, path: &Path, bytes: &[u8]) -> Result<()> {
    fault::check(Op::Write, path)
        .and_then(|()| f.write_all(bytes))
        .map_err(|e| Error::io(format!("write {}", path.display()), e))
}

/// fsyncs `f` (named `path` in errors), data and metadata.
pub fn sync_file(f: &File, path: &Path) -> Result<()> {
    fault::check(Op::Sync, path)
        .and_then(|()| {
            powercut::syncing_file(f);
            f.sync_all()
        })
        .map_err(|e| Error::io(format!("fsync {}", path.display()), e))
}

/// Removes a file or directory tree if it exists. Not durable by itself: the caller syncs the
/// parent directory when the removal must survive a crash (usually it need not, as startup
/// removes whatever the manifest does not list).
pub fn remove_path(path: &Path) -> Result<()> {
    powercut::removing(path);
    let r = if path.is_dir() { fs::remove_dir_all(path) } else { fs::remove_file(path) };
    match r {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(format!("remove {}", path.display()), e)),
    }
}

/// Removes `dir` if it is an empty directory; fails harmlessly (and changes nothing) when it
/// still holds entries. Not durable by itself, like [`remove_path`].
pub fn remove_empty_dir(dir: &Path) -> Result<()> {
    let empty = fs::read_dir(dir).map(|mut rd| rd.next().is_none()).unwrap_or(false);
    if empty {
        powercut::removing(dir);
    }
    fs::remove_dir(dir).map_err(|e| Error::io(format!("remove dir {}", dir.display()), e))
}

/// The temporary name used while `path` is being written.
pub fn tmp_path(path: &Path) -> std::path::PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".tmp");
    s.into()
}

/// Deletes every `*.tmp` entry directly inside `dir` (leftovers of interrupted writes).
pub fn remove_tmp_files(dir: &Path) -> Result<usize> {
    let mut n = 0;
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(Error::io(format!("list {}", dir.display()), e)),
    };
    for entry in rd {
        let entry = entry.map_err(|e| Error::io(format!("list {}", dir.display()), e))?;
        if entry.file_name().to_string_lossy().ends_with(".tmp") {
            remove_path(&entry.path())?;
            n += 1;
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_cleans() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        fs::write(d.path().join("x.tmp"), b"junk").unwrap();
        assert_eq!(remove_tmp_files(d.path()).unwrap(), 1);
    }

    /// `--data-dir data` (one relative component, whose parent is the empty path).
    #[test]
    fn a_relative_directory_of_one_component_is_created() {
        let name = format!("strata-fsutil-test-{}", std::process::id());
        let dir = Path::new(&name);
        let created = create_dir_durable(dir);
        let _ = fs::remove_dir(dir);
        created.unwrap();
    }
}

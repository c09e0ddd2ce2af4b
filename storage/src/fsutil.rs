//! Every durable file operation in one place. Each function says what survives a crash.
//!
//! The rule: a file becomes visible under its final name only after its bytes are synced, and a
//! rename is durable only after the directory is synced.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};

/// Fsyncs a directory so that creations, renames and deletions inside it survive a power loss.
pub fn sync_dir(dir: &Path) -> Result<()> {
    let f = File::open(dir).map_err(|e| Error::io(format!("open dir {}", dir.display()), e))?;
    f.sync_all().map_err(|e| Error::io(format!("fsync dir {}", dir.display()), e))
}

/// Creates `dir` and its parents, syncing the parent so the new directory entry is durable.
pub fn create_dir_durable(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::create_dir_all(dir).map_err(|e| Error::io(format!("create dir {}", dir.display()), e))?;
    if let Some(parent) = dir.parent() {
        sync_dir(parent)?;
    }
    Ok(())
}

/// Atomically replaces `path` with `bytes`: writes `path.tmp`, fsyncs it, renames it over
/// `path`, fsyncs the directory. After a crash `path` holds either the old or the new bytes,
/// never a mix; a leftover `.tmp` is garbage that [`remove_tmp_files`] deletes.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = tmp_path(path);
    {
        let mut f = File::create(&tmp).map_err(|e| Error::io(format!("create {}", tmp.display()), e))?;
        f.write_all(bytes).map_err(|e| Error::io(format!("write {}", tmp.display()), e))?;
        f.sync_all().map_err(|e| Error::io(format!("fsync {}", tmp.display()), e))?;
    }
    rename_durable(&tmp, path)
}

/// Renames `from` to `to` and fsyncs the destination directory (and the source directory if
/// it differs), so the rename survives a power loss.
pub fn rename_durable(from: &Path, to: &Path) -> Result<()> {
    fs::rename(from, to)
        .map_err(|e| Error::io(format!("rename {} -> {}", from.display(), to.display()), e))?;
    let to_dir = to.parent().unwrap_or(Path::new("."));
    sync_dir(to_dir)?;
    if let Some(from_dir) = from.parent()
        && from_dir != to_dir
    {
        sync_dir(from_dir)?;
    }
    Ok(())
}

/// Removes a file or directory tree if it exists. Not durable by itself: the caller syncs the
/// parent directory when the removal must survive a crash (usually it need not, as startup
/// removes whatever the manifest does not list).
pub fn remove_path(path: &Path) -> Result<()> {
    let r = if path.is_dir() { fs::remove_dir_all(path) } else { fs::remove_file(path) };
    match r {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(format!("remove {}", path.display()), e)),
    }
}

/// Opens a file for appending, creating it if needed (the caller syncs the directory after
/// creation if the file's existence must be durable).
pub fn open_append(path: &Path) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .open(path)
        .map_err(|e| Error::io(format!("open {}", path.display()), e))
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
}

//! Segment files on disk: their names, listing them, and creating a new one durably.

use std::fs::{self, File, OpenOptions};
use std::io::{self, IoSlice, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::failpoint;
use crate::fault::{self, Op};
use crate::fsutil;

use super::format::{SEGMENT_HEADER_LEN, SegmentHeader};

/// Digits in a segment file name; larger numbers simply get longer names.
const NAME_DIGITS: usize = 8;

/// The file name of segment `number`: its decimal number zero-padded to 8 digits.
pub(crate) fn file_name(number: u64) -> String {
    format!("{number:0NAME_DIGITS$}")
}

/// The segment number a file name stands for, or `None` for any other file.
pub(crate) fn parse_file_name(name: &str) -> Option<u64> {
    if name.len() < NAME_DIGITS || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok()
}

/// Every segment in `dir` as (number, path), ascending. Other files are ignored.
pub(crate) fn list(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let context = || format!("list WAL dir {}", dir.display());
    let mut segments = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| Error::io(context(), e))? {
        let entry = entry.map_err(|e| Error::io(context(), e))?;
        match entry.file_name().to_str().and_then(parse_file_name) {
            Some(number) => segments.push((number, entry.path())),
            None => tracing::debug!(file = %entry.path().display(), "ignoring non-segment file in WAL dir"),
        }
    }
    segments.sort_unstable_by_key(|(number, _)| *number);
    Ok(segments)
}

/// The segment that appends go to, owned by the writer under the append lock.
#[derive(Debug)]
pub(crate) struct ActiveSegment {
    /// Its number.
    pub number: u64,
    /// The run it belongs to: the number of the run's first segment (its own number when it
    /// starts the run). See [`SegmentHeader::starts_run`].
    pub run: u64,
    /// Its salt, mixed into every frame's checksum.
    pub salt: u32,
    /// The open file (append mode); shared with the fsync leader.
    pub file: Arc<File>,
    /// Its path, for error messages.
    pub path: PathBuf,
    /// Bytes in the file so far, header included.
    pub len: u64,
}

impl ActiveSegment {
    /// Creates segment `number` of run `run` (a new run when `run == number`) in `dir` and
    /// makes it durable before returning: the file with its header is fsynced and so is the
    /// directory, so a segment that exists after a crash always has a complete header unless
    /// the crash hit this very function.
    pub fn create(dir: &Path, number: u64, run: u64) -> Result<ActiveSegment> {
        let path = dir.join(file_name(number));
        let file = fault::check(Op::Create, &path)
            .and_then(|()| OpenOptions::new().append(true).create_new(true).open(&path))
            .map_err(|e| Error::io(format!("create WAL segment {}", path.display()), e))?;
        failpoint::hit("wal.segment_rotate.after_create");
        let header = SegmentHeader::new(number, run == number);
        let written = fault::check(Op::Write, &path)
            .and_then(|()| (&file).write_all(&header.encode()))
            .and_then(|()| fault::check(Op::Sync, &path))
            .and_then(|()| {
                crate::powercut::syncing_file(&file);
                file.sync_data()
            })
            .map_err(|e| Error::io(format!("write header of WAL segment {}", path.display()), e))
            .and_then(|()| fsutil::sync_dir(dir));
        if let Err(e) = written {
            // Never leave a headerless segment behind: it would be the newest one at the next
            // start, and a retry creates the same number again.
            drop(file);
            let _ = fsutil::remove_path(&path);
            return Err(e);
        }
        Ok(ActiveSegment {
            number,
            run,
            salt: header.salt,
            file: Arc::new(file),
            path,
            len: SEGMENT_HEADER_LEN as u64,
        })
    }

    /// Stands in for segment `number` while the WAL starts poisoned because no segment could
    /// be created: nothing is ever written to or synced through it (every path checks the
    /// poison first), and `restart_after_poison` replaces it with a real segment numbered
    /// above it. Holds the WAL directory open, which needs no disk space.
    pub fn placeholder(dir: &Path, number: u64) -> Result<ActiveSegment> {
        let file = File::open(dir).map_err(|e| Error::io(format!("open WAL dir {}", dir.display()), e))?;
        Ok(ActiveSegment {
            number,
            run: number,
            salt: 0,
            file: Arc::new(file),
            path: dir.join(file_name(number)),
            len: SEGMENT_HEADER_LEN as u64,
        })
    }

    /// True once a record was written after the header.
    pub fn has_records(&self) -> bool {
        self.len > SEGMENT_HEADER_LEN as u64
    }
}

/// Writes all of `bufs` with as few write(2) calls as the kernel allows (normally one).
pub(crate) fn write_all_vectored(mut file: &File, mut bufs: &mut [IoSlice<'_>]) -> io::Result<()> {
    IoSlice::advance_slices(&mut bufs, 0);
    while !bufs.is_empty() {
        match file.write_vectored(bufs) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "write returned 0 bytes")),
            Ok(n) => IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_foreign_files_are_ignored() {
        assert_eq!(file_name(1), "00000001");
        assert_eq!(parse_file_name("00000001"), Some(1));
        assert_eq!(file_name(123_456_789_012), "123456789012");
        assert_eq!(parse_file_name("123456789012"), Some(123_456_789_012));
        for other in ["", "1", "0000001a", "00000001.tmp", "checkpoint", "99999999999999999999999"] {
            assert_eq!(parse_file_name(other), None, "{other}");
        }
    }
}

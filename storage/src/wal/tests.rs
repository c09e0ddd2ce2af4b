//! WAL tests: round trips, torn tails, bit flips, group commit, sync modes, segment removal,
//! poisoning, and real crashes at every WAL crash point (in a child process).

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use proptest::prelude::*;

use super::format::{FRAME_HEADER_LEN, SEGMENT_HEADER_LEN};
use super::recover::{Damage, replay_segment};
use super::segment::file_name;
use super::*;

/// Test-only fault injection, reachable through `Wal::inner.faults`.
#[derive(Default)]
pub(super) struct Faults {
    fail_write: AtomicBool,
    fail_sync: AtomicBool,
    sync_delay_ms: AtomicU64,
    /// A lower record size limit than the real one (0: the real one).
    pub(super) max_payload: AtomicUsize,
}

impl Faults {
    pub(super) fn before_write(&self, mut file: &File, header: &[u8]) -> io::Result<()> {
        if self.fail_write.load(Ordering::SeqCst) {
            // Like a disk filling up mid-record: part of the frame reaches the file.
            file.write_all(header.get(..header.len() / 2).unwrap_or_default())?;
            return Err(io::Error::other("injected write failure"));
        }
        Ok(())
    }

    pub(super) fn before_sync(&self) -> io::Result<()> {
        let delay = self.sync_delay_ms.load(Ordering::SeqCst);
        if delay > 0 {
            std::thread::sleep(Duration::from_millis(delay));
        }
        if self.fail_sync.load(Ordering::SeqCst) {
            return Err(io::Error::from_raw_os_error(5)); // EIO
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers

fn opts(dir: &Path, segment_bytes: u64) -> WalOptions {
    WalOptions { segment_bytes, ..WalOptions::new(dir) }
}

/// A deterministic payload: its index, then a pattern, `len` bytes in all.
fn payload(i: u64, len: usize) -> Vec<u8> {
    let mut p: Vec<u8> = i.to_le_bytes().iter().copied().cycle().take(len.min(8)).collect();
    p.extend((8..len).map(|j| (j as u64 * 31 + i) as u8));
    p
}

type Records = Vec<(u64, Vec<u8>)>;

/// Opens the WAL and returns it with every replayed (segment, payload).
fn open_collect(o: WalOptions, first_segment: u64) -> Result<(Wal, Records, ReplayStats)> {
    let mut got = Vec::new();
    let (wal, stats) = Wal::open(o, first_segment, |at, p| {
        got.push((at.segment, p.to_vec()));
        Ok(())
    })?;
    Ok((wal, got, stats))
}

fn append_all(wal: &Wal, payloads: &[Vec<u8>]) -> Records {
    payloads.iter().map(|p| (wal.append(|_, buf| buf.extend_from_slice(p)).unwrap(), p.clone())).collect()
}

fn segment_files(dir: &Path) -> Vec<u64> {
    segment::list(dir).unwrap().into_iter().map(|(n, _)| n).collect()
}

fn segment_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(file_name(n))
}

/// Writes a WAL with `payloads` in one segment (plus the empty segment `Wal::open` started
/// afterwards, which is removed) and returns the segment's path and its records' start offsets.
fn single_segment(dir: &Path, payloads: &[Vec<u8>]) -> (PathBuf, Vec<usize>) {
    let (wal, _, _) = open_collect(opts(dir, u64::MAX), 0).unwrap();
    append_all(&wal, payloads);
    wal.close().unwrap();
    drop(wal);
    let mut offsets = Vec::new();
    let mut off = SEGMENT_HEADER_LEN;
    for p in payloads {
        offsets.push(off);
        off += FRAME_HEADER_LEN + p.len();
    }
    assert_eq!(fs::metadata(segment_path(dir, 1)).unwrap().len() as usize, off);
    (segment_path(dir, 1), offsets)
}

fn flip_bit(path: &Path, bit: usize) {
    let mut bytes = fs::read(path).unwrap();
    bytes[bit / 8] ^= 1 << (bit % 8);
    fs::write(path, bytes).unwrap();
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Round trips and segments

#[test]
fn wal_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Wal>();
}

#[test]
fn round_trip_across_rotations() {
    let d = tempfile::tempdir().unwrap();
    let sizes = [0usize, 1, 17, 100, 1000, 5000, 3, 4096];
    let payloads: Vec<_> = (0..300u64).map(|i| payload(i, sizes[i as usize % sizes.len()])).collect();
    let (wal, got, stats) = open_collect(opts(d.path(), 4096), 0).unwrap();
    assert!(got.is_empty());
    assert_eq!(stats, ReplayStats::default());
    let mut written = append_all(&wal, &payloads[..150]);
    let rotated_to = wal.rotate().unwrap();
    let first_after_rotate = append_all(&wal, &payloads[150..151]);
    assert_eq!(first_after_rotate[0].0, rotated_to, "a record after rotate() goes to the new segment");
    written.extend(first_after_rotate);
    written.extend(append_all(&wal, &payloads[151..]));
    let last_segment = wal.current_segment();
    let s = wal.stats();
    assert_eq!(s.records, 300);
    assert_eq!(s.bytes_written, payloads.iter().map(|p| (p.len() + FRAME_HEADER_LEN) as u64).sum::<u64>());
    assert_eq!(s.current_segment, last_segment);
    wal.close().unwrap();
    drop(wal);
    assert!(segment_files(d.path()).len() > 10, "expected many rotations");

    let (wal, got, stats) = open_collect(opts(d.path(), 4096), 0).unwrap();
    assert_eq!(got, written);
    assert_eq!(stats.records, 300);
    assert_eq!(stats.truncated_bytes, 0);
    assert_eq!(stats.segments, segment_files(d.path()).len() - 1);
    assert_eq!(wal.current_segment(), last_segment + 1, "appends never continue a recovered segment");
    // No segment but the current one holds a record beyond the size, except by one record.
    for (n, path) in segment::list(d.path()).unwrap() {
        let len = fs::metadata(&path).unwrap().len();
        let biggest = 4096 + (FRAME_HEADER_LEN + 5000) as u64;
        assert!(len <= biggest, "segment {n} has {len} bytes");
    }
}

/// Opens the WAL and returns it with the position of every replayed record.
fn open_positions(o: WalOptions, first_segment: u64) -> Result<(Wal, Vec<Position>)> {
    let mut got = Vec::new();
    let (wal, _) = Wal::open(o, first_segment, |at, _| {
        got.push(at);
        Ok(())
    })?;
    Ok((wal, got))
}

/// Appends a 90-byte record and returns where it landed (the run as `encode` saw it).
fn append_at(wal: &Wal, i: u64) -> Result<Position> {
    let mut run = None;
    let segment = wal.append(|r, buf| {
        run = Some(r);
        buf.extend_from_slice(&payload(i, 90));
    })?;
    Ok(Position { segment, run: run.unwrap() })
}

/// Whether each segment file's header says it starts a run.
fn run_starts(dir: &Path) -> Vec<(u64, bool)> {
    segment::list(dir)
        .unwrap()
        .into_iter()
        .map(|(n, path)| (n, format::SegmentHeader::decode(&fs::read(path).unwrap()).unwrap().starts_run))
        .collect()
}

#[test]
fn encode_sees_the_run_the_record_lands_in() {
    let d = tempfile::tempdir().unwrap();
    let (wal, _, _) = open_collect(opts(d.path(), 200), 0).unwrap();
    let mut seen = Vec::new();
    for i in 0..20u64 {
        seen.push(append_at(&wal, i).unwrap());
        if i == 9 {
            assert_eq!(wal.rotate().unwrap(), seen[9].segment + 1);
        }
    }
    // Two records fit a 200-byte segment: the size rotations continue the run, and rotate()
    // starts one.
    let runs: Vec<u64> = seen.iter().map(|p| p.run).collect();
    let second = seen[10].segment;
    assert_eq!(runs, [vec![1; 10], vec![second; 10]].concat());
    assert_eq!(seen[9].segment, 5);
    assert_eq!(second, 6);
    assert_eq!(seen[19].segment, 10);
    drop(wal);
    let starts: Vec<(u64, bool)> = (1..=10).map(|n| (n, n == 1 || n == 6)).collect();
    assert_eq!(run_starts(d.path()), starts);
    let (_, got) = open_positions(opts(d.path(), 200), 0).unwrap();
    assert_eq!(got, seen);
}

#[test]
fn every_start_and_restart_after_poison_begins_a_run() {
    let d = tempfile::tempdir().unwrap();
    let (wal, _, _) = open_collect(opts(d.path(), 200), 0).unwrap();
    let first: Vec<Position> = (0..5).map(|i| append_at(&wal, i).unwrap()).collect();
    drop(wal);
    let (wal, got) = open_positions(opts(d.path(), 200), 0).unwrap();
    assert_eq!(got, first);
    let next = append_at(&wal, 5).unwrap();
    assert_eq!(next, Position { segment: 4, run: 4 }, "a new process starts a run");
    let before_poison = append_at(&wal, 6).unwrap();
    assert_eq!(before_poison.run, 4);
    wal.inner.poison_with(Error::Poisoned("test".into()));
    wal.restart_after_poison(0).unwrap();
    let after = append_at(&wal, 7).unwrap();
    assert_eq!(after, Position { segment: before_poison.segment + 1, run: before_poison.segment + 1 });
}

#[test]
fn a_refused_record_ends_the_run() {
    let d = tempfile::tempdir().unwrap();
    let (wal, _, _) = open_collect(opts(d.path(), u64::MAX), 0).unwrap();
    let kept = append_at(&wal, 0).unwrap();
    wal.inner.faults.max_payload.store(50, Ordering::SeqCst);
    let mut refused_run = None;
    let refused = wal.append(|run, buf| {
        refused_run = Some(run);
        buf.extend_from_slice(&payload(1, 90));
    });
    assert!(matches!(refused, Err(Error::InvalidInput(_))), "{refused:?}");
    assert_eq!(refused_run, Some(kept.run));
    wal.inner.faults.max_payload.store(0, Ordering::SeqCst);
    // Whatever its encoder noted as written in run 1, the next record is in a new run.
    let next = append_at(&wal, 2).unwrap();
    assert_eq!(next, Position { segment: 2, run: 2 });
    drop(wal);
    let (_, got) = open_positions(opts(d.path(), u64::MAX), 0).unwrap();
    assert_eq!(got, vec![kept, next]);
}

/// A log of two runs over several segments each: run 1 in segments 1..=4, run 5 in 5..=8.
fn two_runs(dir: &Path) -> Vec<Position> {
    let (wal, _, _) = open_collect(opts(dir, 200), 0).unwrap();
    let mut at: Vec<Position> = (0..8).map(|i| append_at(&wal, i).unwrap()).collect();
    assert_eq!(wal.rotate().unwrap(), 5);
    at.extend((8..16).map(|i| append_at(&wal, i).unwrap()));
    drop(wal);
    assert_eq!(at[7], Position { segment: 4, run: 1 });
    assert_eq!(at[15], Position { segment: 8, run: 5 });
    at
}

#[test]
fn the_log_cut_where_a_run_starts_replays() {
    let d = tempfile::tempdir().unwrap();
    let at = two_runs(d.path());
    // What a flush does once the first run is stored elsewhere; and what a start does when the
    // manifest says replay begins at segment 5.
    let (wal, got) = open_positions(opts(d.path(), 200), 0).unwrap();
    assert_eq!(got, at);
    wal.remove_segments_before(5).unwrap();
    drop(wal);
    let (_, got) = open_positions(opts(d.path(), 200), 0).unwrap();
    assert_eq!(got, at[8..]);
    let (_, got) = open_positions(opts(d.path(), 200), 5).unwrap();
    assert_eq!(got, at[8..]);
}

#[test]
fn a_run_without_its_earlier_segments_is_corruption() {
    let src = tempfile::tempdir().unwrap();
    let at = two_runs(src.path());
    // A segment of the middle of a run missing; the front of a run missing (the log cut at a
    // segment that continues a run).
    for (missing, first_segment) in [(vec![2], 0), (vec![6], 0), (vec![], 3), (vec![5], 0)] {
        let d = tempfile::tempdir().unwrap();
        copy_dir(src.path(), d.path());
        for n in &missing {
            fs::remove_file(segment_path(d.path(), *n)).unwrap();
        }
        let broken = missing.first().map_or(first_segment, |n| n + 1);
        match open_collect(opts(d.path(), 200), first_segment) {
            Err(Error::Corruption { path, offset, reason }) => {
                assert_eq!(path, segment_path(d.path(), broken), "{missing:?}");
                assert_eq!(offset, Some(0));
                assert!(reason.contains("continues a run"), "{reason}");
            }
            other => panic!("{missing:?}: expected corruption, got {:?}", other.map(|(_, g, _)| g.len())),
        }
        // Cut there when asked: the records before it stay.
        let mut o = opts(d.path(), 200);
        o.truncate_corrupt = true;
        let (wal, got) = open_positions(o, first_segment).unwrap();
        let kept: Vec<Position> = at
            .iter()
            .copied()
            .filter(|p| p.segment >= first_segment && p.segment < broken && !missing.contains(&p.segment))
            .collect();
        assert_eq!(got, kept, "{missing:?}");
        drop(wal);
        let (_, again) = open_positions(opts(d.path(), 200), first_segment).unwrap();
        assert_eq!(again, kept, "{missing:?}");
    }
}

#[test]
fn a_torn_tail_in_a_segment_continuing_a_run() {
    let d = tempfile::tempdir().unwrap();
    let at = two_runs(d.path());
    // Segment 8 holds records 14 and 15: cut the last one in half.
    let eight = segment_path(d.path(), 8);
    let len = fs::metadata(&eight).unwrap().len();
    fs::OpenOptions::new().write(true).open(&eight).unwrap().set_len(len - 40).unwrap();
    let (wal, got) = open_positions(opts(d.path(), 200), 0).unwrap();
    assert_eq!(got, at[..15]);
    let next = append_at(&wal, 16).unwrap();
    assert_eq!(next, Position { segment: 9, run: 9 });
    drop(wal);
    let (_, again) = open_positions(opts(d.path(), 200), 0).unwrap();
    assert_eq!(again, [&at[..15], &[next]].concat());
}

/// What [`write_segment`] writes: a header of version 1 (each segment its own run), or of the
/// current version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SegmentKind {
    Version1,
    StartsRun,
    ContinuesRun,
}

/// Writes segment `number` into the WAL directory `dir` by hand: a header of `kind`, then
/// `payloads` framed. For tests that need a log the writer would not produce (old versions,
/// missing definitions).
pub(crate) fn write_segment(dir: &Path, number: u64, kind: SegmentKind, payloads: &[Vec<u8>]) {
    let header = format::SegmentHeader::new(number, kind != SegmentKind::ContinuesRun);
    let mut bytes = header.encode().to_vec();
    if kind == SegmentKind::Version1 {
        bytes[4] = format::VERSION_1;
        bytes[5] = 0;
        let crc = crc32fast::hash(&bytes[..20]);
        bytes[20..24].copy_from_slice(&crc.to_le_bytes());
    }
    for p in payloads {
        bytes.extend_from_slice(&format::frame_header(header.salt, p));
        bytes.extend_from_slice(p);
    }
    fs::create_dir_all(dir).unwrap();
    fs::write(segment_path(dir, number), bytes).unwrap();
}

#[test]
fn version_1_segments_are_each_their_own_run() {
    let d = tempfile::tempdir().unwrap();
    write_segment(d.path(), 1, SegmentKind::Version1, &[payload(0, 30), payload(1, 30)]);
    write_segment(d.path(), 2, SegmentKind::Version1, &[payload(2, 30)]);
    write_segment(d.path(), 4, SegmentKind::Version1, &[payload(3, 30)]);
    let (wal, got) = open_positions(opts(d.path(), 200), 0).unwrap();
    let runs = |segment| Position { segment, run: segment };
    assert_eq!(got, vec![runs(1), runs(1), runs(2), runs(4)]);
    let next = append_at(&wal, 4).unwrap();
    assert_eq!(next, runs(5));
    drop(wal);
    let (_, again) = open_positions(opts(d.path(), 200), 0).unwrap();
    assert_eq!(again, vec![runs(1), runs(1), runs(2), runs(4), runs(5)]);
}

#[test]
fn replay_error_aborts_open() {
    let d = tempfile::tempdir().unwrap();
    let (wal, _, _) = open_collect(opts(d.path(), u64::MAX), 0).unwrap();
    append_all(&wal, &[payload(1, 10), payload(2, 10)]);
    drop(wal);
    let mut calls = 0;
    let r = Wal::open(opts(d.path(), u64::MAX), 0, |_, _| {
        calls += 1;
        Err(Error::Decode("bad batch".into()))
    });
    assert!(matches!(r, Err(Error::Decode(_))));
    assert_eq!(calls, 1);
}

#[test]
fn replay_progress_names_the_segment_being_read() {
    let d = tempfile::tempdir().unwrap();
    let fresh = opts(d.path(), u64::MAX);
    let progress = Arc::clone(&fresh.progress);
    let (wal, _, _) = open_collect(fresh, 0).unwrap();
    assert_eq!(progress.status(), ReplayStatus::default(), "nothing to replay in a new directory");
    for i in 0..4u64 {
        append_all(&wal, &[payload(i, 50)]);
        wal.rotate().unwrap();
    }
    drop(wal);
    // Segments 1..=4 hold a record each, 5 is empty; flushed up to 2.
    let o = opts(d.path(), u64::MAX);
    let progress = Arc::clone(&o.progress);
    let mut seen = Vec::new();
    let (wal, _) = Wal::open(o, 2, |at, _| {
        seen.push((at.segment, progress.status()));
        Ok(())
    })
    .unwrap();
    let during: Vec<_> = (2..=4).map(|n| (n, ReplayStatus { min: 2, max: 5, current: n })).collect();
    assert_eq!(seen, during);
    assert_eq!(progress.status(), ReplayStatus { min: 2, max: 5, current: 5 }, "done: current is max");
    drop(wal);
}

#[test]
fn remove_segments_before_and_first_segment() {
    let d = tempfile::tempdir().unwrap();
    let (wal, _, _) = open_collect(opts(d.path(), u64::MAX), 0).unwrap();
    for i in 0..5u64 {
        append_all(&wal, &[payload(i, 50)]);
        wal.rotate().unwrap();
    }
    // Segments 1..=5 hold one record each; 6 is current and empty.
    assert_eq!(segment_files(d.path()), vec![1, 2, 3, 4, 5, 6]);
    wal.remove_segments_before(3).unwrap();
    assert_eq!(segment_files(d.path()), vec![3, 4, 5, 6]);
    wal.remove_segments_before(u64::MAX).unwrap();
    assert_eq!(segment_files(d.path()), vec![6], "the current segment is never removed");
    append_all(&wal, &[payload(5, 50)]);
    wal.rotate().unwrap();
    append_all(&wal, &[payload(6, 50)]);
    drop(wal);

    // Segments 6 and 7 remain; flushed up to 6 means 7 is the first to replay.
    let (wal, got, stats) = open_collect(opts(d.path(), u64::MAX), 7).unwrap();
    assert_eq!(got, vec![(7, payload(6, 50))]);
    assert_eq!(stats.segments, 1);
    assert_eq!(wal.current_segment(), 8);
    drop(wal);
    assert_eq!(segment_files(d.path()), vec![7, 8]);

    // A first_segment beyond every file: all removed, numbering continues from it.
    let (wal, got, _) = open_collect(opts(d.path(), u64::MAX), 100).unwrap();
    assert!(got.is_empty());
    assert_eq!(wal.current_segment(), 100);
    drop(wal);
    assert_eq!(segment_files(d.path()), vec![100]);
}

#[test]
fn restarts_without_writes_leave_no_empty_segments() {
    let d = tempfile::tempdir().unwrap();
    let (wal, _, _) = open_collect(opts(d.path(), u64::MAX), 0).unwrap();
    append_all(&wal, &[payload(1, 40)]);
    wal.rotate().unwrap();
    // Segment 1 holds a record, 2 is empty and current.
    drop(wal);
    for restart in 0..5u64 {
        let (wal, got, stats) = open_collect(opts(d.path(), u64::MAX), 0).unwrap();
        assert_eq!(got, vec![(1, payload(1, 40))], "restart {restart}");
        assert_eq!(wal.current_segment(), 3 + restart, "numbers are never reused");
        drop(wal);
        // The segment with the record and the one just started; the empty ones are gone.
        assert_eq!(segment_files(d.path()), vec![1, 3 + restart], "restart {restart}");
        assert!(stats.segments >= 2);
    }
    // Writes after the restarts land in the newest segment and replay after the old record.
    let (wal, _, _) = open_collect(opts(d.path(), u64::MAX), 0).unwrap();
    append_all(&wal, &[payload(2, 40)]);
    drop(wal);
    let (_, got, _) = open_collect(opts(d.path(), u64::MAX), 0).unwrap();
    assert_eq!(got, vec![(1, payload(1, 40)), (8, payload(2, 40))]);
}

#[test]
fn foreign_files_in_the_dir_are_left_alone() {
    let d = tempfile::tempdir().unwrap();
    fs::write(d.path().join("notes.txt"), b"hello").unwrap();
    let (wal, _, _) = open_collect(opts(d.path(), u64::MAX), 0).unwrap();
    append_all(&wal, &[payload(1, 10)]);
    drop(wal);
    let (_, got, _) = open_collect(opts(d.path(), u64::MAX), 0).unwrap();
    assert_eq!(got.len(), 1);
    assert!(d.path().join("notes.txt").exists());
}

// ---------------------------------------------------------------------------------------------
// Torn tails

#[test]
fn torn_tail_at_every_byte_of_the_last_three_records() {
    let src = tempfile::tempdir().unwrap();
    let payloads: Vec<_> = (0..8u64).map(|i| payload(i, 8 + 3 * i as usize)).collect();
    let (seg, offsets) = single_segment(src.path(), &payloads);
    let full = fs::read(&seg).unwrap();
    let first_cut = offsets[payloads.len() - 3];
    for cut in first_cut..full.len() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join(file_name(1)), &full[..cut]).unwrap();
        let (wal, got, stats) =
            open_collect(opts(d.path(), u64::MAX), 0).unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
        let whole =
            offsets.iter().zip(&payloads).filter(|(o, p)| **o + FRAME_HEADER_LEN + p.len() <= cut).count();
        let expect: Records = payloads[..whole].iter().map(|p| (1, p.clone())).collect();
        assert_eq!(got, expect, "cut at {cut}");
        let kept = offsets.get(whole).copied().unwrap_or(full.len());
        assert_eq!(stats.truncated_bytes, (cut - kept) as u64, "cut at {cut}");
        assert_eq!(fs::metadata(d.path().join(file_name(1))).unwrap().len() as usize, kept);

        // The repaired log takes appends and reopens cleanly.
        append_all(&wal, &[b"after".to_vec()]);
        drop(wal);
        let (_, again, stats) = open_collect(opts(d.path(), u64::MAX), 0).unwrap();
        assert_eq!(again.len(), whole + 1, "cut at {cut}");
        assert_eq!(again.last(), Some(&(2, b"after".to_vec())));
        assert_eq!(stats.truncated_bytes, 0);
    }
}

#[test]
fn torn_header_of_the_newest_segment_is_removed() {
    let src = tempfile::tempdir().unwrap();
    let payloads = vec![payload(1, 30), payload(2, 40)];
    single_segment(src.path(), &payloads);
    // A crash while rotation created segment 2: any prefix of its header, or nothing.
    let (probe, _, _) = open_collect(opts(src.path(), u64::MAX), 0).unwrap();
    drop(probe);
    let header = fs::read(segment_path(src.path(), 2)).unwrap();
    assert_eq!(header.len(), SEGMENT_HEADER_LEN);
    for cut in 0..SEGMENT_HEADER_LEN {
        let d = tempfile::tempdir().unwrap();
        fs::copy(segment_path(src.path(), 1), segment_path(d.path(), 1)).unwrap();
        let mut torn = header[..cut].to_vec();
        torn.resize(cut + 100, 0); // and a zeroed, preallocated-looking rest
        fs::write(segment_path(d.path(), 2), &torn).unwrap();
        let (wal, got, stats) = open_collect(opts(d.path(), u64::MAX), 0).unwrap();
        assert_eq!(got.len(), 2, "cut at {cut}");
        assert_eq!(wal.current_segment(), 3);
        drop(wal);
        if torn[..SEGMENT_HEADER_LEN] == header[..] {
            // The zeros happened to complete the header (its last CRC bytes are zero, which the
            // segment's random identity makes happen now and then): a valid, empty segment 2
            // with a zeroed tail, whatever follows the header is cut.
            assert_eq!(stats.truncated_bytes, (torn.len() - SEGMENT_HEADER_LEN) as u64, "cut at {cut}");
            assert_eq!(segment_files(d.path()), vec![1, 2, 3]);
        } else {
            assert_eq!(stats.truncated_bytes, torn.len() as u64, "cut at {cut}");
            assert_eq!(segment_files(d.path()), vec![1, 3]);
        }
    }
}

#[test]
fn zero_filled_tail_recovers() {
    let d = tempfile::tempdir().unwrap();
    let payloads: Vec<_> = (0..10u64).map(|i| payload(i, 300)).collect();
    let (seg, _) = single_segment(d.path(), &payloads);
    let before = fs::metadata(&seg).unwrap().len();
    let mut f = fs::OpenOptions::new().append(true).open(&seg).unwrap();
    f.write_all(&vec![0u8; 64 << 10]).unwrap();
    drop(f);
    let (_, got, stats) = open_collect(opts(d.path(), u64::MAX), 0).unwrap();
    assert_eq!(got.len(), 10);
    assert_eq!(stats.truncated_bytes, 64 << 10);
    assert_eq!(fs::metadata(&seg).unwrap().len(), before);
}

#[test]
fn zeroed_last_record_followed_by_zeros_recovers() {
    // A power cut can persist the file size but not the last page: the last record reads as zeros.
    let d = tempfile::tempdir().unwrap();
    let payloads: Vec<_> = (0..10u64).map(|i| payload(i, 300)).collect();
    let (seg, offsets) = single_segment(d.path(), &payloads);
    let mut bytes = fs::read(&seg).unwrap();
    let last = offsets[9];
    bytes[last..].fill(0);
    bytes.extend_from_slice(&[0u8; 5000]);
    fs::write(&seg, &bytes).unwrap();
    let (_, got, _) = open_collect(opts(d.path(), u64::MAX), 0).unwrap();
    assert_eq!(got.len(), 9);
}

// ---------------------------------------------------------------------------------------------
// Bit flips

/// Which record (index) holds byte `pos`, or None for the segment header.
fn record_at(offsets: &[usize], pos: usize) -> Option<usize> {
    offsets.iter().rposition(|&o| o <= pos)
}

#[test]
fn every_bit_flip_in_the_last_4k_is_detected_and_classified() {
    check_every_bit_flip_in_tail(4 << 10, 40);
}

/// The same over the last 64 KiB of a segment (a torn tail can be that long when a large batch
/// was being written): minutes in a debug build, so run it as
/// `STRATA_SLOW_TESTS=1 cargo test --release -p storage --lib wal::tests::every_bit`.
#[test]
fn every_bit_flip_in_the_last_64k_is_detected_and_classified_slow() {
    if std::env::var_os("STRATA_SLOW_TESTS").is_some() {
        check_every_bit_flip_in_tail(64 << 10, 300);
    }
}

/// Flips, one at a time, every bit of the last `tail_bytes` of a segment of `records` records
/// (and every 37th bit before that, the header included) and checks that recovery's decoder
/// finds the damage at the start of the flipped record, replays exactly the records before it,
/// and calls it a torn tail only when the flip is in the last record.
fn check_every_bit_flip_in_tail(tail_bytes: usize, records: u64) {
    let d = tempfile::tempdir().unwrap();
    let payloads: Vec<_> = (0..records).map(|i| payload(i, 150 + (i as usize * 13) % 200)).collect();
    let (seg, offsets) = single_segment(d.path(), &payloads);
    let clean = fs::read(&seg).unwrap();
    assert!(clean.len() > tail_bytes + 4096);
    let last = payloads.len() - 1;
    let tail_start = clean.len() - tail_bytes;
    let bits = (0..tail_start * 8).step_by(37).chain(tail_start * 8..clean.len() * 8);
    let mut cases = 0;
    let mut bytes = clean.clone();
    for bit in bits {
        bytes[bit / 8] ^= 1 << (bit % 8);
        let mut replayed = 0usize;
        let mut stats = ReplayStats::default();
        let damage = replay_segment(&bytes, 1, &mut None, &mut stats, &mut |_, _| {
            replayed += 1;
            Ok(())
        })
        .unwrap();
        bytes[bit / 8] ^= 1 << (bit % 8);
        let Some(Damage { offset, data_follows, .. }) = damage else {
            panic!("flip of bit {bit} went undetected");
        };
        match record_at(&offsets, bit / 8) {
            None => {
                assert_eq!((offset, replayed, data_follows), (0, 0, true), "header bit {bit}");
            }
            Some(r) => {
                assert_eq!(offset as usize, offsets[r], "bit {bit}");
                assert_eq!(replayed, r, "bit {bit}");
                // Torn tail (truncate) only when the flip is in the last record.
                assert_eq!(data_follows, r != last, "bit {bit} in record {r}");
            }
        }
        cases += 1;
    }
    assert!(cases > tail_bytes * 8);
}

#[test]
fn bit_flips_end_to_end() {
    let src = tempfile::tempdir().unwrap();
    let payloads: Vec<_> = (0..20u64).map(|i| payload(i, 100)).collect();
    let (seg, offsets) = single_segment(src.path(), &payloads);
    let len = fs::metadata(&seg).unwrap().len() as usize;
    for bit in (0..len * 8).step_by(331).chain([len * 8 - 1, offsets[19] * 8 + 3]) {
        let r = record_at(&offsets, bit / 8);
        let d = tempfile::tempdir().unwrap();
        copy_dir(src.path(), d.path());
        flip_bit(&segment_path(d.path(), 1), bit);
        let outcome = open_collect(opts(d.path(), u64::MAX), 0);
        match r {
            Some(19) => {
                let (_, got, stats) = outcome.unwrap();
                assert_eq!(got.len(), 19, "bit {bit}");
                assert_eq!(stats.truncated_bytes, (len - offsets[19]) as u64);
            }
            _ => {
                let at = r.map_or(0, |r| offsets[r]) as u64;
                match outcome {
                    Err(Error::Corruption { path, offset, .. }) => {
                        assert_eq!(path, segment_path(d.path(), 1));
                        assert_eq!(offset, Some(at), "bit {bit}");
                    }
                    Err(e) => panic!("bit {bit}: unexpected error {e}"),
                    Ok(_) => panic!("bit {bit}: corruption accepted"),
                }
                // Nothing was changed by the refused open.
                assert_eq!(fs::metadata(segment_path(d.path(), 1)).unwrap().len() as usize, len);
                let mut o = opts(d.path(), u64::MAX);
                o.truncate_corrupt = true;
                let (_, got, stats) = open_collect(o, 0).unwrap();
                assert_eq!(got.len(), r.unwrap_or(0), "bit {bit}");
                assert_eq!(stats.truncated_bytes, len as u64 - at);
            }
        }
    }
}

#[test]
fn corruption_in_an_older_segment_is_refused_or_cut_with_later_segments() {
    let src = tempfile::tempdir().unwrap();
    let (wal, _, _) = open_collect(opts(src.path(), u64::MAX), 0).unwrap();
    append_all(&wal, &[payload(0, 100), payload(1, 100)]);
    wal.rotate().unwrap();
    append_all(&wal, &[payload(2, 100)]);
    wal.rotate().unwrap();
    append_all(&wal, &[payload(3, 100)]);
    drop(wal);
    // Segments: 1 = [0, 1], 2 = [2], 3 = [3]. Damage the LAST record of segment 2:
    // at the end of its segment, but not the newest segment, so it is not a torn tail.
    let seg2 = segment_path(src.path(), 2);
    let seg2_len = fs::metadata(&seg2).unwrap().len();
    let d = tempfile::tempdir().unwrap();
    copy_dir(src.path(), d.path());
    flip_bit(&segment_path(d.path(), 2), (seg2_len as usize - 1) * 8);
    match open_collect(opts(d.path(), u64::MAX), 0) {
        Err(Error::Corruption { path, offset, reason }) => {
            assert_eq!(path, segment_path(d.path(), 2));
            assert_eq!(offset, Some(SEGMENT_HEADER_LEN as u64));
            assert!(reason.contains("not the newest"), "{reason}");
        }
        other => panic!("expected corruption, got {:?}", other.map(|(_, g, s)| (g, s))),
    }
    let mut o = opts(d.path(), u64::MAX);
    o.truncate_corrupt = true;
    let (wal, got, _) = open_collect(o.clone(), 0).unwrap();
    assert_eq!(got, vec![(1, payload(0, 100)), (1, payload(1, 100))]);
    assert_eq!(wal.current_segment(), 4, "numbering continues above every segment ever seen");
    drop(wal);
    assert_eq!(segment_files(d.path()), vec![1, 2, 4]);
    // A truncated truncate_corrupt log reopens cleanly without the flag.
    let (_, got, stats) = open_collect(opts(d.path(), u64::MAX), 0).unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(stats.truncated_bytes, 0);

    // A headerless older segment is corruption too.
    let d = tempfile::tempdir().unwrap();
    copy_dir(src.path(), d.path());
    fs::write(segment_path(d.path(), 2), b"").unwrap();
    assert!(matches!(
        open_collect(opts(d.path(), u64::MAX), 0),
        Err(Error::Corruption { offset: Some(0), .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Recovery's decoder never panics and never loops on arbitrary bytes, with or without a
    /// valid header in front.
    #[test]
    fn decoding_arbitrary_bytes_never_panics(
        body in proptest::collection::vec(any::<u8>(), 0..2048),
        with_header in any::<bool>(),
    ) {
        let mut data = if with_header {
            format::SegmentHeader::new(1, true).encode().to_vec()
        } else {
            Vec::new()
        };
        data.extend_from_slice(&body);
        let mut stats = ReplayStats::default();
        let _ = replay_segment(&data, 1, &mut None, &mut stats, &mut |_, _| Ok(()));
        prop_assert!(stats.bytes as usize <= data.len());
    }
}

// ---------------------------------------------------------------------------------------------
// Group commit and sync modes

#[test]
fn group_commit_shares_fsyncs() {
    const THREADS: u64 = 8;
    const APPENDS: u64 = 200;
    let d = tempfile::tempdir().unwrap();
    let (wal, _, _) = open_collect(opts(d.path(), u64::MAX), 0).unwrap();
    // A slower fsync (as on a real disk) guarantees appenders overlap with it.
    wal.inner.faults.sync_delay_ms.store(1, Ordering::SeqCst);
    let barrier = Barrier::new(THREADS as usize);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (wal, barrier) = (&wal, &barrier);
            s.spawn(move || {
                barrier.wait();
                for i in 0..APPENDS {
                    wal.append(|_, buf| buf.extend_from_slice(&payload(t * 1000 + i, 64))).unwrap();
                }
            });
        }
    });
    let stats = wal.stats();
    assert_eq!(stats.records, THREADS * APPENDS);
    assert!(stats.fsyncs < THREADS * APPENDS, "fsyncs {} for {} appends", stats.fsyncs, stats.records);
    drop(wal);
    let (_, got, _) = open_collect(opts(d.path(), u64::MAX), 0).unwrap();
    assert_eq!(got.len() as u64, THREADS * APPENDS);
    for t in 0..THREADS {
        let mine: Vec<_> = got
            .iter()
            .filter(|(_, p)| u64::from_le_bytes(p[..8].try_into().unwrap()) / 1000 == t)
            .map(|(_, p)| p.clone())
            .collect();
        let expect: Vec<_> = (0..APPENDS).map(|i| payload(t * 1000 + i, 64)).collect();
        assert_eq!(mine, expect, "thread {t}'s records, in its order");
    }
}

#[test]
fn interval_mode_acknowledges_without_fsync_and_close_syncs() {
    let d = tempfile::tempdir().unwrap();
    let mut o = opts(d.path(), u64::MAX);
    o.sync = WalSync::Interval(Duration::from_secs(3600));
    let (wal, _, _) = open_collect(o.clone(), 0).unwrap();
    let payloads: Vec<_> = (0..100u64).map(|i| payload(i, 200)).collect();
    append_all(&wal, &payloads);
    assert_eq!(wal.stats().fsyncs, 0, "no fsync per record in interval mode");
    wal.close().unwrap();
    assert_eq!(wal.stats().fsyncs, 1, "close syncs once");
    assert!(matches!(wal.append(|_, _| {}), Err(Error::Closed)));
    assert!(matches!(wal.rotate(), Err(Error::Closed)));
    wal.close().unwrap();
    drop(wal);
    let (_, got, _) = open_collect(o, 0).unwrap();
    assert_eq!(got.len(), 100);
}

#[test]
fn interval_syncer_syncs_in_the_background() {
    let d = tempfile::tempdir().unwrap();
    let mut o = opts(d.path(), u64::MAX);
    o.sync = WalSync::Interval(Duration::from_millis(5));
    let (wal, _, _) = open_collect(o, 0).unwrap();
    append_all(&wal, &[payload(1, 100)]);
    // Liveness, not timing: wait (generously) until the syncer has run.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while wal.stats().fsyncs == 0 {
        assert!(std::time::Instant::now() < deadline, "interval syncer never synced");
        std::thread::sleep(Duration::from_millis(5));
    }
    let idle = wal.stats().fsyncs;
    wal.close().unwrap();
    assert!(wal.stats().fsyncs <= idle + 1);
}

// ---------------------------------------------------------------------------------------------
// Poisoning

#[test]
fn failed_write_poisons_and_recovery_drops_the_partial_record() {
    let d = tempfile::tempdir().unwrap();
    let (wal, _, _) = open_collect(opts(d.path(), u64::MAX), 0).unwrap();
    append_all(&wal, &[payload(1, 100), payload(2, 100)]);
    assert_eq!(wal.poisoned(), None);
    wal.inner.faults.fail_write.store(true, Ordering::SeqCst);
    assert!(matches!(wal.append(|_, b| b.extend_from_slice(&payload(3, 100))), Err(Error::Io { .. })));
    wal.inner.faults.fail_write.store(false, Ordering::SeqCst);
    let reason = wal.poisoned().expect("poisoned");
    assert!(reason.contains("injected write failure"), "{reason}");
    assert!(matches!(wal.append(|_, b| b.push(1)), Err(Error::Poisoned(_))));
    assert!(matches!(wal.rotate(), Err(Error::Poisoned(_))));
    assert!(matches!(wal.close(), Err(Error::Poisoned(_))));
    drop(wal);
    let (_, got, stats) = open_collect(opts(d.path(), u64::MAX), 0).unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(stats.truncated_bytes, (FRAME_HEADER_LEN / 2) as u64);
}

#[test]
fn failed_fsync_poisons_every_waiter_and_later_append() {
    let d = tempfile::tempdir().unwrap();
    let (wal, _, _) = open_collect(opts(d.path(), u64::MAX), 0).unwrap();
    append_all(&wal, &[payload(1, 100)]);
    wal.inner.faults.fail_sync.store(true, Ordering::SeqCst);
    let results: Vec<_> = std::thread::scope(|s| {
        let wal = &wal;
        let handles: Vec<_> = (0..4u64)
            .map(|t| s.spawn(move || wal.append(|_, b| b.extend_from_slice(&payload(t, 10)))))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(results.iter().all(Result::is_err), "no append acknowledged after a failed fsync");
    assert!(results.iter().any(|r| matches!(r, Err(Error::Io { .. }))), "the leader sees the I/O error");
    wal.inner.faults.fail_sync.store(false, Ordering::SeqCst);
    assert!(matches!(wal.append(|_, b| b.push(1)), Err(Error::Poisoned(_))));
    assert!(wal.poisoned().is_some());
}

#[test]
fn failed_background_sync_poisons_interval_mode() {
    let d = tempfile::tempdir().unwrap();
    let mut o = opts(d.path(), u64::MAX);
    o.sync = WalSync::Interval(Duration::from_millis(5));
    let (wal, _, _) = open_collect(o, 0).unwrap();
    wal.inner.faults.fail_sync.store(true, Ordering::SeqCst);
    append_all(&wal, &[payload(1, 100)]);
    // Liveness, not timing: wait (generously) for the background syncer to hit the failure.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while wal.poisoned().is_none() {
        assert!(std::time::Instant::now() < deadline, "background sync failure did not poison");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(matches!(wal.append(|_, b| b.push(1)), Err(Error::Poisoned(_))));
    assert!(matches!(wal.close(), Err(Error::Poisoned(_))));
}

#[test]
fn restart_after_poison_abandons_the_segment_and_takes_appends_again() {
    let d = tempfile::tempdir().unwrap();
    let (wal, _, _) = open_collect(opts(d.path(), u64::MAX), 0).unwrap();
    append_all(&wal, &[payload(1, 100), payload(2, 100)]);
    let poisoned_segment = wal.current_segment();
    wal.inner.faults.fail_write.store(true, Ordering::SeqCst);
    assert!(wal.append(|_, b| b.extend_from_slice(&payload(3, 100))).is_err());
    // Still failing: the restart fails, leaves no new segment, and the WAL stays poisoned.
    let full = crate::fault::inject(d.path(), crate::fault::Fault::new(&[crate::fault::Op::Sync]));
    assert!(wal.restart_after_poison(poisoned_segment + 1).is_err());
    assert_eq!(segment_files(d.path()), vec![poisoned_segment]);
    assert!(wal.poisoned().is_some());
    full.clear();
    wal.inner.faults.fail_write.store(false, Ordering::SeqCst);
    // The caller has stored records 1 and 2 elsewhere; the WAL starts over after them.
    wal.restart_after_poison(poisoned_segment + 1).unwrap();
    assert_eq!(wal.poisoned(), None);
    assert_eq!(wal.current_segment(), poisoned_segment + 1);
    assert_eq!(segment_files(d.path()), vec![poisoned_segment + 1]);
    append_all(&wal, &[payload(4, 100), payload(5, 100)]);
    wal.close().unwrap();
    drop(wal);
    let (_, got, stats) = open_collect(opts(d.path(), u64::MAX), poisoned_segment + 1).unwrap();
    assert_eq!(
        got.iter().map(|(_, p)| p.clone()).collect::<Vec<_>>(),
        vec![payload(4, 100), payload(5, 100)]
    );
    assert_eq!(stats.truncated_bytes, 0);
}

#[test]
fn a_waiter_on_an_abandoned_segment_is_never_acknowledged() {
    let d = tempfile::tempdir().unwrap();
    let (wal, _, _) = open_collect(opts(d.path(), u64::MAX), 0).unwrap();
    append_all(&wal, &[payload(1, 10)]);
    // Record 2 is written but never synced: the poisoned WAL is restarted before its appender
    // waits for it, which must then fail rather than see the new segment's syncs cover it.
    let file = wal.inner.writer.lock().segment.file.clone();
    wal.inner.commit.written(2);
    wal.inner.poison_with(Error::Poisoned("test".into()));
    wal.restart_after_poison(0).unwrap();
    let r = wal.inner.commit.wait_durable(2, &|f| wal.inner.fsync(f), &|| wal.inner.check_poison());
    assert!(matches!(r, Err(Error::Poisoned(_))), "{r:?}");
    drop(file);
}

// ---------------------------------------------------------------------------------------------
// Real crashes at the WAL's crash points

const CRASH_DIR_ENV: &str = "STRATA_WAL_CRASH_TEST_DIR";
const CRASH_RECORDS: u64 = 30;

/// Kills a writer process at each WAL crash point (and occurrence), then checks that recovery
/// keeps every acknowledged record, at most the one in flight besides, and nothing partial.
/// The test binary re-runs this very test as the child, with the crash point armed.
#[test]
fn crash_at_every_wal_crash_point() {
    if let Ok(dir) = std::env::var(CRASH_DIR_ENV) {
        // The child: append until the armed crash point aborts the process.
        let (wal, _, _) = open_collect(opts(Path::new(&dir), 700), 0).unwrap();
        for i in 0..CRASH_RECORDS {
            wal.append(|_, b| b.extend_from_slice(&payload(i, 100 + i as usize * 10))).unwrap();
            println!("acked {i}");
        }
        return;
    }
    let points = [
        ("wal.before_write", 5),
        ("wal.mid_record", 5),
        ("wal.after_write_before_sync", 5),
        ("wal.after_sync_before_ack", 5),
        // The first creation is at open; the second is the first rotation.
        ("wal.segment_rotate.after_create", 2),
        ("wal.segment_rotate.after_create", 1),
    ];
    let exe = std::env::current_exe().unwrap();
    for (point, nth) in points {
        let d = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(&exe)
            .args([
                "--exact",
                "wal::tests::crash_at_every_wal_crash_point",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CRASH_DIR_ENV, d.path())
            .env("STRATA_FAILPOINT", format!("{point}:{nth}"))
            .output()
            .unwrap();
        assert!(!out.status.success(), "{point}:{nth}: child did not crash");
        let stdout = String::from_utf8_lossy(&out.stdout);
        // (Not per line: libtest prints the test's name without a newline before it runs.)
        let acked = stdout.matches("acked ").count() as u64;
        assert!(acked < CRASH_RECORDS, "{point}:{nth}: crashed after all records");

        let (_, got, _) =
            open_collect(opts(d.path(), 700), 0).unwrap_or_else(|e| panic!("{point}:{nth}: {e}"));
        let ids: Vec<u64> = got.iter().map(|(_, p)| u64::from_le_bytes(p[..8].try_into().unwrap())).collect();
        assert_eq!(ids, (0..ids.len() as u64).collect::<Vec<_>>(), "{point}:{nth}: replay is a prefix");
        for (i, (_, p)) in got.iter().enumerate() {
            assert_eq!(p, &payload(i as u64, 100 + i * 10), "{point}:{nth}: record {i} intact");
        }
        let replayed = ids.len() as u64;
        // Every acknowledged record survives; at most the in-flight one more.
        let in_flight = match point {
            "wal.before_write" | "wal.mid_record" | "wal.segment_rotate.after_create" => 0,
            _ => 1,
        };
        assert_eq!(replayed, acked + in_flight, "{point}:{nth}: acked {acked}, replayed {replayed}");
    }
}

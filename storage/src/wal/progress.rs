//! How far the startup replay has come, readable while [`super::Wal::open`] runs.
//!
//! The server answers `/api/v1/status/walreplay` from this while the database is still
//! opening (a large WAL takes a while to replay), so an operator can see the replay move
//! instead of a bare 503. Counters only: nothing waits on them, so relaxed atomics do.

use std::sync::atomic::{AtomicU64, Ordering};

/// Shared progress of one WAL replay: the first and last segment to replay and the one being
/// read. All three stay 0 until replay starts, and also when there is nothing to replay.
#[derive(Debug, Default)]
pub struct ReplayProgress {
    min: AtomicU64,
    max: AtomicU64,
    current: AtomicU64,
}

/// A copy of [`ReplayProgress`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayStatus {
    /// The first segment to replay.
    pub min: u64,
    /// The last segment to replay.
    pub max: u64,
    /// The segment being replayed; equal to `max` once replay is done.
    pub current: u64,
}

impl ReplayProgress {
    /// Replay will read segments `min..=max`, starting with `min`.
    pub(crate) fn begin(&self, min: u64, max: u64) {
        self.min.store(min, Ordering::Relaxed);
        self.max.store(max, Ordering::Relaxed);
        self.current.store(min, Ordering::Relaxed);
    }

    /// Replay has reached segment `number`.
    pub(crate) fn reached(&self, number: u64) {
        self.current.store(number, Ordering::Relaxed);
    }

    /// Replay is over. After a whole log this changes nothing (`current` is `max`); after a
    /// torn or cut-off tail, the segment replay stopped in becomes the last one.
    pub(crate) fn finish(&self) {
        let current = self.current.load(Ordering::Relaxed);
        self.max.store(current, Ordering::Relaxed);
    }

    /// The progress now.
    pub fn status(&self) -> ReplayStatus {
        ReplayStatus {
            min: self.min.load(Ordering::Relaxed),
            max: self.max.load(Ordering::Relaxed),
            current: self.current.load(Ordering::Relaxed),
        }
    }
}

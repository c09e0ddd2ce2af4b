//! The database: ties WAL, index, head and partition files together.
//!
//! (Being built; the signatures below are the contract the server codes against.)

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, Result};
use crate::options::Options;

/// Whether the database can take writes right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// True when writes can be made durable.
    pub writable: bool,
    /// Why not, when not.
    pub reason: Option<String>,
}

/// An open database. Cheap to share behind an `Arc`; every method takes `&self`.
pub struct Db {
    inner: Arc<Inner>,
}

struct Inner {
    _opts: Options,
    closed: AtomicBool,
}

impl Db {
    /// Opens (creating if needed) the database in `opts.data_dir`, replaying the WAL.
    pub fn open(opts: Options) -> Result<Db> {
        crate::fsutil::create_dir_durable(&opts.data_dir)?;
        Ok(Db { inner: Arc::new(Inner { _opts: opts, closed: AtomicBool::new(false) }) })
    }

    /// Writable or not, and why.
    pub fn health(&self) -> Health {
        if self.inner.closed.load(Ordering::Acquire) {
            return Health { writable: false, reason: Some(Error::Closed.to_string()) };
        }
        Health { writable: true, reason: None }
    }

    /// Stops background work, syncs the WAL and flushes the head so the next start is fast.
    pub fn close(&self) -> Result<()> {
        self.inner.closed.store(true, Ordering::Release);
        Ok(())
    }
}

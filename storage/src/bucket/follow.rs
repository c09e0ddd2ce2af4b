//! What a query node (`--role query`) reads of a bucket: the writers' prefixes under its own
//! and each one's newest record, kept current in the background.
//!
//! A prefix is a directory holding `manifest/latest` (every writer writes that hint with its
//! first record): the query node's own prefix if it is one, and each directory one level below
//! it that is. Finding them takes one LIST, repeated now and then to see new writers; keeping a
//! prefix current takes one HEAD per refresh (is there a record after the one we hold?), and
//! the hint and the new record when there is. None of it runs on a query's path.

use std::sync::Arc;

use super::Bucket;
use super::commit;
use super::record::Record;
use crate::error::Result;

/// One writer's prefix as a query node follows it.
pub(crate) struct Followed {
    /// The name below the query node's prefix (empty for the prefix itself).
    pub name: String,
    pub bucket: Arc<Bucket>,
    /// The newest record read, once there is one.
    pub record: Option<Record>,
    /// Refreshes since the hint was last read: see [`Followed::refresh`].
    since_hint: u32,
}

/// A refresh reads the hint (rather than only probing the next number) every this many times,
/// so that a query node cannot stay stuck at a record whose successors were all deleted.
const HINT_EVERY: u32 = 16;

impl Followed {
    pub(crate) fn new(name: String, bucket: Arc<Bucket>) -> Followed {
        Followed { name, bucket, record: None, since_hint: HINT_EVERY }
    }

    /// Reads the prefix's newest record if it is newer than the one held. True if it was.
    pub(crate) fn refresh(&mut self) -> Result<bool> {
        let b = &self.bucket;
        let held = self.record.as_ref().map(|r| r.seq);
        self.since_hint += 1;
        if let Some(seq) = held
            && self.since_hint < HINT_EVERY
            && !b.exists(&b.manifest_key(seq + 1))?
        {
            return Ok(false);
        }
        self.since_hint = 0;
        let newest = commit::latest(b)?;
        match newest {
            Some(r) if held.is_none_or(|s| r.seq > s) => {
                self.record = Some(r);
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

/// The names of the prefixes at and one level below `root` that hold records: `""` for `root`
/// itself. One LIST, and a HEAD per directory found.
pub(crate) fn discover(root: &Bucket) -> Result<Vec<String>> {
    let mut found = Vec::new();
    if root.exists(&root.hint_key())? {
        found.push(String::new());
    }
    for name in root.list_dirs()? {
        if matches!(name.as_str(), "manifest" | "partitions") {
            continue;
        }
        let sub = root.sub(&name);
        if sub.exists(&sub.hint_key())? {
            found.push(name);
        }
    }
    Ok(found)
}

//! A writer in log mode (`--role write --log.url ...`): consumes its partitions of the ingest
//! log into its database.
//!
//! Per partition, one task reads the records after the last offset stored, takes what has
//! arrived (up to [`RECORDS_PER_APPEND`] records) as one batch, appends it (one WAL record, one
//! fsync), and only then counts the records as consumed. The offsets are saved to
//! `log-offsets.json` in the data directory once a second and at shutdown
//! (`docs/format/log.md`). A crash therefore replays at most the records appended since
//! the last save, and that is harmless: a sample is stored once per series and timestamp, so
//! appending the same samples again changes no answer.
//!
//! A record that does not decode, or that storage refuses whole (a label that is not UTF-8),
//! would be refused again on every retry: it is skipped, logged and counted. Storage that cannot
//! write (a full disk) is retried every second without moving past the record.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use parking_lot::Mutex;
use remote::prw::{self, Version};
use storage::{Batch, Db};
use tokio::task::JoinSet;
use tracing::{error, info, warn};

use super::{Log, Record};

/// Records taken into one append at most: one WAL record and fsync for up to this many
/// distributor messages.
const RECORDS_PER_APPEND: usize = 256;

/// How often consumed offsets are saved, and the wait before retrying a failed read or append.
const PAUSE: Duration = Duration::from_secs(1);

/// The file, in the data directory, that holds the consumed offsets.
pub const OFFSETS_FILE: &str = "log-offsets.json";

/// Consumes partitions of a log into a database until dropped or stopped.
pub struct Ingester {
    tasks: JoinSet<()>,
    offsets: Arc<Offsets>,
}

impl Ingester {
    /// Starts consuming `partitions` of `log` into `db`, after the offsets saved in
    /// `data_dir` for the log named `log_name` (offsets saved for another name are ignored).
    pub fn start(
        log: Arc<dyn Log>,
        db: Arc<Db>,
        partitions: &[u32],
        data_dir: &Path,
        log_name: &str,
    ) -> std::io::Result<Ingester> {
        let offsets = Arc::new(Offsets::load(data_dir.join(OFFSETS_FILE), log_name)?);
        let mut tasks = JoinSet::new();
        for &p in partitions {
            let (log, db, offsets) = (Arc::clone(&log), Arc::clone(&db), Arc::clone(&offsets));
            tasks.spawn(consume(log, db, p, offsets));
        }
        let saver = Arc::clone(&offsets);
        tasks.spawn(async move {
            loop {
                tokio::time::sleep(PAUSE).await;
                let offsets = Arc::clone(&saver);
                match tokio::task::spawn_blocking(move || offsets.save()).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => warn!("cannot save the ingest log offsets: {e}"),
                    Err(e) => error!("saving the ingest log offsets failed: {e}"),
                }
            }
        });
        info!(?partitions, "consuming the ingest log");
        Ok(Ingester { tasks, offsets })
    }

    /// Stops consuming and saves the offsets of everything appended.
    pub async fn stop(mut self) -> std::io::Result<()> {
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
        let offsets = Arc::clone(&self.offsets);
        tokio::task::spawn_blocking(move || offsets.save()).await.map_err(std::io::Error::other)?
    }
}

/// Consumes partition `p` for ever, re-reading after any failure of the log.
async fn consume(log: Arc<dyn Log>, db: Arc<Db>, p: u32, offsets: Arc<Offsets>) {
    loop {
        let after = offsets.get(p);
        let records = match log.read_after(p, after).await {
            Ok(records) => records,
            Err(e) => {
                warn!(partition = p, "{e}; retrying");
                tokio::time::sleep(PAUSE).await;
                continue;
            }
        };
        let mut chunks = records.ready_chunks(RECORDS_PER_APPEND);
        while let Some(chunk) = chunks.next().await {
            let mut good = Vec::with_capacity(chunk.len());
            let mut failed = None;
            for r in chunk {
                match r {
                    Ok(record) => good.push(record),
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            if let Some(last) = good.last().map(|r| r.offset) {
                append_records(&db, p, good).await;
                offsets.set(p, last);
            }
            if let Some(e) = failed {
                warn!(partition = p, "{e}; reading again from offset {}", offsets.get(p));
                tokio::time::sleep(PAUSE).await;
                break;
            }
        }
    }
}

/// Appends `records` of partition `p` to `db`: as one batch while they hold only floats (a
/// histogram at the same timestamp as a float of the same series wins only within its own
/// batch, so records with histograms go alone, in order).
async fn append_records(db: &Arc<Db>, p: u32, records: Vec<Record>) {
    let mut batch = Batch::new();
    for record in records {
        let Some(decoded) = decode(p, &record) else { continue };
        if decoded.histograms.is_empty() {
            batch.series.extend(decoded.series);
            continue;
        }
        append(db, p, std::mem::take(&mut batch)).await;
        append(db, p, decoded).await;
    }
    append(db, p, batch).await;
}

/// The batch a record carries, or `None` (logged) if it does not decode.
fn decode(p: u32, record: &Record) -> Option<Batch> {
    // Distributors encode what they decoded within the request limits, and a request may be
    // split into fewer, larger parts than any sender's; the log's own message limit bounds it.
    let limits =
        remote::Limits { body_bytes_max: usize::MAX, decoded_bytes_max: usize::MAX, ..Default::default() };
    match prw::decode(Version::V2, &record.payload, &limits) {
        Ok(decoded) => Some(decoded.batch),
        Err(e) => {
            error!(partition = p, offset = record.offset, "skipping a log record that does not decode: {e}");
            None
        }
    }
}

/// Appends `batch` on a blocking thread, retrying while storage cannot write; a batch storage
/// refuses whole is skipped (logged).
async fn append(db: &Arc<Db>, p: u32, batch: Batch) {
    if batch.series.is_empty() && batch.histograms.is_empty() {
        return;
    }
    let batch = Arc::new(batch);
    loop {
        let (db, b) = (Arc::clone(db), Arc::clone(&batch));
        match tokio::task::spawn_blocking(move || db.append(&b)).await {
            Ok(Ok(_)) => return,
            Ok(Err(e @ storage::Error::InvalidLabels { .. })) => {
                error!(partition = p, "skipping log records storage refuses: {e}");
                return;
            }
            Ok(Err(e)) => warn!(partition = p, "cannot append log records yet: {e}; retrying"),
            Err(e) => error!(partition = p, "appending log records failed: {e}; retrying"),
        }
        tokio::time::sleep(PAUSE).await;
    }
}

/// The last offset appended, per partition, and the file they are saved in.
struct Offsets {
    path: PathBuf,
    log_name: String,
    by_partition: Mutex<BTreeMap<u32, u64>>,
}

impl Offsets {
    /// The offsets saved at `path` for the log `log_name`; none if the file is missing or
    /// names another log.
    fn load(path: PathBuf, log_name: &str) -> std::io::Result<Offsets> {
        let mut by_partition = BTreeMap::new();
        match std::fs::read(&path) {
            Ok(bytes) => {
                let saved: serde_json::Value = serde_json::from_slice(&bytes)
                    .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?;
                if saved["log"].as_str() == Some(log_name) {
                    for (p, offset) in saved["offsets"].as_object().into_iter().flatten() {
                        if let (Ok(p), Some(offset)) = (p.parse(), offset.as_u64()) {
                            by_partition.insert(p, offset);
                        }
                    }
                } else {
                    warn!(file = %path.display(), "offsets saved for another log are ignored");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(Offsets { path, log_name: log_name.to_owned(), by_partition: Mutex::new(by_partition) })
    }

    fn get(&self, p: u32) -> u64 {
        self.by_partition.lock().get(&p).copied().unwrap_or(0)
    }

    fn set(&self, p: u32, offset: u64) {
        self.by_partition.lock().insert(p, offset);
    }

    /// Writes the offsets to a temporary file, syncs it and renames it over the last one.
    fn save(&self) -> std::io::Result<()> {
        let offsets: serde_json::Map<String, serde_json::Value> =
            self.by_partition.lock().iter().map(|(p, o)| (p.to_string(), (*o).into())).collect();
        let text = serde_json::json!({ "log": self.log_name, "offsets": offsets }).to_string();
        let tmp = self.path.with_extension("json.tmp");
        let mut file = std::fs::File::create(&tmp)?;
        std::io::Write::write_all(&mut file, text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, &self.path)?;
        if let Some(dir) = self.path.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Saved offsets come back for the same log only.
    #[test]
    fn offsets_are_saved_per_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(OFFSETS_FILE);
        let offsets = Offsets::load(path.clone(), "a").unwrap();
        assert_eq!(offsets.get(3), 0);
        offsets.set(3, 41);
        offsets.set(0, 7);
        offsets.save().unwrap();
        // The layout docs/format/log.md shows.
        assert_eq!(std::fs::read_to_string(&path).unwrap(), r#"{"log":"a","offsets":{"0":7,"3":41}}"#);
        let again = Offsets::load(path.clone(), "a").unwrap();
        assert_eq!((again.get(0), again.get(3), again.get(1)), (7, 41, 0));
        assert_eq!(Offsets::load(path, "b").unwrap().get(3), 0);
    }
}

//! A writer in log mode (`--role write --log.url ...`): consumes its partitions of the ingest
//! log into its database.
//!
//! Per partition, one task reads the records after the last offset stored, takes what has
//! arrived (up to [`RECORDS_PER_APPEND`] records) as one batch, appends it (one WAL record, one
//! fsync), and only then counts the records as consumed. The offsets are saved to
//! `log-offsets.json` in the data directory once a second (when they moved) and at shutdown
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
use remote::prw;
use storage::{BatchRef, Db};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinSet};
use tracing::{error, info, warn};

use super::distributor::payload_version;
use super::leases::{LeaseConfig, Membership};
use super::metrics::LOG_METRICS;
use super::{Log, LogError, Record};

/// Records taken into one append at most: one WAL record and fsync for up to this many
/// distributor messages.
const RECORDS_PER_APPEND: usize = 256;

/// How often consumed offsets are saved, and the wait before retrying a failed read or append.
const PAUSE: Duration = Duration::from_secs(1);

/// The file, in the data directory, that holds the consumed offsets.
pub const OFFSETS_FILE: &str = "log-offsets.json";

/// Which partitions an ingester consumes.
#[derive(Debug, Clone)]
pub enum Ownership {
    /// These, always (`--log.consume`; every partition by default).
    Fixed(Vec<u32>),
    /// Its share of the partitions, claimed with etcd leases (`--leases.url`): the partitions
    /// divided by the live members, rounded up; a member with more gives the rest up, one
    /// with fewer claims free ones, and a dead member's are free once its lease expires.
    Leased(LeaseConfig),
}

/// How often a member with leases looks at the claims (and records what is in the bucket).
const CLAIM_TICK: Duration = Duration::from_secs(2);

/// How long a partition's reading may deliver nothing before the log is asked whether it holds
/// more: a reading can stall without an error after the connection moves to another server
/// (seen with JetStream's ordered consumers in the kill test: one partition one record short,
/// for good), and is then started again after the last record appended.
const STALL_CHECK: Duration = Duration::from_secs(3);

/// Consumes partitions of a log into a database until stopped.
pub struct Ingester {
    tasks: JoinSet<()>,
    offsets: Arc<Offsets>,
    stop: watch::Sender<bool>,
}

impl Ingester {
    /// Starts consuming the partitions `ownership` gives of `log` into `db`, after the offsets
    /// saved in `data_dir` for the log named `log_name` (offsets saved for another name are
    /// ignored).
    pub fn start(
        log: Arc<dyn Log>,
        db: Arc<Db>,
        ownership: Ownership,
        data_dir: &Path,
        log_name: &str,
    ) -> std::io::Result<Ingester> {
        let offsets = Arc::new(Offsets::load(data_dir.join(OFFSETS_FILE), log_name)?);
        let (stop, stopped) = watch::channel(false);
        let mut tasks = JoinSet::new();
        match ownership {
            Ownership::Fixed(partitions) => {
                info!(?partitions, "consuming the ingest log");
                for p in partitions {
                    offsets.hold(p, true);
                    let (log, db, offsets) = (Arc::clone(&log), Arc::clone(&db), Arc::clone(&offsets));
                    tasks.spawn(consume(log, db, p, offsets));
                }
            }
            Ownership::Leased(config) => {
                info!(member = %config.member, "consuming the ingest log's partitions this member claims");
                let coordinator = Coordinator {
                    log,
                    db,
                    config,
                    log_name: log_name.to_owned(),
                    offsets: Arc::clone(&offsets),
                };
                tasks.spawn(coordinator.run(stopped));
            }
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
        Ok(Ingester { tasks, offsets, stop })
    }

    /// What it consumes: offsets and the partitions held.
    pub fn offsets(&self) -> &Arc<Offsets> {
        &self.offsets
    }

    /// Stops consuming (a member with leases gives its partitions up at once) and saves the
    /// offsets of everything appended.
    pub async fn stop(mut self) -> std::io::Result<()> {
        // Only a coordinator (leases) listens; it leaves and ends, while the other tasks never
        // end by themselves. Fixed partitions have nothing to give up.
        if self.stop.send(true).is_ok() {
            let leave = async {
                while let Some(done) = self.tasks.join_next().await {
                    if done.is_ok() {
                        break;
                    }
                }
            };
            let _ = tokio::time::timeout(Duration::from_secs(5), leave).await;
        }
        self.tasks.abort_all();
        while self.tasks.join_next().await.is_some() {}
        let offsets = Arc::clone(&self.offsets);
        tokio::task::spawn_blocking(move || offsets.save()).await.map_err(std::io::Error::other)?
    }
}

/// A member's loop with leases: joins, claims and releases partitions each [`CLAIM_TICK`],
/// runs a consumer per partition it holds, records what is in the bucket; rejoins with a new
/// lease after losing one.
struct Coordinator {
    log: Arc<dyn Log>,
    db: Arc<Db>,
    config: LeaseConfig,
    log_name: String,
    offsets: Arc<Offsets>,
}

impl Coordinator {
    async fn run(self, mut stopped: watch::Receiver<bool>) {
        loop {
            let membership = tokio::select! {
                joined = Membership::join(&self.config, &self.log_name) => joined,
                _ = stopped.changed() => return,
            };
            let membership = match membership {
                Ok(m) => m,
                Err(e) => {
                    warn!("{e}; retrying");
                    tokio::select! {
                        () = tokio::time::sleep(PAUSE) => continue,
                        _ = stopped.changed() => return,
                    }
                }
            };
            let mut held = Held::default();
            loop {
                tokio::select! {
                    () = tokio::time::sleep(CLAIM_TICK) => {}
                    _ = stopped.changed() => {
                        held.consumers.abort_all();
                        membership.leave().await;
                        return;
                    }
                }
                if membership.lost() {
                    break;
                }
                if let Err(e) = self.step(&membership, &mut held).await {
                    warn!("claiming partitions: {e}");
                }
            }
            // Fenced: what we held may be another's already. Stop, and join again once a
            // lease's time has passed, when our old claims have expired everywhere.
            held.consumers.abort_all();
            LOG_METRICS.lease_lost();
            for &p in held.partitions.keys() {
                self.offsets.hold(p, false);
            }
            warn!(partitions = ?held.partitions.keys().collect::<Vec<_>>(), "lease lost: stopped consuming");
            drop(membership);
            tokio::select! {
                () = tokio::time::sleep(self.config.ttl) => {}
                _ = stopped.changed() => return,
            }
        }
    }

    /// One look at the claims: keep the partitions still ours, give up those beyond our share
    /// or claim free ones up to it, and record how far the bucket holds each.
    async fn step(&self, membership: &Membership, held: &mut Held) -> Result<(), LogError> {
        let partitions = self.log.partitions();
        let members = u32::try_from(membership.members().await?.max(1)).unwrap_or(u32::MAX);
        let share = partitions.div_ceil(members) as usize;
        let owners = membership.owners().await?;
        let me = self.config.member.as_str();
        held.partitions.retain(|p, consumer| {
            let ours = owners.get(p).is_some_and(|o| o == me);
            if !ours {
                consumer.abort();
                self.offsets.hold(*p, false);
                warn!(partition = p, "partition claimed by another member: stopped consuming it");
            }
            ours
        });
        while held.partitions.len() > share {
            let Some((p, consumer)) = held.partitions.pop_last() else { break };
            consumer.abort();
            self.offsets.hold(p, false);
            held.recorded.remove(&p);
            membership.release(p).await?;
            info!(partition = p, members, "released partition to another member");
        }
        for p in 0..partitions {
            if held.partitions.len() >= share {
                break;
            }
            if owners.contains_key(&p) || !membership.claim(p).await? {
                continue;
            }
            let stored = membership.stored(p).await?;
            self.offsets.set(p, stored);
            let from = self.offsets.get(p);
            let (log, db, offsets) = (Arc::clone(&self.log), Arc::clone(&self.db), Arc::clone(&self.offsets));
            let consumer = held.consumers.spawn(consume(log, db, p, offsets));
            held.partitions.insert(p, consumer);
            self.offsets.hold(p, true);
            // Tests and operators read takeovers from this line; keep its wording.
            info!(partition = p, after = from, stored, "claimed partition");
        }
        let stored = self.db.positions_stored();
        let mut recorded = Vec::new();
        for &p in held.partitions.keys() {
            let Some(&offset) = stored.get(&source_name(&self.log_name, p)) else { continue };
            if held.recorded.get(&p).is_none_or(|&r| r < offset)
                && membership.record_stored(p, offset).await?
            {
                held.recorded.insert(p, offset);
                recorded.push((p, offset));
            }
        }
        if !recorded.is_empty() {
            // Once per upload that moves a partition on.
            info!(?recorded, "recorded stored offsets");
        }
        Ok(())
    }
}

/// The partitions a membership holds: their consumers and the stored offsets recorded.
#[derive(Default)]
struct Held {
    consumers: JoinSet<()>,
    partitions: BTreeMap<u32, AbortHandle>,
    recorded: BTreeMap<u32, u64>,
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
        loop {
            let chunk = match tokio::time::timeout(STALL_CHECK, chunks.next()).await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                Err(_idle) => match log.last_offset(p).await {
                    Ok(last) if last > offsets.get(p) => {
                        LOG_METRICS.stalled();
                        warn!(
                            partition = p,
                            consumed = offsets.get(p),
                            last,
                            "reading the log stalled; reading again"
                        );
                        break;
                    }
                    // Caught up (or the log cannot say now): keep waiting.
                    _ => continue,
                },
            };
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
                let records = good.len() as u64;
                append_records(&db, p, good).await;
                LOG_METRICS.consumed(p, records);
                offsets.set(p, last);
                db.note_position(&offsets.source(p), last);
            }
            if let Some(e) = failed {
                warn!(partition = p, "{e}; reading again from offset {}", offsets.get(p));
                tokio::time::sleep(PAUSE).await;
                break;
            }
        }
    }
}

/// Appends `records` of partition `p` to `db` as one batch (one WAL record, one fsync), on
/// a blocking thread; retried while storage cannot write.
async fn append_records(db: &Arc<Db>, p: u32, records: Vec<Record>) {
    let records = Arc::new(records);
    loop {
        let (db, records) = (Arc::clone(db), Arc::clone(&records));
        match tokio::task::spawn_blocking(move || append_blocking(&db, p, &records)).await {
            Ok(Ok(())) => return,
            Ok(Err(e)) => warn!(partition = p, "cannot append log records yet: {e}; retrying"),
            Err(e) => error!(partition = p, "appending log records failed: {e}; retrying"),
        }
        tokio::time::sleep(PAUSE).await;
    }
}

/// Decompressed bytes of log records appended at once, at most (unless one record is larger):
/// large enough that appends (a WAL record and its fsync each) are few, small enough that the
/// buffer they are decompressed into is kept from chunk to chunk.
const APPEND_BYTES_MAX: usize = 16 << 20;

/// Appends `records` in groups of at most [`APPEND_BYTES_MAX`] decompressed bytes.
fn append_blocking(db: &Db, p: u32, records: &[Record]) -> storage::Result<()> {
    let size = |r: &Record| payload_version(&r.payload).and_then(|(_, block)| snap_len(block)).unwrap_or(0);
    let mut from = 0;
    while from < records.len() {
        let (mut to, mut bytes) = (from, 0);
        while let Some(r) = records.get(to) {
            let n = size(r);
            if to > from && bytes + n > APPEND_BYTES_MAX {
                break;
            }
            bytes += n;
            to += 1;
        }
        append_group(db, p, &records[from..to])?;
        from = to;
    }
    Ok(())
}

/// The decompressed length a snappy block declares, if it declares one.
fn snap_len(block: &[u8]) -> Option<usize> {
    prw::decompressed_len(block, &record_limits()).ok()
}

/// The limits a record is decoded with. Distributors encode what they decoded within the
/// request limits, and a request may be split into fewer, larger parts than any sender's; the
/// log's own message limit bounds a record.
fn record_limits() -> remote::Limits {
    remote::Limits { body_bytes_max: usize::MAX, decoded_bytes_max: usize::MAX, ..Default::default() }
}

/// Decodes `records` in place (label strings borrowed from the decompressed records, as the
/// HTTP write path does) into one batch and appends it. A record that does not decode is
/// skipped (logged and counted); so is one that storage refuses whole, appended alone to find
/// it if the batch is refused.
fn append_group(db: &Db, p: u32, records: &[Record]) -> storage::Result<()> {
    thread_local! {
        /// The records' decompressed bytes, kept for the thread's next group: a fresh buffer
        /// per group is mapped and zeroed again, page by page.
        static BUF: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
    }
    let mut buf = BUF.take();
    let appended = append_decoded(db, p, records, &mut buf);
    if buf.capacity() <= 2 * APPEND_BYTES_MAX {
        BUF.set(buf);
    }
    appended
}

fn append_decoded(db: &Db, p: u32, records: &[Record], buf: &mut Vec<u8>) -> storage::Result<()> {
    let limits = record_limits();
    let skip = |offset: u64, why: String| {
        LOG_METRICS.skipped();
        error!(partition = p, offset, "skipping a log record that does not decode: {why}");
    };
    let mut blocks = Vec::with_capacity(records.len());
    for record in records {
        match payload_version(&record.payload) {
            Some((version, block)) => blocks.push((record.offset, version, block)),
            None => skip(record.offset, "unknown version byte".into()),
        }
    }
    let payloads: Vec<&[u8]> = blocks.iter().map(|(_, _, block)| *block).collect();
    let ranges = prw::decompress_many(&payloads, &limits, buf);
    let buf: &[u8] = buf;
    let mut decoded = Vec::with_capacity(blocks.len());
    for ((offset, version, _), range) in blocks.iter().zip(ranges) {
        let bytes = match range {
            Ok(range) => buf.get(range).unwrap_or_default(),
            Err(e) => {
                skip(*offset, e.to_string());
                continue;
            }
        };
        match prw::decode_ref(*version, bytes, &limits) {
            Ok(d) => decoded.push((*offset, d.batch)),
            Err(e) => skip(*offset, e.to_string()),
        }
    }
    // Sized once: growing it pair by pair would copy and fault in its pages again and again.
    let (series, pairs, samples) = decoded
        .iter()
        .fold((0, 0, 0), |(s, p, n), (_, d)| (s + d.len(), p + d.label_size().0, n + d.sample_count()));
    let mut batch = BatchRef::with_capacity(series, pairs, samples);
    for (_, d) in &decoded {
        batch.extend_from(d);
    }
    if batch.is_empty() {
        return Ok(());
    }
    match db.append_ref(&batch) {
        Err(storage::Error::InvalidLabels { .. }) => {
            for (offset, d) in &decoded {
                match db.append_ref(d) {
                    Err(e @ storage::Error::InvalidLabels { .. }) => {
                        LOG_METRICS.skipped();
                        error!(partition = p, offset, "skipping a log record storage refuses: {e}");
                    }
                    other => {
                        other?;
                    }
                }
            }
            Ok(())
        }
        other => other.map(|_| ()),
    }
}

/// The source name of partition `p` of the log `log_name` among a database's positions:
/// `log:<name>/<p>`.
pub fn source_name(log_name: &str, p: u32) -> String {
    format!("log:{log_name}/{p}")
}

/// What this process consumes of the log: per partition, the offset of the last record
/// appended (saved in [`OFFSETS_FILE`]) and whether it consumes the partition now. The one
/// record of both: consumers move the offsets, the coordinator the holding, and strong reads
/// (`super::consistency`) and `/metrics` read them.
pub struct Offsets {
    path: PathBuf,
    log_name: String,
    by_partition: Mutex<BTreeMap<u32, Consumed>>,
    /// The offsets last written to the file, so an idle writer does not rewrite it.
    saved: Mutex<BTreeMap<u32, u64>>,
}

/// One partition as this process consumes it.
#[derive(Debug, Default, Clone, Copy)]
struct Consumed {
    offset: u64,
    held: bool,
}

impl Offsets {
    /// The offsets saved at `path` for the log `log_name`; none if the file is missing or
    /// names another log.
    fn load(path: PathBuf, log_name: &str) -> std::io::Result<Offsets> {
        let mut saved = BTreeMap::new();
        match std::fs::read(&path) {
            Ok(bytes) => {
                let file: serde_json::Value = serde_json::from_slice(&bytes)
                    .map_err(|e| std::io::Error::other(format!("{}: {e}", path.display())))?;
                if file["log"].as_str() == Some(log_name) {
                    for (p, offset) in file["offsets"].as_object().into_iter().flatten() {
                        if let (Ok(p), Some(offset)) = (p.parse(), offset.as_u64()) {
                            saved.insert(p, offset);
                        }
                    }
                } else {
                    warn!(file = %path.display(), "offsets saved for another log are ignored");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let by_partition = saved.iter().map(|(&p, &offset)| (p, Consumed { offset, held: false })).collect();
        Ok(Offsets {
            path,
            log_name: log_name.to_owned(),
            by_partition: Mutex::new(by_partition),
            saved: Mutex::new(saved),
        })
    }

    /// The name partition `p` has among the database's positions (docs/format/manifest.md).
    fn source(&self, p: u32) -> String {
        source_name(&self.log_name, p)
    }

    fn get(&self, p: u32) -> u64 {
        self.by_partition.lock().get(&p).map_or(0, |c| c.offset)
    }

    /// Raises partition `p`'s offset to `offset` (offsets never go back).
    fn set(&self, p: u32, offset: u64) {
        let mut by_partition = self.by_partition.lock();
        let at = by_partition.entry(p).or_default();
        at.offset = at.offset.max(offset);
    }

    /// Marks partition `p` as consumed here from now on, or no longer.
    fn hold(&self, p: u32, held: bool) {
        self.by_partition.lock().entry(p).or_default().held = held;
    }

    /// The partitions consumed here now, each with the offset of its last record appended.
    pub fn held(&self) -> BTreeMap<u32, u64> {
        self.by_partition.lock().iter().filter(|(_, c)| c.held).map(|(&p, c)| (p, c.offset)).collect()
    }

    /// Every partition this process has an offset or a claim for: (partition, offset, held).
    pub fn all(&self) -> Vec<(u32, u64, bool)> {
        self.by_partition.lock().iter().map(|(&p, c)| (p, c.offset, c.held)).collect()
    }

    /// Writes the offsets to a temporary file, syncs it and renames it over the last one;
    /// nothing if they have not moved since the last write.
    fn save(&self) -> std::io::Result<()> {
        let now: BTreeMap<u32, u64> = self.by_partition.lock().iter().map(|(&p, c)| (p, c.offset)).collect();
        let mut saved = self.saved.lock();
        if *saved == now && self.path.exists() {
            return Ok(());
        }
        let offsets: serde_json::Map<String, serde_json::Value> =
            now.iter().map(|(p, o)| (p.to_string(), (*o).into())).collect();
        let text = serde_json::json!({ "log": self.log_name, "offsets": offsets }).to_string();
        let tmp = self.path.with_extension("json.tmp");
        let mut file = std::fs::File::create(&tmp)?;
        std::io::Write::write_all(&mut file, text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, &self.path)?;
        if let Some(dir) = self.path.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
        *saved = now;
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
        assert_eq!(Offsets::load(path.clone(), "b").unwrap().get(3), 0);
        // Unmoved offsets are not written again; moved ones are.
        std::fs::write(&path, "untouched").unwrap();
        again.save().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "untouched");
        again.set(1, 2);
        again.save().unwrap();
        assert!(std::fs::read_to_string(&path).unwrap().contains(r#""1":2"#));
    }
}

//! Partition files and manifests in an object store: S3 or an S3-compatible store (Ceph's RADOS
//! Gateway, MinIO, R2), or a local directory and memory for tests, through Apache Arrow's
//! `object_store` client.
//!
//! The local data directory stays the writer's working copy: the WAL, the head, and the
//! partition files it flushes and compacts, committed by the local `MANIFEST` exactly as
//! without a bucket. The bucket mirrors the local manifest (see [`mirror`]): a background
//! thread uploads each file the newest local manifest lists and the bucket does not hold yet,
//! then commits that manifest to the bucket as the next object of a numbered sequence. So a
//! bucket that is slow or down delays only the mirror, never ingest or a flush, and a disk
//! that dies loses only what the mirror had not committed yet (the WAL and the newest files).
//!
//! Bucket layout under the prefix (`docs/format/bucket.md`):
//!
//! ```text
//! <prefix>/manifest/<seq, 20 digits>              immutable, created if absent (see `record`)
//! <prefix>/manifest/latest                        a hint: the newest seq known, may lag
//! <prefix>/partitions/<start_ms>/<file_id>.spf    immutable partition files
//! ```
//!
//! No query path lists the bucket: the newest manifest is found from the hint by probing the
//! next numbers (see [`commit::latest`]). The two LISTs are a writer's search for leftovers at
//! start ([`Bucket::list_files`]) and a query node's search for prefixes ([`follow`]).

pub(crate) mod cache;
pub(crate) mod commit;
#[cfg(any(test, feature = "testing"))]
pub mod faulty;
pub(crate) mod follow;
pub(crate) mod mirror;
pub(crate) mod record;
#[cfg(test)]
mod tests;

use std::fmt;
use std::future::Future;
use std::path::Path as FsPath;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, WriteMultipart};

use crate::error::{Error, Result};
use crate::fsutil;
use crate::manifest::Manifest;
use record::Record;

/// Files up to this size go up in one PUT; larger ones as a multipart upload of parts this big
/// (S3 wants parts of at least 5 MiB, and a part is held in memory while it is sent).
const PART_BYTES: usize = 16 << 20;

/// Where the bucket is and how to reach it: the server's `--storage.bucket*` flags.
#[derive(Debug, Clone, Default)]
pub struct BucketOptions {
    /// `s3://bucket/prefix`, `file:///absolute/dir` or `memory://prefix` (a fresh in-process
    /// store, or `store`).
    pub url: String,
    /// S3 endpoint for S3-compatible stores (`http://127.0.0.1:7480`); else `AWS_ENDPOINT` or
    /// AWS's own.
    pub endpoint: Option<String>,
    /// S3 region; else `AWS_REGION` / `AWS_DEFAULT_REGION`.
    pub region: Option<String>,
    /// Access key id; else `AWS_ACCESS_KEY_ID`.
    pub access_key_id: Option<String>,
    /// Secret access key; else `AWS_SECRET_ACCESS_KEY`.
    pub secret_access_key: Option<String>,
    /// How long an object no manifest lists any more stays in the bucket before it is deleted:
    /// longer than any reader keeps an older manifest.
    pub delete_delay: Duration,
    /// Most bytes of partition files kept on the local disk (0: no limit): beyond it the least
    /// recently read files the bucket holds are dropped locally and read from the bucket again
    /// when needed.
    pub cache_bytes_max: u64,
    /// The store to use instead of the one `url` names (the prefix still comes from `url`):
    /// tests share one in-memory store between databases, or wrap one to inject faults.
    pub store: Option<Arc<dyn ObjectStore>>,
}

/// An object store and the prefix strata owns in it, with a small runtime to run the store's
/// async calls from storage's threads.
pub struct Bucket {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    /// How the bucket was named, for messages.
    url: String,
    delete_delay: Duration,
    /// Shared with the buckets of [`Bucket::sub`]; `None` only while dropping (see `Drop`).
    runtime: Option<Arc<tokio::runtime::Runtime>>,
}

impl fmt::Debug for Bucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bucket").field("url", &self.url).finish_non_exhaustive()
    }
}

impl Drop for Bucket {
    fn drop(&mut self) {
        // A runtime dropped inside another runtime's context panics; this one may be dropped
        // from a server task, so it is shut down without waiting for its threads.
        if let Some(rt) = self.runtime.take().and_then(Arc::into_inner) {
            rt.shutdown_background();
        }
    }
}

impl Bucket {
    /// Connects to the bucket `opts.url` names (no request is made yet).
    pub fn open(opts: &BucketOptions) -> Result<Bucket> {
        let invalid = |why: String| Error::InvalidInput(format!("bucket {}: {why}", opts.url));
        let (store, prefix): (Arc<dyn ObjectStore>, &str) = if let Some(rest) = opts.url.strip_prefix("s3://")
        {
            let (name, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if name.is_empty() {
                return Err(invalid("no bucket name".into()));
            }
            match &opts.store {
                Some(s) => (Arc::clone(s), prefix),
                None => (Arc::new(s3(opts, name).map_err(|e| invalid(e.to_string()))?), prefix),
            }
        } else if let Some(dir) = opts.url.strip_prefix("file://") {
            if !dir.starts_with('/') {
                return Err(invalid("a file:// bucket needs an absolute path (file:///dir)".into()));
            }
            match &opts.store {
                Some(s) => (Arc::clone(s), ""),
                None => {
                    fsutil::create_dir_durable(FsPath::new(dir))?;
                    let fs = object_store::local::LocalFileSystem::new_with_prefix(dir)
                        .map_err(|e| invalid(e.to_string()))?;
                    (Arc::new(fs), "")
                }
            }
        } else if let Some(prefix) = opts.url.strip_prefix("memory://") {
            let store = opts.store.clone().unwrap_or_else(|| Arc::new(object_store::memory::InMemory::new()));
            (store, prefix)
        } else {
            return Err(invalid("expected s3://bucket/prefix, file:///dir or memory://".into()));
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("strata-bucket")
            .enable_all()
            .build()
            .map_err(|e| Error::io("starting the object store's runtime", e))?;
        Ok(Bucket {
            store,
            prefix: Path::from(prefix.trim_matches('/')),
            url: opts.url.clone(),
            delete_delay: opts.delete_delay,
            runtime: Some(Arc::new(runtime)),
        })
    }

    /// The bucket of prefix `<prefix>/<name>` in the same store, sharing this one's runtime.
    pub(crate) fn sub(&self, name: &str) -> Bucket {
        Bucket {
            store: Arc::clone(&self.store),
            prefix: self.key(name),
            url: format!("{}/{name}", self.url.trim_end_matches('/')),
            delete_delay: self.delete_delay,
            runtime: self.runtime.clone(),
        }
    }

    /// The names one level below the prefix that hold anything (a LIST with a delimiter):
    /// a query node's search for writers' prefixes, in the background, never on a query path.
    pub(crate) fn list_dirs(&self) -> Result<Vec<String>> {
        let (store, dir) = (Arc::clone(&self.store), self.prefix.clone());
        let listed = self.run(async move {
            let at = (!dir.as_ref().is_empty()).then_some(&dir);
            store.list_with_delimiter(at).await
        })?;
        let listed = listed.map_err(|e| store_error("LIST", &self.prefix, e))?;
        Ok(listed.common_prefixes.iter().filter_map(|p| p.filename().map(str::to_string)).collect())
    }

    /// The URL the bucket was opened with.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub(crate) fn delete_delay(&self) -> Duration {
        self.delete_delay
    }

    /// Runs `fut` on the bucket's runtime and waits for it. Callable from any thread, also
    /// one of another runtime's (the future is spawned, not blocked on in place).
    fn run<T: Send + 'static>(&self, fut: impl Future<Output = T> + Send + 'static) -> Result<T> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let rt = self.runtime.as_ref().ok_or(Error::Closed)?;
        rt.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv().map_err(|_| Error::Closed)
    }

    fn key(&self, rest: &str) -> Path {
        rest.split('/').fold(self.prefix.clone(), |p, part| p.join(part))
    }

    /// The manifest object of sequence number `seq`.
    pub(crate) fn manifest_key(&self, seq: u64) -> Path {
        self.key(&format!("manifest/{seq:020}"))
    }

    /// The hint naming the newest manifest.
    pub(crate) fn hint_key(&self) -> Path {
        self.key("manifest/latest")
    }

    /// A partition file's object.
    pub(crate) fn file_key(&self, partition: i64, id: u64) -> Path {
        self.key(&format!("partitions/{partition}/{id:08}.spf"))
    }

    /// The whole object, or None if there is none.
    pub(crate) fn get(&self, key: &Path) -> Result<Option<Bytes>> {
        let (store, k) = (Arc::clone(&self.store), key.clone());
        let got = self.run(async move {
            match store.get(&k).await {
                Ok(r) => r.bytes().await.map(Some),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })?;
        got.map_err(|e| store_error("GET", key, e))
    }

    /// The bytes of `ranges` of the object, one `Bytes` per range (ranges close together are
    /// fetched by one request).
    pub(crate) fn get_ranges(&self, key: &Path, ranges: &[std::ops::Range<u64>]) -> Result<Vec<Bytes>> {
        let (store, k, r) = (Arc::clone(&self.store), key.clone(), ranges.to_vec());
        let got = self.run(async move { store.get_ranges(&k, &r).await })?;
        got.map_err(|e| store_error("GET (ranges)", key, e))
    }

    /// When the object was last written (unix ms), or None if there is none.
    pub(crate) fn modified_ms(&self, key: &Path) -> Result<Option<i64>> {
        let (store, k) = (Arc::clone(&self.store), key.clone());
        let got = self.run(async move {
            match store.head(&k).await {
                Ok(meta) => Ok(Some(meta.last_modified.timestamp_millis())),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })?;
        got.map_err(|e| store_error("HEAD", key, e))
    }

    /// Whether the object exists (a HEAD request).
    pub(crate) fn exists(&self, key: &Path) -> Result<bool> {
        self.modified_ms(key).map(|m| m.is_some())
    }

    /// Every partition file under the prefix: (partition, file id, last modified unix ms).
    /// A LIST: only for the writer's leftover scan at start, never on a query path.
    pub(crate) fn list_files(&self) -> Result<Vec<(i64, u64, i64)>> {
        use futures::TryStreamExt;
        let (store, dir) = (Arc::clone(&self.store), self.key("partitions"));
        let listed = self.run(async move { store.list(Some(&dir)).try_collect::<Vec<_>>().await })?;
        let listed = listed.map_err(|e| store_error("LIST", &self.key("partitions"), e))?;
        Ok(listed
            .into_iter()
            .filter_map(|meta| {
                let parts: Vec<_> = meta.location.parts().collect();
                let [.., dir, name] = parts.as_slice() else { return None };
                let partition = crate::filenames::parse_partition_dir(dir.as_ref())?;
                let id = crate::filenames::parse_partition_file(name.as_ref())?;
                Some((partition, id, meta.last_modified.timestamp_millis()))
            })
            .collect())
    }

    /// Writes the object, replacing any.
    pub(crate) fn put(&self, key: &Path, bytes: Bytes) -> Result<()> {
        let (store, k) = (Arc::clone(&self.store), key.clone());
        let got = self.run(async move { store.put(&k, PutPayload::from(bytes)).await })?;
        got.map(|_| ()).map_err(|e| store_error("PUT", key, e))
    }

    /// Creates the object if no object has its key: Ok(false) if one has (whoever wrote it,
    /// possibly this very put, applied before its answer was lost and then retried).
    pub(crate) fn create(&self, key: &Path, bytes: Bytes) -> Result<bool> {
        let (store, k) = (Arc::clone(&self.store), key.clone());
        let got = self.run(async move {
            let opts = PutOptions { mode: PutMode::Create, ..PutOptions::default() };
            match store.put_opts(&k, PutPayload::from(bytes), opts).await {
                Ok(_) => Ok(true),
                Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {
                    Ok(false)
                }
                Err(e) => Err(e),
            }
        })?;
        got.map_err(|e| store_error("PUT (create)", key, e))
    }

    /// Deletes the object; an absent one is not an error.
    pub(crate) fn delete(&self, key: &Path) -> Result<()> {
        let (store, k) = (Arc::clone(&self.store), key.clone());
        let got = self.run(async move {
            match store.delete(&k).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(e),
            }
        })?;
        got.map_err(|e| store_error("DELETE", key, e))
    }

    /// Uploads the local file at `path` as `key`: one PUT, or a multipart upload for a large
    /// file. The object appears whole or not at all. `Ok(false)` if the local file is gone (a
    /// later compaction or retention removed it).
    pub(crate) fn upload(&self, path: &FsPath, key: &Path) -> Result<bool> {
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(Error::io(format!("opening {} to upload it", path.display()), e)),
        };
        let len = file.metadata().map_err(|e| Error::io(format!("reading {}", path.display()), e))?.len();
        let (store, k, p) = (Arc::clone(&self.store), key.clone(), path.to_path_buf());
        let got = self.run(async move { upload_file(store, k, file, len, &p).await })?;
        got.map(|()| true)
    }
}

/// Opens the prefix for this writer ([`commit::claim`]) and, on a data directory without a
/// manifest, makes the prefix's newest manifest the local one (replaying from the first WAL
/// segment: an empty directory has none); its files are then read from the bucket. Returns the
/// record that took the epoch.
pub(crate) fn open_prefix(bucket: &Bucket, dir: &FsPath, local: Option<&Manifest>) -> Result<Record> {
    let claim = commit::claim(bucket, dir, local, commit::writer_nonce())?;
    if claim.restore {
        // Files are read from the bucket as queries need them (`cache`), not downloaded here.
        let mut m = claim.record.manifest.clone();
        m.wal_first_segment = 0;
        m.store(&crate::filenames::manifest(dir))?;
        tracing::info!(
            bucket = bucket.url(),
            files = m.files.len(),
            bytes = m.files.iter().map(|f| f.size).sum::<u64>(),
            "restored the data directory from the bucket; files are read from it as queries need them"
        );
    }
    tracing::info!(
        bucket = bucket.url(),
        epoch = claim.record.epoch,
        seq = claim.record.seq,
        "opened the bucket prefix"
    );
    Ok(claim.record)
}

/// The first file id of writer epoch `epoch`: each epoch has 2^40 ids of its own.
pub(crate) fn first_file_id(epoch: u64) -> u64 {
    epoch << 40
}

/// The S3 client: the `AWS_*` environment, then the flags.
fn s3(opts: &BucketOptions, bucket: &str) -> object_store::Result<object_store::aws::AmazonS3> {
    let mut b = object_store::aws::AmazonS3Builder::from_env().with_bucket_name(bucket);
    if let Some(e) = &opts.endpoint {
        b = b.with_endpoint(e).with_allow_http(e.starts_with("http://"));
    }
    if let Some(r) = &opts.region {
        b = b.with_region(r);
    }
    if let Some(k) = &opts.access_key_id {
        b = b.with_access_key_id(k);
    }
    if let Some(k) = &opts.secret_access_key {
        b = b.with_secret_access_key(k);
    }
    b.build()
}

fn store_error(op: &'static str, key: &Path, source: object_store::Error) -> Error {
    Error::ObjectStore { op, key: key.to_string(), source: Box::new(source) }
}

async fn upload_file(
    store: Arc<dyn ObjectStore>,
    key: Path,
    mut file: std::fs::File,
    len: u64,
    path: &FsPath,
) -> Result<()> {
    use std::io::Read;
    let read_err = |e| Error::io(format!("reading {} to upload it", path.display()), e);
    if len <= PART_BYTES as u64 {
        let mut buf = Vec::with_capacity(len as usize);
        file.read_to_end(&mut buf).map_err(read_err)?;
        return store
            .put(&key, PutPayload::from(buf))
            .await
            .map(|_| ())
            .map_err(|e| store_error("PUT", &key, e));
    }
    let upload =
        store.put_multipart(&key).await.map_err(|e| store_error("PUT (multipart start)", &key, e))?;
    let mut w = WriteMultipart::new_with_chunk_size(upload, PART_BYTES);
    let mut buf = vec![0u8; PART_BYTES];
    loop {
        let n = match file.read(&mut buf) {
            Ok(n) => n,
            Err(e) => {
                let _ = w.abort().await;
                return Err(read_err(e));
            }
        };
        if n == 0 {
            break;
        }
        // At most two parts in flight: memory stays at a few parts whatever the file's size.
        if let Err(e) = w.wait_for_capacity(2).await {
            return Err(store_error("PUT (multipart part)", &key, e));
        }
        w.write(&buf[..n]);
    }
    w.finish().await.map(|_| ()).map_err(|e| store_error("PUT (multipart complete)", &key, e))
}

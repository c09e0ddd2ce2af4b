//! An object store that fails when told to, and counts requests: for tests of the bucket
//! protocol against what S3 does to its clients. Injected faults:
//!
//! - **unavailable**: the request fails before it reaches the store (a 503 or a refused
//!   connection);
//! - **answer lost**: a put or delete is applied, then the caller gets an error (a timeout
//!   after the store applied it);
//! - **cut body**: a GET's body ends early with an error;
//! - **slow**: every request waits first.
//!
//! Faults come either from counters (`fail_next`, `lose_next_answers`) or at random with a
//! seeded generator (`random_faults`), so a failing run repeats with its seed.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use parking_lot::Mutex;

/// Requests by kind.
#[derive(Debug, Default)]
pub struct RequestCounts {
    /// GET requests (ranged or whole).
    pub get: AtomicU64,
    /// HEAD requests.
    pub head: AtomicU64,
    /// PUT requests (whole objects, conditional or not) and multipart uploads started.
    pub put: AtomicU64,
    /// DELETE requests.
    pub delete: AtomicU64,
    /// LIST requests.
    pub list: AtomicU64,
    /// Bytes returned by ranged reads (`get_ranges`).
    pub range_bytes: AtomicU64,
    /// Faults injected.
    pub faults: AtomicU64,
}

/// See the module docs.
pub struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
    fail_next: AtomicU32,
    lose_next: AtomicU32,
    /// (probability of "unavailable", of "answer lost", of "cut body") in parts per million,
    /// and the generator's state.
    random: Mutex<Option<(u32, u32, u32, u64)>>,
    delay: Mutex<Duration>,
    counts: RequestCounts,
}

impl fmt::Debug for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FaultyStore")
    }
}

impl fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultyStore({})", self.inner)
    }
}

enum Fault {
    None,
    Unavailable,
    AnswerLost,
    CutBody,
}

fn injected(what: &str) -> object_store::Error {
    object_store::Error::Generic { store: "FaultyStore", source: format!("injected fault: {what}").into() }
}

impl FaultyStore {
    /// Wraps `inner`, faultless until told otherwise.
    pub fn new(inner: Arc<dyn ObjectStore>) -> FaultyStore {
        FaultyStore {
            inner,
            fail_next: AtomicU32::new(0),
            lose_next: AtomicU32::new(0),
            random: Mutex::new(None),
            delay: Mutex::new(Duration::ZERO),
            counts: RequestCounts::default(),
        }
    }

    /// The next `n` requests fail before reaching the store.
    pub fn fail_next(&self, n: u32) {
        self.fail_next.store(n, Ordering::SeqCst);
    }

    /// The next `n` puts or deletes are applied, then answered with an error.
    pub fn lose_next_answers(&self, n: u32) {
        self.lose_next.store(n, Ordering::SeqCst);
    }

    /// From now on each request meets a fault at random, with these probabilities (0 to 1)
    /// from a generator seeded with `seed`; `None` turns random faults off.
    pub fn random_faults(&self, probabilities: Option<(f64, f64, f64)>, seed: u64) {
        let ppm = |p: f64| (p.clamp(0.0, 1.0) * 1e6) as u32;
        *self.random.lock() = probabilities.map(|(u, l, c)| (ppm(u), ppm(l), ppm(c), seed | 1));
    }

    /// Every request waits this long first.
    pub fn set_delay(&self, d: Duration) {
        *self.delay.lock() = d;
    }

    /// Requests made so far.
    pub fn counts(&self) -> &RequestCounts {
        &self.counts
    }

    /// Which fault the next request meets (`mutating`: a put or delete, which can lose its
    /// answer; `reading`: a GET, whose body can be cut).
    fn fault(&self, mutating: bool, reading: bool) -> Fault {
        let take =
            |c: &AtomicU32| c.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
        let f = if take(&self.fail_next) {
            Fault::Unavailable
        } else if mutating && take(&self.lose_next) {
            Fault::AnswerLost
        } else if let Some((u, l, c, state)) = self.random.lock().as_mut() {
            // xorshift64*
            *state ^= *state >> 12;
            *state ^= *state << 25;
            *state ^= *state >> 27;
            let r = (state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32 % 1_000_000;
            if r < *u {
                Fault::Unavailable
            } else if mutating && r < *u + *l {
                Fault::AnswerLost
            } else if reading && r < *u + *l + *c {
                Fault::CutBody
            } else {
                Fault::None
            }
        } else {
            Fault::None
        };
        if !matches!(f, Fault::None) {
            self.counts.faults.fetch_add(1, Ordering::Relaxed);
        }
        f
    }

    async fn pause(&self) {
        let d = *self.delay.lock();
        if !d.is_zero() {
            tokio::time::sleep(d).await;
        }
    }
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        self.pause().await;
        self.counts.put.fetch_add(1, Ordering::Relaxed);
        match self.fault(true, false) {
            Fault::Unavailable => Err(injected("unavailable")),
            Fault::AnswerLost => {
                let _ = self.inner.put_opts(location, payload, opts).await;
                Err(injected("timeout after the put was applied"))
            }
            _ => self.inner.put_opts(location, payload, opts).await,
        }
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.pause().await;
        self.counts.put.fetch_add(1, Ordering::Relaxed);
        match self.fault(false, false) {
            Fault::Unavailable => Err(injected("unavailable")),
            _ => self.inner.put_multipart_opts(location, opts).await,
        }
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.pause().await;
        let counter = if options.head { &self.counts.head } else { &self.counts.get };
        counter.fetch_add(1, Ordering::Relaxed);
        match self.fault(false, !options.head) {
            Fault::Unavailable => Err(injected("unavailable")),
            Fault::CutBody => {
                let mut r = self.inner.get_opts(location, options).await?;
                let body = match r.payload {
                    GetResultPayload::Stream(s) => s,
                    #[allow(unreachable_patterns)]
                    other => {
                        r.payload = other;
                        return Ok(r);
                    }
                };
                // The first chunk, cut to half, then an error.
                let cut = body
                    .take(1)
                    .map(|c| c.map(|b: Bytes| b.slice(..b.len() / 2)))
                    .chain(futures::stream::once(async { Err(injected("body cut short")) }));
                r.payload = GetResultPayload::Stream(cut.boxed());
                Ok(r)
            }
            _ => self.inner.get_opts(location, options).await,
        }
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        self.pause().await;
        self.counts.get.fetch_add(1, Ordering::Relaxed);
        match self.fault(false, true) {
            Fault::Unavailable | Fault::CutBody => Err(injected("unavailable")),
            _ => {
                let got = self.inner.get_ranges(location, ranges).await?;
                let n: usize = got.iter().map(Bytes::len).sum();
                self.counts.range_bytes.fetch_add(n as u64, Ordering::Relaxed);
                Ok(got)
            }
        }
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        self.counts.delete.fetch_add(1, Ordering::Relaxed);
        match self.fault(true, false) {
            Fault::Unavailable => futures::stream::once(async { Err(injected("unavailable")) }).boxed(),
            Fault::AnswerLost => {
                let inner = Arc::clone(&self.inner);
                futures::stream::once(async move {
                    let mut s = inner.delete_stream(locations);
                    while s.next().await.is_some() {}
                    Err(injected("timeout after the delete was applied"))
                })
                .boxed()
            }
            _ => self.inner.delete_stream(locations),
        }
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.counts.list.fetch_add(1, Ordering::Relaxed);
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        self.counts.list.fetch_add(1, Ordering::Relaxed);
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.counts.list.fetch_add(1, Ordering::Relaxed);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

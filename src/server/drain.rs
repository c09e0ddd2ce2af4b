//! Reading what a refusal left of a request body, so the client gets the refusal.
//!
//! A request refused before its body is read (401/403 from auth, 413, 429/503 from admission,
//! an early 400) would otherwise end with the body unread. On HTTP/2, hyper then follows the
//! response with `RST_STREAM(NO_ERROR)`, which the protocol allows but which curl 7.x and other
//! nghttp2-based clients still uploading report as "Stream error in the HTTP/2 framing layer",
//! never showing the status; on HTTP/1.1 the connection is closed under a client that may not
//! have read the answer. So the body a handler drops unfinished is read to its end and thrown
//! away in the background, while the response goes out: the client finishes its upload and
//! reads the status and error body on either protocol. Reading is bounded in bytes and time so
//! an endless upload cannot hold a task; past either bound the stream is reset as before.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http_body::{Body as HttpBody, Frame, SizeHint};

/// How long a dropped body is read at most. Long enough for a client uploading a maximal write
/// (`--write-body-bytes-max`, 32 MiB by default) at a few MB/s.
const DRAIN_TIME_MAX: Duration = Duration::from_secs(60);

/// Wraps every request body in [`Draining`], which reads at most `max_bytes` in all (what the
/// handler read included) when it is dropped unfinished.
pub(super) async fn drain_unread_body(
    State(max_bytes): State<u64>,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    // A body that is already complete (GET, an empty POST) needs no wrapper.
    if body.is_end_stream() {
        return next.run(Request::from_parts(parts, body)).await;
    }
    let body = Body::new(Draining { inner: Some(body), read: 0, max_bytes });
    next.run(Request::from_parts(parts, body)).await
}

/// A request body that, dropped before its end, hands the rest to a task that discards it.
struct Draining {
    /// `None` once the body has ended (or failed): nothing is left to read.
    inner: Option<Body>,
    /// Data bytes the handler read.
    read: u64,
    /// Bytes read in all, by the handler and the drain, beyond which the rest is not read.
    max_bytes: u64,
}

impl HttpBody for Draining {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        let Some(inner) = this.inner.as_mut() else { return Poll::Ready(None) };
        let polled = Pin::new(inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.read += data.len() as u64;
                }
            }
            Poll::Ready(None | Some(Err(_))) => this.inner = None,
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(HttpBody::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.as_ref().map_or_else(|| SizeHint::with_exact(0), HttpBody::size_hint)
    }
}

impl Drop for Draining {
    fn drop(&mut self) {
        let Some(mut body) = self.inner.take() else { return };
        if body.is_end_stream() {
            return;
        }
        let budget = self.max_bytes.saturating_sub(self.read);
        // A declared length past the budget would be cut off anyway: reset now.
        if body.size_hint().lower() > budget {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        runtime.spawn(async move {
            let discard = async {
                let mut left = budget;
                while let Some(Ok(frame)) =
                    std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
                {
                    if let Some(data) = frame.data_ref() {
                        let len = data.len() as u64;
                        if len > left {
                            return;
                        }
                        left -= len;
                    }
                }
            };
            // Past the time bound the body is dropped, which resets the stream.
            let _ = tokio::time::timeout(DRAIN_TIME_MAX, discard).await;
        });
    }
}

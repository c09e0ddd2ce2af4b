//! The built-in query UI at `/`: a PromQL console (instant and range queries, a chart, a
//! table, the query's stats, a history kept in the browser) and a cardinality page over
//! `/api/v1/status/tsdb`.
//!
//! Why it is built this way: strata is one binary that a newcomer starts and points a browser
//! at, so the page ships inside it, with no CDN (strata often runs where the internet is not
//! reachable) and no Node toolchain at build time (the build stays one `cargo build`). The
//! files in `src/ui/` are plain HTML, CSS and JavaScript, embedded with `include_bytes!`; the
//! chart library, uPlot (MIT), is vendored as one minified file in `src/ui/vendor/` with its
//! license, which is served too. The page talks to strata only through the public HTTP API, as
//! Grafana does, so it needs nothing from the server beyond these routes.
//!
//! The PromQL editor is the one Prometheus publishes, `@prometheus-io/codemirror-promql` on
//! CodeMirror 6: highlighting, syntax errors underlined by its client-side parser, completion
//! of functions and of the metric names, label names and values strata holds, which it asks
//! strata's API for (`/api/v1/label/__name__/values`, `/api/v1/labels`, `/api/v1/series`,
//! `/api/v1/label/<name>/values`, `/api/v1/metadata`, relative to the page). It is bundled
//! outside the cargo build into one minified ES module, `src/ui/vendor/promql-editor.min.js`,
//! with the license of every package in it in `promql-editor.LICENSE` (served too); the exact
//! versions are in `src/ui/editor/package-lock.json` and in the bundle's first line. To rebuild
//! it (Node 20+): `cd src/ui/editor && npm ci && npm run build`, then commit the lock file and
//! the two files in `src/ui/vendor/` (`node_modules/` stays out of git).
//!
//! Responses carry a weak ETag (a hash of the file, computed when the router is built) and
//! `Cache-Control: no-cache`: browsers revalidate and get a 304 until the binary changes, so an
//! upgrade never leaves a stale script behind. The page gets a Content-Security-Policy that
//! allows only this origin.

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tower_http::compression::CompressionLayer;

/// One embedded file and the path it is served at.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

impl Asset {
    const fn new(path: &'static str, content_type: &'static str, body: &'static [u8]) -> Asset {
        Asset { path, content_type, body }
    }

    /// The ETag: FNV-1a of the body. Computed when the router is built, not at compile time:
    /// const evaluation of the editor bundle's half megabyte is too slow for rustc.
    fn etag(&self) -> HeaderValue {
        HeaderValue::try_from(format!("W/\"{:016x}\"", fnv1a(self.body)))
            .expect("hex is a valid header value")
    }
}

/// Paths are relative in the HTML (`ui/app.js`), so the UI also works behind a reverse proxy
/// that serves strata under a prefix.
static ASSETS: [Asset; 8] = [
    Asset::new("/", "text/html; charset=utf-8", include_bytes!("ui/index.html")),
    Asset::new("/ui/app.js", "text/javascript; charset=utf-8", include_bytes!("ui/app.js")),
    Asset::new("/ui/app.css", "text/css; charset=utf-8", include_bytes!("ui/app.css")),
    Asset::new(
        "/ui/vendor/uPlot.iife.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("ui/vendor/uPlot.iife.min.js"),
    ),
    Asset::new(
        "/ui/vendor/uPlot.min.css",
        "text/css; charset=utf-8",
        include_bytes!("ui/vendor/uPlot.min.css"),
    ),
    Asset::new(
        "/ui/vendor/uPlot.LICENSE",
        "text/plain; charset=utf-8",
        include_bytes!("ui/vendor/uPlot.LICENSE"),
    ),
    Asset::new(
        "/ui/vendor/promql-editor.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("ui/vendor/promql-editor.min.js"),
    ),
    Asset::new(
        "/ui/vendor/promql-editor.LICENSE",
        "text/plain; charset=utf-8",
        include_bytes!("ui/vendor/promql-editor.LICENSE"),
    ),
];

/// The page may load scripts, styles and data only from strata itself. uPlot sizes its
/// elements through inline styles, hence `'unsafe-inline'` for styles (not for scripts).
/// CodeMirror adds its theme at run time through style-mod: a constructed style sheet where the
/// browser has them (current Chromium, Firefox, Safari), else a `<style>` element, which this
/// also allows (`EditorView.cspNonce` could allow just that element, but uPlot needs the rest).
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
     img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// The UI's routes, to be merged into the server's router. Responses are gzip-compressed when
/// the browser accepts it (uPlot is 51 KB, 22 KB gzipped).
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let router = ASSETS.iter().fold(Router::new(), |router, asset| {
        let etag = asset.etag();
        router.route(
            asset.path,
            get(move |headers: HeaderMap| {
                let etag = etag.clone();
                async move { serve(asset, etag, &headers) }
            }),
        )
    });
    router.layer(CompressionLayer::new().gzip(true))
}

/// Answers `asset`, or 304 when the browser's copy is current.
fn serve(asset: &'static Asset, etag: HeaderValue, request: &HeaderMap) -> Response {
    let fresh =
        request.get(header::IF_NONE_MATCH).and_then(|value| value.to_str().ok()).is_some_and(|tags| {
            tags.split(',').any(|tag| tag.trim().as_bytes() == etag.as_bytes() || tag.trim() == "*")
        });
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, asset.content_type)], asset.body).into_response()
    };
    let headers = response.headers_mut();
    headers.insert(header::ETAG, etag);
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    if asset.content_type.starts_with("text/html") {
        headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
        headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    }
    response
}

/// 64-bit FNV-1a for the ETags: cheap, and any change to a file changes its tag.
const fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    hash
}

#[cfg(test)]
mod tests;

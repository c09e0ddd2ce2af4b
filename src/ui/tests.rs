//! The UI's routes without sockets: every file the page references is served with its type,
//! conditional requests get 304, and the page carries its security headers.

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use tower::ServiceExt;

use super::{ASSETS, fnv1a, routes};

async fn call(method: Method, path: &str, headers: &[(&str, &str)]) -> (StatusCode, HeaderMap, Vec<u8>) {
    let mut request = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let router: Router = routes();
    let response = router.oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), 1 << 22).await.unwrap();
    (status, headers, body.to_vec())
}

/// `src="..."` and `href="..."` values of the page that point into `ui/`.
fn referenced_assets(html: &str) -> Vec<String> {
    let mut found = Vec::new();
    for attribute in ["src=\"", "href=\""] {
        for part in html.split(attribute).skip(1) {
            let value = part.split('"').next().unwrap_or_default();
            if value.starts_with("ui/") {
                found.push(format!("/{value}"));
            }
        }
    }
    found
}

#[tokio::test]
async fn the_page_and_every_file_it_references_are_served() {
    let (status, headers, body) = call(Method::GET, "/", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "text/html; charset=utf-8");
    let html = String::from_utf8(body).unwrap();
    let assets = referenced_assets(&html);
    for wanted in [
        "/ui/app.js",
        "/ui/app.css",
        "/ui/vendor/uPlot.iife.min.js",
        "/ui/vendor/uPlot.min.css",
        "/ui/vendor/promql-editor.min.js",
        "/ui/vendor/promql-editor.LICENSE",
    ] {
        assert!(assets.iter().any(|a| a == wanted), "{wanted} not referenced by the page: {assets:?}");
    }
    for path in &assets {
        let (status, headers, body) = call(Method::GET, path, &[]).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        assert!(!body.is_empty(), "{path}");
        let expected = ASSETS.iter().find(|a| a.path == path).unwrap();
        assert_eq!(headers[header::CONTENT_TYPE], expected.content_type, "{path}");
        assert_eq!(body, expected.body, "{path}");
    }
}

#[tokio::test]
async fn the_vendored_chart_library_keeps_its_license() {
    let (status, _, body) = call(Method::GET, "/ui/vendor/uPlot.LICENSE", &[]).await;
    assert_eq!(status, StatusCode::OK);
    let license = String::from_utf8(body).unwrap();
    assert!(license.contains("The MIT License") && license.contains("Leon Sorokin"), "{license}");
    let (_, _, script) = call(Method::GET, "/ui/vendor/uPlot.iife.min.js", &[]).await;
    assert!(script.starts_with(b"/*! https://github.com/leeoniya/uPlot (v"), "the version header was lost");
}

#[tokio::test]
async fn the_page_edits_promql_in_the_vendored_editor_which_keeps_its_licenses() {
    // app.js is an ES module that imports the editor bundle (relative, so a prefix is kept).
    let (_, _, html) = call(Method::GET, "/", &[]).await;
    let html = String::from_utf8(html).unwrap();
    assert!(html.contains(r#"<script type="module" src="ui/app.js">"#), "{html}");
    let (_, _, app) = call(Method::GET, "/ui/app.js", &[]).await;
    let app = String::from_utf8(app).unwrap();
    assert!(app.contains("import { createEditor } from './vendor/promql-editor.min.js';"));
    let (status, headers, script) = call(Method::GET, "/ui/vendor/promql-editor.min.js", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_TYPE], "text/javascript; charset=utf-8");
    let script = String::from_utf8(script).unwrap();
    assert!(
        script.starts_with("/*! strata's PromQL editor, bundled by src/ui/editor"),
        "the header was lost"
    );
    let header_line = script.lines().next().unwrap();
    assert!(header_line.contains("@prometheus-io/codemirror-promql@0."), "{header_line}");
    assert!(
        script.contains("export{") && script.contains("createEditor"),
        "not an ES module exporting createEditor"
    );
    // Every package in the bundle has its license beside it.
    let (status, _, license) = call(Method::GET, "/ui/vendor/promql-editor.LICENSE", &[]).await;
    assert_eq!(status, StatusCode::OK);
    let license = String::from_utf8(license).unwrap();
    for package in header_line.split(": ").nth(1).unwrap().split(", ") {
        let name = package.rsplit_once('@').unwrap().0;
        assert!(license.contains(&format!("\n{name} ")), "no license for {name}");
    }
    assert!(license.contains("Apache License") && license.contains("Version 2.0"), "Apache-2.0 text missing");
    assert!(
        license.contains("MIT License") && license.contains("Marijn Haverbeke"),
        "CodeMirror's license missing"
    );
}

#[tokio::test]
async fn a_current_copy_gets_304_and_a_changed_one_the_file() {
    let (_, headers, _) = call(Method::GET, "/ui/app.js", &[]).await;
    let etag = headers[header::ETAG].to_str().unwrap().to_owned();
    assert!(etag.starts_with("W/\""), "{etag}");
    assert_eq!(headers[header::CACHE_CONTROL], "no-cache");
    let (status, headers, body) = call(Method::GET, "/ui/app.js", &[("if-none-match", &etag)]).await;
    assert_eq!(status, StatusCode::NOT_MODIFIED);
    assert!(body.is_empty());
    assert_eq!(headers[header::ETAG], etag.as_str());
    let (status, _, body) =
        call(Method::GET, "/ui/app.js", &[("if-none-match", "W/\"0000000000000000\"")]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(!body.is_empty());
    // Every file has its own tag.
    let mut tags: Vec<u64> = ASSETS.iter().map(|a| fnv1a(a.body)).collect();
    tags.sort_unstable();
    tags.dedup();
    assert_eq!(tags.len(), ASSETS.len());
}

#[tokio::test]
async fn the_page_allows_only_its_own_origin() {
    let (_, headers, _) = call(Method::GET, "/", &[]).await;
    let policy = headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
    assert!(policy.contains("default-src 'self'") && policy.contains("script-src 'self';"), "{policy}");
    assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    // No CDN: every script and stylesheet is relative to strata.
    let (_, _, body) = call(Method::GET, "/", &[]).await;
    let html = String::from_utf8(body).unwrap();
    assert!(!html.contains("http://") && !html.contains("https://") && !html.contains("//cdn"), "{html}");
}

#[tokio::test]
async fn head_and_gzip_are_answered() {
    let (status, headers, body) = call(Method::HEAD, "/", &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.is_empty());
    assert_eq!(headers[header::CONTENT_TYPE], "text/html; charset=utf-8");
    let (status, headers, body) =
        call(Method::GET, "/ui/vendor/uPlot.iife.min.js", &[("accept-encoding", "gzip")]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CONTENT_ENCODING], "gzip");
    assert!(body.len() < 30_000, "{} bytes gzipped", body.len());
    // The editor is the page's heaviest file: CodeMirror's view alone is a third of it.
    let (_, headers, body) =
        call(Method::GET, "/ui/vendor/promql-editor.min.js", &[("accept-encoding", "gzip")]).await;
    assert_eq!(headers[header::CONTENT_ENCODING], "gzip");
    assert!(body.len() < 170_000, "{} bytes gzipped", body.len());
}

#[tokio::test]
async fn unknown_ui_paths_are_not_found() {
    let (status, _, _) = call(Method::GET, "/ui/nope.js", &[]).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

//! Optional authentication: HTTP basic auth and bearer tokens, with separate credentials for
//! reading and writing.
//!
//! Every path belongs to one [`Access`] class. Health probes are always open (load balancers
//! and orchestrators call them without credentials). Reads are the query and metadata API,
//! remote read, the UI, `/metrics` (it names series counts and request rates) and unknown paths.
//! Writes are remote write, the Influx endpoints including `/query` (its only statements,
//! `CREATE DATABASE` and `SHOW DATABASES`, are sent by writers such as Telegraf and TSBS before
//! they write) and the admin endpoints (they delete data). Write credentials also grant reads.
//!
//! A class with no credentials configured is open; with only write credentials set, reads
//! stay open. A request with missing or wrong credentials gets 401 with `WWW-Authenticate`; one
//! with read credentials on a write path gets 403. Answers speak the endpoint's dialect:
//! Prometheus' error envelope on the query API, InfluxDB's `{"error":...}` on the Influx
//! endpoints, plain text elsewhere (remote write, as Prometheus' own receiver does).

mod credentials;

use std::path::PathBuf;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

pub use credentials::{Credentials, Presented, Secret};

/// Where the credentials of one scope come from (the `--auth.<scope>.*` flags). Only file
/// paths: the secrets themselves are read by [`Authenticator::load`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScopeSettings {
    /// The basic-auth user name (not a secret).
    pub basic_user: Option<String>,
    /// File holding the basic-auth password.
    pub basic_password_file: Option<PathBuf>,
    /// File holding the bearer token.
    pub bearer_token_file: Option<PathBuf>,
}

/// Read and write credential settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthSettings {
    /// Credentials for the read class.
    pub read: ScopeSettings,
    /// Credentials for the write class (they also grant reads).
    pub write: ScopeSettings,
}

/// What a path requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Nobody needs credentials: health probes and Influx' `/ping`.
    Open,
    /// Read or write credentials.
    Read,
    /// Write credentials.
    Write,
}

impl Access {
    /// The class of `path`. Anything not listed (new API routes, the UI, unknown paths) is a
    /// read, so a route added later is never left open by accident.
    pub fn of(path: &str) -> Access {
        match path {
            "/-/healthy" | "/-/ready" | "/ping" => Access::Open,
            "/api/v1/write" | "/write" | "/api/v2/write" | "/query" => Access::Write,
            _ if path.starts_with("/api/v1/admin/") => Access::Write,
            _ => Access::Read,
        }
    }
}

/// The outcome of checking a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Let the request through.
    Allowed,
    /// Missing or wrong credentials: 401.
    Unauthenticated,
    /// Read credentials on a write path: 403.
    Forbidden,
}

/// The configured credentials, checked against every request by [`enforce`].
#[derive(Debug, Clone, Default)]
pub struct Authenticator {
    read: Credentials,
    write: Credentials,
}

impl Authenticator {
    /// An authenticator with these credentials.
    pub fn new(read: Credentials, write: Credentials) -> Authenticator {
        Authenticator { read, write }
    }

    /// Reads the secret files named in `settings`. `Ok(None)` when no credentials are
    /// configured at all, so the server adds no layer. The error names the file and the flag.
    pub fn load(settings: &AuthSettings) -> Result<Option<Authenticator>, String> {
        let auth = Authenticator {
            read: load_scope(&settings.read, "read")?,
            write: load_scope(&settings.write, "write")?,
        };
        Ok((!auth.read.is_empty() || !auth.write.is_empty()).then_some(auth))
    }

    /// Whether reads are open (no read credentials configured; write credentials alone
    /// protect only writes).
    pub fn reads_open(&self) -> bool {
        self.read.is_empty()
    }

    /// Whether writes are open (no write credentials configured).
    pub fn writes_open(&self) -> bool {
        self.write.is_empty()
    }

    /// Decides on a request to a path of class `access` that presents `presented`.
    pub fn verdict(&self, access: Access, presented: &Presented) -> Verdict {
        match access {
            Access::Open => Verdict::Allowed,
            Access::Read if self.reads_open() => Verdict::Allowed,
            Access::Read if self.read.accept(presented) || self.write.accept(presented) => Verdict::Allowed,
            Access::Write if self.writes_open() || self.write.accept(presented) => Verdict::Allowed,
            Access::Write if self.read.accept(presented) => Verdict::Forbidden,
            Access::Read | Access::Write => Verdict::Unauthenticated,
        }
    }

    /// The `WWW-Authenticate` challenges for a 401: one per configured kind of credential.
    fn challenges(&self) -> Vec<&'static str> {
        let scopes = [&self.read, &self.write];
        let mut out = Vec::new();
        if scopes.iter().any(|s| s.basic.is_some()) {
            out.push("Basic realm=\"strata\", charset=\"UTF-8\"");
        }
        if scopes.iter().any(|s| s.token.is_some()) {
            out.push("Bearer realm=\"strata\"");
        }
        out
    }
}

fn load_scope(settings: &ScopeSettings, scope: &str) -> Result<Credentials, String> {
    let basic = match (&settings.basic_user, &settings.basic_password_file) {
        (Some(user), Some(file)) => {
            if user.is_empty() {
                return Err(format!("--auth.{scope}.basic-user is empty"));
            }
            let password =
                Secret::from_file(file).map_err(|e| format!("--auth.{scope}.basic-password-file: {e}"))?;
            Some((Secret::new(user.as_bytes()), password))
        }
        (None, None) => None,
        // clap's `requires` already refuses this; kept for callers that build settings directly.
        _ => {
            return Err(format!(
                "--auth.{scope}.basic-user and --auth.{scope}.basic-password-file go together"
            ));
        }
    };
    let token = match &settings.bearer_token_file {
        Some(file) => {
            Some(Secret::from_file(file).map_err(|e| format!("--auth.{scope}.bearer-token-file: {e}"))?)
        }
        None => None,
    };
    Ok(Credentials { basic, token })
}

/// The middleware: lets a request through or answers 401/403 in the endpoint's dialect.
pub async fn enforce(State(auth): State<Arc<Authenticator>>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let access = Access::of(path);
    if access == Access::Open {
        return next.run(request).await;
    }
    let presented = presented(&request);
    match auth.verdict(access, &presented) {
        Verdict::Allowed => next.run(request).await,
        Verdict::Unauthenticated => {
            tracing::debug!(path, credentials = ?presented, "request refused: not authenticated");
            let message = match (access, presented) {
                (_, Presented::Malformed) => {
                    "unreadable Authorization header; send basic auth or a bearer token"
                }
                (_, Presented::Nothing) => "authentication required",
                _ => "wrong credentials",
            };
            let mut response = refusal(StatusCode::UNAUTHORIZED, path, message);
            for challenge in auth.challenges() {
                response.headers_mut().append(WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
            }
            response
        }
        Verdict::Forbidden => {
            tracing::debug!(path, "request refused: read credentials on a write endpoint");
            refusal(StatusCode::FORBIDDEN, path, "these credentials may read but not write")
        }
    }
}

/// The credentials `request` presents: the `Authorization` header, or on the Influx endpoints
/// the `u`/`p` query parameters InfluxDB 1.x clients may send instead.
fn presented(request: &Request) -> Presented {
    if let Some(value) = request.headers().get(AUTHORIZATION) {
        return Presented::from_authorization(value.as_bytes());
    }
    if is_influx(request.uri().path())
        && let Some(found) = request.uri().query().and_then(Presented::from_influx_query)
    {
        return found;
    }
    Presented::Nothing
}

fn is_influx(path: &str) -> bool {
    matches!(path, "/write" | "/api/v2/write" | "/query")
}

/// InfluxDB 1.x repeats the error message of a failed request in this header.
const INFLUX_ERROR_HEADER: HeaderName = HeaderName::from_static("x-influxdb-error");

/// A 401/403 answer in the dialect of the endpoint at `path`.
fn refusal(status: StatusCode, path: &str, message: &str) -> Response {
    let error_type = if status == StatusCode::FORBIDDEN { "forbidden" } else { "unauthorized" };
    if is_influx(path) {
        let body = serde_json::json!({ "error": message }).to_string();
        let mut response = (status, [(CONTENT_TYPE, "application/json")], body).into_response();
        if let Ok(value) = HeaderValue::from_str(message) {
            response.headers_mut().insert(INFLUX_ERROR_HEADER, value);
        }
        response
    } else if path.starts_with("/api/") && path != "/api/v1/write" && path != "/api/v1/read" {
        let body =
            serde_json::json!({ "status": "error", "errorType": error_type, "error": message }).to_string();
        (status, [(CONTENT_TYPE, "application/json")], body).into_response()
    } else {
        (status, [(CONTENT_TYPE, "text/plain; charset=utf-8")], format!("{message}\n")).into_response()
    }
}

#[cfg(test)]
mod tests;

//! The credential checker, and the middleware through the real router (no sockets).

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use tower::ServiceExt;

use super::*;
use crate::server::secured_router;
use crate::state::AppState;

fn basic(user: &str, password: &str) -> Presented {
    Presented::Basic { user: user.into(), password: password.into() }
}

fn token(t: &str) -> Presented {
    Presented::Token(t.into())
}

fn credentials(user: &str, password: &str, token: &str) -> Credentials {
    Credentials {
        basic: Some((Secret::new(user.as_bytes()), Secret::new(password.as_bytes()))),
        token: Some(Secret::new(token.as_bytes())),
    }
}

fn both() -> Authenticator {
    Authenticator::new(credentials("grafana", "rpass", "rtoken"), credentials("prom", "wpass", "wtoken"))
}

#[test]
fn paths_are_classified() {
    for open in ["/-/healthy", "/-/ready", "/ping"] {
        assert_eq!(Access::of(open), Access::Open, "{open}");
    }
    for write in ["/api/v1/write", "/write", "/api/v2/write", "/query", "/api/v1/admin/tsdb/snapshot"] {
        assert_eq!(Access::of(write), Access::Write, "{write}");
    }
    for read in ["/api/v1/query", "/api/v1/read", "/metrics", "/", "/graph", "/api/v1/status/flags", "/nope"]
    {
        assert_eq!(Access::of(read), Access::Read, "{read}");
    }
}

#[test]
fn read_and_write_credentials_have_their_scopes() {
    let auth = both();
    let cases = [
        (Access::Read, basic("grafana", "rpass"), Verdict::Allowed),
        (Access::Read, token("rtoken"), Verdict::Allowed),
        (Access::Read, basic("prom", "wpass"), Verdict::Allowed),
        (Access::Read, token("wtoken"), Verdict::Allowed),
        (Access::Write, basic("prom", "wpass"), Verdict::Allowed),
        (Access::Write, token("wtoken"), Verdict::Allowed),
        (Access::Write, basic("grafana", "rpass"), Verdict::Forbidden),
        (Access::Write, token("rtoken"), Verdict::Forbidden),
        (Access::Read, Presented::Nothing, Verdict::Unauthenticated),
        (Access::Write, Presented::Nothing, Verdict::Unauthenticated),
        (Access::Read, Presented::Malformed, Verdict::Unauthenticated),
        (Access::Read, basic("grafana", "wrong"), Verdict::Unauthenticated),
        (Access::Read, basic("wrong", "rpass"), Verdict::Unauthenticated),
        // A user of one scope with the password of the other is no one.
        (Access::Read, basic("grafana", "wpass"), Verdict::Unauthenticated),
        (Access::Read, token("rpass"), Verdict::Unauthenticated),
        (Access::Write, token("wtoke"), Verdict::Unauthenticated),
        // InfluxDB 2's `Token user:password`.
        (Access::Write, token("prom:wpass"), Verdict::Allowed),
        (Access::Open, Presented::Nothing, Verdict::Allowed),
        (Access::Open, Presented::Malformed, Verdict::Allowed),
    ];
    for (access, presented, want) in cases {
        assert_eq!(auth.verdict(access, &presented), want, "{access:?} {presented:?}");
    }
}

#[test]
fn a_scope_without_credentials_is_open() {
    let writes_only = Authenticator::new(Credentials::default(), credentials("prom", "wpass", "wtoken"));
    assert!(writes_only.reads_open() && !writes_only.writes_open());
    assert_eq!(writes_only.verdict(Access::Read, &Presented::Nothing), Verdict::Allowed);
    assert_eq!(writes_only.verdict(Access::Write, &Presented::Nothing), Verdict::Unauthenticated);
    let reads_only = Authenticator::new(credentials("g", "rpass", "rtoken"), Credentials::default());
    assert_eq!(reads_only.verdict(Access::Write, &Presented::Nothing), Verdict::Allowed);
    assert_eq!(reads_only.verdict(Access::Read, &Presented::Nothing), Verdict::Unauthenticated);
}

#[test]
fn authorization_headers_are_read() {
    let header = format!("Basic {}", STANDARD.encode("admin:pa:ss"));
    assert_eq!(Presented::from_authorization(header.as_bytes()), basic("admin", "pa:ss"));
    let lower = format!("basic {}", STANDARD.encode("a:b"));
    assert_eq!(Presented::from_authorization(lower.as_bytes()), basic("a", "b"));
    assert_eq!(Presented::from_authorization(b"Bearer abc.def"), token("abc.def"));
    assert_eq!(Presented::from_authorization(b"Token my-token"), token("my-token"));
    assert_eq!(Presented::from_authorization(b"Basic !!!"), Presented::Malformed);
    let no_colon = format!("Basic {}", STANDARD.encode("admin"));
    assert_eq!(Presented::from_authorization(no_colon.as_bytes()), Presented::Malformed);
    assert_eq!(Presented::from_authorization(b"Bearer"), Presented::Malformed);
    assert_eq!(Presented::from_authorization(b"Digest x=1"), Presented::Malformed);
    assert_eq!(Presented::from_influx_query("db=x&u=prom&p=w%20p"), Some(basic("prom", "w p")));
    assert_eq!(Presented::from_influx_query("db=x"), None);
}

#[test]
fn secrets_never_show_in_debug_output() {
    let auth = both();
    let printed = format!("{auth:?} {:?} {:?}", basic("grafana", "rpass"), token("rtoken"));
    for secret in ["grafana", "rpass", "rtoken", "wpass", "wtoken"] {
        assert!(!printed.contains(secret), "{secret} in {printed}");
    }
    assert!(printed.contains("redacted"), "{printed}");
}

#[test]
fn secret_files_are_trimmed_and_must_not_be_empty() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("password");
    std::fs::write(&file, "  s3cret\n").unwrap();
    let settings = AuthSettings {
        read: ScopeSettings {
            basic_user: Some("grafana".into()),
            basic_password_file: Some(file.clone()),
            bearer_token_file: None,
        },
        write: ScopeSettings::default(),
    };
    let auth = Authenticator::load(&settings).unwrap().unwrap();
    assert_eq!(auth.verdict(Access::Read, &basic("grafana", "s3cret")), Verdict::Allowed);
    assert!(Authenticator::load(&AuthSettings::default()).unwrap().is_none());

    std::fs::write(&file, "\n").unwrap();
    let err = Authenticator::load(&settings).unwrap_err();
    assert!(err.contains("--auth.read.basic-password-file") && err.contains("empty"), "{err}");
    let missing = AuthSettings {
        write: ScopeSettings {
            bearer_token_file: Some(dir.path().join("absent")),
            ..ScopeSettings::default()
        },
        ..AuthSettings::default()
    };
    let err = Authenticator::load(&missing).unwrap_err();
    assert!(err.contains("--auth.write.bearer-token-file") && err.contains("absent"), "{err}");
}

struct Answer {
    status: StatusCode,
    challenge: Vec<String>,
    content_type: String,
    body: String,
}

async fn call(method: &str, uri: &str, authorization: Option<&str>) -> Answer {
    let router = secured_router(Arc::new(AppState::new()), Some(Arc::new(both())));
    let mut request = Request::builder().method(method).uri(uri);
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let response = router.oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
    let status = response.status();
    let header = |name: &str| {
        response.headers().get_all(name).iter().map(|v| v.to_str().unwrap().to_owned()).collect::<Vec<_>>()
    };
    let challenge = header("www-authenticate");
    let content_type = header("content-type").join(",");
    let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
    Answer { status, challenge, content_type, body: String::from_utf8(body.to_vec()).unwrap() }
}

fn basic_header(user: &str, password: &str) -> String {
    format!("Basic {}", STANDARD.encode(format!("{user}:{password}")))
}

#[tokio::test]
async fn refusals_speak_each_endpoints_dialect() {
    let api = call("GET", "/api/v1/query?query=1", None).await;
    assert_eq!(api.status, StatusCode::UNAUTHORIZED);
    assert_eq!(api.challenge, ["Basic realm=\"strata\", charset=\"UTF-8\"", "Bearer realm=\"strata\""]);
    let envelope: serde_json::Value = serde_json::from_str(&api.body).unwrap();
    assert_eq!(envelope["status"], "error");
    assert_eq!(envelope["errorType"], "unauthorized");

    let influx = call("POST", "/write?db=x", Some(&basic_header("grafana", "rpass"))).await;
    assert_eq!(influx.status, StatusCode::FORBIDDEN);
    assert!(influx.challenge.is_empty());
    let error: serde_json::Value = serde_json::from_str(&influx.body).unwrap();
    assert!(error["error"].as_str().unwrap().contains("not write"), "{}", influx.body);

    let remote_write = call("POST", "/api/v1/write", None).await;
    assert_eq!(remote_write.status, StatusCode::UNAUTHORIZED);
    assert!(remote_write.content_type.starts_with("text/plain"), "{}", remote_write.content_type);
}

#[tokio::test]
async fn the_router_lets_the_right_credentials_through() {
    // Health stays open; the database is still opening, so ready says 503 (not 401).
    assert_eq!(call("GET", "/-/healthy", None).await.status, StatusCode::OK);
    assert_eq!(call("GET", "/-/ready", None).await.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(call("GET", "/metrics", None).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(call("GET", "/metrics", Some("Bearer rtoken")).await.status, StatusCode::OK);
    assert_eq!(
        call("GET", "/metrics", Some(&basic_header("grafana", "wrong"))).await.status,
        StatusCode::UNAUTHORIZED
    );
    // Past authentication the handler answers: SHOW DATABASES needs no database.
    let show = call("GET", "/query?q=SHOW+DATABASES&u=prom&p=wpass", None).await;
    assert_eq!(show.status, StatusCode::OK, "{}", show.body);
    assert_eq!(
        call("GET", "/query?q=SHOW+DATABASES&u=prom&p=no", None).await.status,
        StatusCode::UNAUTHORIZED
    );
    // `u`/`p` count only on the Influx endpoints.
    assert_eq!(call("GET", "/metrics?u=prom&p=wpass", None).await.status, StatusCode::UNAUTHORIZED);
}

#[test]
fn auth_and_tls_flags_reach_the_server_config() {
    use clap::Parser as _;
    let cli = crate::config::Cli::try_parse_from([
        "strata",
        "--auth.read.basic-user=grafana",
        "--auth.read.basic-password-file=/r/pw",
        "--auth.write.bearer-token-file=/w/token",
        "--tls.cert-file=/c.pem",
        "--tls.key-file=/k.pem",
        "--tls.reload-interval=1m",
    ])
    .unwrap();
    let config = cli.server_config();
    assert_eq!(
        config.auth.read,
        ScopeSettings {
            basic_user: Some("grafana".into()),
            basic_password_file: Some("/r/pw".into()),
            bearer_token_file: None
        }
    );
    assert_eq!(config.auth.write.bearer_token_file, Some("/w/token".into()));
    let tls = config.tls.unwrap();
    assert_eq!((tls.cert_file.to_str(), tls.key_file.to_str()), (Some("/c.pem"), Some("/k.pem")));
    assert_eq!(tls.reload_interval, std::time::Duration::from_secs(60));

    let defaults = crate::config::Cli::try_parse_from(["strata"]).unwrap().server_config();
    assert_eq!(defaults.auth, AuthSettings::default());
    assert_eq!(defaults.tls, None);
    for lonely in ["--tls.cert-file=/c.pem", "--auth.write.basic-password-file=/p"] {
        assert!(crate::config::Cli::try_parse_from(["strata", lonely]).is_err(), "{lonely}");
    }
}

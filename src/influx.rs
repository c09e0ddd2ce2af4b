//! The InfluxDB 1.x endpoints a line-protocol writer calls besides `/write`: `/ping` and the
//! database-management subset of `/query`.
//!
//! Writers (Telegraf, the TSBS loader, the Influx client libraries) ping the server and issue
//! `CREATE DATABASE` before they write. strata has a single data store, so databases are names
//! only: `CREATE DATABASE` remembers the name (as does a write that names one), `SHOW DATABASES`
//! lists them, and all data lands in the same store whatever the database. The names are kept
//! in memory; after a restart `SHOW DATABASES` lists only names used since. Data is queried with
//! PromQL, not InfluxQL, so every other statement is refused with a 400 that says so.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Query, RawQuery, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::state::AppState;
use crate::tenant::Scope;

/// The InfluxDB version strata answers as. Clients pick their protocol from it (a `1.` prefix
/// means the 1.x API, which is the one strata implements).
pub const INFLUX_VERSION: &str = "1.8.10";

const VERSION_HEADER: HeaderName = HeaderName::from_static("x-influxdb-version");
const BUILD_HEADER: HeaderName = HeaderName::from_static("x-influxdb-build");

/// The database names writers have created or written to, per tenant (`""`: the default
/// tenant), in name order.
#[derive(Debug, Default)]
pub struct Databases {
    names: Mutex<BTreeSet<(String, String)>>,
}

impl Databases {
    /// Remembers `name` for `tenant` (`None`: the default tenant); returns whether it was new.
    pub fn insert(&self, tenant: Option<&str>, name: &str) -> bool {
        let key = (tenant.unwrap_or_default().to_owned(), name.to_owned());
        let mut names = self.names.lock().unwrap_or_else(PoisonError::into_inner);
        if names.contains(&key) {
            return false;
        }
        names.insert(key)
    }

    /// The names of `tenants`, sorted, each once.
    pub fn list(&self, tenants: &[Option<&str>]) -> Vec<String> {
        let names = self.names.lock().unwrap_or_else(PoisonError::into_inner);
        let listed: BTreeSet<String> = names
            .iter()
            .filter(|(t, _)| tenants.iter().any(|want| want.unwrap_or_default() == t))
            .map(|(_, n)| n.clone())
            .collect();
        listed.into_iter().collect()
    }
}

/// The headers InfluxDB puts on every answer; clients read the version from `/ping`.
pub fn version_headers() -> [(HeaderName, HeaderValue); 2] {
    [
        (VERSION_HEADER, HeaderValue::from_static(INFLUX_VERSION)),
        (BUILD_HEADER, HeaderValue::from_static(concat!("strata ", env!("CARGO_PKG_VERSION")))),
    ]
}

/// `GET|HEAD /ping`: 204 with the version headers, or 200 with `{"version": ...}` when
/// `verbose=true`, as InfluxDB 1.x answers.
pub async fn ping(Query(params): Query<Vec<(String, String)>>) -> Response {
    let verbose = params.iter().any(|(k, v)| k == "verbose" && v != "false" && v != "0");
    if verbose {
        (StatusCode::OK, version_headers(), Json(json!({ "version": INFLUX_VERSION }))).into_response()
    } else {
        (StatusCode::NO_CONTENT, version_headers()).into_response()
    }
}

/// `GET|POST /query`: answers `CREATE DATABASE` and `SHOW DATABASES` statements like InfluxDB
/// 1.x. `q` comes from the URL or, for POST, from a form-encoded body; several statements may be
/// separated by `;`. If any statement is not supported, none is run.
pub async fn query(
    State(state): State<Arc<AppState>>,
    RawQuery(url_query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut q = url_query.as_deref().and_then(|query| form_value(query.as_bytes(), "q"));
    let is_form = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/x-www-form-urlencoded"));
    if q.is_none() && is_form {
        q = form_value(&body, "q");
    }
    let Some(q) = q else {
        return influx_error(ApiError::BadData("missing required parameter \"q\"".into()));
    };
    let statements = match parse_statements(&q) {
        Ok(statements) => statements,
        Err(message) => return influx_error(ApiError::BadData(message)),
    };
    // A tenant's databases are its own (X-Scope-OrgID; see `crate::tenant`).
    let scope = match Scope::from_headers(&headers, state.tenant_federation()) {
        Ok(scope) => scope,
        Err(err) => return influx_error(err),
    };
    let tenant = match &scope {
        Scope::One(t) => Some(t.as_str()),
        _ => None,
    };
    let results: Vec<Value> = statements
        .iter()
        .enumerate()
        .map(|(id, statement)| match statement {
            Statement::CreateDatabase(_) if scope.is_federated() => {
                json!({ "statement_id": id, "error": "a database is created for one tenant: X-Scope-OrgID names several" })
            }
            Statement::CreateDatabase(name) => {
                state.databases().insert(tenant, name);
                json!({ "statement_id": id })
            }
            Statement::ShowDatabases => {
                let values: Vec<Value> =
                    state.databases().list(&scope.tenants()).into_iter().map(|n| json!([n])).collect();
                let mut series = json!({ "name": "databases", "columns": ["name"] });
                // InfluxDB leaves `values` out when there are none.
                if !values.is_empty() {
                    series["values"] = Value::Array(values);
                }
                json!({ "statement_id": id, "series": [series] })
            }
        })
        .collect();
    (StatusCode::OK, version_headers(), Json(json!({ "results": results }))).into_response()
}

fn influx_error(err: ApiError) -> Response {
    let mut response = err.into_influx_response();
    response.headers_mut().extend(version_headers());
    response
}

/// The first value of `key` in a form-encoded string (`a=1&q=...`), percent- and
/// plus-decoded; `None` if absent or if the bytes are not a valid form.
fn form_value(form: &[u8], key: &str) -> Option<String> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(form).ok()?;
    pairs.into_iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// The InfluxQL statements strata answers.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Statement {
    /// `CREATE DATABASE <name> [WITH ...]`; retention-policy options are accepted and ignored
    /// (strata has one retention, `--retention`).
    CreateDatabase(String),
    /// `SHOW DATABASES`.
    ShowDatabases,
}

/// A token of the InfluxQL subset: words (keywords or unquoted identifiers), quoted
/// identifiers, and anything else as punctuation.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Other(char),
}

/// Splits `q` into statements and parses each. The error text says which statement is not
/// supported and where to go instead.
fn parse_statements(q: &str) -> Result<Vec<Statement>, String> {
    let statements = tokenize(q)?;
    if statements.is_empty() {
        return Err("error parsing query: empty query".into());
    }
    statements.iter().map(|(tokens, text)| parse_statement(tokens, text)).collect()
}

/// One statement: its tokens and its text as written (for messages that quote it).
fn parse_statement(tokens: &[Token], text: &str) -> Result<Statement, String> {
    let keyword =
        |i: usize, word: &str| matches!(tokens.get(i), Some(Token::Word(w)) if w.eq_ignore_ascii_case(word));
    if keyword(0, "SHOW") && keyword(1, "DATABASES") && tokens.len() == 2 {
        return Ok(Statement::ShowDatabases);
    }
    if keyword(0, "CREATE") && keyword(1, "DATABASE") {
        let name = match tokens.get(2) {
            Some(Token::Word(name) | Token::Quoted(name)) if !name.is_empty() => name.clone(),
            _ => return Err("error parsing query: CREATE DATABASE needs a database name".into()),
        };
        if tokens.len() == 3 || keyword(3, "WITH") {
            return Ok(Statement::CreateDatabase(name));
        }
        return Err(format!(
            "error parsing query: unexpected {} after the database name",
            describe(&tokens[3..])
        ));
    }
    Err(format!(
        "strata answers only CREATE DATABASE and SHOW DATABASES through /query, not {text:?}; query data with \
         PromQL at /api/v1/query"
    ))
}

fn describe(tokens: &[Token]) -> String {
    format!("{:?}", render(tokens))
}

/// The statement as text again, for error messages.
fn render(tokens: &[Token]) -> String {
    let mut out = String::new();
    for token in tokens {
        match token {
            Token::Word(w) => {
                if !out.is_empty() {
                    out.push(' ');
                }
                out.push_str(w);
            }
            Token::Quoted(q) => {
                if !out.is_empty() {
                    out.push(' ');
                }
                out.push('"');
                out.push_str(q);
                out.push('"');
            }
            Token::Other(c) => out.push(*c),
        }
    }
    out
}

/// Tokenizes `q` into statements (split at `;` outside quotes), each with its text as written
/// (trimmed), dropping empty ones.
fn tokenize(q: &str) -> Result<Vec<(Vec<Token>, &str)>, String> {
    let mut statements = Vec::new();
    let mut current = Vec::new();
    let mut start = 0;
    let mut chars = q.char_indices().map(|(i, c)| (c, i)).peekable();
    let text = |from: usize, to: usize| q.get(from..to).unwrap_or_default().trim();
    while let Some((c, at)) = chars.next() {
        match c {
            ';' => {
                statements.push((std::mem::take(&mut current), text(start, at)));
                start = at + 1;
            }
            c if c.is_whitespace() => {}
            '"' | '\'' => {
                let quote = c;
                let mut text = String::new();
                let mut closed = false;
                while let Some((inner, _)) = chars.next() {
                    if inner == '\\' {
                        if let Some((escaped, _)) = chars.next() {
                            text.push(escaped);
                        }
                    } else if inner == quote {
                        closed = true;
                        break;
                    } else {
                        text.push(inner);
                    }
                }
                if !closed {
                    return Err(format!("error parsing query: unterminated quoted text {quote}{text}"));
                }
                if quote == '"' {
                    current.push(Token::Quoted(text));
                } else {
                    // A string literal is never a database name; keep it visible in messages.
                    current.push(Token::Other('\''));
                    current.extend(text.chars().map(Token::Other));
                    current.push(Token::Other('\''));
                }
            }
            c if c.is_alphanumeric() || c == '_' => {
                let mut word = String::from(c);
                while let Some(&(next, _)) = chars.peek() {
                    if next.is_alphanumeric() || next == '_' {
                        word.push(next);
                        chars.next();
                    } else {
                        break;
                    }
                }
                current.push(Token::Word(word));
            }
            other => current.push(Token::Other(other)),
        }
    }
    statements.push((current, text(start, q.len())));
    statements.retain(|(tokens, _)| !tokens.is_empty());
    Ok(statements)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(q: &str) -> Result<Vec<Statement>, String> {
        parse_statements(q)
    }

    fn create(name: &str) -> Statement {
        Statement::CreateDatabase(name.into())
    }

    #[test]
    fn create_database_in_its_spellings() {
        assert_eq!(parse("CREATE DATABASE benchmark"), Ok(vec![create("benchmark")]));
        assert_eq!(parse("create database \"bench mark\""), Ok(vec![create("bench mark")]));
        assert_eq!(parse("CREATE DATABASE \"a\\\"b\";"), Ok(vec![create("a\"b")]));
        assert_eq!(
            parse("CREATE DATABASE telegraf WITH DURATION 30d REPLICATION 1"),
            Ok(vec![create("telegraf")])
        );
    }

    #[test]
    fn several_statements() {
        assert_eq!(
            parse("CREATE DATABASE a; SHOW DATABASES;"),
            Ok(vec![create("a"), Statement::ShowDatabases])
        );
    }

    #[test]
    fn other_influxql_is_refused_with_a_pointer_to_promql() {
        let err = parse("SELECT mean(usage) FROM cpu WHERE host = 'a;b'").unwrap_err();
        assert!(err.contains("only CREATE DATABASE and SHOW DATABASES"), "{err}");
        assert!(err.contains("PromQL"), "{err}");
        assert!(err.contains("SELECT mean"), "{err}");
        // Quoted as written, spaces and all.
        let err = parse("SHOW DATABASES; SELECT * FROM cpu WHERE host = 'a'").unwrap_err();
        assert!(err.contains(r#"not "SELECT * FROM cpu WHERE host = 'a'""#), "{err}");
        assert!(parse("DROP DATABASE a").is_err());
        assert!(parse("SHOW DATABASES foo").is_err());
    }

    #[test]
    fn malformed_statements_say_what_is_wrong() {
        assert!(parse("CREATE DATABASE").unwrap_err().contains("needs a database name"));
        assert!(parse("CREATE DATABASE a b").unwrap_err().contains("unexpected"));
        assert!(parse("CREATE DATABASE \"a").unwrap_err().contains("unterminated"));
        assert!(parse(" ; ").unwrap_err().contains("empty query"));
    }

    #[test]
    fn form_values_are_decoded() {
        assert_eq!(
            form_value(b"db=x&q=CREATE+DATABASE+%22b%22", "q").as_deref(),
            Some("CREATE DATABASE \"b\"")
        );
        assert_eq!(form_value(b"db=x", "q"), None);
    }

    #[test]
    fn databases_are_listed_sorted_once_per_tenant() {
        let dbs = Databases::default();
        assert!(dbs.insert(None, "b"));
        assert!(dbs.insert(None, "a"));
        assert!(!dbs.insert(None, "b"));
        assert!(dbs.insert(Some("t"), "b"));
        assert!(dbs.insert(Some("t"), "c"));
        assert_eq!(dbs.list(&[None]), vec!["a".to_owned(), "b".to_owned()]);
        assert_eq!(dbs.list(&[Some("t")]), vec!["b".to_owned(), "c".to_owned()]);
        assert_eq!(dbs.list(&[None, Some("t")]), vec!["a".to_owned(), "b".to_owned(), "c".to_owned()]);
        assert!(dbs.list(&[Some("u")]).is_empty());
    }
}

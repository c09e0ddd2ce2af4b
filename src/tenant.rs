//! Tenants: the `X-Scope-OrgID` header (the Cortex, Mimir and Thanos convention) names whose
//! data a request writes or reads.
//!
//! A tenant is a label: every series written with the header carries [`TENANT_LABEL`] with the
//! tenant's id, stamped by the write path over anything the client sent under that name; a
//! write without the header is the default tenant's, whose series have no such label (so data
//! written before tenants existed, and every request of a single-tenant setup, is the default
//! tenant's without change). Reads are scoped the same way ([`scoped::Scoped`]): one matcher on
//! the label is added to every selection, and the label is hidden from what is answered. One
//! label rather than a database per tenant keeps one WAL, one index and one set of files, and
//! carries the tenant through the ingest log and the bucket with nothing else to change.
//! Storage counts its series limits per tenant.
//!
//! A read may name several tenants, `a|b` (Mimir's tenant federation), only with
//! `--tenant.federation`; each series then carries [`FEDERATED_LABEL`] with its tenant.
//! Tenant ids follow Mimir's rules ([`check_id`]).
//!
//! The header selects; it does not authenticate. Put strata behind a proxy that sets it from
//! the client's credentials, as Mimir and Cortex expect.

pub mod scoped;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName};
use std::sync::Arc;
use storage::{Labels, MatchOp, Matcher, TENANT_LABEL};

use crate::error::ApiError;
use crate::state::AppState;

/// The header that names the tenant.
pub const HEADER: HeaderName = HeaderName::from_static("x-scope-orgid");

/// The label each series of a federated read carries its tenant in (Mimir's name).
pub const FEDERATED_LABEL: &str = "__tenant_id__";

/// Where a series' own [`FEDERATED_LABEL`] goes in a federated read (Mimir's name).
pub const ORIGINAL_FEDERATED_LABEL: &str = "original___tenant_id__";

/// The longest tenant id (Mimir's limit).
const ID_BYTES_MAX: usize = 150;

/// Whose data a request reads or writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// No header: the default tenant, whose series carry no tenant label.
    Default,
    /// One tenant.
    One(String),
    /// Several tenants (`a|b`, with `--tenant.federation`), sorted and unique.
    Many(Vec<String>),
}

/// Checks a tenant id against Mimir's rules: 1 to 150 bytes of `a-z A-Z 0-9 ! - _ . * ' ( )`,
/// not `.` or `..` (an id may end up as a path segment).
pub fn check_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("the tenant id is empty".into());
    }
    if id.len() > ID_BYTES_MAX {
        return Err(format!("the tenant id is longer than {ID_BYTES_MAX} bytes"));
    }
    if id == "." || id == ".." {
        return Err(format!("{id:?} is not a valid tenant id"));
    }
    if let Some(c) = id.chars().find(|c| !(c.is_ascii_alphanumeric() || "!-_.*'()".contains(*c))) {
        return Err(format!(
            "tenant id {id:?} contains {c:?}; allowed are letters, digits and ! - _ . * ' ( )"
        ));
    }
    Ok(())
}

impl Scope {
    /// The scope `headers` name. `federation`: whether a read may name several tenants.
    pub fn from_headers(headers: &HeaderMap, federation: bool) -> Result<Scope, ApiError> {
        let mut values = headers.get_all(HEADER).iter();
        let Some(value) = values.next() else { return Ok(Scope::Default) };
        if values.next().is_some() {
            return Err(bad("more than one X-Scope-OrgID header"));
        }
        let value = value.to_str().map_err(|_| bad("the X-Scope-OrgID header is not ASCII text"))?;
        let mut ids: Vec<String> = value.split('|').map(str::trim).map(str::to_string).collect();
        for id in &ids {
            check_id(id).map_err(|e| bad(&format!("invalid X-Scope-OrgID header: {e}")))?;
        }
        ids.sort_unstable();
        ids.dedup();
        match ids.len() {
            1 => Ok(Scope::One(ids.remove(0))),
            _ if federation => Ok(Scope::Many(ids)),
            _ => Err(bad(
                "the X-Scope-OrgID header names several tenants; queries across tenants are enabled with \
                 --tenant.federation",
            )),
        }
    }

    /// The tenant a write goes to (`None`: the default tenant): a write names one tenant at
    /// most.
    pub fn for_write(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
        match Scope::from_headers(headers, true)? {
            Scope::Default => Ok(None),
            Scope::One(id) => Ok(Some(id)),
            Scope::Many(_) => Err(bad("a write goes to one tenant: the X-Scope-OrgID header names several")),
        }
    }

    /// The header value that names this scope to another strata (a query node asking its
    /// writers), or `None` for the default tenant.
    pub fn header_value(&self) -> Option<String> {
        match self {
            Scope::Default => None,
            Scope::One(id) => Some(id.clone()),
            Scope::Many(ids) => Some(ids.join("|")),
        }
    }

    /// The matcher that selects this scope's series.
    pub fn matcher(&self) -> Matcher {
        match self {
            Scope::Default => Matcher::equal(TENANT_LABEL, ""),
            Scope::One(id) => Matcher::equal(TENANT_LABEL, id.as_str()),
            // Tenant ids hold no regex syntax but `.`, `*`, `(` and `)`, which are escaped: the
            // alternation always compiles (a matcher no id can match stands in, unreachably).
            Scope::Many(ids) => {
                let alternation = ids.iter().map(|id| regex_syntax_escape(id)).collect::<Vec<_>>().join("|");
                Matcher::new(MatchOp::Regex, TENANT_LABEL, alternation)
                    .unwrap_or_else(|_| Matcher::equal(TENANT_LABEL, "/"))
            }
        }
    }

    /// The default tenant's scope.
    pub fn is_default(&self) -> bool {
        matches!(self, Scope::Default)
    }

    /// The tenants of this scope, as storage names them (`None`: the default tenant).
    pub fn tenants(&self) -> Vec<Option<&str>> {
        match self {
            Scope::Default => vec![None],
            Scope::One(t) => vec![Some(t.as_str())],
            Scope::Many(ts) => ts.iter().map(|t| Some(t.as_str())).collect(),
        }
    }

    /// A federated read's scope.
    pub fn is_federated(&self) -> bool {
        matches!(self, Scope::Many(_))
    }

    /// The stored label name a name shown to this scope stands for (a federated read shows
    /// the tenant label as [`FEDERATED_LABEL`], and a series' own label of that name as
    /// [`ORIGINAL_FEDERATED_LABEL`]).
    pub fn stored_name<'n>(&self, name: &'n str) -> &'n str {
        match name {
            FEDERATED_LABEL if self.is_federated() => TENANT_LABEL,
            ORIGINAL_FEDERATED_LABEL if self.is_federated() => FEDERATED_LABEL,
            other => other,
        }
    }

    /// `matchers`, on the names this scope shows, as matchers on stored names restricted to
    /// this scope's series: what a selection or deletion of the scope's tenants runs. A matcher
    /// on the hidden tenant label sees it absent, as answers show it.
    pub fn restrict(&self, matchers: &[Matcher]) -> storage::Result<Vec<Matcher>> {
        let mut out = Vec::with_capacity(matchers.len() + 1);
        for m in matchers {
            if m.name == TENANT_LABEL {
                if !m.matches("") {
                    // No tenant id is "/": selects nothing.
                    out.push(Matcher::equal(TENANT_LABEL, "/"));
                }
                continue;
            }
            let name = self.stored_name(&m.name);
            if name == m.name {
                out.push(m.clone());
            } else {
                out.push(Matcher::new(m.op, name, m.value.as_str())?);
            }
        }
        out.push(self.matcher());
        Ok(out)
    }
}

/// `labels` without the tenant label, as a tenant is shown its series.
pub fn hidden(labels: Labels) -> Labels {
    if labels.get(TENANT_LABEL).is_none() {
        return labels;
    }
    Labels::from_sorted(labels.iter().filter(|l| &*l.name != TENANT_LABEL).cloned().collect())
}

/// `s` with the characters a tenant id may hold that mean something in a regex escaped.
fn regex_syntax_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    for c in s.chars() {
        if ".*()".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn bad(message: &str) -> ApiError {
    ApiError::BadData(message.to_string())
}

/// The scope of an API request, refused with 400 (in the Prometheus envelope) when the header
/// is invalid or names several tenants without `--tenant.federation`.
impl FromRequestParts<Arc<AppState>> for Scope {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<AppState>) -> Result<Scope, ApiError> {
        Scope::from_headers(&parts.headers, state.tenant_federation())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(HEADER, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn the_header_names_the_scope() {
        assert_eq!(Scope::from_headers(&headers(&[]), false).unwrap(), Scope::Default);
        assert_eq!(Scope::from_headers(&headers(&["team-a"]), false).unwrap(), Scope::One("team-a".into()));
        assert_eq!(
            Scope::from_headers(&headers(&["b|a|b"]), true).unwrap(),
            Scope::Many(vec!["a".into(), "b".into()])
        );
        // A list of one is one tenant.
        assert_eq!(Scope::from_headers(&headers(&["a|a"]), false).unwrap(), Scope::One("a".into()));
        let refused = Scope::from_headers(&headers(&["a|b"]), false).unwrap_err();
        assert!(refused.to_string().contains("--tenant.federation"), "{refused}");
        assert_eq!(refused.status().as_u16(), 400);
        for invalid in ["", "a|", "..", "a/b", "a b", &"x".repeat(151)] {
            let err = Scope::from_headers(&headers(&[invalid]), true).unwrap_err();
            assert_eq!(err.status().as_u16(), 400, "{invalid:?}");
        }
        assert!(Scope::from_headers(&headers(&["a", "b"]), true).is_err());
        assert!(check_id("Team_1.prod-(eu)*'!").is_ok());
    }

    #[test]
    fn a_write_goes_to_one_tenant() {
        assert_eq!(Scope::for_write(&headers(&[])).unwrap(), None);
        assert_eq!(Scope::for_write(&headers(&["a"])).unwrap(), Some("a".into()));
        assert_eq!(Scope::for_write(&headers(&["a|b"])).unwrap_err().status().as_u16(), 400);
    }

    #[test]
    fn the_matcher_selects_the_scope() {
        let m = Scope::Default.matcher();
        assert!(m.matches("") && !m.matches("a"));
        let m = Scope::One("a.b".into()).matcher();
        assert!(m.matches("a.b") && !m.matches("axb"));
        let m = Scope::Many(vec!["a.b".into(), "(c)*".into()]).matcher();
        assert!(
            m.matches("a.b") && m.matches("(c)*") && !m.matches("axb") && !m.matches("") && !m.matches("c")
        );
    }
}

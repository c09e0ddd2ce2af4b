//! Credentials: what an operator configured for a scope, what a request presents, and the
//! comparison between the two.
//!
//! Configured secrets are kept only as SHA-256 digests ([`Secret`]): the plaintext is dropped
//! once the file is read, so it cannot end up in a log, a core dump of a long-running process or
//! a `Debug` print. A presented secret is hashed too and the two digests are compared with
//! `subtle`'s constant-time equality, so the time a comparison takes says nothing about how much
//! of a guess was right, nor about the secret's length.

use std::fmt;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest, Sha256};
use subtle::{Choice, ConstantTimeEq};

/// A configured secret (a user name, password or token), held as its SHA-256 digest only.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret([u8; 32]);

impl Secret {
    /// Keeps `plain` as its digest; the caller drops the plaintext.
    pub fn new(plain: &[u8]) -> Secret {
        Secret(Sha256::digest(plain).into())
    }

    /// Whether `presented` is this secret, in time independent of both values.
    pub fn matches(&self, presented: &[u8]) -> Choice {
        Secret::new(presented).0.ct_eq(&self.0)
    }

    /// Reads a secret from `path`. Surrounding whitespace (the newline an editor or `echo`
    /// adds) is ignored, as Prometheus does for its `password_file` and `credentials_file`, so
    /// the same file works on both ends. An empty secret is refused: it would let anyone in.
    pub fn from_file(path: &Path) -> Result<Secret, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let trimmed = bytes.trim_ascii();
        if trimmed.is_empty() {
            return Err(format!("{} is empty", path.display()));
        }
        Ok(Secret::new(trimmed))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// The credentials that grant one scope (read or write). Either kind, or both, may be set;
/// a request is let in if it presents any of them.
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    /// HTTP basic auth: user name and password.
    pub basic: Option<(Secret, Secret)>,
    /// A bearer token (`Authorization: Bearer` or InfluxDB 2's `Authorization: Token`).
    pub token: Option<Secret>,
}

impl Credentials {
    /// Whether nothing is configured, which leaves the scope open.
    pub fn is_empty(&self) -> bool {
        self.basic.is_none() && self.token.is_none()
    }

    /// Whether `presented` is one of these credentials.
    pub fn accept(&self, presented: &Presented) -> bool {
        match presented {
            Presented::Nothing | Presented::Malformed => false,
            Presented::Basic { user, password } => self.accept_basic(user, password),
            Presented::Token(token) => {
                let as_token = self.token.as_ref().is_some_and(|t| bool::from(t.matches(token)));
                // InfluxDB 2's 1.x compatibility also takes `Token user:password`.
                let as_basic = split_colon(token).is_some_and(|(u, p)| self.accept_basic(u, p));
                as_token || as_basic
            }
        }
    }

    fn accept_basic(&self, user: &[u8], password: &[u8]) -> bool {
        // Both halves are compared whatever the first gives, so timing does not reveal whether
        // the user name was right.
        self.basic.as_ref().is_some_and(|(u, p)| bool::from(u.matches(user) & p.matches(password)))
    }
}

/// What a request offers as proof of who sent it.
#[derive(PartialEq, Eq)]
pub enum Presented {
    /// No credentials at all.
    Nothing,
    /// HTTP basic auth, or InfluxDB 1.x's `u` and `p` query parameters.
    Basic {
        /// The user name.
        user: Vec<u8>,
        /// The password.
        password: Vec<u8>,
    },
    /// `Authorization: Bearer <token>` or `Authorization: Token <token>`.
    Token(Vec<u8>),
    /// An `Authorization` header strata cannot read (unknown scheme, bad base64).
    Malformed,
}

impl fmt::Debug for Presented {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The kind only: a presented secret may be a real one with a typo.
        f.write_str(match self {
            Presented::Nothing => "Nothing",
            Presented::Basic { .. } => "Basic(<redacted>)",
            Presented::Token(_) => "Token(<redacted>)",
            Presented::Malformed => "Malformed",
        })
    }
}

impl Presented {
    /// Reads an `Authorization` header value. The scheme is case-insensitive (RFC 9110).
    pub fn from_authorization(value: &[u8]) -> Presented {
        let text = value.trim_ascii();
        let (scheme, rest) = match text.iter().position(|&b| b == b' ') {
            Some(space) => (&text[..space], text[space + 1..].trim_ascii()),
            None => (text, &[][..]),
        };
        if scheme.eq_ignore_ascii_case(b"basic") {
            let Ok(decoded) = STANDARD.decode(rest) else { return Presented::Malformed };
            match split_colon(&decoded) {
                Some((user, password)) => {
                    Presented::Basic { user: user.to_vec(), password: password.to_vec() }
                }
                None => Presented::Malformed,
            }
        } else if (scheme.eq_ignore_ascii_case(b"bearer") || scheme.eq_ignore_ascii_case(b"token"))
            && !rest.is_empty()
        {
            Presented::Token(rest.to_vec())
        } else {
            Presented::Malformed
        }
    }

    /// Reads InfluxDB 1.x's `u` and `p` parameters from a URL query string, if either is there.
    pub fn from_influx_query(query: &str) -> Option<Presented> {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).ok()?;
        let value = |key: &str| pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_bytes().to_vec());
        let (user, password) = (value("u"), value("p"));
        if user.is_none() && password.is_none() {
            return None;
        }
        Some(Presented::Basic { user: user.unwrap_or_default(), password: password.unwrap_or_default() })
    }
}

/// Splits at the first ':' (a basic-auth user name cannot contain one; a password can).
fn split_colon(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = bytes.iter().position(|&b| b == b':')?;
    Some((&bytes[..colon], &bytes[colon + 1..]))
}

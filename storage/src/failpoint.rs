//! Test-only crash points: `STRATA_FAILPOINT=name` (or `name:N` for the N-th hit, 1-based)
//! makes the process abort at that point, as a power cut or SIGKILL would stop it.
//!
//! Crash tests run a real child process with the variable set and then check that the data
//! directory reopens with every acknowledged batch (`storage-crash-writer`, or the unit test
//! binary itself). The points are live only in storage's unit tests and with the `testing`
//! feature; otherwise [`hit`] compiles to nothing and the variable is never read.

#[cfg(any(test, feature = "testing"))]
use std::sync::OnceLock;
#[cfg(any(test, feature = "testing"))]
use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(any(test, feature = "testing"))]
struct Armed {
    name: String,
    nth: u64,
    hits: AtomicU64,
}

#[cfg(any(test, feature = "testing"))]
fn armed() -> Option<&'static Armed> {
    static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
    ARMED
        .get_or_init(|| {
            let spec = std::env::var("STRATA_FAILPOINT").ok()?;
            let (name, nth) = match spec.split_once(':') {
                Some((n, k)) => (n.to_string(), k.parse().unwrap_or(1)),
                None => (spec, 1),
            };
            Some(Armed { name, nth, hits: AtomicU64::new(0) })
        })
        .as_ref()
}

/// Marks a crash point. Aborts the process if this point is armed and this is the armed hit.
#[cfg(any(test, feature = "testing"))]
#[inline]
pub(crate) fn hit(name: &str) {
    if let Some(a) = armed()
        && a.name == name
        && a.hits.fetch_add(1, Ordering::Relaxed) + 1 == a.nth
    {
        eprintln!("failpoint {name}: aborting");
        std::process::abort();
    }
}

/// Marks a crash point: nothing without the `testing` feature.
#[cfg(not(any(test, feature = "testing")))]
#[inline(always)]
pub(crate) fn hit(_name: &str) {}

/// True if the process was started with crash point `name` armed (at any hit), for code that
/// prepares for the point differently (the WAL writes records in two halves only then).
#[cfg(any(test, feature = "testing"))]
pub(crate) fn is_armed(name: &str) -> bool {
    armed().is_some_and(|a| a.name == name)
}

/// True if crash point `name` is armed: never without the `testing` feature.
#[cfg(not(any(test, feature = "testing")))]
#[inline(always)]
pub(crate) fn is_armed(_name: &str) -> bool {
    false
}

//! Test-only crash points: `STRATA_FAILPOINT=name` (or `name:N` for the N-th hit, 1-based)
//! makes the process abort at that point, as a power cut or SIGKILL would stop it.
//!
//! Crash tests run a real child process with the variable set and then check that the data
//! directory reopens with every acknowledged batch. The check is one relaxed atomic load when
//! the variable is unset, so the points stay in release builds.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

struct Armed {
    name: String,
    nth: u64,
    hits: AtomicU64,
}

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
#[inline]
pub fn hit(name: &str) {
    if let Some(a) = armed()
        && a.name == name
        && a.hits.fetch_add(1, Ordering::Relaxed) + 1 == a.nth
    {
        eprintln!("failpoint {name}: aborting");
        std::process::abort();
    }
}

//! The global allocator's settings: mimalloc, told to give memory back to the OS sooner.
//!
//! mimalloc is the allocator because it appends and replays the WAL several times faster than
//! glibc malloc with many threads (docs/benchmarks/storage.md#append-throughput). Its defaults
//! keep memory resident that ingest has freed: arenas are committed up front, and freed pages are
//! purged only after 1 s (10 s for arena memory). Under a bulk load that made the peak resident
//! memory more than twice what the data needs (145–187 MiB against 62–67 MiB with glibc malloc
//! for the 3-day TSBS load). Two changes bring it to 79–125 MiB with no measurable cost in CPU
//! (docs/benchmarks/ingest.md#peak-memory-during-ingest):
//!
//! - arena memory is committed as it is used: `MI_DEFAULT_ARENA_EAGER_COMMIT=0`, a build-time
//!   default set in `.cargo/config.toml`, because the first arena exists before `main` runs;
//! - freed pages are purged after 50 ms instead of 1 s, set here at startup. Purging at once
//!   (0 ms) saved a little more but cost about a third more CPU on line-protocol ingest; 200 ms
//!   saved 5–9 % of the CPU of TSBS loads at 1,000 and 10,000 hosts for 10–18 % more peak
//!   resident memory (the pages a request frees are faulted in again by the next one), and
//!   500 ms up to 13 % for up to 38 % more.
//!
//! `MIMALLOC_ARENA_EAGER_COMMIT` and `MIMALLOC_PURGE_DELAY` in the environment still win: an
//! option is only changed here while it holds mimalloc's default.

#![allow(unsafe_code)]

use std::os::raw::{c_int, c_long};

/// mimalloc 3's option numbers (`mi_option_e` in `mimalloc.h`). The bindings' own constants
/// follow mimalloc 2's numbering, so they are spelled out here and checked against the
/// documented defaults before use.
const ARENA_EAGER_COMMIT: c_int = 4;
const PURGE_DELAY: c_int = 15;

/// `(option, mimalloc's default, strata's value)`. Arena commit is set at build time; it is
/// listed for the check that the option numbers are the ones expected, with the build-time
/// default as "default" (set again, it changes nothing).
const SETTINGS: [(c_int, c_long, c_long); 2] = [(ARENA_EAGER_COMMIT, 0, 0), (PURGE_DELAY, 1000, 50)];

/// Applies [`SETTINGS`]; call first thing in `main`. Does nothing to an option whose current
/// value is not mimalloc's default: it was set in the environment, or the numbering is not the
/// one expected (another mimalloc version), and then leaving it alone is the safe choice.
pub fn configure() {
    for (option, default, value) in SETTINGS {
        // SAFETY: plain FFI calls with integer arguments; mimalloc's option functions are
        // thread-safe and accept any option number below its last (both used ones are).
        let current = unsafe { libmimalloc_sys::mi_option_get(option) };
        if current == default {
            unsafe { libmimalloc_sys::mi_option_set(option, value) };
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_option_numbers_are_mimallocs() {
        if std::env::var_os("MIMALLOC_ARENA_EAGER_COMMIT").is_some()
            || std::env::var_os("MIMALLOC_PURGE_DELAY").is_some()
        {
            return;
        }
        // The test binary has the same global allocator and nothing has changed its options
        // yet, so they hold their defaults: mimalloc's, and for arena commit the build-time
        // one from `.cargo/config.toml` unless the builder's own CFLAGS replaced it.
        let built_lazy = option_env!("CFLAGS").is_some_and(|f| f.contains("MI_DEFAULT_ARENA_EAGER_COMMIT=0"));
        for (option, default, _) in super::SETTINGS {
            let expected = if option == super::ARENA_EAGER_COMMIT && !built_lazy { 2 } else { default };
            // SAFETY: as in `configure`.
            let current = unsafe { libmimalloc_sys::mi_option_get(option) };
            assert_eq!(current, expected, "option {option} is not the one expected");
        }
    }
}

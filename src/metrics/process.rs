//! The standard `process_*` metrics every Prometheus client library exports, read from
//! `/proc/self` at scrape time, so dashboards built for any Prometheus-instrumented program show
//! strata's memory, CPU, file descriptors and threads unchanged.
//!
//! The `procfs` crate does the parsing (the same crate the Rust `prometheus` client's process
//! collector uses): `/proc/self/stat` has a command name that may contain spaces and
//! parentheses, and turning ticks and pages into seconds and bytes needs the kernel's clock tick
//! rate and page size, which only a system call gives.

use super::exposition::{Exposition, Kind};

/// One reading of the process' resource use.
#[derive(Debug, Clone, Copy, PartialEq)]
struct ProcessStats {
    resident_bytes: u64,
    virtual_bytes: u64,
    cpu_seconds: f64,
    start_time_seconds: f64,
    threads: u64,
    open_fds: u64,
    /// `None` when the soft limit is "unlimited".
    max_fds: Option<u64>,
}

fn read() -> procfs::ProcResult<ProcessStats> {
    let me = procfs::process::Process::myself()?;
    let stat = me.stat()?;
    let ticks = procfs::ticks_per_second().max(1) as f64;
    let max_fds = match me.limits()?.max_open_files.soft_limit {
        procfs::process::LimitValue::Value(n) => Some(n),
        procfs::process::LimitValue::Unlimited => None,
    };
    Ok(ProcessStats {
        resident_bytes: stat.rss.saturating_mul(procfs::page_size()),
        virtual_bytes: stat.vsize,
        cpu_seconds: stat.utime.saturating_add(stat.stime) as f64 / ticks,
        // `starttime` counts clock ticks from boot.
        start_time_seconds: procfs::boot_time_secs()? as f64 + stat.starttime as f64 / ticks,
        threads: u64::try_from(stat.num_threads).unwrap_or(0),
        open_fds: me.fd_count()? as u64,
        max_fds,
    })
}

/// Writes the `process_*` families. If `/proc` cannot be read (not Linux, or a restricted
/// container) they are left out and the reason is logged at debug level: a scrape must not fail
/// over them.
pub(super) fn write_to(out: &mut Exposition) {
    let stats = match read() {
        Ok(stats) => stats,
        Err(e) => {
            tracing::debug!(error = %e, "cannot read /proc/self; leaving out the process_* metrics");
            return;
        }
    };
    out.single_f64(
        "process_cpu_seconds_total",
        Kind::Counter,
        "Total user and system CPU time spent in seconds.",
        stats.cpu_seconds,
    );
    out.single("process_open_fds", Kind::Gauge, "Number of open file descriptors.", stats.open_fds);
    if let Some(max) = stats.max_fds {
        out.single("process_max_fds", Kind::Gauge, "Maximum number of open file descriptors.", max);
    }
    out.single(
        "process_virtual_memory_bytes",
        Kind::Gauge,
        "Virtual memory size in bytes.",
        stats.virtual_bytes,
    );
    out.single(
        "process_resident_memory_bytes",
        Kind::Gauge,
        "Resident memory size in bytes.",
        stats.resident_bytes,
    );
    out.single_f64(
        "process_start_time_seconds",
        Kind::Gauge,
        "Start time of the process since unix epoch in seconds.",
        stats.start_time_seconds,
    );
    out.single("process_threads", Kind::Gauge, "Number of OS threads in the process.", stats.threads);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_plausible_numbers_for_this_process() {
        let stats = read().expect("/proc/self is readable on Linux");
        assert!(stats.resident_bytes > 0 && stats.virtual_bytes >= stats.resident_bytes, "{stats:?}");
        assert!(stats.threads >= 1, "{stats:?}");
        assert!(stats.open_fds >= 3, "stdin, stdout, stderr at least: {stats:?}");
        if let Some(max) = stats.max_fds {
            assert!(max >= stats.open_fds, "{stats:?}");
        }
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
        // Boot time is in whole seconds, so the start may appear up to a second late.
        assert!(stats.start_time_seconds > 1e9 && stats.start_time_seconds <= now + 1.0, "{stats:?}");
        assert!(stats.cpu_seconds >= 0.0, "{stats:?}");
    }
}

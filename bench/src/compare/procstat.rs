//! What a server process costs, read from /proc, and how much disk a directory takes.

use std::path::Path;

use procfs::Current;

/// CPU time and memory of one process at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcSample {
    /// User plus system CPU seconds since the process started.
    pub cpu_secs: f64,
    /// Peak resident set size since the process started (`VmHWM`), bytes.
    pub peak_rss: u64,
    /// Resident set size now (`VmRSS`), bytes.
    pub rss: u64,
}

/// Reads `pid`'s CPU seconds and memory; `None` once the process is gone.
pub fn sample(pid: u32) -> Option<ProcSample> {
    let process = procfs::process::Process::new(i32::try_from(pid).ok()?).ok()?;
    let stat = process.stat().ok()?;
    let status = process.status().ok()?;
    let ticks = procfs::ticks_per_second() as f64;
    Some(ProcSample {
        cpu_secs: (stat.utime + stat.stime) as f64 / ticks,
        peak_rss: status.vmhwm.unwrap_or(0) * 1024,
        rss: status.vmrss.unwrap_or(0) * 1024,
    })
}

/// Disk space of all regular files under `dir`, as `du` counts it (allocated blocks, so sparse
/// preallocated files count what they use, not their length), skipping top-level entries named
/// in `skip`.
pub fn dir_bytes(dir: &Path, skip: &[&str]) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut total = 0;
    for entry in entries.flatten() {
        if skip.iter().any(|s| entry.file_name() == **s) {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            total += dir_bytes(&entry.path(), &[]);
        } else if meta.is_file() {
            total += std::os::unix::fs::MetadataExt::blocks(&meta) * 512;
        }
    }
    total
}

/// The summed lengths of all regular files under `dir`: the bytes written into them (what `du
/// --apparent-size` counts). For a file still being appended to this is the better figure than
/// [`dir_bytes`]: a file system may reserve blocks beyond its end (ext4 does, in steps of up to
/// some hundred KiB), which `du` counts until the file is closed.
pub fn file_lengths(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut total = 0;
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            total += file_lengths(&entry.path());
        } else if meta.is_file() {
            total += meta.len();
        }
    }
    total
}

/// The machine, for the report: CPU model, cores, memory, kernel.
pub fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split(':').nth(1)))
        .map_or("unknown CPU".to_owned(), |m| m.trim().to_owned());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_gib = procfs::Meminfo::current().map_or(0.0, |m| m.mem_total as f64 / (1u64 << 30) as f64);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{model}, {cores} cores, {mem_gib:.1} GiB RAM, Linux {}", kernel.trim())
}

/// The 1-minute load average (how busy the machine was).
pub fn load_average() -> f64 {
    procfs::LoadAverage::current().map_or(f64::NAN, |l| f64::from(l.one))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_has_cpu_and_memory() {
        let s = sample(std::process::id()).unwrap();
        assert!(s.peak_rss >= s.rss && s.rss > 0);
        assert!(s.cpu_secs >= 0.0);
    }

    #[test]
    fn dir_bytes_counts_files_recursively_and_skips() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::create_dir(d.path().join("cache")).unwrap();
        std::fs::write(d.path().join("a"), vec![1u8; 10_000]).unwrap();
        std::fs::write(d.path().join("sub/b"), vec![1u8; 10_000]).unwrap();
        std::fs::write(d.path().join("cache/c"), vec![1u8; 10_000]).unwrap();
        let all = dir_bytes(d.path(), &[]);
        let without_cache = dir_bytes(d.path(), &["cache"]);
        assert!((30_000..=3 * 16_384).contains(&all), "{all}");
        assert!((20_000..=2 * 16_384).contains(&without_cache), "{without_cache}");
        // A sparse file counts only what it uses.
        let sparse = std::fs::File::create(d.path().join("sparse")).unwrap();
        sparse.set_len(1 << 30).unwrap();
        assert!(dir_bytes(d.path(), &[]) < all + 65_536);
        assert_eq!(file_lengths(d.path()), 30_000 + (1 << 30), "lengths, the sparse file's too");
        assert_eq!(file_lengths(&d.path().join("sub")), 10_000);
        assert_eq!(file_lengths(&d.path().join("missing")), 0);
        assert!(machine().contains("cores"));
    }
}

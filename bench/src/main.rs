//! strata's benchmarks. `strata-bench storage` measures the storage engine on its own:
//! bytes per sample on disk per data shape, head memory, append throughput, startup with many
//! series. `strata-bench metadata` measures label and series lookups with a million series. Numbers go to `docs/benchmarks.md` with the command that produced them.

mod datagen;
mod metadata_bench;
mod storage_bench;

use clap::{Parser, Subcommand};

/// The same allocator as the server, so measurements match what it does.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(about = "strata benchmarks")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Storage engine measurements (no HTTP): disk bytes/sample, head memory, append rate, startup.
    Storage(storage_bench::Args),
    /// Latency of label names, label values and series lookups (storage and HTTP handler) over
    /// a million TSBS-like series.
    Metadata(metadata_bench::Args),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Storage(a) => storage_bench::run(a),
        Cmd::Metadata(a) => metadata_bench::run(a),
    };
    if let Err(e) = result {
        eprintln!("strata-bench: {e}");
        std::process::exit(1);
    }
}

//! strata's benchmarks. `strata-bench storage` measures the storage engine on its own:
//! bytes per sample on disk per data shape, head memory, append throughput, startup with many
//! series. `strata-bench metadata` measures label and series lookups with a million series.
//! `strata-bench tsbs-gen` writes the TSBS cpu-only devops dataset, and `strata-bench compare`
//! (or `bench/run.sh`) runs that workload on strata and on VictoriaMetrics, Prometheus and
//! InfluxDB side by side. Numbers go to `docs/benchmarks/`, one page per subject (the entry page
//! is `docs/benchmarks.md`), with the command that produced them.

mod compare;
mod datagen;
mod metadata_bench;
mod query_load;
mod series_memory;
mod storage_bench;
mod tsbs;

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
    /// Queries/s and latency of 8 concurrent TSBS query clients while ingest runs, with
    /// parallel query evaluation off and on.
    QueryLoad(query_load::Args),
    /// Resident memory per series after creating N series (1 million by default).
    SeriesMemory(series_memory::Args),
    /// Writes the TSBS cpu-only devops dataset (line protocol or remote-write requests).
    TsbsGen(tsbs::gen_cmd::Args),
    /// The TSBS devops workload side by side: strata and whichever of VictoriaMetrics,
    /// Prometheus and InfluxDB are installed, one at a time; writes a Markdown report and plots.
    Compare(compare::Args),
    /// What the harness's HTTP client adds to a request: one GET timed from a raw socket, the
    /// harness's client, and `ureq` with one global timeout.
    ClientFloor(compare::client_floor::Args),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Storage(a) => storage_bench::run(a),
        Cmd::Metadata(a) => metadata_bench::run(a),
        Cmd::QueryLoad(a) => query_load::run(a),
        Cmd::SeriesMemory(a) => series_memory::run(a),
        Cmd::TsbsGen(a) => tsbs::gen_cmd::run(a),
        Cmd::Compare(a) => compare::run(a),
        Cmd::ClientFloor(a) => compare::client_floor::run(a),
    };
    if let Err(e) = result {
        eprintln!("strata-bench: {e}");
        std::process::exit(1);
    }
}

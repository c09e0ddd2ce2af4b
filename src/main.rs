//! The `strata` binary: parse flags, start logging, run the server until a signal stops it.

use std::io::IsTerminal;
use std::process::ExitCode;

use strata::config::Cli;

mod allocator;
use tracing_subscriber::EnvFilter;

/// mimalloc instead of glibc malloc: ingest makes many small, short-lived allocations that
/// fragment glibc's arenas; see docs/benchmarks/storage.md#append-throughput for the measured
/// difference.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    allocator::configure();
    let (cli, flags) = Cli::parse_with_flags(std::env::args_os()).unwrap_or_else(|err| err.exit());
    if let Err(err) = init_logging(cli.log_level.as_deref()) {
        eprintln!("strata: {err}");
        return ExitCode::from(2);
    }
    for feature in cli.unknown_features() {
        tracing::warn!(feature, "unknown --enable-feature value ignored");
    }
    let mut config = cli.server_config();
    if let Err(err) = cli.check_role().and_then(|()| cli.read_bucket_secret(&mut config.storage)) {
        tracing::error!("{err}");
        return ExitCode::from(2);
    }
    config.status.flags = flags;
    // Queries are evaluated on the blocking pool's threads (`api::blocking`): give them the
    // stack the engine needs and say so, so the engine does not start a thread per query.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_stack_size(promql::EVAL_STACK_BYTES)
        .on_thread_start(|| promql::declare_thread_stack(promql::EVAL_STACK_BYTES))
        .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(err) => {
            tracing::error!("cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(strata::server::run(config));
    // Don't wait for blocking tasks: after a second signal a `Db::open` may still be running,
    // and storage is built to recover from being stopped anywhere.
    runtime.shutdown_background();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("strata failed: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Logs go to stderr: `--log-level` if given, else `RUST_LOG` if set, else `info`.
fn init_logging(flag: Option<&str>) -> Result<(), String> {
    let filter = match (flag, std::env::var("RUST_LOG")) {
        (Some(directives), _) => EnvFilter::try_new(directives).map_err(|e| format!("--log-level: {e}"))?,
        (None, Ok(directives)) => {
            // Checked as --log-level is: tracing would take a typo for a target and log nothing.
            let checked = strata::config::log_filter(&directives)
                .map_err(|e| format!("RUST_LOG={directives:?}: {e}"))?;
            EnvFilter::try_new(&checked).map_err(|e| format!("RUST_LOG: {e}"))?
        }
        (None, Err(_)) => EnvFilter::new("info"),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init()
        .map_err(|e| format!("cannot start logging: {e}"))
}

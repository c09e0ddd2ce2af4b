use clap::{CommandFactory, Parser};
use storage::WalSync;

use super::Cli;

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("strata").chain(args.iter().copied()))
}

#[test]
fn clap_definition_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn flag_defaults_equal_the_storage_defaults() {
    let cli = parse(&[]).unwrap();
    let from_flags = cli.storage_options();
    let storage_defaults = storage::Options::new("./data");
    // Options has no PartialEq; its Debug output lists every field.
    assert_eq!(format!("{from_flags:?}"), format!("{storage_defaults:?}"));
    assert_eq!(cli.listen, "127.0.0.1:9201");
    assert_eq!(cli.log_level, None);
    assert_eq!(cli.limits(), remote::Limits::default());
}

#[test]
fn limit_flags_reach_the_decoder_limits() {
    let cli = parse(&[
        "--write-body-bytes-max=1MiB",
        "--write-decoded-bytes-max=8MiB",
        "--labels-per-series-max=10",
        "--label-name-bytes-max=100",
        "--label-value-bytes-max=2KiB",
    ])
    .unwrap();
    let limits = cli.limits();
    assert_eq!(limits.body_bytes_max, 1 << 20);
    assert_eq!(limits.decoded_bytes_max, 8 << 20);
    assert_eq!(limits.labels_per_series_max, 10);
    assert_eq!(limits.label_name_bytes_max, 100);
    assert_eq!(limits.label_value_bytes_max, 2 << 10);
    assert_eq!(cli.server_config().limits, limits);
}

#[test]
fn every_flag_reaches_its_option() {
    let cli = parse(&[
        "--data-dir=/tmp/x",
        "--retention=30d",
        "--partition-duration=12h",
        "--ooo-window=0",
        "--future-window=5m",
        "--wal-sync=100ms",
        "--wal-segment-size=64MiB",
        "--wal-truncate-corrupt",
        "--block-samples-max=256",
        "--block-grid=30m",
        "--head-samples-max=1000",
        "--head-flush-interval=15m",
        "--maintenance-interval=1s",
        "--compact-files-min=8",
    ])
    .unwrap();
    let o = cli.storage_options();
    assert_eq!(o.data_dir, std::path::PathBuf::from("/tmp/x"));
    assert_eq!(o.retention_ms, 30 * 86_400_000);
    assert_eq!(o.partition_ms, 12 * 3_600_000);
    assert_eq!(o.ooo_window_ms, 0);
    assert_eq!(o.future_window_ms, 5 * 60_000);
    assert_eq!(o.wal_sync, WalSync::Interval(std::time::Duration::from_millis(100)));
    assert_eq!(o.wal_segment_bytes, 64 << 20);
    assert!(o.wal_truncate_corrupt);
    assert_eq!(o.block_samples_max, 256);
    assert_eq!(o.block_grid_ms, 30 * 60_000);
    assert_eq!(o.head_samples_max, 1000);
    assert_eq!(o.head_flush_interval, std::time::Duration::from_secs(15 * 60));
    assert_eq!(o.maintenance_interval, std::time::Duration::from_secs(1));
    assert_eq!(o.compact_files_min, 8);
}

#[test]
fn wal_sync_batch_is_per_batch() {
    assert_eq!(parse(&["--wal-sync", "batch"]).unwrap().wal_sync, WalSync::PerBatch);
}

#[test]
fn bad_values_are_refused_with_a_reason() {
    let cases = [
        ("--retention", "15x", "unknown unit"),
        ("--retention", "0", "greater than 0"),
        ("--partition-duration", "1.5d", "invalid duration"),
        ("--ooo-window", "-1h", "invalid duration"),
        ("--wal-sync", "sometimes", "\"batch\" or an interval"),
        ("--wal-sync", "0", "greater than 0"),
        ("--wal-segment-size", "lots", "invalid size"),
        ("--wal-segment-size", "0", "greater than 0"),
        ("--block-samples-max", "0", "greater than 0"),
        ("--head-samples-max", "-5", "greater than 0"),
        ("--compact-files-min", "1", "at least 2"),
        ("--write-body-bytes-max", "0", "greater than 0"),
        ("--labels-per-series-max", "0", "greater than 0"),
        ("--label-value-bytes-max", "16k", "unknown unit"),
        ("--log-level", "info,[", "--log-level"),
    ];
    for (flag, value, reason) in cases {
        // `--flag=value` so that values starting with '-' reach the flag's parser.
        let err = parse(&[&format!("{flag}={value}")])
            .err()
            .unwrap_or_else(|| panic!("{flag} {value} should be refused"))
            .to_string();
        assert!(err.contains(flag), "{flag} {value}: error should name the flag: {err}");
        assert!(err.contains(reason), "{flag} {value}: error should say {reason:?}: {err}");
    }
}

/// README.md and docs/operations.md must document every flag, and README's table must show
/// each flag's real default.
#[test]
fn docs_list_every_flag_with_its_default() {
    let readme = include_str!("../../README.md");
    let operations = include_str!("../../docs/operations.md");
    for arg in Cli::command().get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if long == "help" || long == "version" {
            continue;
        }
        let flag = format!("`--{long}");
        assert!(operations.contains(&flag), "docs/operations.md does not mention --{long}");
        let row = readme
            .lines()
            .find(|line| line.starts_with(&format!("| {flag}")))
            .unwrap_or_else(|| panic!("README.md has no table row for --{long}"));
        for default in arg.get_default_values() {
            let default = default.to_string_lossy();
            assert!(
                row.contains(&format!("`{default}`")),
                "README row for --{long} lacks default `{default}`"
            );
        }
    }
}

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

/// `--listen :PORT` listens on every interface, as Prometheus users write it; a bare port is
/// refused with a hint naming both spellings.
#[test]
fn listen_takes_a_prometheus_style_port_and_hints_at_a_bare_one() {
    assert_eq!(parse(&["--listen", ":9201"]).unwrap().listen, "0.0.0.0:9201");
    assert_eq!(parse(&["--listen", "localhost:9201"]).unwrap().listen, "localhost:9201");
    let err = parse(&["--listen", "9201"]).err().unwrap().to_string();
    assert!(err.contains("127.0.0.1:9201") && err.contains(":9201 for every interface"), "{err}");
}

/// Prometheus' names for the data directory, the listen address and retention work as they
/// do in Prometheus, so a command line carried over from Prometheus still starts strata.
#[test]
fn prometheus_flag_names_are_aliases() {
    let cli = parse(&[
        "--storage.tsdb.path=/tmp/x",
        "--web.listen-address=:9090",
        "--storage.tsdb.retention.time=30d",
    ])
    .unwrap();
    assert_eq!(cli.data_dir, std::path::PathBuf::from("/tmp/x"));
    assert_eq!(cli.listen, "0.0.0.0:9090");
    assert_eq!(cli.retention.to_string(), "30d");
}

/// A Prometheus flag strata has no counterpart for is refused with what to do instead, not
/// clap's nearest-spelling guess.
#[test]
fn prometheus_only_flags_get_a_hint() {
    for (args, want) in [
        (&["strata", "--storage.tsdb.retention.size=10GB"][..], "no size-based retention"),
        (&["strata", "--config.file", "prometheus.yml"][..], "point its remote_write"),
        (&["strata", "--web.enable-lifecycle"][..], "SIGTERM"),
    ] {
        let err = Cli::parse_with_flags(args.iter().copied()).err().unwrap();
        assert_eq!(err.kind(), clap::error::ErrorKind::UnknownArgument);
        let text = err.to_string();
        assert!(text.contains("a Prometheus flag") && text.contains(want), "{text}");
        assert!(!text.contains("similar argument"), "{text}");
    }
}

/// `--log-level` takes levels and `target=level` directives, `warning` as `warn`; tracing
/// alone would read `warning` as a target and log nothing.
#[test]
fn log_levels_are_read_as_documented() {
    for (given, read) in [
        ("warning", "warn"),
        ("WARN", "warn"),
        ("info,storage=debug", "info,storage=debug"),
        (" debug , strata::api=trace ", "debug,strata::api=trace"),
        ("off", "off"),
    ] {
        assert_eq!(parse(&["--log-level", given]).unwrap().log_level.as_deref(), Some(read), "{given}");
    }
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
        "--head-span-max=90m",
        "--maintenance-interval=1s",
        "--compact-files-min=8",
    ])
    .unwrap();
    let o = cli.storage_options();
    assert_eq!(o.data_dir, std::path::PathBuf::from("/tmp/x"));
    assert_eq!(o.retention_ms, 30 * 86_400_000);
    assert_eq!(o.partition_ms, 12 * 3_600_000);
    assert_eq!(o.ooo_window_ms, Some(0));
    assert_eq!(o.future_window_ms, 5 * 60_000);
    assert_eq!(o.wal_sync, WalSync::Interval(std::time::Duration::from_millis(100)));
    assert_eq!(o.wal_segment_bytes, 64 << 20);
    assert!(o.wal_truncate_corrupt);
    assert_eq!(o.block_samples_max, 256);
    assert_eq!(o.block_grid_ms, 30 * 60_000);
    assert_eq!(o.head_samples_max, 1000);
    assert_eq!(o.head_flush_interval, std::time::Duration::from_secs(15 * 60));
    assert_eq!(o.head_span_max_ms, 90 * 60_000);
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
        ("--retention", "15x", "write e.g. 15d"),
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
        ("--log-level", "verbose", "error, warn (or warning), info, debug, trace, off"),
        ("--log-level", "garbage!!", "neither a log level"),
        ("--log-level", "info,storage=loud", "neither a log level"),
        ("--log-level", ",", "empty log filter"),
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

#[test]
fn query_flags_default_to_the_engine_defaults() {
    let config = parse(&[]).unwrap().query_config();
    // EngineOptions has no PartialEq; its Debug output lists every field.
    assert_eq!(format!("{:?}", config.options), format!("{:?}", promql::EngineOptions::default()));
    assert_eq!(config.max_concurrency, crate::api::query::DEFAULT_MAX_CONCURRENCY);
    assert_eq!(config.max_parallelism, 0);
    assert_eq!(config.inline_max_points, crate::api::query::DEFAULT_INLINE_MAX_POINTS);
}

#[test]
fn query_flags_and_features_reach_the_engine() {
    let cli = parse(&[
        "--query.timeout=30s",
        "--query.max-samples=1000",
        "--query.lookback-delta=1m",
        "--query.default-subquery-step=15s",
        "--query.max-concurrency=4",
        "--query.max-parallelism=2",
        "--query.inline-max-points=0",
        "--enable-feature=promql-experimental-functions,promql-duration-expr",
        "--enable-feature=promql-delayed-name-removal",
        "--enable-feature=native-histograms",
    ])
    .unwrap();
    let config = cli.query_config();
    let o = &config.options;
    assert_eq!(o.timeout, std::time::Duration::from_secs(30));
    assert_eq!(o.max_samples, 1000);
    assert_eq!(o.lookback_delta_ms, 60_000);
    assert_eq!(o.default_subquery_step_ms, 15_000);
    assert_eq!(config.max_concurrency, 4);
    assert_eq!(config.max_parallelism, 2);
    assert_eq!(config.inline_max_points, 0);
    assert!(o.experimental_functions && o.duration_expressions && o.delayed_name_removal);
    assert!(!o.extended_range_selectors && !o.binop_fill_modifiers && !o.type_and_unit_labels);
    assert_eq!(cli.unknown_features(), vec!["native-histograms"]);
    assert_eq!(cli.server_config().query.max_concurrency, 4);
}

#[test]
fn every_flag_value_is_reported_by_name() {
    let (cli, flags) = Cli::parse_with_flags([
        "strata",
        "--retention=30d",
        "--wal-truncate-corrupt",
        "--enable-feature=a,b",
        "--query.timeout=1m",
    ])
    .unwrap();
    assert_eq!(cli.retention.as_millis(), 30 * 86_400_000);
    assert_eq!(flags["retention"], "30d");
    assert_eq!(flags["data-dir"], "./data");
    assert_eq!(flags["wal-truncate-corrupt"], "true");
    assert_eq!(flags["log-level"], "");
    assert_eq!(flags["query.timeout"], "1m");
    assert_eq!(flags["query.lookback-delta"], "5m");
    assert_eq!(flags["query.default-subquery-step"], "1m");
    assert_eq!(flags["enable-feature"], "a,b");
    let longs = Cli::command()
        .get_arguments()
        .filter_map(|a| a.get_long())
        .filter(|l| *l != "help" && *l != "version")
        .count();
    assert_eq!(flags.len(), longs);
    assert_eq!(cli.server_config().status.retention, "30d");
}

#[test]
fn remote_read_and_admin_flags_reach_the_server_config() {
    let defaults = parse(&[]).unwrap().server_config();
    assert_eq!(defaults.remote_read, crate::api::read::RemoteReadConfig::default());
    assert_eq!(defaults.remote_read.sample_limit, 50_000_000);
    assert_eq!(defaults.remote_read.concurrency, 10);
    assert_eq!(defaults.remote_read.frame_bytes_max, 1 << 20);
    assert!(!defaults.admin_api);
    let cli = parse(&[
        "--web.enable-admin-api",
        "--storage.remote.read-sample-limit=0",
        "--storage.remote.read-concurrent-limit=3",
        "--storage.remote.read-max-bytes-in-frame=64KiB",
    ])
    .unwrap();
    let config = cli.server_config();
    assert!(config.admin_api);
    assert_eq!(
        config.remote_read,
        crate::api::read::RemoteReadConfig { sample_limit: 0, concurrency: 3, frame_bytes_max: 64 << 10 }
    );
    assert!(parse(&["--storage.remote.read-max-bytes-in-frame=0"]).is_err());
}

#[test]
fn roles_that_need_a_bucket_say_so() {
    let err = parse(&["--role", "query"]).unwrap().check_role().unwrap_err();
    assert_eq!(err, "--role query needs --storage.bucket");
    let err = parse(&["--role", "write"]).unwrap().check_role().unwrap_err();
    assert_eq!(err, "--role write needs --storage.bucket");
    assert!(parse(&["--role", "query", "--storage.bucket", "file:///b"]).unwrap().check_role().is_ok());
    let err = parse(&["--query.writer", "http://w:9201"]).unwrap().check_role().unwrap_err();
    assert!(err.contains("--role query"), "{err}");
    assert!(parse(&[]).unwrap().check_role().is_ok());
}

#[test]
fn log_flags_name_the_roles_and_partitions_they_need() {
    let err = parse(&["--role", "distributor"]).unwrap().check_role().unwrap_err();
    assert!(err.contains("--log.url"), "{err}");
    let url = ["--log.url", "nats://127.0.0.1:4222"];
    let with = |extra: &[&str]| {
        let mut args = url.to_vec();
        args.extend_from_slice(extra);
        parse(&args).unwrap()
    };
    assert!(with(&["--role", "distributor"]).check_role().is_ok());
    let err = with(&["--role", "query", "--storage.bucket", "file:///b"]).check_role().unwrap_err();
    assert!(err.contains("query nodes"), "{err}");
    // A distributor consumes nothing; an ingester every partition unless told otherwise.
    assert!(with(&["--role", "distributor"]).log_settings().unwrap().consume.is_none());
    let fixed = |cli: Cli| match cli.log_settings().unwrap().consume {
        Some(crate::log::ingester::Ownership::Fixed(p)) => p,
        other => panic!("{other:?}"),
    };
    assert_eq!(fixed(with(&["--log.partitions", "4"])), vec![0, 1, 2, 3]);
    let leased = with(&["--leases.url", "http://a:2379, http://b:2379", "--leases.member", "w1"]);
    assert!(leased.check_role().is_ok());
    match leased.log_settings().unwrap().consume {
        Some(crate::log::ingester::Ownership::Leased(c)) => {
            assert_eq!(c.endpoints, ["http://a:2379", "http://b:2379"]);
            assert_eq!((c.member.as_str(), c.ttl.as_secs()), ("w1", 10));
        }
        other => panic!("{other:?}"),
    }
    let err = with(&["--leases.url", "http://a:2379", "--log.consume", "0"]).check_role().unwrap_err();
    assert!(err.contains("exclude each other"), "{err}");
    let some = with(&["--log.partitions", "10", "--log.consume", "8, 0-2,1"]);
    assert_eq!(some.log_consume_partitions().unwrap(), vec![0, 1, 2, 8]);
    for bad in ["10", "3-1", "x", "1-", ""] {
        let cli = with(&["--log.partitions", "10", "--log.consume", bad]);
        assert!(cli.check_role().unwrap_err().contains("--log.consume"), "{bad}");
    }
    let err = with(&["--role", "distributor", "--log.consume", "0"]).check_role().unwrap_err();
    assert!(err.contains("--log.consume is for"), "{err}");
    assert!(parse(&["--log.replicas", "0"]).is_err());
    assert!(parse(&["--log.partitions", "0"]).is_err());
    assert!(parse(&[]).unwrap().log_settings().is_none());
}

#[test]
fn the_ha_tracker_needs_a_log_and_etcd() {
    let err = parse(&["--ha-tracker"]).unwrap().check_role().unwrap_err();
    assert!(err.contains("--leases.url"), "{err}");
    let args = [
        "--role",
        "distributor",
        "--log.url",
        "nats://n:4222",
        "--leases.url",
        "http://e:2379",
        "--ha-tracker",
    ];
    let cli = parse(&args).unwrap();
    assert!(cli.check_role().is_ok());
    let ha = cli.log_settings().unwrap().ha.unwrap();
    assert_eq!((ha.cluster_label.as_str(), ha.replica_label.as_str()), ("cluster", "__replica__"));
    assert_eq!((ha.update_timeout.as_secs(), ha.failover_timeout.as_secs()), (15, 30));
    assert_eq!(ha.endpoints, ["http://e:2379"]);
    let mut slow = args.to_vec();
    slow.extend(["--ha-tracker.failover-timeout", "10s", "--ha-tracker.update-timeout", "10s"]);
    assert!(parse(&slow).unwrap().check_role().unwrap_err().contains("longer"));
    // Without --ha-tracker a distributor has no use for etcd.
    let err = parse(&args[..6]).unwrap().check_role().unwrap_err();
    assert!(err.contains("--leases.url is for"), "{err}");
}

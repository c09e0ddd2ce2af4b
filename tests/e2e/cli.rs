//! The command line of the real binary: `--help` documents every flag, bad values stop it with
//! a message naming the flag.

use crate::common::run_to_exit;

/// Every flag the operations guide promises.
const FLAGS: &[&str] = &[
    "--data-dir",
    "--listen",
    "--retention",
    "--partition-duration",
    "--ooo-window",
    "--future-window",
    "--wal-sync",
    "--wal-segment-size",
    "--wal-truncate-corrupt",
    "--block-samples-max",
    "--block-grid",
    "--head-samples-max",
    "--head-flush-interval",
    "--maintenance-interval",
    "--compact-files-min",
    "--log-level",
];

#[test]
fn help_lists_every_flag_with_its_default() {
    let out = run_to_exit(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for flag in FLAGS {
        assert!(help.contains(flag), "--help does not mention {flag}:\n{help}");
    }
    for default in ["[default: ./data]", "[default: 127.0.0.1:9201]", "[default: 15d]", "[default: batch]"] {
        assert!(help.contains(default), "--help lacks {default}:\n{help}");
    }
}

#[test]
fn version_prints_the_crate_version() {
    let out = run_to_exit(&["--version"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        format!("strata {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn bad_flag_values_exit_2_naming_the_flag_and_the_value() {
    let cases: &[&[&str]] = &[
        &["--retention", "15x"],
        &["--partition-duration", "0"],
        &["--ooo-window", "soon"],
        &["--wal-sync", "sometimes"],
        &["--wal-segment-size", "lots"],
        &["--block-samples-max=-1"],
        &["--compact-files-min", "1"],
        &["--log-level", "info,["],
    ];
    for args in cases {
        let out = run_to_exit(args);
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        // Either `--flag value` or `--flag=value` (so that a value starting with '-' reaches
        // the flag): the message names both.
        let (flag, value) = args[0].split_once('=').unwrap_or((args[0], args.get(1).copied().unwrap_or("")));
        assert!(stderr.contains(flag) && stderr.contains(value), "{args:?}: {stderr}");
    }
}

/// A log filter that names no level is refused before anything starts (exit 2, naming the
/// accepted levels), from the flag and from RUST_LOG alike: tracing would read `warning` or a
/// typo as a target and start a server that logs nothing, fatal errors included.
#[test]
fn a_log_filter_without_a_level_exits_2_naming_the_levels() {
    for args in [&["--log-level", "warning-ish"][..], &["--log-level", "verbose"][..]] {
        let out = run_to_exit(args);
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("error, warn (or warning), info, debug, trace, off"), "{args:?}: {stderr}");
    }
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env("RUST_LOG", "garbage!!")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("RUST_LOG=\"garbage!!\"") && stderr.contains("info, debug"), "{stderr}");
}

#[test]
fn unknown_flags_exit_2() {
    let out = run_to_exit(&["--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8(out.stderr).unwrap().contains("--no-such-flag"));
}

#[test]
fn an_invalid_rust_log_is_reported_not_ignored() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["--data-dir", "/nonexistent/never-created", "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info,[")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8(out.stderr).unwrap().contains("RUST_LOG"));
}

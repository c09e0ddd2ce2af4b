//! The real `strata` binary over real sockets: health endpoints, startup failures, and graceful
//! shutdown on SIGTERM/SIGINT followed by a restart on the same data directory.

use std::ffi::OsStr;

use crate::common::Strata;
use nix::sys::signal::Signal;

#[test]
fn serves_healthy_and_ready_once_the_database_is_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut strata = Strata::start(dir.path());
    strata.wait_ready();

    let healthy = strata.get("/-/healthy");
    assert_eq!((healthy.status, healthy.body.as_str()), (200, "strata is Healthy.\n"));
    let ready = strata.get("/-/ready");
    assert_eq!((ready.status, ready.body.as_str()), (200, "strata is Ready.\n"));
    let head = strata.head("/-/ready");
    assert_eq!((head.status, head.body.as_str()), (200, ""));
}

#[test]
fn unknown_routes_are_404() {
    let dir = tempfile::tempdir().unwrap();
    let mut strata = Strata::start(dir.path());
    strata.wait_ready();
    assert_eq!(strata.get("/no/such/route").status, 404);
    assert_eq!(strata.get("/api/v1/nope").status, 404);
}

#[test]
fn sigterm_shuts_down_cleanly_and_the_directory_opens_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = Strata::start(dir.path());
    first.wait_ready();
    let status = first.terminate();
    assert_eq!(status.code(), Some(0), "log:\n{}", first.log());
    let log = first.log();
    assert!(log.contains("signal=\"SIGTERM\""), "{log}");
    assert!(log.contains("closing the database"), "{log}");
    assert!(log.contains("strata stopped"), "{log}");

    let mut second = Strata::start(dir.path());
    second.wait_ready();
    assert_eq!(second.get("/-/ready").status, 200);
    assert_eq!(second.terminate().code(), Some(0), "log:\n{}", second.log());
}

#[test]
fn sigint_shuts_down_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut strata = Strata::start(dir.path());
    strata.wait_ready();
    strata.signal(Signal::SIGINT);
    assert_eq!(strata.wait_exit().code(), Some(0), "log:\n{}", strata.log());
    assert!(strata.log().contains("signal=\"SIGINT\""), "{}", strata.log());
}

#[test]
fn a_database_that_cannot_open_exits_non_zero_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    // A regular file where the data directory should be.
    let not_a_dir = dir.path().join("data");
    std::fs::write(&not_a_dir, b"not a directory").unwrap();
    let mut strata = Strata::spawn(&not_a_dir, &[]);
    let status = strata.wait_exit();
    assert_eq!(status.code(), Some(1), "log:\n{}", strata.log());
    let log = strata.log();
    assert!(log.contains("cannot open the database in"), "{log}");
    assert!(log.contains(&not_a_dir.display().to_string()), "{log}");
}

#[test]
fn a_taken_port_exits_non_zero_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = Strata::start(&dir.path().join("a"));
    first.wait_ready();
    let taken = first.addr().to_string();
    let data = dir.path().join("b");
    let mut second = Strata::launch([
        OsStr::new("--data-dir"),
        data.as_os_str(),
        OsStr::new("--listen"),
        OsStr::new(&taken),
    ]);
    let status = second.wait_exit();
    assert_eq!(status.code(), Some(1), "log:\n{}", second.log());
    let log = second.log();
    assert!(log.contains(&format!("cannot listen on {taken}")), "{log}");
    assert_eq!(first.terminate().code(), Some(0));
}

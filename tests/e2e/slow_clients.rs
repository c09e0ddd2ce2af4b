//! Clients that are slow or too many, against the real binary: a client that never finishes
//! its headers, or keeps a connection idle, is disconnected after `--web.read-timeout`; write
//! requests beyond `--write-max-concurrency` wait for a slot and, after
//! `--write-max-queue-duration`, get 503 with `Retry-After`, while the request holding the slot
//! completes normally.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::Strata;

/// Reads until the server closes the connection, returning what it sent and how long the close
/// took; fails if the connection is still open after `guard`.
fn read_until_closed(stream: &mut TcpStream, guard: Duration) -> (String, Duration) {
    let started = Instant::now();
    stream.set_read_timeout(Some(guard)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => break,
            Err(e) => panic!(
                "connection still open after {guard:?} ({e}); received {:?}",
                String::from_utf8_lossy(&got)
            ),
        }
    }
    (String::from_utf8_lossy(&got).into_owned(), started.elapsed())
}

#[test]
fn unfinished_headers_and_idle_connections_are_closed_after_the_read_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let mut strata = Strata::start_with(dir.path(), &["--web.read-timeout=1s"]);
    strata.wait_ready();

    // Half a request, then silence.
    let mut slow = TcpStream::connect(strata.addr()).unwrap();
    slow.write_all(b"GET /-/healthy HTTP/1.1\r\nHost: strata\r\n").unwrap();
    let (_, took) = read_until_closed(&mut slow, Duration::from_secs(30));
    assert!(took >= Duration::from_millis(900), "closed after {took:?}, before the timeout");

    // A whole request is answered; the kept-alive connection is then closed once idle.
    let mut idle = TcpStream::connect(strata.addr()).unwrap();
    idle.write_all(b"GET /-/healthy HTTP/1.1\r\nHost: strata\r\n\r\n").unwrap();
    let (answer, took) = read_until_closed(&mut idle, Duration::from_secs(30));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(took >= Duration::from_millis(900), "closed after {took:?}, before the timeout");

    // The server itself is unaffected.
    assert_eq!(strata.get("/-/ready").status, 200);
    assert_eq!(strata.terminate().code(), Some(0), "log:\n{}", strata.log());
}

#[test]
fn writes_beyond_the_concurrency_limit_wait_then_get_503_with_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--write-max-concurrency=1", "--write-max-queue-duration=300ms"];
    let mut strata = Strata::start_with(dir.path(), &args);
    strata.wait_ready();

    // A slow writer takes the only slot: its headers are in, its body is still coming.
    let body = b"slow,host=a value=1 1700000000000000000\n";
    let mut slow = TcpStream::connect(strata.addr()).unwrap();
    let head = format!("POST /write?db=x HTTP/1.1\r\nHost: strata\r\nContent-Length: {}\r\n\r\n", body.len());
    slow.write_all(head.as_bytes()).unwrap();
    slow.write_all(&body[..5]).unwrap();
    std::thread::sleep(Duration::from_millis(200));

    // Another writer waits for the queue duration, then is told to come back.
    let started = Instant::now();
    let busy = strata.post("/write?db=x", &[], b"fast,host=b value=2 1700000000000000000\n");
    let waited = started.elapsed();
    assert_eq!(busy.status, 503, "{}", busy.body);
    assert!(busy.header("Retry-After").is_some(), "{:?}", busy.headers);
    assert!(busy.body.contains("busy"), "{}", busy.body);
    assert!(waited >= Duration::from_millis(250), "answered after {waited:?}, without waiting");
    // Each write route answers in its own dialect: InfluxDB's error object and version header
    // for line protocol, the Prometheus envelope for remote write.
    assert!(busy.body.starts_with(r#"{"error":"#), "{}", busy.body);
    assert!(busy.header("X-Influxdb-Version").is_some(), "{:?}", busy.headers);
    let busy_v2 = strata.post("/api/v2/write?bucket=x", &[], b"fast,host=b value=2 1700000000000000000\n");
    assert_eq!(busy_v2.status, 503, "{}", busy_v2.body);
    assert!(busy_v2.header("X-Influxdb-Version").is_some(), "{:?}", busy_v2.headers);
    let busy_v1 = strata.post("/api/v1/write", &[("Content-Encoding", "snappy")], b"");
    assert_eq!(busy_v1.status, 503, "{}", busy_v1.body);
    assert!(busy_v1.body.starts_with(r#"{"status":"error","errorType":"unavailable""#), "{}", busy_v1.body);

    // The slow writer finishes and is stored; the slot is free again.
    slow.write_all(&body[5..]).unwrap();
    let (answer, _) = {
        slow.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut buf = [0u8; 1024];
        let n = slow.read(&mut buf).unwrap();
        (String::from_utf8_lossy(&buf[..n]).into_owned(), ())
    };
    assert!(answer.starts_with("HTTP/1.1 204"), "{answer}");
    let after = strata.post("/write?db=x", &[], b"fast,host=b value=2 1700000000000000000\n");
    assert_eq!(after.status, 204, "{}", after.body);

    let metrics = strata.get("/metrics").body;
    assert!(
        metrics.lines().any(|l| l.starts_with("strata_http_requests_total") && l.contains("code=\"503\"")),
        "{metrics}"
    );
    assert_eq!(strata.terminate().code(), Some(0), "log:\n{}", strata.log());
}

//! `strata-bench client-floor`: what the harness's HTTP client adds to a request.
//!
//! The same GET is sent over one kept-alive connection by three clients in turn: a raw socket
//! (the request written by hand, the answer read by its `Content-Length`: no library at all),
//! the harness's [`Http`] client (a timeout per phase), and `ureq` with one global timeout (with
//! a timeout covering name resolution, `ureq` resolves every request's address on a thread it
//! spawns, which is why the harness sets one per phase). The differences between their latencies are what
//! each client costs; the raw socket's is the server's floor plus the loopback.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::http::Http;
use super::query_run::quantile;

#[derive(clap::Args)]
pub struct Args {
    /// Server to ask, as host:port.
    #[arg(long, default_value = "127.0.0.1:9201")]
    addr: String,
    /// Requests per client.
    #[arg(long, default_value_t = 3000)]
    requests: usize,
    /// Path and query string to GET (asked for gzip, as the harness asks).
    #[arg(long, default_value = "/api/v1/query?query=1")]
    path: String,
}

pub fn run(args: Args) -> Result<(), String> {
    let n = args.requests.max(1);
    let url = format!("http://{}{}", args.addr, args.path);
    let timeout = Duration::from_secs(60);

    let raw = {
        let mut conn = RawConn::connect(&args.addr)?;
        time(n, || conn.get(&args.path))?
    };
    let harness = {
        let http = Http::new(1, timeout).gzip_answers(true);
        time(n, || http.get_ok(&url).map(|b| b.len()))?
    };
    let global = {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(timeout))
            .build()
            .into();
        time(n, || {
            let mut resp = agent
                .get(&url)
                .header("Accept-Encoding", "gzip")
                .call()
                .map_err(|e| format!("GET {url}: {e}"))?;
            resp.body_mut().read_to_vec().map(|b| b.len()).map_err(|e| format!("{url}: {e}"))
        })?
    };

    println!("GET {url}, {n} requests per client over one kept-alive connection (ms)");
    println!("| client | p50 | p90 | p99 |");
    println!("|---|---|---|---|");
    for (name, lat) in [
        ("raw socket", raw),
        ("harness (a timeout per phase)", harness),
        ("ureq with a global timeout", global),
    ] {
        println!(
            "| {name} | {:.3} | {:.3} | {:.3} |",
            quantile(&lat, 0.5),
            quantile(&lat, 0.9),
            quantile(&lat, 0.99)
        );
    }
    Ok(())
}

/// Latencies in ms of `n` calls of `get`, sorted.
fn time(n: usize, mut get: impl FnMut() -> Result<usize, String>) -> Result<Vec<f64>, String> {
    let mut lat = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        get()?;
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    lat.sort_by(f64::total_cmp);
    Ok(lat)
}

/// One kept-alive HTTP/1.1 connection, read by hand.
struct RawConn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl RawConn {
    fn connect(addr: &str) -> Result<Self, String> {
        let stream = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        Ok(RawConn { stream, buf: vec![0; 1 << 16] })
    }

    /// GETs `path`; the answer body's length. Needs a `Content-Length` answer (strata and
    /// VictoriaMetrics send one for API answers).
    fn get(&mut self, path: &str) -> Result<usize, String> {
        let req = format!("GET {path} HTTP/1.1\r\nHost: bench\r\nAccept-Encoding: gzip\r\n\r\n");
        self.stream.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
        let mut have = 0;
        let (head_end, len) = loop {
            have += self.read_more(have)?;
            if let Some(i) = self.buf[..have].windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..i]).to_ascii_lowercase();
                if !head.starts_with("http/1.1 200") {
                    return Err(format!("GET {path}: {}", head.lines().next().unwrap_or("")));
                }
                let len = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .ok_or_else(|| format!("GET {path}: no Content-Length"))?;
                break (i + 4, len);
            }
        };
        while have < head_end + len {
            have += self.read_more(have)?;
        }
        Ok(len)
    }

    /// Reads into the buffer after `have` bytes (growing it when full); how many bytes came.
    fn read_more(&mut self, have: usize) -> Result<usize, String> {
        if have == self.buf.len() {
            self.buf.resize(have * 2, 0);
        }
        match self.stream.read(&mut self.buf[have..]) {
            Ok(0) => Err("connection closed".into()),
            Ok(k) => Ok(k),
            Err(e) => Err(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader};
    use std::net::TcpListener;

    use super::*;

    /// Answers the requests on one connection with the given status lines and bodies, in order.
    fn serve(answers: Vec<(&'static str, String)>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut writer = stream;
            for (status, body) in answers {
                let mut line = String::new();
                while reader.read_line(&mut line).unwrap() > 0 && line != "\r\n" {
                    line.clear();
                }
                let head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n\r\n", body.len());
                writer.write_all(head.as_bytes()).unwrap();
                writer.write_all(body.as_bytes()).unwrap();
            }
        });
        addr
    }

    #[test]
    fn the_raw_client_reads_whole_answers_on_one_connection_and_refuses_errors() {
        let addr = serve(vec![
            ("200 OK", "{}".into()),
            ("200 OK", "x".repeat(200_000)),
            ("400 Bad Request", "no".into()),
        ]);
        let mut conn = RawConn::connect(&addr).unwrap();
        assert_eq!(conn.get("/a").unwrap(), 2);
        assert_eq!(conn.get("/b").unwrap(), 200_000, "an answer larger than the buffer");
        let err = conn.get("/c").unwrap_err();
        assert!(err.contains("400"), "{err}");
    }
}

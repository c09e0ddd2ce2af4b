//! A small blocking HTTP client over `ureq`: status codes are returned, not turned into errors,
//! because the harness checks every answer itself.

use std::io::Read;
use std::time::Duration;

/// Largest answer body read (query answers of high-cpu-all can be tens of megabytes).
const BODY_MAX: u64 = 1 << 30;

/// A connection-pooling client shared by all worker threads (cheap to clone).
#[derive(Clone)]
pub struct Http {
    agent: ureq::Agent,
    /// Whether GETs ask for gzipped answers (and decompress them).
    gzip_answers: bool,
}

impl Http {
    /// A client with keep-alive connections for up to `connections` concurrent workers and a
    /// `timeout` on each phase of a request (connecting, sending, waiting for the answer,
    /// reading its body).
    ///
    /// Not `timeout_global`: with any timeout that covers name resolution, ureq resolves every
    /// request's address, an IP literal and a kept-alive connection included, on a thread it
    /// spawns for the purpose. That thread cost 0.08-0.1 ms per request, as much as strata's
    /// whole request floor, added to every timed query of every system, and its stack's
    /// mapping and unmapping showed up as outliers.
    pub fn new(connections: usize, timeout: Duration) -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_idle_connections(connections.max(4) * 2)
            .max_idle_connections_per_host(connections.max(4) * 2)
            .timeout_connect(Some(timeout))
            .timeout_send_request(Some(timeout))
            .timeout_send_body(Some(timeout))
            .timeout_recv_response(Some(timeout))
            .timeout_recv_body(Some(timeout))
            .build()
            .into();
        Http { agent, gzip_answers: false }
    }

    /// GETs ask for gzipped answers, as Go's HTTP client does, and decompress what comes gzipped.
    pub fn gzip_answers(mut self, on: bool) -> Self {
        self.gzip_answers = on;
        self
    }

    /// GET `url`: status and body.
    pub fn get(&self, url: &str) -> Result<(u16, Vec<u8>), String> {
        let mut req = self.agent.get(url);
        if self.gzip_answers {
            req = req.header("Accept-Encoding", "gzip");
        }
        let resp = req.call().map_err(|e| format!("GET {url}: {e}"))?;
        let gzipped = resp.headers().get("Content-Encoding").is_some_and(|v| v == "gzip");
        let (status, body) = read(resp, url)?;
        if !gzipped {
            return Ok((status, body));
        }
        let mut plain = Vec::with_capacity(body.len() * 4);
        flate2::read::GzDecoder::new(&body[..])
            .take(BODY_MAX)
            .read_to_end(&mut plain)
            .map_err(|e| format!("{url}: gzipped answer: {e}"))?;
        Ok((status, plain))
    }

    /// GET `url`, failing unless the status is 2xx.
    pub fn get_ok(&self, url: &str) -> Result<Vec<u8>, String> {
        let (status, body) = self.get(url)?;
        if (200..300).contains(&status) {
            Ok(body)
        } else {
            Err(format!("GET {url}: status {status}: {}", String::from_utf8_lossy(&body)))
        }
    }

    /// POST `body` to `url` with `headers`: status and answer body.
    pub fn post(&self, url: &str, body: &[u8], content_type: &str) -> Result<(u16, Vec<u8>), String> {
        self.post_with(url, body, &[("Content-Type", content_type)])
    }

    /// POST `body` to `url` with the given headers.
    pub fn post_with(
        &self,
        url: &str,
        body: &[u8],
        headers: &[(&str, &str)],
    ) -> Result<(u16, Vec<u8>), String> {
        let mut req = self.agent.post(url);
        for (k, v) in headers.iter().filter(|(_, v)| !v.is_empty()) {
            req = req.header(*k, *v);
        }
        let resp = req.send(body).map_err(|e| format!("POST {url}: {e}"))?;
        read(resp, url)
    }
}

fn read(mut resp: ureq::http::Response<ureq::Body>, url: &str) -> Result<(u16, Vec<u8>), String> {
    let status = resp.status().as_u16();
    let body =
        resp.body_mut().with_config().limit(BODY_MAX).read_to_vec().map_err(|e| format!("{url}: {e}"))?;
    Ok((status, body))
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;

    use super::*;

    /// Serves one connection: answers each request with `body`, gzipped when it was asked for,
    /// and reports whether each request asked.
    fn serve(body: &'static str, requests: usize) -> (String, std::thread::JoinHandle<Vec<bool>>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let handle = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut writer = stream;
            let mut asked = Vec::new();
            for _ in 0..requests {
                let mut gzip = false;
                loop {
                    let mut line = String::new();
                    reader.read_line(&mut line).unwrap();
                    if line.trim().is_empty() {
                        break;
                    }
                    gzip |= line.to_ascii_lowercase().starts_with("accept-encoding: gzip");
                }
                let (encoding, bytes) = if gzip {
                    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                    e.write_all(body.as_bytes()).unwrap();
                    ("Content-Encoding: gzip\r\n", e.finish().unwrap())
                } else {
                    ("", body.as_bytes().to_vec())
                };
                let head = format!("HTTP/1.1 200 OK\r\n{encoding}Content-Length: {}\r\n\r\n", bytes.len());
                writer.write_all(head.as_bytes()).unwrap();
                writer.write_all(&bytes).unwrap();
                asked.push(gzip);
            }
            asked
        });
        (base, handle)
    }

    /// No timeout may cover name resolution (see [`Http::new`]), yet a server that never
    /// answers still fails the request after the timeout.
    #[test]
    fn requests_time_out_without_a_resolver_thread() {
        let http = Http::new(1, Duration::from_millis(300));
        let t = http.agent.config().timeouts();
        assert_eq!((t.global, t.per_call, t.resolve), (None, None, None));
        assert_eq!(t.recv_response, Some(Duration::from_millis(300)));

        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/never", listener.local_addr().unwrap());
        let started = std::time::Instant::now();
        let err = http.get(&url).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(10), "{err}");
        assert!(err.contains("timeout") || err.contains("Timeout"), "{err}");
        drop(listener);
    }

    #[test]
    fn gzipped_answers_are_asked_for_and_decompressed_only_when_enabled() {
        let body = r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
        let (base, server) = serve(body, 2);
        let http = Http::new(1, Duration::from_secs(10));
        assert_eq!(http.get(&format!("{base}/plain")).unwrap(), (200, body.as_bytes().to_vec()));
        let http = http.gzip_answers(true);
        assert_eq!(http.get(&format!("{base}/gzip")).unwrap(), (200, body.as_bytes().to_vec()));
        assert_eq!(server.join().unwrap(), vec![false, true]);
    }
}

//! A small blocking HTTP client over `ureq`: status codes are returned, not turned into errors,
//! because the harness checks every answer itself.

use std::time::Duration;

/// Largest answer body read (query answers of high-cpu-all can be tens of megabytes).
const BODY_MAX: u64 = 1 << 30;

/// A connection-pooling client shared by all worker threads (cheap to clone).
#[derive(Clone)]
pub struct Http {
    agent: ureq::Agent,
}

impl Http {
    /// A client with keep-alive connections for up to `connections` concurrent workers and a
    /// per-request `timeout`.
    pub fn new(connections: usize, timeout: Duration) -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .max_idle_connections(connections.max(4) * 2)
            .max_idle_connections_per_host(connections.max(4) * 2)
            .timeout_global(Some(timeout))
            .build()
            .into();
        Http { agent }
    }

    /// GET `url`: status and body.
    pub fn get(&self, url: &str) -> Result<(u16, Vec<u8>), String> {
        let resp = self.agent.get(url).call().map_err(|e| format!("GET {url}: {e}"))?;
        read(resp, url)
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

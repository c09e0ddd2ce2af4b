//! Per-endpoint request counts and latencies, and the number of requests in flight.
//!
//! Endpoints are keyed by their route template (`/api/v1/label/{name}/values`, never the raw
//! path), so the set is bounded by the router; requests no route matched share one key. An
//! endpoint's counters are created the first time it answers and then live for the process:
//! every later request takes a read lock to find them and bumps relaxed atomics — one per status
//! code (a fixed array over every code HTTP allows) and the latency histogram's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use storage::buckets::BucketHistogram;

use super::exposition::{Exposition, Kind};

/// The route label of requests no route matched, so unknown paths cannot grow the map.
pub const UNMATCHED_ROUTE: &str = "other";

/// Status codes are 100..=999 (the `http` crate's `StatusCode` guarantees it).
const FIRST_CODE: u16 = 100;
const CODES: usize = 900;

/// Request latency bucket bounds in nanoseconds: 1 ms (a ping, a small write) to 2 min (a
/// heavy range query near its timeout).
const REQUEST_NANOS_BUCKETS: &[u64] = &[
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
    30_000_000_000,
    60_000_000_000,
    120_000_000_000,
];

/// The counters of one route.
#[derive(Debug)]
struct Endpoint {
    /// Requests answered, indexed by `code - FIRST_CODE`.
    codes: Box<[AtomicU64]>,
    /// Time from the request reaching the router to the response head being ready, in ns.
    duration: BucketHistogram,
}

impl Endpoint {
    fn new() -> Endpoint {
        Endpoint {
            codes: (0..CODES).map(|_| AtomicU64::new(0)).collect(),
            duration: BucketHistogram::new(REQUEST_NANOS_BUCKETS),
        }
    }

    fn code(&self, code: u16) -> Option<&AtomicU64> {
        self.codes.get(usize::from(code.checked_sub(FIRST_CODE)?))
    }
}

/// Request metrics for `/metrics`, shared by every request through the middleware.
#[derive(Debug, Default)]
pub struct HttpMetrics {
    endpoints: RwLock<HashMap<String, Arc<Endpoint>>>,
    in_flight: AtomicU64,
}

/// Counts a request as in flight until dropped, so a request whose client went away (its
/// future dropped mid-way) still leaves the gauge.
#[derive(Debug)]
pub struct InFlight<'a>(&'a AtomicU64);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl HttpMetrics {
    /// Marks a request as started; it counts as in flight until the guard is dropped.
    pub fn start(&self) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(&self.in_flight)
    }

    /// Counts one answered request of `route` with status `code` that took `elapsed`.
    pub fn finish(&self, route: &str, code: u16, elapsed: Duration) {
        let endpoint = self.endpoint(route);
        if let Some(counter) = endpoint.code(code) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
        endpoint.duration.observe_duration(elapsed);
    }

    /// Requests of `route` answered with `code` so far (for tests and diagnostics).
    pub fn requests(&self, route: &str, code: u16) -> u64 {
        let endpoints = self.endpoints.read().unwrap_or_else(PoisonError::into_inner);
        endpoints.get(route).and_then(|e| e.code(code)).map_or(0, |counter| counter.load(Ordering::Relaxed))
    }

    /// Requests being served right now.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    fn endpoint(&self, route: &str) -> Arc<Endpoint> {
        let found = self.endpoints.read().unwrap_or_else(PoisonError::into_inner).get(route).cloned();
        match found {
            Some(endpoint) => endpoint,
            None => {
                let mut endpoints = self.endpoints.write().unwrap_or_else(PoisonError::into_inner);
                Arc::clone(endpoints.entry(route.to_owned()).or_insert_with(|| Arc::new(Endpoint::new())))
            }
        }
    }

    /// Writes the request families, endpoints in name order.
    pub(super) fn write_to(&self, out: &mut Exposition) {
        let mut endpoints: Vec<(String, Arc<Endpoint>)> = {
            let map = self.endpoints.read().unwrap_or_else(PoisonError::into_inner);
            map.iter().map(|(route, e)| (route.clone(), Arc::clone(e))).collect()
        };
        endpoints.sort_by(|a, b| a.0.cmp(&b.0));

        out.family(
            "strata_http_requests_total",
            Kind::Counter,
            "HTTP requests answered, by route template and status code.",
        );
        for (route, endpoint) in &endpoints {
            for (code, counter) in (FIRST_CODE..).zip(endpoint.codes.iter()) {
                let n = counter.load(Ordering::Relaxed);
                if n > 0 {
                    out.sample(
                        "strata_http_requests_total",
                        &[("handler", route), ("code", &code.to_string())],
                        n,
                    );
                }
            }
        }

        out.family(
            "strata_http_request_duration_seconds",
            Kind::Histogram,
            "Time from a request reaching the router until its response head is ready, by route template.",
        );
        for (route, endpoint) in &endpoints {
            let h = endpoint.duration.snapshot();
            out.histogram("strata_http_request_duration_seconds", &[("handler", route)], &h, 1e9);
        }

        out.single(
            "strata_http_requests_in_flight",
            Kind::Gauge,
            "HTTP requests being served right now, this scrape included.",
            self.in_flight(),
        );
    }
}

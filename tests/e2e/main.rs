//! The black-box tests: the real `strata` binary (`CARGO_BIN_EXE_strata`) started on an
//! ephemeral port with its own data directory, driven over real sockets by real clients
//! (Prometheus, promtool, vmalert, InfluxDB, Chromium, curl, Ceph's S3 gateway) and our own.
//!
//! One test binary, one module per subject, so the suite links once. [`common`] starts and
//! stops strata and the peers; a peer that is not installed fails the test under CI and is
//! skipped with a printed line elsewhere. Run one subject with
//! `cargo test --test e2e -- query_api::`.

mod common;

mod auth_tls;
mod bucket;
mod cardinality;
mod cli;
mod dashboards;
mod disk_full;
mod grafana_api;
mod histogram_api;
mod influx_differential;
mod ingest;
mod ingest_log;
mod metrics;
mod prometheus;
mod promtool_query;
mod query_api;
mod remote_read;
mod s3;
mod server;
mod slow_clients;
mod tenants;
mod ui_browser;

//! The strata server: command-line flags, the HTTP router and the process lifecycle around
//! `storage::Db`.
//!
//! `main.rs` parses [`config::Cli`], starts logging and calls [`server::run`], which binds the
//! listener, opens the database on a blocking thread and serves until SIGTERM/SIGINT
//! ([`shutdown`]). Handlers share [`state::AppState`]; API errors go through the single
//! [`error::ApiError`] mapping to Prometheus' error envelope (or, on the write endpoints, to the
//! sender's dialect). Writes come in through [`ingest`] (remote write, Influx line protocol),
//! with [`influx`] answering the InfluxDB 1.x side endpoints; [`metrics`] serves `/metrics`. This crate is the only one that
//! knows HTTP and JSON; `storage`, `promql` and `remote` know nothing about them.

pub mod api;
pub mod auth;
pub mod config;
pub mod duration;
pub mod error;
pub mod health;
pub mod influx;
pub mod ingest;
pub mod log;
pub mod metadata;
pub mod metrics;
pub mod query_node;
pub mod server;
pub mod shutdown;
pub mod size;
pub mod state;
pub mod tenant;
pub mod tls;
pub mod ui;

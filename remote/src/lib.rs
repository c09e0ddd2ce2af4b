//! Wire formats: bytes in, [`storage::BatchRef`] out (or an owned [`storage::Batch`]).
//!
//! Decoders do not copy label strings: the batch borrows them from the (decompressed) request
//! and the server appends it with `storage::Db::append_ref`, so a sample of a known series
//! costs no allocation from the wire to the series index. Each decoder also has an owned
//! variant (`prw::decode`, `line::parse`) for tests and tools.
//!
//! * [`prw`]: Prometheus remote write 1.0 (`prometheus.WriteRequest`) and 2.0
//!   (`io.prometheus.write.v2.Request`), snappy-compressed protobuf.
//! * [`line`]: Influx line protocol, plain or gzip.
//! * [`read`]: Prometheus remote read requests, sampled and streamed (XOR chunk) responses.
//!
//! This crate knows no HTTP framework: the server reads headers and bodies, calls these
//! functions on a blocking thread, and answers with [`Error::status_hint`]. Every decoder is a
//! total function over untrusted bytes: it returns an error, never panics, and checks
//! [`Limits`] before doing the work they bound.

// Request bytes are untrusted: no unwrap, expect or unchecked indexing outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing))]

mod bytes;
pub mod error;
pub mod limits;
pub mod line;
pub mod metadata;
pub mod prw;
pub mod read;

pub use error::{Error, Result};
pub use limits::Limits;

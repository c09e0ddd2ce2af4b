//! Sample encodings: the on-disk block format and the in-memory head chunk.
//!
//! * [`encode_block`] / [`decode_block`] turn a run of samples of one series into a
//!   self-contained block for a partition file, choosing per block the smallest timestamp codec
//!   (constant interval, Gorilla delta-of-delta, an integer sequence of deltas / grid offsets /
//!   deltas of deltas, varint intervals) and value codec (constant, scaled integers with FOR,
//!   Rice or zero-run packed residuals, Gorilla XOR). Integer and few-decimal data, which most
//!   metrics are, thereby costs well under half a byte per sample, where plain Gorilla costs
//!   about one. Layout: `docs/format/block.md`.
//! * [`BlockStats`] are a block's count, sum, min, max, first and last, kept beside it in the
//!   file index so queries can aggregate whole blocks without decoding them.
//! * [`XorChunk`] is the head's appendable Gorilla chunk, compressed as samples arrive.
//!
//! Everything round-trips every `f64` bit pattern (NaN payloads, the stale marker, -0.0, ±Inf)
//! and any strictly increasing `i64` timestamps. Decoders are total: bad bytes give
//! [`Error::Decode`](crate::Error::Decode), never a panic.
//!
//! Internal layering: `varint`, `bits` and `float_class` are the primitives; `dod` and `xor`
//! are the Gorilla coders shared by the chunk and the block; `intpack` packs integer residuals
//! (FOR, Rice, zero runs) and `intseq` chooses their order; `timestamps`, `values` and `scaled`
//! are the block's section codecs; `block` frames them.

// Decoders handle untrusted bytes: no panicking shortcuts outside tests.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing, clippy::panic)
)]

pub(crate) mod bits;
mod block;
mod dod;
mod float_class;
mod intpack;
mod intseq;
mod scaled;
mod stats;
#[cfg(test)]
mod test_support;
mod timestamps;
mod values;
pub(crate) mod varint;
pub(crate) mod xor;
mod xor_chunk;

pub use block::{
    PrefixSum, block_has_time_in, decode_block, decode_block_until, decode_indexed_block, encode_indexed_block,
    integral_indexed_values, integral_values, sum_block_until,
};
#[cfg(any(test, feature = "testing"))]
pub use block::{BlockHeader, block_header, encode_block};
pub use stats::{BlockStats, StatsChain};
pub use xor_chunk::XorChunk;
#[cfg(any(test, feature = "testing"))]
pub use xor_chunk::XorIter;

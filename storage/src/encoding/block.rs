//! A block: up to `u32::MAX` samples of one series encoded as a header, a timestamp section and
//! a value section, each with the codec that gave the fewest bytes for this block. The byte
//! layout is specified in `docs/format/block.md`:
//!
//! ```text
//! ┌──────────────────────────────────┬─────────────────┬──────────────────┬───────────────┐
//! │ codecs <u8>: ts | value << 4     │ count <uvarint> │ timestamps       │ values        │
//! └──────────────────────────────────┴─────────────────┴──────────────────┴───────────────┘
//! ```
//!
//! A block carries no checksum; the partition file that holds it covers it with its own.

use super::stats::BlockStats;
use super::timestamps::TS_IMPLIED;
use super::varint::{get_u8, get_uvarint, put_uvarint};
use super::{timestamps, values};
use crate::error::{Error, Result};
use crate::types::Sample;

/// Encodes `samples` (strictly increasing `t`, non-empty, at most `u32::MAX` of them) as one
/// block appended to `out`, choosing the smallest codec for timestamps and for values
/// separately, and returns the block's statistics for the file index.
///
/// The caller guarantees the preconditions (the head and compaction produce sorted, deduplicated
/// runs); they are checked in debug builds. Any `f64` bits are stored exactly.
///
/// Only tests call it: flush and compaction write their blocks with [`encode_indexed_block`].
#[cfg(any(test, feature = "testing"))]
pub fn encode_block(samples: &[Sample], out: &mut Vec<u8>) -> BlockStats {
    encode_block_with(samples, out, None, None)
}

/// [`encode_block`] for a block whose returned statistics the caller stores beside it (a
/// partition file of format version 2): when the timestamps are a constant interval, the block
/// leaves out its count and timestamp section (timestamp codec 4, *implied*), which the
/// statistics already say: 8-10 bytes less for every regular block. Decode it with
/// [`decode_indexed_block`] and the same statistics.
pub fn encode_indexed_block(samples: &[Sample], out: &mut Vec<u8>) -> BlockStats {
    let constant = timestamps::constant_interval(&samples.iter().map(|s| s.t).collect::<Vec<_>>()).is_some();
    encode_block_with(samples, out, constant.then_some(TS_IMPLIED), None)
}

/// [`encode_block`] with codecs pinned (tests use this to cover every codec; [`TS_IMPLIED`]
/// only for a constant interval).
pub(crate) fn encode_block_with(
    samples: &[Sample],
    out: &mut Vec<u8>,
    ts_codec: Option<u8>,
    val_codec: Option<u8>,
) -> BlockStats {
    debug_assert!(!samples.is_empty(), "encode_block needs at least one sample");
    debug_assert!(u32::try_from(samples.len()).is_ok(), "encode_block takes at most u32::MAX samples");
    debug_assert!(
        samples.windows(2).all(|w| matches!(w, [a, b] if a.t < b.t)),
        "timestamps must strictly increase"
    );
    let ts: Vec<i64> = samples.iter().map(|s| s.t).collect();
    let vs: Vec<f64> = samples.iter().map(|s| s.v).collect();
    // The codec byte is known only after the sections are written: reserve it, patch it.
    let header_at = out.len();
    out.push(0);
    let tc = if ts_codec == Some(TS_IMPLIED) {
        debug_assert!(
            timestamps::constant_interval(&ts).is_some(),
            "implied timestamps need a constant interval"
        );
        TS_IMPLIED
    } else {
        put_uvarint(out, samples.len() as u64);
        timestamps::encode(&ts, out, ts_codec)
    };
    let vc = values::encode(&vs, out, val_codec);
    if let Some(b) = out.get_mut(header_at) {
        *b = tc | vc << 4;
    }
    BlockStats::from_samples(samples)
}

/// The codecs and sample count in a block's header, without decoding it. Callers that enforce a
/// sample limit check `count` before [`decode_block`] allocates.
#[cfg(any(test, feature = "testing"))]
pub fn block_header(bytes: &[u8]) -> Result<BlockHeader> {
    let mut pos = 0;
    BlockHeader::read(bytes, &mut pos, None)
}

/// The fixed part of a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    /// Timestamp codec id (see `docs/format/block.md`).
    pub ts_codec: u8,
    /// Value codec id.
    pub value_codec: u8,
    /// Number of samples.
    pub count: u32,
}

impl BlockHeader {
    /// Reads the header; `stats` are the block's statistics from the file index, which a
    /// [`TS_IMPLIED`] block takes its count from (an error without them).
    fn read(bytes: &[u8], pos: &mut usize, stats: Option<&BlockStats>) -> Result<BlockHeader> {
        let codecs = get_u8(bytes, pos)?;
        let count = if codecs & 0x0f == TS_IMPLIED {
            let st = stats.ok_or_else(|| {
                Error::Decode("timestamp codec 4 needs the block's statistics from a file index".into())
            })?;
            u64::from(st.count) + u64::from(st.stale_count)
        } else {
            get_uvarint(bytes, pos)?
        };
        let count = u32::try_from(count)
            .ok()
            .filter(|&c| c > 0)
            .ok_or_else(|| Error::Decode(format!("block sample count {count} not in 1..=u32::MAX")))?;
        Ok(BlockHeader { ts_codec: codecs & 0x0f, value_codec: codecs >> 4, count })
    }
}

/// Decodes one block (exactly the bytes [`encode_block`] appended) and appends its samples to
/// `out`.
///
/// Total over its input: any bytes give `Ok` or [`Error::Decode`], never a panic, and on error
/// `out` is left as it was. The header's count is checked against the least number of bytes
/// its codecs need for that many samples, and the up-front reservation is bounded by both the
/// count and the input length (64 samples per byte). Output beyond that grows only as samples
/// actually decode. Note that some blocks are legitimately tiny for any count (a constant
/// interval with a constant value, or with runs of unchanged values): such a block decodes to
/// `count` samples, up to `u32::MAX`. Callers decoding untrusted files check
/// [`block_header`]`(bytes)?.count` against their sample limit first.
pub fn decode_block(bytes: &[u8], out: &mut Vec<Sample>) -> Result<()> {
    decode_checked(bytes, None, None, out)
}

/// [`decode_block`] for a block written by [`encode_indexed_block`] (or [`encode_block`]),
/// given the statistics stored beside it; a block with timestamp codec 4 (*implied*) takes its
/// count and timestamps from them. Total like [`decode_block`]; statistics that imply no constant
/// interval for their count give an error. The count comes from statistics covered by the file
/// index's checksum; callers bound it against their sample limit as for [`decode_block`].
pub fn decode_indexed_block(bytes: &[u8], stats: &BlockStats, out: &mut Vec<Sample>) -> Result<()> {
    decode_checked(bytes, Some(stats), None, out)
}

/// The samples up to `until_t` (inclusive) only, of a block stored with `stats` beside it
/// ([`decode_indexed_block`]) or, with `None`, of a self-contained one ([`decode_block`]): the
/// values after them are not read, so a block cut by a window boundary costs its part before
/// the boundary. Total like [`decode_block`]; bytes after the part it reads are not checked.
pub fn decode_block_until(
    bytes: &[u8],
    stats: Option<&BlockStats>,
    until_t: i64,
    out: &mut Vec<Sample>,
) -> Result<()> {
    decode_checked(bytes, stats, Some(until_t), out)
}

/// What [`sum_block_until`] found in the part of a block up to a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefixSum {
    /// Samples read (stale markers included).
    pub read: u64,
    /// Non-stale values among them.
    pub count: u64,
    /// Their sum, exact while the magnitudes' sum stays below 2^63 (callers that need an exact
    /// `f64` bound it below 2^53 from the block's statistics).
    pub sum: i64,
}

/// For a block stored with `stats` beside it whose timestamps are implied (codec 4) and whose
/// values are all integers below 2^53 or stale markers (told from the value codec's parameters,
/// as [`integral_indexed_values`]): the count and integer sum of its non-stale values up to
/// `until_t` (inclusive), reading the packed integers only that far and writing no samples.
/// `None` for any other block (the caller decodes it). Total like [`decode_block`].
pub fn sum_block_until(bytes: &[u8], stats: &BlockStats, until_t: i64) -> Result<Option<PrefixSum>> {
    let mut pos = 0;
    let h = BlockHeader::read(bytes, &mut pos, Some(stats))?;
    if h.ts_codec != TS_IMPLIED || !integral(bytes, Some(stats), stats.stale_count) {
        return Ok(None);
    }
    let n = h.count as usize;
    let take = timestamps::implied_until(stats.min_t, stats.max_t, n, until_t)?;
    Ok(values::sum_prefix(h.value_codec, bytes, &mut pos, n, take)?.map(|(count, sum)| PrefixSum {
        read: take as u64,
        count,
        sum,
    }))
}

/// Whether a block stored with `stats` beside it ([`decode_indexed_block`]) or, with `None`, a
/// self-contained one holds a sample with a timestamp in `[mint, maxt]`, from its timestamps
/// alone: implied timestamps are counted without decoding, others decoded, and values never
/// read. Selecting series over a range inside their blocks (a 5-minute query over hour
/// blocks) asks this of every series; decoding whole blocks there cost more than the query.
/// Total like [`decode_block`].
pub fn block_has_time_in(bytes: &[u8], stats: Option<&BlockStats>, mint: i64, maxt: i64) -> Result<bool> {
    if mint > maxt {
        return Ok(false);
    }
    let mut pos = 0;
    let h = BlockHeader::read(bytes, &mut pos, stats)?;
    let n = h.count as usize;
    if let Some(st) = stats.filter(|_| h.ts_codec == TS_IMPLIED) {
        let through_maxt = timestamps::implied_until(st.min_t, st.max_t, n, maxt)?;
        let before_mint = match mint.checked_sub(1) {
            Some(m) => timestamps::implied_until(st.min_t, st.max_t, n, m)?,
            None => 0,
        };
        return Ok(through_maxt > before_mint);
    }
    let ts_min = timestamps::min_bytes(h.ts_codec, n)
        .ok_or_else(|| Error::Decode(format!("unknown timestamp codec {}", h.ts_codec)))?;
    if bytes.len() - pos < ts_min {
        return Err(Error::Decode(format!("block of {n} samples cannot fit in {} bytes", bytes.len() - pos)));
    }
    let mut ts = Vec::with_capacity(n.min((bytes.len() - pos).saturating_mul(64)));
    timestamps::decode(h.ts_codec, bytes, &mut pos, n, &mut ts)?;
    let first = ts.partition_point(|s| s.t < mint);
    Ok(ts.get(first).is_some_and(|s| s.t <= maxt))
}

/// Decodes into `out`, leaving it as it was on error.
fn decode_checked(
    bytes: &[u8],
    stats: Option<&BlockStats>,
    until_t: Option<i64>,
    out: &mut Vec<Sample>,
) -> Result<()> {
    let start = out.len();
    let result = decode_into(bytes, stats, until_t, out, start);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

/// True if every non-stale value of the block is an integer of magnitude below 2^53 other than
/// -0.0, told from the header and the value codec's parameters without decoding a sample:
/// then any sum of its values whose partial sums stay below 2^53 is exact, in any order (what
/// push-down of `sum_over_time`/`avg_over_time` needs, see `crate::window_agg`). `stale_count` is
/// the block's stale-marker count from its statistics.
///
/// False whenever that cannot be told cheaply: a timestamp section other than a constant
/// interval (its length is known only by decoding it), Gorilla XOR values, decimal values, or
/// exceptions in the scaled codec other than the stale markers. Corrupt bytes also give false.
pub fn integral_values(bytes: &[u8], stale_count: u32) -> bool {
    integral(bytes, None, stale_count)
}

/// [`integral_values`] for a block stored with its statistics (see [`decode_indexed_block`]).
pub fn integral_indexed_values(bytes: &[u8], stats: &BlockStats) -> bool {
    integral(bytes, Some(stats), stats.stale_count)
}

fn integral(bytes: &[u8], stats: Option<&BlockStats>, stale_count: u32) -> bool {
    let mut pos = 0;
    let Ok(h) = BlockHeader::read(bytes, &mut pos, stats) else { return false };
    (h.ts_codec == TS_IMPLIED || timestamps::skip_const(h.ts_codec, bytes, &mut pos).is_ok())
        && values::integral(h.value_codec, bytes, &mut pos, stale_count)
}

fn decode_into(
    bytes: &[u8],
    stats: Option<&BlockStats>,
    until_t: Option<i64>,
    out: &mut Vec<Sample>,
    start: usize,
) -> Result<()> {
    let mut pos = 0;
    let h = BlockHeader::read(bytes, &mut pos, stats)?;
    let n = h.count as usize;
    let ts_min = timestamps::min_bytes(h.ts_codec, n)
        .ok_or_else(|| Error::Decode(format!("unknown timestamp codec {}", h.ts_codec)))?;
    let val_min = values::min_bytes(h.value_codec, n)
        .ok_or_else(|| Error::Decode(format!("unknown value codec {}", h.value_codec)))?;
    let remaining = bytes.len() - pos;
    if remaining < ts_min + val_min {
        return Err(Error::Decode(format!("block of {n} samples cannot fit in {remaining} bytes")));
    }
    out.reserve(n.min(remaining.saturating_mul(64)));
    match stats {
        Some(st) if h.ts_codec == TS_IMPLIED => {
            timestamps::decode_implied(st.min_t, st.max_t, n, until_t, out)?
        }
        _ => timestamps::decode(h.ts_codec, bytes, &mut pos, n, out)?,
    }
    let decoded = out.get_mut(start..).unwrap_or(&mut []);
    // Implied timestamps stop at `until_t` already.
    let implied_cut = until_t.is_some() && h.ts_codec == TS_IMPLIED && stats.is_some();
    if decoded.len() != n && !implied_cut {
        return Err(Error::Decode(format!("decoded {} timestamps, header says {n}", decoded.len())));
    }
    let wanted = until_t.map_or(n, |u| decoded.partition_point(|s| s.t <= u));
    out.truncate(start + wanted);
    let decoded = out.get_mut(start..).unwrap_or(&mut []);
    values::decode_prefix(h.value_codec, bytes, &mut pos, n, decoded)?;
    if wanted == n && pos != bytes.len() {
        return Err(Error::Decode(format!("{} trailing bytes after block", bytes.len() - pos)));
    }
    Ok(())
}

#[cfg(test)]
mod tests;

//! Three ways to pack a sequence of `i64` residuals (deltas, deltas of deltas, offsets), used
//! by the timestamp and value codecs of a block through [`super::intseq`]:
//!
//! * **FOR** (frame of reference) per mini-block of [`MINIBLOCK`] values: each mini-block stores
//!   its minimum and a bit width, then every value minus the minimum in that many bits. Costs
//!   `width` bits per value, so it suits residuals spread evenly over a range (noise, jitter).
//! * **Rice**: `z = zigzag(x - bias)` split into `q = z >> k` written in unary and the low `k`
//!   bits written plainly. About `log2(mean |x - bias|) + 2` bits, so it suits peaked
//!   distributions (a random walk's steps are mostly 0 and ±1) that FOR pays full width for.
//! * **Runs**: the lengths of runs of zeros, each followed by one non-zero value, both Rice
//!   coded. A few bytes per change, so it suits data that rarely changes (a step function, a
//!   regular series with one missed scrape) where even Rice pays a bit per value.
//!
//! A Rice code of `z` with parameter `k` is `q = z >> k` zero bits, a one bit, then the low `k`
//! bits of `z`. Quotients of [`RICE_ESCAPE`] or more are escaped instead: that many zero bits,
//! a 6-bit `width - 1`, then `z` in `width` bits, so an outlier costs at most 90 bits.
//!
//! Layouts (bit streams LSB-first, padded to a whole byte):
//!
//! ```text
//! FOR:  ┌─────────────────────────────────────────┬──────────────────────────────────────┐
//!       │ per mini-block: min <varint> width <u8> │ bit stream: (x - min) in width bits  │
//!       └─────────────────────────────────────────┴──────────────────────────────────────┘
//! Rice: ┌───────────────────────┬────────────────┬─────────────────────────────────────────┐
//!       │ k | has_bias<<6 <u8>  │ bias <varint>? │ bit stream: rice(zigzag(x - bias), k)    │
//!       └───────────────────────┴────────────────┴─────────────────────────────────────────┘
//! Runs: ┌───────────┬───────────┬────────────────────────────────────────────────────────────┐
//!       │ k_run <u8>│ k_val <u8>│ bit stream: rice(run, k_run) rice(zigzag(x) - 1, k_val) ... │
//!       └───────────┴───────────┴────────────────────────────────────────────────────────────┘
//! ```
//!
//! In Runs, each run of zeros (possibly empty) is followed by the non-zero value that ends it;
//! a trailing run of zeros has no value after it. All arithmetic wraps, so any `i64` values
//! round-trip. Readers bound their work by `n` and the bytes they are given, and never allocate.

use super::bits::{BitReader, BitWriter, PEEK_BITS, bit_width, low_mask};
use super::varint::{get_u8, get_varint, put_varint, unzigzag, uvarint_len, zigzag};
use crate::error::{Error, Result};

/// Values per FOR mini-block: small enough that one outlier widens few values, large enough
/// that the 2–3 byte mini-block header stays under 0.02 bytes per value.
pub(crate) const MINIBLOCK: usize = 128;

/// Longest unary quotient before the Rice escape.
pub(crate) const RICE_ESCAPE: u32 = 20;

/// Largest Rice parameter.
const RICE_K_MAX: u8 = 63;
/// Bit of the Rice header byte set when a non-zero bias follows.
const RICE_HAS_BIAS: u8 = 0x40;

/// Packing id of FOR (as stored in block headers).
pub(crate) const PACK_FOR: u8 = 0;
/// Packing id of Rice.
pub(crate) const PACK_RICE: u8 = 1;
/// Packing id of Runs.
pub(crate) const PACK_RUNS: u8 = 2;

/// A packing with the parameters the encoder chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Packing {
    /// Frame of reference per mini-block.
    For,
    /// Rice coding of `zigzag(x - bias)` with `k` plain low bits.
    Rice { bias: i64, k: u8 },
    /// Zero runs and non-zero values with their own Rice parameters.
    Runs { k_run: u8, k_val: u8 },
}

impl Packing {
    /// The id stored in block headers ([`PACK_FOR`], [`PACK_RICE`], [`PACK_RUNS`]).
    pub(crate) fn id(&self) -> u8 {
        match self {
            Packing::For => PACK_FOR,
            Packing::Rice { .. } => PACK_RICE,
            Packing::Runs { .. } => PACK_RUNS,
        }
    }

    /// The best parameters of packing `id` for `xs` and the exact size in bytes.
    pub(crate) fn choose(id: u8, xs: &[i64], scratch: &mut Vec<i64>) -> (Packing, usize) {
        match id {
            PACK_RICE => rice_choose(xs, scratch),
            PACK_RUNS => runs_choose(xs),
            _ => (Packing::For, for_len(xs)),
        }
    }

    /// Appends `xs` packed this way.
    pub(crate) fn write(&self, xs: &[i64], out: &mut Vec<u8>) {
        match *self {
            Packing::For => write_for(xs, out),
            Packing::Rice { bias, k } => write_rice(xs, bias, k, out),
            Packing::Runs { k_run, k_val } => write_runs(xs, k_run, k_val, out),
        }
    }
}

/// Minimum bytes a section of `n` values packed as `id` takes, for early rejection of corrupt
/// counts (Runs can hold any number of zeros in a few bytes).
pub(crate) fn min_bytes(id: u8, n: usize) -> usize {
    match id {
        PACK_FOR => 2 * n.div_ceil(MINIBLOCK),
        PACK_RICE => 1 + n.div_ceil(8),
        _ => 2 + usize::from(n > 0),
    }
}

/// Reads the first `take` (at most `n`) of the `n` values packed as `id` at `*pos`, handing
/// each to `sink` in order. Having read all `n`, it advances `*pos` past the section; after a
/// shorter `take`, `*pos` is unspecified (a prefix is read only where nothing follows it).
pub(crate) fn read(
    id: u8,
    bytes: &[u8],
    pos: &mut usize,
    n: usize,
    take: usize,
    sink: impl FnMut(i64) -> Result<()>,
) -> Result<()> {
    let take = take.min(n);
    let remaining = bytes.len().saturating_sub(*pos);
    if remaining < min_bytes(id, n) {
        return Err(Error::Decode(format!("packed section of {n} values needs more than {remaining} bytes")));
    }
    match id {
        PACK_FOR => read_for(bytes, pos, n, take, sink),
        PACK_RICE => read_rice(bytes, pos, take, sink),
        PACK_RUNS => read_runs(bytes, pos, n, take, sink),
        other => Err(Error::Decode(format!("unknown packing {other}"))),
    }
}

// ---- FOR ----

fn min_max(xs: &[i64]) -> (i64, i64) {
    xs.iter().fold((i64::MAX, i64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)))
}

/// Bit width of a mini-block's offsets from its minimum.
fn miniblock_width(lo: i64, hi: i64) -> u32 {
    bit_width(hi.wrapping_sub(lo) as u64)
}

fn for_len(xs: &[i64]) -> usize {
    for_len_range(xs).0
}

/// The FOR size of `xs` with their smallest and largest value (`i64::MAX, i64::MIN` if empty),
/// which FOR finds anyway.
pub(crate) fn for_len_range(xs: &[i64]) -> (usize, i64, i64) {
    let mut header = 0;
    let mut bits = 0u64;
    let (mut min, mut max) = (i64::MAX, i64::MIN);
    for mb in xs.chunks(MINIBLOCK) {
        let (lo, hi) = min_max(mb);
        header += uvarint_len(zigzag(lo)) + 1;
        bits += u64::from(miniblock_width(lo, hi)) * mb.len() as u64;
        (min, max) = (min.min(lo), max.max(hi));
    }
    (header + bits.div_ceil(8) as usize, min, max)
}

fn write_for(xs: &[i64], out: &mut Vec<u8>) {
    let mut frames = Vec::with_capacity(xs.len().div_ceil(MINIBLOCK));
    for mb in xs.chunks(MINIBLOCK) {
        let (lo, hi) = min_max(mb);
        let width = miniblock_width(lo, hi);
        put_varint(out, lo);
        out.push(width as u8);
        frames.push((lo, width));
    }
    let mut w = BitWriter::new(out);
    for (mb, &(lo, width)) in xs.chunks(MINIBLOCK).zip(&frames) {
        for &x in mb {
            w.write(x.wrapping_sub(lo) as u64, width);
        }
    }
}

fn read_for(
    bytes: &[u8],
    pos: &mut usize,
    n: usize,
    take: usize,
    mut sink: impl FnMut(i64) -> Result<()>,
) -> Result<()> {
    // First pass: skip the headers to find the bit stream; the second pass reads them again.
    let mut header_pos = *pos;
    let mut scan = *pos;
    for _ in 0..n.div_ceil(MINIBLOCK) {
        get_varint(bytes, &mut scan)?;
        let width = get_u8(bytes, &mut scan)?;
        if width > 64 {
            return Err(Error::Decode(format!("FOR mini-block width {width} exceeds 64")));
        }
    }
    let mut r = BitReader::new(bytes.get(scan..).unwrap_or(&[]));
    let mut left = take;
    while left > 0 {
        let lo = get_varint(bytes, &mut header_pos)?;
        let width = u32::from(get_u8(bytes, &mut header_pos)?);
        let count = left.min(MINIBLOCK);
        if width <= PEEK_BITS {
            // One load per value, the bound tested before the value is used.
            for _ in 0..count {
                let x = r.peek_fast() & low_mask(width);
                r.skip(width);
                if r.overran() {
                    return Err(r.truncated(u64::from(width)));
                }
                sink(lo.wrapping_add(x as i64))?;
            }
        } else {
            for _ in 0..count {
                sink(lo.wrapping_add(r.read(width)? as i64))?;
            }
        }
        left -= count;
    }
    *pos = scan + r.bytes_consumed();
    Ok(())
}

// ---- Rice codes ----

/// Bits of the Rice code of `z` with parameter `k`.
#[inline(always)]
fn rice_bits(z: u64, k: u32) -> u64 {
    let q = z >> k;
    if q < u64::from(RICE_ESCAPE) {
        q + 1 + u64::from(k)
    } else {
        u64::from(RICE_ESCAPE) + 6 + u64::from(bit_width(z))
    }
}

#[inline(always)]
fn write_rice_code(w: &mut BitWriter<'_>, z: u64, k: u32) {
    let q = z >> k;
    if q < u64::from(RICE_ESCAPE) {
        // q zeros then a one, then the low k bits.
        w.write(1u64 << q, q as u32 + 1);
        w.write(z, k);
    } else {
        let width = bit_width(z);
        w.write(0, RICE_ESCAPE);
        w.write(u64::from(width - 1), 6);
        w.write(z, width);
    }
}

#[inline(always)]
fn read_rice_code(r: &mut BitReader<'_>, k: u32) -> Result<u64> {
    let q = r.read_zeros(RICE_ESCAPE)?;
    if q < RICE_ESCAPE {
        Ok((u64::from(q) << k) | r.read(k)?)
    } else {
        let width = r.read(6)? as u32 + 1;
        r.read(width)
    }
}

/// The cheapest Rice parameter for codes `zs` (tried around log2 of their mean) and the total
/// number of bits.
fn best_k(zs: impl Iterator<Item = u64> + Clone) -> (u8, u64) {
    let (sum, count) = zs.clone().fold((0u128, 0u128), |(s, c), z| (s + u128::from(z), c + 1));
    let lowest = lowest_k(sum, count);
    let ks = [0u8, 1, 2, 3].map(|i| u32::from(lowest + i));
    let mut bits = [0u64; 4];
    for z in zs {
        for (b, &k) in bits.iter_mut().zip(&ks) {
            *b += rice_bits(z, k);
        }
    }
    cheapest_k(lowest, bits)
}

/// [`best_k`] for codes given as distinct values with their counts: the same result, costing
/// each distinct code once.
fn best_k_counted(zs: impl Iterator<Item = (u64, u64)> + Clone) -> (u8, u64) {
    let (sum, count) = zs
        .clone()
        .fold((0u128, 0u128), |(s, c), (z, n)| (s + u128::from(z) * u128::from(n), c + u128::from(n)));
    let lowest = lowest_k(sum, count);
    let ks = [0u8, 1, 2, 3].map(|i| u32::from(lowest + i));
    let mut bits = [0u64; 4];
    for (z, n) in zs {
        for (b, &k) in bits.iter_mut().zip(&ks) {
            *b += rice_bits(z, k) * n;
        }
    }
    cheapest_k(lowest, bits)
}

/// The smallest of the four Rice parameters [`best_k`] tries, from the codes' sum and count.
fn lowest_k(sum: u128, count: u128) -> u8 {
    let mean = (sum / count.max(1)).min(u128::from(u64::MAX)) as u64;
    // The optimal k is about log2(mean * ln 2): cost four neighbours in one pass.
    (bit_width(mean).saturating_sub(3) as u8).min(RICE_K_MAX - 3)
}

/// The parameter from `lowest` with the fewest bits (the smaller on a tie) and those bits.
fn cheapest_k(lowest: u8, bits: [u64; 4]) -> (u8, u64) {
    (0u8..).zip(bits).min_by_key(|&(_, b)| b).map_or((lowest, 0), |(i, b)| (lowest + i, b))
}

// ---- Rice ----

/// Residual ranges below this are counted in a table (for the median and Rice's sizes).
const SMALL_RANGE: usize = 256;

/// How often each value in `lo .. lo + SMALL_RANGE` occurs in `xs`, if all of them lie there.
fn small_range_counts(xs: &[i64], lo: i64, hi: i64) -> Option<[u32; SMALL_RANGE]> {
    if xs.is_empty() || hi.wrapping_sub(lo) as u64 >= SMALL_RANGE as u64 {
        return None;
    }
    let mut counts = [0u32; SMALL_RANGE];
    for &x in xs {
        if let Some(c) = counts.get_mut(x.wrapping_sub(lo) as usize) {
            *c += 1;
        }
    }
    Some(counts)
}

/// The lower median of `len` values counted by [`small_range_counts`] from `lo`.
fn counted_median(counts: &[u32; SMALL_RANGE], lo: i64, len: usize) -> i64 {
    let mid = len.saturating_sub(1) / 2;
    let mut seen = 0usize;
    for (offset, &c) in (0i64..).zip(counts.iter()) {
        seen += c as usize;
        if seen > mid {
            return lo.wrapping_add(offset);
        }
    }
    lo
}

/// The lower median of `xs` (0 if empty): by counting when the values span a small range, as
/// residuals usually do, else by selection on a copy in `scratch`.
pub(crate) fn median(xs: &[i64], scratch: &mut Vec<i64>) -> i64 {
    if xs.is_empty() {
        return 0;
    }
    let (lo, hi) = min_max(xs);
    match small_range_counts(xs, lo, hi) {
        Some(counts) => counted_median(&counts, lo, xs.len()),
        None => selected_median(xs, scratch),
    }
}

/// The lower median of `xs` (not empty) by selection on a copy in `scratch`.
fn selected_median(xs: &[i64], scratch: &mut Vec<i64>) -> i64 {
    scratch.clear();
    scratch.extend_from_slice(xs);
    scratch.select_nth_unstable(xs.len().saturating_sub(1) / 2).1.to_owned()
}

fn rice_choose(xs: &[i64], scratch: &mut Vec<i64>) -> (Packing, usize) {
    // The median centres the residuals on zero (e.g. a counter's typical increase). Residuals
    // in a small range (the usual case) are counted once, and each distinct one costed once.
    let (lo, hi) = min_max(xs);
    let (bias, (k, bits)) = match small_range_counts(xs, lo, hi) {
        Some(counts) => {
            let bias = counted_median(&counts, lo, xs.len());
            let codes = (0i64..).zip(counts).filter(|&(_, c)| c > 0).map(|(offset, c)| {
                (zigzag(lo.wrapping_add(offset).wrapping_sub(bias)), u64::from(c))
            });
            (bias, best_k_counted(codes))
        }
        None => {
            let bias = if xs.is_empty() { 0 } else { selected_median(xs, scratch) };
            (bias, best_k(xs.iter().map(|&x| zigzag(x.wrapping_sub(bias)))))
        }
    };
    let bias_len = if bias == 0 { 0 } else { uvarint_len(zigzag(bias)) };
    (Packing::Rice { bias, k }, 1 + bias_len + bits.div_ceil(8) as usize)
}

fn write_rice(xs: &[i64], bias: i64, k: u8, out: &mut Vec<u8>) {
    if bias == 0 {
        out.push(k);
    } else {
        out.push(k | RICE_HAS_BIAS);
        put_varint(out, bias);
    }
    let mut w = BitWriter::new(out);
    for &x in xs {
        write_rice_code(&mut w, zigzag(x.wrapping_sub(bias)), u32::from(k));
    }
}

fn read_rice_k(bytes: &[u8], pos: &mut usize) -> Result<u32> {
    let k = get_u8(bytes, pos)?;
    if k > RICE_K_MAX {
        return Err(Error::Decode(format!("Rice parameter {k} exceeds {RICE_K_MAX}")));
    }
    Ok(u32::from(k))
}

/// Reads the first `n` codes (the codes are sequential: a prefix is read by asking for fewer).
fn read_rice(bytes: &[u8], pos: &mut usize, n: usize, mut sink: impl FnMut(i64) -> Result<()>) -> Result<()> {
    let mut at = *pos;
    let header = get_u8(bytes, &mut at)?;
    if header & !(RICE_HAS_BIAS | RICE_K_MAX) != 0 {
        return Err(Error::Decode(format!("Rice header {header:#x} has unknown bits")));
    }
    let bias = if header & RICE_HAS_BIAS != 0 { get_varint(bytes, &mut at)? } else { 0 };
    let k = u32::from(header & RICE_K_MAX);
    let mut r = BitReader::new(bytes.get(at..).unwrap_or(&[]));
    if RICE_ESCAPE + k <= PEEK_BITS {
        // Every code that is not an escape fits one peek: its unary quotient, the one bit and
        // the k low bits. A random walk's steps are mostly 1-3 bits, so one peek holds many
        // codes: they are taken from the word by shifts, which makes the chain from one code
        // to the next a shift and a bit count rather than a load. A code is taken from the
        // word only if it lies wholly within both the peeked and the stream's bits; the first
        // code of a word that does not is an escape or runs past the end (an error).
        let mask = low_mask(k);
        let mut left = n;
        while left > 0 {
            let w = r.peek_fast();
            let avail = r.remaining().min(u64::from(PEEK_BITS)) as u32;
            let mut used = 0u32;
            while left > 0 {
                let x = w >> used;
                let q = x.trailing_zeros();
                let len = q + 1 + k;
                if q >= RICE_ESCAPE || used + len > avail {
                    break;
                }
                let z = (u64::from(q) << k) | ((x >> (q + 1)) & mask);
                used += len;
                left -= 1;
                sink(unzigzag(z).wrapping_add(bias))?;
            }
            r.skip(used);
            if used == 0 {
                // An escape, or a code past the end of the stream (`read` reports it).
                let z = read_rice_code(&mut r, k)?;
                left -= 1;
                sink(unzigzag(z).wrapping_add(bias))?;
            }
        }
    } else {
        for _ in 0..n {
            sink(unzigzag(read_rice_code(&mut r, k)?).wrapping_add(bias))?;
        }
    }
    *pos = at + r.bytes_consumed();
    Ok(())
}

// ---- Runs ----

/// Splits `xs` into the run lengths and the `zigzag(x) - 1` codes of the non-zero values.
fn runs_split(xs: &[i64]) -> (Vec<u64>, Vec<u64>) {
    let mut runs = Vec::new();
    let mut vals = Vec::new();
    let mut run = 0u64;
    for &x in xs {
        if x == 0 {
            run += 1;
        } else {
            runs.push(run);
            vals.push(zigzag(x) - 1);
            run = 0;
        }
    }
    if run > 0 {
        runs.push(run);
    }
    (runs, vals)
}

/// Whether Runs could take fewer than `cap` bytes for `xs`, whose smallest and largest values
/// are `lo` and `hi`, so that sizing it may pay. Never false when Runs would be smaller:
///
/// * Without zeros (e.g. a counter's deltas), every residual costs a run code and a value code
///   at least as long as the one of the value nearest zero (see [`runs_min_len`]): checked from
///   the range alone.
/// * Else by [`runs_min_len`], which stops once its bound reaches `cap`. (Counting the zeros
///   first, to size Runs at once when most residuals are zero, cost a second pass over every
///   block: 2 % of a TSBS flush's encoding instructions.)
pub(crate) fn runs_may_beat(xs: &[i64], lo: i64, hi: i64, cap: usize) -> bool {
    if lo > 0 || hi < 0 {
        let v = zigzag(if lo > 0 { lo } else { hi }) - 1;
        let per_value = 1 + (v.min(u64::from(RICE_ESCAPE)) + 1).min(u64::from(bit_width(v | 1) + 1));
        if 2 + (per_value * xs.len() as u64).div_ceil(8) as usize >= cap {
            return false;
        }
    }
    runs_min_len(xs, cap) < cap
}

/// A lower bound on the bytes Runs takes for `xs` (what [`Packing::choose`] gives for
/// [`PACK_RUNS`]), from one branch-free pass without allocating, so a caller that already has
/// a candidate that small may skip sizing Runs and never miss a smaller Runs encoding. Once the
/// bound reaches `cap` the pass stops and returns a value of at least `cap`.
///
/// Each of the two Rice streams (run lengths, non-zero values) uses one parameter `k` for all
/// its codes, so it costs at least the smaller of its cost at `k = 0` and a bound for `k >= 1`:
///
/// * `k = 0`: a code of `z` costs `z + 1` bits below the escape and at least 31 from it on, so
///   at least `min(z, 20) + 1`.
/// * `k >= 1`: a code costs at least 2 bits, and at least `bit_width(z) + 1` for any `k` (with
///   `q = z >> k`: if `bit_width(z) > k` then `q >= 2^(bit_width(z) - 1 - k) >= bit_width(z) - k`;
///   an escape costs more still).
///
/// For the runs (one before each non-zero value, and a trailing one) this gives
/// `runs + min(short_zeros, runs)` bits, `short_zeros` being the zeros among the first 20 of
/// their run; for the values (`zigzag(x) - 1` of each non-zero `x`), the smaller of the two
/// sums.
///
/// (The share of non-zero residuals alone bounds nothing: Rice pays its `k` on every value, zeros
/// included, so with zeros and large values mixed, e.g. alternating 0 and 1000, Runs is the
/// smallest even with half the residuals non-zero.)
pub(crate) fn runs_min_len(xs: &[i64], cap: usize) -> usize {
    let (mut non_zero, mut short_zeros, mut vals_k0, mut vals_k1) = (0u64, 0u64, 0u64, 0u64);
    let mut run = 0u64;
    let len = |non_zero: u64, short_zeros: u64, vals_k0: u64, vals_k1: u64, run: u64| {
        let runs = non_zero + u64::from(run > 0);
        2 + (runs + short_zeros.min(runs) + vals_k0.min(vals_k1)).div_ceil(8) as usize
    };
    for chunk in xs.chunks(256) {
        for &x in chunk {
            let zero = x == 0;
            run = if zero { run + 1 } else { 0 };
            short_zeros += u64::from(zero & (run <= u64::from(RICE_ESCAPE)));
            non_zero += u64::from(!zero);
            // With z = v + 1 (v = zigzag(x) - 1 for x != 0): min(z, 21) = min(v, 20) + 1, and 0
            // for a zero.
            let z = zigzag(x);
            vals_k0 += z.min(u64::from(RICE_ESCAPE) + 1);
            let k1 = u64::from(bit_width(z.wrapping_sub(1) | 1) + 1);
            vals_k1 += k1 & u64::from(!zero).wrapping_neg();
        }
        // Every term only grows, so a prefix's bound already bounds the whole.
        let so_far = len(non_zero, short_zeros, vals_k0, vals_k1, run);
        if so_far >= cap {
            return so_far;
        }
    }
    len(non_zero, short_zeros, vals_k0, vals_k1, run)
}

fn runs_choose(xs: &[i64]) -> (Packing, usize) {
    let (runs, vals) = runs_split(xs);
    let (k_run, run_bits) = best_k(runs.iter().copied());
    let (k_val, val_bits) = best_k(vals.iter().copied());
    (Packing::Runs { k_run, k_val }, 2 + (run_bits + val_bits).div_ceil(8) as usize)
}

fn write_runs(xs: &[i64], k_run: u8, k_val: u8, out: &mut Vec<u8>) {
    out.push(k_run);
    out.push(k_val);
    let mut w = BitWriter::new(out);
    let mut run = 0u64;
    for &x in xs {
        if x == 0 {
            run += 1;
        } else {
            write_rice_code(&mut w, run, u32::from(k_run));
            write_rice_code(&mut w, zigzag(x) - 1, u32::from(k_val));
            run = 0;
        }
    }
    if run > 0 {
        write_rice_code(&mut w, run, u32::from(k_run));
    }
}

fn read_runs(
    bytes: &[u8],
    pos: &mut usize,
    n: usize,
    take: usize,
    mut sink: impl FnMut(i64) -> Result<()>,
) -> Result<()> {
    let mut at = *pos;
    let k_run = read_rice_k(bytes, &mut at)?;
    let k_val = read_rice_k(bytes, &mut at)?;
    let mut r = BitReader::new(bytes.get(at..).unwrap_or(&[]));
    let mut left = n as u64;
    // Values still to hand to `sink`; a run is checked against `left` before it is cut to this.
    let mut wanted = take as u64;
    while wanted > 0 {
        let run = read_rice_code(&mut r, k_run)?;
        if run > left {
            return Err(Error::Decode(format!("run of {run} zeros exceeds the {left} values left")));
        }
        for _ in 0..run.min(wanted) {
            sink(0)?;
        }
        left -= run;
        wanted = wanted.saturating_sub(run);
        if wanted == 0 {
            break;
        }
        let code = read_rice_code(&mut r, k_val)?;
        let z = code.checked_add(1).ok_or_else(|| Error::Decode("run value code overflows".into()))?;
        sink(unzigzag(z))?;
        left -= 1;
        wanted -= 1;
    }
    *pos = at + r.bytes_consumed();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arb_residuals() -> impl Strategy<Value = Vec<i64>> {
        prop_oneof![
            proptest::collection::vec(-3i64..=3, 0..600),
            proptest::collection::vec(any::<i64>(), 0..300),
            proptest::collection::vec(prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(0), -5i64..5], 0..300),
            proptest::collection::vec(prop_oneof![20 => Just(0i64), 1 => any::<i64>()], 0..600),
            (any::<i64>(), proptest::collection::vec(0i64..1000, 0..400))
                .prop_map(|(base, v)| v.into_iter().map(|x| base.wrapping_add(x)).collect()),
        ]
    }

    fn round_trip(id: u8, xs: &[i64]) -> usize {
        let (p, len) = Packing::choose(id, xs, &mut Vec::new());
        assert_eq!(p.id(), id);
        let mut out = vec![0xEE];
        p.write(xs, &mut out);
        assert_eq!(out.len() - 1, len, "{p:?} size estimate");
        assert!(len >= min_bytes(id, xs.len()));
        if id == PACK_RUNS {
            let (_, lo, hi) = for_len_range(xs);
            assert!(runs_may_beat(xs, lo, hi, len + 1), "Runs of {len} bytes ruled out below {}", len + 1);
            let bound = runs_min_len(xs, usize::MAX);
            assert!(bound <= len, "Runs bound {bound} above its size {len}");
            // Cut short at a cap, it bounds no less than the cap or is the whole bound.
            for cap in [0, 3, bound, bound + 1, len] {
                let cut = runs_min_len(xs, cap);
                assert!(cut <= bound && (cut >= cap || cut == bound), "cap {cap}: {cut} of {bound}");
            }
        }
        out.push(0xAB); // a following section must not be consumed
        let mut got = Vec::new();
        let mut pos = 1;
        read(id, &out, &mut pos, xs.len(), xs.len(), |x| {
            got.push(x);
            Ok(())
        })
        .unwrap();
        assert_eq!(got, xs);
        assert_eq!(pos, out.len() - 1);
        // A prefix reads the same values, and no more.
        for take in [0, 1, xs.len() / 2, xs.len().saturating_sub(1), xs.len() + 1] {
            let mut prefix = Vec::new();
            read(id, &out, &mut 1, xs.len(), take, |x| {
                prefix.push(x);
                Ok(())
            })
            .unwrap();
            assert_eq!(prefix, xs[..take.min(xs.len())], "{p:?} prefix of {take}");
        }
        len
    }

    proptest! {
        #[test]
        fn every_packing_round_trips(xs in arb_residuals()) {
            for id in [PACK_FOR, PACK_RICE, PACK_RUNS] {
                round_trip(id, &xs);
            }
        }

        /// A section cut short is an error for every packing, and what a reader handed out
        /// before noticing is the section's own values.
        #[test]
        fn a_truncated_section_is_an_error(xs in arb_residuals(), cut in any::<prop::sample::Index>()) {
            prop_assume!(!xs.is_empty());
            for id in [PACK_FOR, PACK_RICE, PACK_RUNS] {
                let (p, _) = Packing::choose(id, &xs, &mut Vec::new());
                let mut out = Vec::new();
                p.write(&xs, &mut out);
                let short = &out[..cut.index(out.len())];
                let mut got = Vec::new();
                let result = read(id, short, &mut 0, xs.len(), xs.len(), |x| {
                    got.push(x);
                    Ok(())
                });
                prop_assert!(result.is_err(), "{:?}: {} of {} bytes read", p, short.len(), out.len());
                prop_assert_eq!(&got[..], &xs[..got.len()]);
            }
        }

        #[test]
        fn readers_never_panic(id in 0u8..4, bytes in proptest::collection::vec(any::<u8>(), 0..200), n in 0usize..2000) {
            let mut count = 0;
            let result = read(id, &bytes, &mut 0, n, n, |_| { count += 1; Ok(()) });
            if result.is_ok() {
                prop_assert_eq!(count, n);
            }
        }
    }

    proptest! {
        #[test]
        fn median_matches_sorting(xs in prop_oneof![
            proptest::collection::vec(-100i64..100, 0..300),
            proptest::collection::vec(any::<i64>(), 0..300),
        ]) {
            let mut sorted = xs.clone();
            sorted.sort_unstable();
            let want = sorted.get(xs.len().saturating_sub(1) / 2).copied().unwrap_or(0);
            prop_assert_eq!(median(&xs, &mut Vec::new()), want);
        }
    }

    /// Half the values non-zero and Runs still the smallest: Rice pays its `k` on the zeros too.
    #[test]
    fn runs_can_win_with_half_non_zero() {
        let xs: Vec<i64> = (0..1024).map(|i| if i % 2 == 0 { 0 } else { 1000 + i % 7 }).collect();
        let [f, r, u] = [PACK_FOR, PACK_RICE, PACK_RUNS].map(|id| round_trip(id, &xs));
        assert!(u < f && u < r, "for {f} rice {r} runs {u}");
        assert!(runs_min_len(&xs, usize::MAX) <= u);
    }

    #[test]
    fn each_packing_wins_its_shape() {
        // Steps of a random walk: mostly 0 and ±1, a rare ±3.
        let walk: Vec<i64> = (0..1024).map(|i| [0, 1, 0, -1, 0, 0, 1, -1, 0, 3][i % 10]).collect();
        // Uniform noise over 0..1000.
        let noise: Vec<i64> = (0..1024).map(|i| (i * 7919 % 1000) as i64).collect();
        // A step function's deltas: three changes.
        let mut steps = vec![0i64; 1024];
        steps[100] = 250;
        steps[600] = -40;
        steps[900] = 7;
        let sizes = |xs: &[i64]| [PACK_FOR, PACK_RICE, PACK_RUNS].map(|id| round_trip(id, xs));
        let [f, r, u] = sizes(&walk);
        assert!(r < f && r < u, "walk: for {f} rice {r} runs {u}");
        // The walk's Runs bound already exceeds its Rice size, so encoders skip costing Runs.
        let bound = runs_min_len(&walk, usize::MAX);
        assert!(bound > r, "walk: rice {r} runs bound {bound}");
        let [f, r, u] = sizes(&noise);
        assert!(f < r && f < u, "noise: for {f} rice {r} runs {u}");
        let [f, r, u] = sizes(&steps);
        assert!(u < f && u < r && u <= 12, "steps: for {f} rice {r} runs {u}");
    }
}

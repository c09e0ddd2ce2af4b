//! Integer sequences (timestamps, or values scaled to integers) as a few seed varints plus
//! residuals of one *order*, packed by [`super::intpack`]. The encoder tries each allowed
//! (order, packing) pair and keeps the smallest.
//!
//! | order | seeds (varints)        | residual i                          | suits                      |
//! |-------|------------------------|-------------------------------------|----------------------------|
//! | 0 raw | none                   | `m[i]` for i >= 0                   | values jumping in a band   |
//! | 1 Δ   | `m[0]`                 | `m[i] - m[i-1]` for i >= 1          | random walks, jittered t   |
//! | 2 ΔΔ  | `m[0]`, `m[1] - m[0]`  | `Δ[i] - Δ[i-1]` for i >= 2          | counters, regular t        |
//! | 3 grid| `m[0]`, `D`            | `m[i] - (m[0] + i·D)` for i >= 1    | scrape times on a grid     |
//!
//! Seeds that would index past the end are omitted (one sample has only `m[0]`). For the grid
//! order `D` is the median interval; its residuals are each sample's offset from the ideal
//! schedule, which for independent scrape jitter spans half the range that deltas do.
//! All arithmetic wraps, so every `i64` sequence round-trips.

use super::intpack::{self, PACK_FOR, PACK_RICE, PACK_RUNS, Packing};
use super::varint::{get_varint, put_varint, uvarint_len, zigzag};
use crate::error::{Error, Result};

/// Order id: the integers themselves.
pub(crate) const ORDER_RAW: u8 = 0;
/// Order id: deltas.
pub(crate) const ORDER_DELTA: u8 = 1;
/// Order id: deltas of deltas.
pub(crate) const ORDER_DOD: u8 = 2;
/// Order id: offsets from a regular grid.
pub(crate) const ORDER_GRID: u8 = 3;

/// Every packing id, for callers that allow all.
pub(crate) const ALL_PACKINGS: [u8; 3] = [PACK_FOR, PACK_RICE, PACK_RUNS];

/// The chosen order and packing of a sequence, with its exact encoded size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SeqPlan {
    /// Residual order ([`ORDER_RAW`] ..= [`ORDER_GRID`]).
    pub(crate) order: u8,
    /// Packing of the residuals, with its parameters.
    pub(crate) packing: Packing,
    /// Bytes of seeds plus packed residuals.
    pub(crate) len: usize,
}

/// Number of seed varints of `order` for `n` values.
fn seed_count(order: u8, n: usize) -> usize {
    match order {
        ORDER_RAW => 0,
        ORDER_DELTA => 1,
        _ => 2,
    }
    .min(n)
}

/// Number of residuals of `order` for `n` values.
fn residual_count(order: u8, n: usize) -> usize {
    match order {
        ORDER_RAW => n,
        ORDER_DOD => n.saturating_sub(2),
        _ => n.saturating_sub(1),
    }
}

/// The median interval, the grid spacing the encoder uses.
fn grid_step(ms: &[i64], scratch: &mut Vec<i64>) -> i64 {
    let deltas: Vec<i64> = ms
        .windows(2)
        .map(|w| match w {
            [a, b] => b.wrapping_sub(*a),
            _ => 0,
        })
        .collect();
    intpack::median(&deltas, scratch)
}

/// Seeds and residuals of `ms` in `order`.
fn transform(ms: &[i64], order: u8, scratch: &mut Vec<i64>) -> (Vec<i64>, Vec<i64>) {
    let first = ms.first().copied().unwrap_or(0);
    let pairs = || {
        ms.windows(2).map(|w| match w {
            [a, b] => b.wrapping_sub(*a),
            _ => 0,
        })
    };
    let (seeds, residuals): (Vec<i64>, Vec<i64>) = match order {
        ORDER_RAW => (vec![], ms.to_vec()),
        ORDER_DELTA => (vec![first], pairs().collect()),
        ORDER_DOD => {
            let deltas: Vec<i64> = pairs().collect();
            let dods = deltas
                .windows(2)
                .map(|w| match w {
                    [a, b] => b.wrapping_sub(*a),
                    _ => 0,
                })
                .collect();
            (std::iter::once(first).chain(deltas.first().copied()).collect(), dods)
        }
        _ => {
            let step = grid_step(ms, scratch);
            let offsets = ms
                .iter()
                .enumerate()
                .skip(1)
                .map(|(i, &m)| m.wrapping_sub(first.wrapping_add(step.wrapping_mul(i as i64))))
                .collect();
            (vec![first, step], offsets)
        }
    };
    let seeds = seeds.into_iter().take(seed_count(order, ms.len())).collect();
    (seeds, residuals)
}

/// One residual order of a sequence, with its FOR size and the residuals' smallest and largest.
struct Candidate {
    order: u8,
    residuals: Vec<i64>,
    seed_len: usize,
    for_len: usize,
    range: (i64, i64),
}

/// The smallest (order, packing) among those allowed for `ms`. Ties go to the earlier order
/// and packing in the lists, so callers list the faster-to-decode ones first.
///
/// To keep flushes cheap, orders are first ranked by their exact FOR size (one pass); the
/// costlier packings are tried only for orders within 25% of the best FOR size (an order whose
/// residuals are much wider under FOR is wider under Rice and Runs as well). Within those, Runs
/// is sized only if a lower bound of its size ([`intpack::runs_may_beat`]) is below the best so
/// far, which never changes the choice.
pub(crate) fn plan(ms: &[i64], orders: &[u8], packings: &[u8], scratch: &mut Vec<i64>) -> SeqPlan {
    let candidates: Vec<Candidate> = orders
        .iter()
        .map(|&order| {
            let (seeds, residuals) = transform(ms, order, scratch);
            let seed_len: usize = seeds.iter().map(|&s| uvarint_len(zigzag(s))).sum();
            let (for_len, lo, hi) = intpack::for_len_range(&residuals);
            Candidate { order, residuals, seed_len, for_len, range: (lo, hi) }
        })
        .collect();
    let best_for = candidates.iter().map(|c| c.seed_len + c.for_len).min().unwrap_or(0);
    let mut best = SeqPlan { order: ORDER_RAW, packing: Packing::For, len: usize::MAX };
    for Candidate { order, residuals, seed_len, for_len, range: (lo, hi) } in candidates {
        let promising = (seed_len + for_len) * 4 <= best_for * 5 + 32;
        for &id in packings {
            if id != PACK_FOR && !promising {
                continue;
            }
            // Runs costs the most to size: skip it when even a lower bound of its size is no
            // smaller than the best so far (it could not replace it).
            let cap = best.len.saturating_sub(seed_len);
            if id == PACK_RUNS && !intpack::runs_may_beat(&residuals, lo, hi, cap) {
                continue;
            }
            let (packing, len) = if id == PACK_FOR {
                (Packing::For, for_len)
            } else {
                Packing::choose(id, &residuals, scratch)
            };
            if seed_len + len < best.len {
                best = SeqPlan { order, packing, len: seed_len + len };
            }
        }
    }
    best
}

/// Appends the seeds and packed residuals of `ms` as `plan` says.
pub(crate) fn write(ms: &[i64], plan: &SeqPlan, out: &mut Vec<u8>) {
    let start = out.len();
    let (seeds, residuals) = transform(ms, plan.order, &mut Vec::new());
    for s in seeds {
        put_varint(out, s);
    }
    plan.packing.write(&residuals, out);
    debug_assert_eq!(out.len() - start, plan.len, "sequence size estimate");
}

/// Minimum bytes of a sequence of `n` values (seeds take at least a byte each).
pub(crate) fn min_bytes(order: u8, packing: u8, n: usize) -> usize {
    seed_count(order, n) + intpack::min_bytes(packing, residual_count(order, n))
}

/// Reads the first `take` (at most `n`) of a sequence of `n` values written with `order` and
/// packing id `packing` at `*pos`, handing each value to `sink` in order. Having read all `n`,
/// it advances `*pos` past the sequence; after a shorter `take`, `*pos` is unspecified.
pub(crate) fn read(
    order: u8,
    packing: u8,
    bytes: &[u8],
    pos: &mut usize,
    n: usize,
    take: usize,
    mut sink: impl FnMut(i64) -> Result<()>,
) -> Result<()> {
    if order > ORDER_GRID {
        return Err(Error::Decode(format!("unknown residual order {order}")));
    }
    let take = take.min(n);
    let seeds = seed_count(order, n);
    let first = if seeds >= 1 { get_varint(bytes, pos)? } else { 0 };
    let second = if seeds >= 2 { get_varint(bytes, pos)? } else { 0 };
    if seeds >= 1 && take >= 1 {
        sink(first)?;
    }
    // Residuals behind the wanted values: value i >= seeds comes from residual i - seeds
    // (the raw order has no seeds, the others one value per seed but the grid's step).
    let (residuals, wanted) = (residual_count(order, n), residual_count(order, take));
    let mut m = first;
    let mut delta = second;
    match order {
        ORDER_RAW => intpack::read(packing, bytes, pos, residuals, wanted, sink),
        ORDER_DELTA => intpack::read(packing, bytes, pos, residuals, wanted, |r| {
            m = m.wrapping_add(r);
            sink(m)
        }),
        ORDER_DOD => {
            if seeds >= 2 && take >= 2 {
                m = m.wrapping_add(delta);
                sink(m)?;
            }
            intpack::read(packing, bytes, pos, residuals, wanted, |r| {
                delta = delta.wrapping_add(r);
                m = m.wrapping_add(delta);
                sink(m)
            })
        }
        _ => {
            let mut base = first;
            intpack::read(packing, bytes, pos, residuals, wanted, |r| {
                base = base.wrapping_add(second);
                sink(base.wrapping_add(r))
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoding::test_support::{arb_timestamps, config, hash};
    use proptest::prelude::*;

    const ORDERS: [u8; 4] = [ORDER_RAW, ORDER_DELTA, ORDER_DOD, ORDER_GRID];

    fn round_trip(ms: &[i64], order: u8, packing: u8) -> usize {
        let plan = plan(ms, &[order], &[packing], &mut Vec::new());
        let mut out = vec![0xEE];
        write(ms, &plan, &mut out);
        assert!(plan.len >= min_bytes(order, packing, ms.len()));
        out.push(0xAB);
        let mut got = Vec::new();
        let mut pos = 1;
        read(order, packing, &out, &mut pos, ms.len(), ms.len(), |m| {
            got.push(m);
            Ok(())
        })
        .unwrap();
        assert_eq!(got, ms, "order {order} packing {packing}");
        assert_eq!(pos, out.len() - 1);
        // Every prefix length the seeds and residuals can end at reads exactly that prefix.
        for take in [0, 1, 2, 3, ms.len() / 2, ms.len().saturating_sub(1), ms.len() + 1] {
            let mut prefix = Vec::new();
            read(order, packing, &out, &mut 1, ms.len(), take, |m| {
                prefix.push(m);
                Ok(())
            })
            .unwrap();
            assert_eq!(prefix, ms[..take.min(ms.len())], "order {order} packing {packing} take {take}");
        }
        plan.len
    }

    proptest! {
        #![proptest_config(config(128))]
        #[test]
        fn every_order_and_packing_round_trips(ms in prop_oneof![
            arb_timestamps(0..300),
            proptest::collection::vec(any::<i64>(), 0..100),
            proptest::collection::vec(-100i64..100, 0..300),
        ]) {
            for order in ORDERS {
                for packing in ALL_PACKINGS {
                    round_trip(&ms, order, packing);
                }
            }
        }

        #[test]
        fn reader_never_panics(order in 0u8..5, packing in 0u8..4, bytes in proptest::collection::vec(any::<u8>(), 0..100), n in 0usize..1000) {
            let mut count = 0;
            if read(order, packing, &bytes, &mut 0, n, n, |_| { count += 1; Ok(()) }).is_ok() {
                prop_assert_eq!(count, n);
            }
        }
    }

    #[test]
    fn grid_beats_deltas_on_scrape_jitter() {
        let ts: Vec<i64> =
            (0..1024).map(|i| 1_700_000_000_000 + i * 15_000 + (hash(i as u64) % 8) as i64).collect();
        let grid = round_trip(&ts, ORDER_GRID, PACK_FOR);
        let delta = round_trip(&ts, ORDER_DELTA, PACK_FOR);
        assert!(grid < delta, "grid {grid} delta {delta}");
        assert_eq!(plan(&ts, &ORDERS, &ALL_PACKINGS, &mut Vec::new()).order, ORDER_GRID);
    }
}

//! Compaction without re-encoding: the blocks of a series that no other input file shares a
//! grid cell with are copied into the output as they are; only the cells that several inputs
//! write to are decoded, merged and encoded again.
//!
//! A flush writes whatever the head held, so consecutive flush files of an in-order load meet
//! inside one grid cell per series (the cell the flush fell in); every other block of theirs is
//! already cut as [`cut_blocks`] would cut the merged samples, one grid cell and at most
//! `block_samples_max` samples each. Copying those is byte for byte what encoding them again
//! would write, at the cost of a checksum instead of a decode and an encode.
//!
//! [`cut_blocks`]: crate::partition::cut_blocks

use std::sync::Arc;

use crate::error::Result;
use crate::manifest::Tombstone;
use crate::matcher::matches_all;
use crate::merge::SourceConcat;
use crate::partition::{BlockMeta, FileWriter, SeriesPart, VERSION, grid_cell};
use crate::snapshot::LiveFile;
use crate::types::{Labels, Sample, SeriesId};

/// What [`splice_series`] did with a series.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Spliced {
    /// Blocks copied as they are.
    pub copied: u64,
    /// Blocks decoded because another input shared their grid cell.
    pub decoded: u64,
}

/// Writes series `id` of `run` (adjacent files of one partition, ascending seq) to `w`,
/// copying the blocks no other input shares a grid cell with. None, with nothing written, when
/// the series must take the decoding path instead: a file of an older format, start timestamps
/// or histograms (stored beside the blocks, per sample), a tombstone that applies to it, or a
/// block that does not fit this database's block policy (written under another `--block-grid`
/// or `--block-samples-max`).
pub(super) fn splice_series(
    run: &[Arc<LiveFile>],
    tombs: &[Tombstone],
    id: SeriesId,
    labels: &Labels,
    w: &mut FileWriter,
    (block_samples_max, grid_ms): (usize, i64),
) -> Result<Option<Spliced>> {
    // (grid cell, input, block), in time order within each input.
    let mut blocks: Vec<(i64, usize, BlockMeta)> = Vec::new();
    for (i, f) in run.iter().enumerate() {
        if !f.file()?.contains(id) {
            continue;
        }
        let tombstoned = tombs.iter().any(|t| t.applies_to(&f.entry) && matches_all(&t.matchers, labels));
        if f.file()?.version() != VERSION
            || f.file()?.has_starts(id)
            || f.file()?.has_histograms(id)
            || tombstoned
        {
            return Ok(None);
        }
        for b in f.file()?.blocks_in(id, i64::MIN, i64::MAX)? {
            let cell = grid_cell(b.stats.min_t, grid_ms);
            let samples = u64::from(b.stats.count) + u64::from(b.stats.stale_count);
            if cell != grid_cell(b.stats.max_t, grid_ms) || samples > block_samples_max as u64 {
                return Ok(None);
            }
            blocks.push((cell, i, b));
        }
    }
    // Stable: each input's blocks of a cell keep their order, and inputs stay in seq order.
    blocks.sort_by_key(|&(cell, i, _)| (cell, i));

    enum Piece {
        Copy(usize, BlockMeta),
        Decoded(std::ops::Range<usize>),
    }
    let mut pieces = Vec::new();
    let mut decoded: Vec<Sample> = Vec::new();
    let mut done = Spliced::default();
    for group in blocks.chunk_by(|a, b| a.0 == b.0) {
        if group.iter().all(|&(_, i, _)| i == group[0].1) {
            pieces.extend(group.iter().map(|&(_, i, b)| Piece::Copy(i, b)));
            done.copied += group.len() as u64;
            continue;
        }
        // Several inputs wrote to this cell: merge them, a later input winning at a shared
        // timestamp, as reads and the decoding path do.
        let start = decoded.len();
        let mut merge = SourceConcat::new(&decoded);
        for input in group.chunk_by(|a, b| a.1 == b.1) {
            let from = decoded.len();
            for &(_, i, b) in input {
                run[i].file()?.read_block(&b, &mut decoded)?;
            }
            merge.added(&decoded, from);
        }
        merge.finish(&mut decoded);
        pieces.push(Piece::Decoded(start..decoded.len()));
        done.decoded += group.len() as u64;
    }
    let mut parts = Vec::with_capacity(pieces.len());
    for piece in &pieces {
        parts.push(match piece {
            Piece::Copy(i, b) => {
                let (bytes, crc) = run[*i].file()?.checked_block(b)?;
                SeriesPart::Block { bytes, crc, stats: b.stats }
            }
            Piece::Decoded(range) => SeriesPart::Samples(&decoded[range.clone()]),
        });
    }
    w.add_series_blocks(labels, &parts)?;
    Ok(Some(done))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use proptest::prelude::*;

    use super::*;
    use crate::manifest::FileEntry;
    use crate::matcher::Matcher;
    use crate::partition::PartitionFile;
    use crate::snapshot::files::read_files_with_starts;
    use crate::types::STALE_NAN_BITS;

    const GRID: i64 = 100;
    const BLOCK_MAX: usize = 6;

    fn labels(i: SeriesId) -> Labels {
        Labels::from_pairs(&[("__name__", "m"), ("s", &i.to_string())])
    }

    /// Writes `series` (id, samples) with this test's block policy and opens it as input `seq`.
    fn input(dir: &Path, seq: u64, series: &[(SeriesId, Vec<Sample>)]) -> Arc<LiveFile> {
        let path = dir.join(format!("{seq}.spf"));
        let mut w = FileWriter::create(&path, BLOCK_MAX, GRID).unwrap();
        for (id, samples) in series {
            w.add_series(&labels(*id), samples).unwrap();
        }
        let written = (w.series_count(), w.samples, w.time_range);
        let size = w.finish().unwrap();
        let file = PartitionFile::open(&path, |l, _| l.get("s").unwrap().parse().unwrap()).unwrap();
        let entry = FileEntry::written(0, seq, seq, size, written, 0);
        Arc::new(LiveFile::open(entry, file))
    }

    /// Compacts `run` twice, through the decoding path and through [`splice_series`], and
    /// returns both files' bytes and what splicing did.
    fn both_ways(dir: &Path, run: &[Arc<LiveFile>], ids: &[SeriesId]) -> (Vec<u8>, Vec<u8>, Spliced) {
        let (decoded_path, spliced_path) = (dir.join("decoded.spf"), dir.join("spliced.spf"));
        let mut decoded = FileWriter::create(&decoded_path, BLOCK_MAX, GRID).unwrap();
        let mut spliced = FileWriter::create(&spliced_path, BLOCK_MAX, GRID).unwrap();
        let mut done = Spliced::default();
        for &id in ids {
            let (mut samples, mut starts) = (Vec::new(), Vec::new());
            read_files_with_starts(run, &[], id, &labels(id), i64::MIN, i64::MAX, &mut samples, &mut starts)
                .unwrap();
            decoded.add_series_full(&labels(id), &samples, &starts, &[]).unwrap();
            let d =
                splice_series(run, &[], id, &labels(id), &mut spliced, (BLOCK_MAX, GRID)).unwrap().unwrap();
            done.copied += d.copied;
            done.decoded += d.decoded;
        }
        decoded.finish().unwrap();
        spliced.finish().unwrap();
        (std::fs::read(decoded_path).unwrap(), std::fs::read(spliced_path).unwrap(), done)
    }

    fn walk(from: i64, n: i64, step: i64) -> Vec<Sample> {
        (0..n).map(|k| Sample::new(from + k * step, (k % 7) as f64)).collect()
    }

    #[test]
    fn inputs_meeting_in_one_cell_decode_that_cell_only() {
        let dir = tempfile::tempdir().unwrap();
        // Series 1: two flushes meeting inside cell 2 (200, 300]; series 2 only in the second.
        let a = input(dir.path(), 1, &[(1, walk(10, 22, 10))]);
        let b = input(dir.path(), 2, &[(1, walk(270, 30, 10)), (2, walk(5, 12, 10))]);
        let (decoded, spliced, done) = both_ways(dir.path(), &[a, b], &[1, 2]);
        assert_eq!(spliced, decoded);
        // Cell 2 holds 210 and 220 from the first file and 270..300 from the second: 2 blocks
        // decoded (one of each), merged into one of 6 samples; every other block is copied.
        assert_eq!(done.decoded, 2);
        let total = done.copied + done.decoded;
        let written =
            PartitionFile::open(&dir.path().join("spliced.spf"), |l, _| l.get("s").unwrap().parse().unwrap())
                .unwrap();
        let blocks_in = |id| written.blocks(id).unwrap().len() as u64;
        assert_eq!(blocks_in(1) + blocks_in(2), total - 1, "the two blocks of cell 2 become one");
    }

    #[test]
    fn disjoint_cells_copy_every_block() {
        let dir = tempfile::tempdir().unwrap();
        let a = input(dir.path(), 1, &[(1, walk(10, 20, 10))]);
        let b = input(dir.path(), 2, &[(1, walk(310, 20, 10))]);
        let (decoded, spliced, done) = both_ways(dir.path(), &[a, b], &[1]);
        assert_eq!(spliced, decoded);
        assert_eq!(done.decoded, 0);
        assert!(done.copied >= 4);
    }

    #[test]
    fn series_the_decoding_path_must_take() {
        let dir = tempfile::tempdir().unwrap();
        let a = input(dir.path(), 1, &[(1, walk(10, 20, 10))]);
        let b = input(dir.path(), 2, &[(1, walk(310, 20, 10))]);
        let run = [a, b];
        let mut w = FileWriter::create(&dir.path().join("out.spf"), BLOCK_MAX, GRID).unwrap();
        // A tombstone over the series.
        let t = Tombstone { seq: 3, mint: 0, maxt: 50, matchers: vec![Matcher::equal("s", "1")], origin: 0 };
        assert_eq!(splice_series(&run, &[t], 1, &labels(1), &mut w, (BLOCK_MAX, GRID)).unwrap(), None);
        // Blocks cut on a coarser grid, or larger than this policy's blocks.
        assert_eq!(splice_series(&run, &[], 1, &labels(1), &mut w, (BLOCK_MAX, GRID / 2)).unwrap(), None);
        assert_eq!(splice_series(&run, &[], 1, &labels(1), &mut w, (BLOCK_MAX - 1, GRID)).unwrap(), None);
        assert_eq!(w.series_count(), 0, "nothing written for a series that takes the other path");
    }

    /// One input's share of a series: a regular run, a value model, maybe a stale marker.
    fn run_strategy() -> impl Strategy<Value = Option<Vec<Sample>>> {
        let run =
            (1i64..900, 1i64..40, prop_oneof![Just(7i64), Just(10), Just(25)], any::<u64>(), any::<bool>())
                .prop_map(|(from, n, step, seed, stale)| {
                    let mut x = seed | 1;
                    (0..n)
                        .map(|k| {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            let v = if stale && k == n / 2 {
                                f64::from_bits(STALE_NAN_BITS)
                            } else {
                                (x % 100) as f64
                            };
                            Sample::new(from + k * step, v)
                        })
                        .collect()
                });
        prop_oneof![1 => Just(None), 3 => run.prop_map(Some)]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Splicing writes the file the decoding path writes, byte for byte, and that file
        /// holds the merge of the inputs with later inputs winning.
        #[test]
        fn splicing_writes_what_decoding_writes(inputs in prop::collection::vec((run_strategy(), run_strategy()), 1..5)) {
            let dir = tempfile::tempdir().unwrap();
            let mut model: BTreeMap<SeriesId, BTreeMap<i64, u64>> = BTreeMap::new();
            let mut run = Vec::new();
            for (seq, (one, two)) in inputs.iter().enumerate() {
                let series: Vec<(SeriesId, Vec<Sample>)> =
                    [(1, one), (2, two)].into_iter().filter_map(|(id, s)| Some((id, s.clone()?))).collect();
                for (id, samples) in &series {
                    let m = model.entry(*id).or_default();
                    for s in samples {
                        m.insert(s.t, s.v.to_bits());
                    }
                }
                run.push(input(dir.path(), seq as u64 + 1, &series));
            }
            let ids: Vec<SeriesId> = model.keys().copied().collect();
            let (decoded, spliced, _) = both_ways(dir.path(), &run, &ids);
            prop_assert_eq!(&spliced, &decoded);
            let written = PartitionFile::open(&dir.path().join("spliced.spf"), |l, _| {
                l.get("s").unwrap().parse().unwrap()
            })
            .unwrap();
            for (id, m) in &model {
                let mut got = Vec::new();
                written.read(*id, i64::MIN, i64::MAX, &mut got).unwrap();
                let got: Vec<(i64, u64)> = got.iter().map(|s| (s.t, s.v.to_bits())).collect();
                let want: Vec<(i64, u64)> = m.iter().map(|(t, v)| (*t, *v)).collect();
                prop_assert_eq!(got, want);
            }
        }
    }
}

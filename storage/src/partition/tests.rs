use std::io::Write as _;

use super::*;
use crate::encoding::BlockStats;
use crate::types::{Labels, Sample, stale_nan};

fn samples(n: i64, step: i64) -> Vec<Sample> {
    (0..n).map(|i| Sample::new(i * step, i as f64 * 0.5)).collect()
}

#[test]
fn cut_blocks_respects_max_and_grid() {
    let s = samples(100, 10);
    let blocks = cut_blocks(&s, 30, 250);
    // Cells are (k·250, (k+1)·250], open on the left like PromQL windows.
    let cell = |t: i64| (t - 1).div_euclid(250);
    assert!(blocks.iter().all(|b| b.len() <= 30 && !b.is_empty()));
    assert!(blocks.iter().all(|b| cell(b[0].t) == cell(b[b.len() - 1].t)));
    assert_eq!(blocks.iter().map(|b| b.len()).sum::<usize>(), 100);
    // A sample on a multiple of the grid ends its block: 0 alone, then 10..=250, 260..=500, ...
    assert_eq!(blocks[0].len(), 1);
    assert_eq!((blocks[1][0].t, blocks[1].last().unwrap().t), (10, 250));
    let neg: Vec<Sample> = (-10..10).map(|i| Sample::new(i * 100, 0.0)).collect();
    let blocks = cut_blocks(&neg, 100, 500);
    let cell = |t: i64| (t - 1).div_euclid(500);
    assert!(blocks.iter().all(|b| cell(b[0].t) == cell(b[b.len() - 1].t)));
    assert_eq!((blocks[0][0].t, blocks[0].last().unwrap().t), (-1000, -1000));
    let extreme = [Sample::new(i64::MIN, 0.0), Sample::new(i64::MIN + 1, 0.0), Sample::new(i64::MAX, 0.0)];
    assert_eq!(cut_blocks(&extreme, 10, 500).len(), 2);
}

proptest::proptest! {
    /// The cut equals the rule applied sample by sample: a new block where the grid cell
    /// changes or the block is full.
    #[test]
    fn cut_blocks_equals_the_per_sample_rule(
        gaps in proptest::collection::vec(1i64..400, 0..300),
        from in proptest::prop_oneof![-5_000i64..5_000, proptest::strategy::Just(i64::MIN), proptest::strategy::Just(i64::MAX - 200_000)],
        max in 1usize..50,
        grid in proptest::prop_oneof![proptest::strategy::Just(0i64), 1i64..1_000],
    ) {
        let mut t = from;
        let mut s = Vec::new();
        for g in gaps {
            s.push(Sample::new(t, 0.0));
            t = t.saturating_add(g);
            if t == i64::MAX {
                break;
            }
        }
        let cell = |t: i64| grid_cell(t, grid);
        let mut model: Vec<&[Sample]> = Vec::new();
        let mut start = 0;
        for i in 1..=s.len() {
            if i == s.len() || i - start >= max || cell(s[i].t) != cell(s[start].t) {
                model.push(&s[start..i]);
                start = i;
            }
        }
        proptest::prop_assert_eq!(cut_blocks(&s, max, grid), model);
    }
}

#[test]
fn write_open_read_round_trip() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("1.spf");
    let a = Labels::from_pairs(&[("__name__", "a"), ("x", "1")]);
    let b = Labels::from_pairs(&[("__name__", "b"), ("x", "1")]);
    let mut sa = samples(2000, 1000);
    sa[5].v = stale_nan();
    let sb = samples(3, 7);
    let mut w = FileWriter::create(&path, 100, 60_000).unwrap();
    w.add_series(&a, &sa).unwrap();
    assert!(w.add_series(&a, &sb).is_err(), "out of label order");
    w.add_series(&b, &sb).unwrap();
    w.finish().unwrap();
    let mut seen = Vec::new();
    let f = PartitionFile::open(&path, |l, max_t| {
        seen.push((l.clone(), max_t));
        seen.len() as u32 - 1
    })
    .unwrap();
    assert_eq!(seen, vec![(a, 1_999_000), (b, 14)]);
    let mut out = Vec::new();
    f.read(0, i64::MIN, i64::MAX, &mut out).unwrap();
    assert_eq!(out, sa);
    out.clear();
    f.read(0, 10_500, 20_000, &mut out).unwrap();
    assert_eq!(out, sa[11..=20].to_vec());
    let blocks = f.blocks(0).unwrap();
    assert!(blocks.len() >= 20);
    assert_eq!(blocks.iter().map(|b| b.stats.count + b.stats.stale_count).sum::<u32>(), 2000);
    assert!(f.blocks(9).unwrap().is_empty());
    // A range reads the blocks overlapping it, no more and no fewer, at the edges too.
    let edges: Vec<i64> = blocks.iter().flat_map(|b| [b.stats.min_t, b.stats.max_t]).collect();
    let times = edges.iter().flat_map(|&t| [t - 1, t, t + 1]).chain([i64::MIN, i64::MAX]);
    let times: Vec<i64> = times.collect();
    for &mint in &times {
        for &maxt in times.iter().step_by(5) {
            let want: Vec<BlockMeta> =
                blocks.iter().filter(|b| b.stats.max_t >= mint && b.stats.min_t <= maxt).copied().collect();
            assert_eq!(f.blocks_in(0, mint, maxt).unwrap(), want, "{mint}..={maxt}");
        }
    }
    // The first bounded read kept the list (the reads of all time above did not), and the
    // reads after it were answered from the kept list: the same blocks as decoding.
    assert_eq!(f.block_lists_kept(0).as_deref(), Some(blocks.as_slice()));
    assert_eq!(f.block_lists_kept(1), None);
    assert!(f.blocks_in(9, i64::MIN, i64::MAX).unwrap().is_empty());
}

#[test]
fn flipped_bytes_are_detected() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("1.spf");
    let a = Labels::from_pairs(&[("__name__", "a")]);
    let s = samples(500, 1000);
    let mut w = FileWriter::create(&path, 64, 0).unwrap();
    w.add_series(&a, &s).unwrap();
    let size = w.finish().unwrap() as usize;
    let orig = std::fs::read(&path).unwrap();
    // Flip one bit at a time at a spread of offsets: opening or reading must fail or return
    // exactly the original data, never different data.
    for off in (0..size).step_by(7) {
        let mut bytes = orig.clone();
        bytes[off] ^= 0x10;
        std::fs::write(&path, &bytes).unwrap();
        let Ok(f) = PartitionFile::open(&path, |_, _| 0) else { continue };
        let mut out = Vec::new();
        match f.read(0, i64::MIN, i64::MAX, &mut out) {
            Ok(()) => assert_eq!(out, s, "flip at {off} served wrong data"),
            Err(e) => assert!(e.to_string().contains("corruption"), "{e}"),
        }
    }
}

/// A file with native histograms: they round-trip beside the floats, and a flipped bit anywhere
/// (blocks, histogram section, tables) is detected or harmless, never served as other data.
#[test]
fn histogram_sections_round_trip_and_flips_are_detected() {
    use crate::hist;
    use crate::types::{FloatHistogram, HistogramSample};
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("1.spf");
    let a = Labels::from_pairs(&[("__name__", "a")]);
    let b = Labels::from_pairs(&[("__name__", "b")]);
    let mut s = samples(40, 1000);
    let mut hs = Vec::new();
    for (k, x) in s.iter_mut().enumerate().filter(|(k, _)| k % 3 != 0) {
        x.v = hist::marker();
        let h = FloatHistogram {
            schema: if k < 20 { 1 } else { -53 },
            count: k as f64,
            sum: 0.5,
            positive: vec![(0, k as f64)],
            custom_values: if k < 20 { vec![] } else { vec![1.0, 2.0] },
            ..FloatHistogram::default()
        };
        hs.push(HistogramSample { t: x.t, h });
    }
    let mut w = FileWriter::create(&path, 16, 0).unwrap();
    w.add_series_full(&a, &s, &[], &hs).unwrap();
    w.add_series(&b, &samples(5, 10)).unwrap();
    let size = w.finish().unwrap() as usize;
    let read = |f: &PartitionFile| -> crate::error::Result<(Vec<Sample>, Vec<HistogramSample>)> {
        let (mut out, mut h) = (Vec::new(), Vec::new());
        f.read(0, i64::MIN, i64::MAX, &mut out)?;
        f.read_histograms(0, &out, &mut h)?;
        Ok((out, h))
    };
    let f = PartitionFile::open(&path, |l, _| u32::from(l.metric_name() == Some("b"))).unwrap();
    assert!(f.has_histograms(0) && !f.has_histograms(1));
    assert_eq!(read(&f).unwrap(), (s.clone(), hs.clone()));
    let orig = std::fs::read(&path).unwrap();
    for off in 0..size {
        let mut bytes = orig.clone();
        bytes[off] ^= 0x04;
        std::fs::write(&path, &bytes).unwrap();
        let Ok(f) = PartitionFile::open(&path, |l, _| u32::from(l.metric_name() == Some("b"))) else {
            continue;
        };
        match read(&f) {
            Ok(got) => assert_eq!(got, (s.clone(), hs.clone()), "flip at {off} served wrong data"),
            Err(e) => assert!(e.to_string().contains("corruption"), "{e}"),
        }
    }
}

/// Since format version 2 a regular series' blocks leave their count and timestamps to their
/// statistics (codec 4), an irregular one's keep them, and both read back. (Version 1 files
/// still open: `tests/integration/db.rs` opens the golden databases written before it.)
#[test]
fn regular_blocks_leave_their_timestamps_to_their_statistics() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("1.spf");
    let regular = Labels::from_pairs(&[("__name__", "regular")]);
    let ragged = Labels::from_pairs(&[("__name__", "z_ragged")]);
    let sr = samples(1000, 10_000);
    let mut sz = samples(1000, 10_000);
    for (i, s) in sz.iter_mut().enumerate() {
        s.t += (i % 7) as i64;
    }
    let mut w = FileWriter::create(&path, 1024, 3_600_000).unwrap();
    w.add_series(&regular, &sr).unwrap();
    w.add_series(&ragged, &sz).unwrap();
    w.finish().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes[8..12], VERSION.to_le_bytes());
    assert_eq!(VERSION, 5);
    let f = PartitionFile::open(&path, |l, _| u32::from(l.get("__name__") != Some("regular"))).unwrap();
    for (id, want, implied) in [(0, &sr, true), (1, &sz, false)] {
        let blocks = f.blocks(id).unwrap();
        assert!(blocks.len() >= 3);
        for b in &blocks {
            // A single sample is a constant interval too.
            let want = implied || b.stats.count == 1;
            assert_eq!(bytes[b.offset as usize] & 0x0f == 4, want, "series {id} block at {}", b.offset);
        }
        let mut out = Vec::new();
        f.read(id, i64::MIN, i64::MAX, &mut out).unwrap();
        assert_eq!(&out, want);
    }
}

/// The golden file's two series: two hours of 15 s samples from a whole hour, a counter that
/// resets in its second hour and a gauge.
fn counter_and_gauge() -> [(Labels, Vec<Sample>); 2] {
    let base = 1_699_999_200_000i64;
    let counter =
        (1..=480).map(|i| Sample::new(base + i * 15_000, (3 * if i <= 300 { i } else { i - 300 }) as f64));
    let gauge = (1..=480).map(|i| Sample::new(base + i * 15_000, ((i * 7) % 11) as f64));
    [
        (Labels::from_pairs(&[("__name__", "c_total")]), counter.collect()),
        (Labels::from_pairs(&[("__name__", "g")]), gauge.collect()),
    ]
}

/// Format version 3 records which blocks never decrease, version 4 which hold integers only,
/// version 5 lays its index out in chunks. Version 2, 3 and 4 files (golden, written by git
/// e2a3877b, 3a5845810 and 196ec146a) still open, with the same samples and statistics except
/// the flags they lack, which read false: their blocks are decoded for `rate` and checked by
/// their header for `sum_over_time`.
#[test]
fn versions_2_to_4_still_open() {
    let golden = |v: u32| {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("testdata/format/partition_v{v}.spf"));
        assert_eq!(std::fs::read(&path).unwrap()[8..12], v.to_le_bytes());
        path
    };
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("1.spf");
    let mut w = FileWriter::create(&path, 1024, 3_600_000).unwrap();
    for (labels, samples) in counter_and_gauge() {
        w.add_series(&labels, &samples).unwrap();
    }
    w.finish().unwrap();
    let id_of = |l: &Labels, _| u32::from(l.get("__name__") != Some("c_total"));
    let new = PartitionFile::open(&path, id_of).unwrap();
    let v4 = PartitionFile::open(&golden(4), id_of).unwrap();
    let v3 = PartitionFile::open(&golden(3), id_of).unwrap();
    let v2 = PartitionFile::open(&golden(2), id_of).unwrap();
    for (id, (_, want)) in counter_and_gauge().iter().enumerate() {
        let id = id as u32;
        let new_blocks = new.blocks(id).unwrap();
        // The counter's first hour only rises; its second hour holds the reset; the gauge falls.
        let no_decrease: Vec<bool> = new_blocks.iter().map(|b| b.stats.no_decrease).collect();
        assert_eq!(no_decrease, if id == 0 { vec![true, false] } else { vec![false, false] });
        assert!(new_blocks.iter().all(|b| b.stats.integral));
        // Version 4 differs in the index only: the same blocks at the same offsets.
        assert_eq!(v4.blocks(id).unwrap(), new_blocks);
        for (old, keeps_no_decrease) in [(&v3, true), (&v2, false)] {
            let old_blocks = old.blocks(id).unwrap();
            assert_eq!(old_blocks.len(), new_blocks.len());
            for (o, n) in old_blocks.iter().zip(&new_blocks) {
                let no_decrease = keeps_no_decrease && n.stats.no_decrease;
                assert_eq!(o.stats, BlockStats { no_decrease, integral: false, ..n.stats });
                // The older files' headers tell the same, read from the block.
                assert!(old.block_integral(o).unwrap());
            }
        }
        for f in [&new, &v4, &v3, &v2] {
            let mut out = Vec::new();
            f.read(id, i64::MIN, i64::MAX, &mut out).unwrap();
            assert_eq!(&out, want);
        }
    }
}

/// A version 4 file answers whether a block holds integers from its statistics alone, also
/// where the block's header cannot tell (Gorilla XOR values), and never for floats.
#[test]
fn integral_blocks_are_known_without_reading_them() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("1.spf");
    let base = 1_699_999_200_000i64;
    let ints: Vec<Sample> = (1..=480).map(|i| Sample::new(base + i * 15_000, ((i * 7919) % 1_000_003) as f64)).collect();
    let floats: Vec<Sample> = (1..=480).map(|i| Sample::new(base + i * 15_000, i as f64 / 3.0)).collect();
    let mut w = FileWriter::create(&path, 1024, 3_600_000).unwrap();
    w.add_series(&Labels::from_pairs(&[("__name__", "a")]), &ints).unwrap();
    w.add_series(&Labels::from_pairs(&[("__name__", "b")]), &floats).unwrap();
    w.finish().unwrap();
    let f = PartitionFile::open(&path, |l, _| u32::from(l.get("__name__") != Some("a"))).unwrap();
    for (id, want) in [(0, true), (1, false)] {
        for b in f.blocks(id).unwrap() {
            assert_eq!(b.stats.integral, want);
            // A block that is not there is not read: only its statistics are.
            let moved = BlockMeta { offset: u64::MAX / 2, ..b };
            assert_eq!(f.block_integral(&moved).unwrap(), want);
        }
    }
}

/// Flush-encoding speed: 1,000 TSBS-like series (integer random walks in [0, 100], 10 s apart)
/// of one day each written into a partition file, median of 5 runs. Prints ns per sample.
/// `STRATA_SLOW_TESTS=1 cargo test --release -p storage --lib flush_encode_speed -- --nocapture`
#[test]
fn flush_encode_speed() {
    if std::env::var_os("STRATA_SLOW_TESTS").is_none() {
        return;
    }
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let series: Vec<(Labels, Vec<Sample>)> = (0..1_000)
        .map(|i| {
            let mut v = 50.0f64;
            let samples = (0..8_640i64)
                .map(|k| {
                    // About N(0, 1): a sum of four uniforms, centred and scaled.
                    let step: f64 = (0..4).map(|_| (next() % 1_000) as f64 / 1_000.0).sum::<f64>() - 2.0;
                    v = (v + step * 1.7).clamp(0.0, 100.0);
                    Sample::new(1_700_000_000_000 + k * 10_000, v.round())
                })
                .collect();
            (Labels::from_pairs(&[("__name__", "cpu_usage_user"), ("hostname", &format!("host_{i:04}"))]), samples)
        })
        .collect();
    let samples: usize = series.iter().map(|(_, s)| s.len()).sum();
    let d = tempfile::tempdir().unwrap();
    let mut times: Vec<f64> = (0..5)
        .map(|run| {
            let started = std::time::Instant::now();
            let mut w = FileWriter::create(&d.path().join(format!("{run}.spf")), 1024, 3_600_000).unwrap();
            for (l, s) in &series {
                w.add_series_full(l, s, &[], &[]).unwrap();
            }
            w.finish().unwrap();
            started.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    let _ = writeln!(
        std::io::stderr(),
        "flush encode: {samples} samples, median {:.1} ms, {:.1} ns/sample",
        times[2] * 1e3,
        times[2] * 1e9 / samples as f64
    );
}

//! The native histogram chunks of streamed remote read (`HISTOGRAM` and `FLOAT_HISTOGRAM`),
//! checked with a decoder of our own written from Prometheus' reader (`histogramIterator.Next`,
//! `floatHistogramIterator.Next`, `readHistogramChunkLayout`, `readVarbitInt/Uint`, `xorRead`,
//! `counterResetHint` in tsdb/chunkenc), independent of the encoder: round trips under
//! proptest (integer and float histograms, every schema, layout changes, counter resets and
//! their headers, gauges), and golden bytes of a tiny chunk worked out by hand from the Go code
//! (docs/formats.md, "Remote read: histogram chunks").

use proptest::prelude::*;
use remote::read::histogram_chunk::histogram_chunks;
use remote::read::proto::{CHUNK_FLOAT_HISTOGRAM, CHUNK_HISTOGRAM, Chunk};
use storage::{CounterResetHint, FloatHistogram, HistogramSample};

// ---------------------------------------------------------------- the decoder

/// Bits, most significant first (Prometheus' `bstreamReader`).
struct Bits<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Bits<'_> {
    fn bit(&mut self) -> Result<bool, String> {
        let byte = self.bytes.get(self.pos / 8).ok_or("unexpected end of chunk")?;
        let bit = byte >> (7 - self.pos % 8) & 1 == 1;
        self.pos += 1;
        Ok(bit)
    }

    fn bits(&mut self, n: u32) -> Result<u64, String> {
        let mut v = 0u64;
        for _ in 0..n {
            v = v << 1 | u64::from(self.bit()?);
        }
        Ok(v)
    }

    /// `readVarbitUint`'s prefix and width.
    fn varbit_width(&mut self) -> Result<u32, String> {
        let mut ones = 0;
        while ones < 8 && self.bit()? {
            ones += 1;
        }
        Ok([0, 3, 6, 9, 12, 18, 25, 56, 64][ones])
    }

    fn varbit_uint(&mut self) -> Result<u64, String> {
        let width = self.varbit_width()?;
        self.bits(width)
    }

    /// `readVarbitInt`: the widths below 64 are two's complement with one more positive value.
    fn varbit_int(&mut self) -> Result<i64, String> {
        let width = self.varbit_width()?;
        let bits = self.bits(width)?;
        if width == 0 || width == 64 {
            return Ok(bits as i64);
        }
        Ok(if bits > 1 << (width - 1) { bits as i64 - (1i64 << width) } else { bits as i64 })
    }

    /// `xorRead`.
    fn xor(&mut self, value: &mut u64, leading: &mut u32, trailing: &mut u32) -> Result<(), String> {
        if !self.bit()? {
            return Ok(());
        }
        if self.bit()? {
            *leading = self.bits(5)? as u32;
            let mut significant = self.bits(6)? as u32;
            if significant == 0 {
                significant = 64;
            }
            *trailing = 64u32.checked_sub(*leading + significant).ok_or("window wider than 64 bits")?;
        }
        let significant = 64 - *leading - *trailing;
        *value ^= self.bits(significant)? << *trailing;
        Ok(())
    }
}

/// The layout every sample of a chunk shares (`readHistogramChunkLayout`).
struct Layout {
    schema: i32,
    zero_threshold: f64,
    positive: Vec<i32>,
    negative: Vec<i32>,
    custom_values: Vec<f64>,
}

fn read_spans(r: &mut Bits<'_>) -> Result<Vec<i32>, String> {
    let mut indexes = Vec::new();
    let mut idx = 0i64;
    for _ in 0..r.varbit_uint()? {
        let length = r.varbit_uint()?;
        idx += r.varbit_int()?;
        for _ in 0..length {
            indexes.push(idx as i32);
            idx += 1;
        }
    }
    Ok(indexes)
}

fn read_layout(r: &mut Bits<'_>) -> Result<Layout, String> {
    let zero_threshold = match r.bits(8)? {
        0 => 0.0,
        255 => f64::from_bits(r.bits(64)?),
        b => 0.5 * 2f64.powi(b as i32 - 243),
    };
    let schema = r.varbit_int()? as i32;
    let positive = read_spans(r)?;
    let negative = read_spans(r)?;
    let mut custom_values = Vec::new();
    if schema == -53 {
        for _ in 0..r.varbit_uint()? {
            custom_values.push(match r.varbit_uint()? {
                0 => f64::from_bits(r.bits(64)?),
                v => (v - 1) as f64 / 1000.0,
            });
        }
    }
    Ok(Layout { schema, zero_threshold, positive, negative, custom_values })
}

/// `counterResetHint`: the header speaks for the first sample only (and "not a reset" there is
/// reported as unknown); later samples of a counter chunk are never resets.
fn hint(header: u8, num_read: usize) -> CounterResetHint {
    match (header >> 6, num_read) {
        (0b11, _) => CounterResetHint::Gauge,
        (_, n) if n > 1 => CounterResetHint::NotReset,
        (0b10, _) => CounterResetHint::Reset,
        _ => CounterResetHint::Unknown,
    }
}

fn histogram(layout: &Layout, hint: CounterResetHint, fields: &[f64]) -> FloatHistogram {
    let (head, buckets) = fields.split_at(3);
    let (pos, neg) = buckets.split_at(layout.positive.len());
    FloatHistogram {
        counter_reset_hint: hint,
        schema: layout.schema,
        zero_threshold: layout.zero_threshold,
        zero_count: head[1],
        count: head[0],
        sum: head[2],
        positive: layout.positive.iter().copied().zip(pos.iter().copied()).collect(),
        negative: layout.negative.iter().copied().zip(neg.iter().copied()).collect(),
        custom_values: layout.custom_values.clone(),
    }
}

/// Decodes a `HISTOGRAM` or `FLOAT_HISTOGRAM` chunk as Prometheus' iterators do.
fn decode(chunk: &Chunk) -> Result<Vec<HistogramSample>, String> {
    let data = &chunk.data;
    if data.len() < 3 {
        return Err("shorter than the header".into());
    }
    let total = usize::from(u16::from_be_bytes([data[0], data[1]]));
    let header = data[2];
    if header & 0x3f != 0 {
        return Err("unused header bits set".into());
    }
    let r = &mut Bits { bytes: &data[3..], pos: 0 };
    let mut out = Vec::with_capacity(total);
    if total == 0 {
        return Ok(out);
    }
    let layout = read_layout(r)?;
    let n = layout.positive.len() + layout.negative.len();
    let mut t = r.varbit_int()?;
    let mut t_delta = 0i64;
    match chunk.r#type {
        CHUNK_HISTOGRAM => {
            let mut count = r.varbit_uint()? as i64;
            let mut zero = r.varbit_uint()? as i64;
            let mut sum = r.bits(64)?;
            // Buckets as deltas to the previous bucket, and how each delta changes over time.
            let mut buckets: Vec<i64> = (0..n).map(|_| r.varbit_int()).collect::<Result<_, _>>()?;
            let mut buckets_delta = vec![0i64; n];
            let (mut count_delta, mut zero_delta) = (0i64, 0i64);
            let (mut leading, mut trailing) = (0, 0);
            for read in 1..=total {
                if read > 1 {
                    t_delta += r.varbit_int()?;
                    t += t_delta;
                    count_delta += r.varbit_int()?;
                    count += count_delta;
                    zero_delta += r.varbit_int()?;
                    zero += zero_delta;
                    r.xor(&mut sum, &mut leading, &mut trailing)?;
                    for i in 0..n {
                        buckets_delta[i] += r.varbit_int()?;
                        buckets[i] += buckets_delta[i];
                    }
                }
                let mut fields = vec![count as f64, zero as f64, f64::from_bits(sum)];
                // Absolute counts: running sums, restarting for the negative side.
                let mut running = 0i64;
                for (i, b) in buckets.iter().enumerate() {
                    if i == layout.positive.len() {
                        running = 0;
                    }
                    running += b;
                    fields.push(running as f64);
                }
                out.push(HistogramSample { t, h: histogram(&layout, hint(header, read), &fields) });
            }
        }
        CHUNK_FLOAT_HISTOGRAM => {
            let mut values: Vec<u64> = (0..3 + n).map(|_| r.bits(64)).collect::<Result<_, _>>()?;
            let mut windows = vec![(0u32, 0u32); 3 + n];
            for read in 1..=total {
                if read > 1 {
                    t_delta += r.varbit_int()?;
                    t += t_delta;
                    for (v, (leading, trailing)) in values.iter_mut().zip(windows.iter_mut()) {
                        r.xor(v, leading, trailing)?;
                    }
                }
                let fields: Vec<f64> = values.iter().map(|b| f64::from_bits(*b)).collect();
                out.push(HistogramSample { t, h: histogram(&layout, hint(header, read), &fields) });
            }
        }
        other => return Err(format!("chunk type {other} is not a histogram chunk")),
    }
    // Whatever follows the last sample is padding: zero bits, at most a byte and a bit
    // (bstream's spare byte).
    if r.pos + 16 <= r.bytes.len() * 8 {
        return Err(format!("{} bytes after the last sample", r.bytes.len() - r.pos.div_ceil(8)));
    }
    Ok(out)
}

// ---------------------------------------------------------------- checks

/// Buckets without observations left out (the chunk's shared layout adds them where a sample
/// lacks a bucket), and the hint left aside: compared separately.
fn compact(h: &FloatHistogram) -> FloatHistogram {
    let keep = |b: &Vec<(i32, f64)>| b.iter().copied().filter(|(_, c)| *c != 0.0).collect::<Vec<_>>();
    FloatHistogram {
        counter_reset_hint: CounterResetHint::Unknown,
        positive: keep(&h.positive),
        negative: keep(&h.negative),
        ..h.clone()
    }
}

fn same_bits(a: &FloatHistogram, b: &FloatHistogram) -> bool {
    let buckets = |x: &[(i32, f64)], y: &[(i32, f64)]| {
        x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.0 == q.0 && p.1.to_bits() == q.1.to_bits())
    };
    a.schema == b.schema
        && a.zero_threshold.to_bits() == b.zero_threshold.to_bits()
        && a.count.to_bits() == b.count.to_bits()
        && a.zero_count.to_bits() == b.zero_count.to_bits()
        && a.sum.to_bits() == b.sum.to_bits()
        && buckets(&a.positive, &b.positive)
        && buckets(&a.negative, &b.negative)
        && a.custom_values.len() == b.custom_values.len()
        && a.custom_values.iter().zip(&b.custom_values).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// A counter histogram that went down against the one before it (Prometheus' `appendable`).
fn is_reset(prev: &FloatHistogram, h: &FloatHistogram) -> bool {
    let down = |old: &[(i32, f64)], new: &[(i32, f64)]| {
        old.iter().any(|(i, c)| *c > new.iter().find(|b| b.0 == *i).map_or(0.0, |b| b.1))
    };
    h.count < prev.count
        || (h.schema == prev.schema
            && h.zero_threshold == prev.zero_threshold
            && ((h.schema == -53 && h.custom_values != prev.custom_values)
                || h.zero_count < prev.zero_count
                || down(&prev.positive, &h.positive)
                || down(&prev.negative, &h.negative)))
}

/// Encodes `samples`, decodes every chunk, and checks everything a reader relies on.
fn check_round_trip(samples: &[HistogramSample]) -> Result<Vec<Chunk>, TestCaseError> {
    let chunks = histogram_chunks(samples);
    let mut decoded = Vec::new();
    let mut last_max = i64::MIN;
    for chunk in &chunks {
        let got = decode(chunk).map_err(|e| TestCaseError::fail(format!("{e}: {chunk:?}")))?;
        prop_assert!(!got.is_empty() && got.len() <= 120, "{} samples in a chunk", got.len());
        prop_assert_eq!(chunk.min_time_ms, got[0].t);
        prop_assert_eq!(chunk.max_time_ms, got[got.len() - 1].t);
        prop_assert!(chunk.min_time_ms > last_max, "chunks overlap or are out of order");
        last_max = chunk.max_time_ms;
        let integer = got.iter().all(|s| remote::prw::is_integer(&s.h));
        prop_assert_eq!(chunk.r#type == CHUNK_HISTOGRAM, integer, "chunk type of {:?}", got);
        decoded.extend(got);
    }
    prop_assert_eq!(decoded.len(), samples.len());
    for (i, (want, got)) in samples.iter().zip(&decoded).enumerate() {
        prop_assert_eq!(want.t, got.t);
        prop_assert!(same_bits(&compact(&want.h), &compact(&got.h)), "sample {}: {:?} != {:?}", i, want, got);
        let gauge = want.h.counter_reset_hint == CounterResetHint::Gauge;
        prop_assert_eq!(got.h.counter_reset_hint == CounterResetHint::Gauge, gauge, "sample {}", i);
        if want.h.counter_reset_hint == CounterResetHint::Reset {
            prop_assert_eq!(
                got.h.counter_reset_hint,
                CounterResetHint::Reset,
                "explicit reset, sample {}",
                i
            );
        }
        // A reset in the data must never be read as "not a reset".
        if i > 0 && !gauge && is_reset(&samples[i - 1].h, &want.h) {
            prop_assert_ne!(
                got.h.counter_reset_hint,
                CounterResetHint::NotReset,
                "hidden reset, sample {}",
                i
            );
        }
    }
    Ok(chunks)
}

fn hint_of(k: u8) -> CounterResetHint {
    [CounterResetHint::Unknown, CounterResetHint::Reset, CounterResetHint::NotReset, CounterResetHint::Gauge]
        [usize::from(k % 4)]
}

/// One step of a series: how the next histogram differs from the previous one.
#[derive(Debug, Clone)]
enum Step {
    /// Observations added to some buckets (new buckets appear: the layout grows).
    Grow(Vec<(bool, i32, u32)>, u32),
    /// Everything starts from zero again, with a hint or without.
    Reset(bool),
    /// Another schema or zero threshold (a new chunk with an unknown header).
    Rescale(i32),
    /// A float histogram (fractional counts) from now on, or an integer one again.
    ToggleFloat,
    /// The hint of the next sample.
    Hint(u8),
}

fn arb_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (proptest::collection::vec((any::<bool>(), -12i32..12, 0u32..300), 0..4), 0u32..40)
            .prop_map(|(b, z)| Step::Grow(b, z)),
        1 => any::<bool>().prop_map(Step::Reset),
        1 => prop_oneof![-4i32..=8, Just(-53)].prop_map(Step::Rescale),
        1 => Just(Step::ToggleFloat),
        1 => (0u8..4).prop_map(Step::Hint),
    ]
}

/// A series built from steps, with timestamps that jitter (varying deltas of deltas).
fn series(
    start_schema: i32,
    steps: &[Step],
    gaps: &[i64],
    zero_threshold: f64,
    sum_seed: f64,
) -> Vec<HistogramSample> {
    let mut out: Vec<HistogramSample> = Vec::new();
    let mut schema = start_schema;
    let mut float = false;
    let mut pos = std::collections::BTreeMap::<i32, f64>::new();
    let mut neg = std::collections::BTreeMap::<i32, f64>::new();
    let mut zero = 0.0;
    let mut sum = sum_seed;
    let mut t = 1_700_000_000_000i64;
    for (k, step) in steps.iter().enumerate() {
        let mut hint = CounterResetHint::Unknown;
        match step {
            Step::Grow(buckets, z) => {
                let scale = if float { 0.25 } else { 1.0 };
                for &(negative, idx, c) in buckets {
                    let side = if negative && schema != -53 { &mut neg } else { &mut pos };
                    let idx = if schema == -53 { idx.rem_euclid(4) } else { idx };
                    *side.entry(idx).or_insert(0.0) += f64::from(c) * scale;
                }
                if schema != -53 {
                    zero += f64::from(*z) * scale;
                }
                sum += 1.5 * f64::from(*z);
            }
            Step::Reset(explicit) => {
                pos.clear();
                neg.clear();
                zero = 0.0;
                sum = 0.0;
                if *explicit {
                    hint = CounterResetHint::Reset;
                }
            }
            Step::Rescale(s) => {
                schema = *s;
                pos.clear();
                neg.clear();
                zero = 0.0;
            }
            Step::ToggleFloat => float = !float,
            Step::Hint(h) => hint = hint_of(*h),
        }
        let positive: Vec<(i32, f64)> =
            pos.iter().map(|(i, c)| (*i, *c)).filter(|(_, c)| *c != 0.0).collect();
        let negative: Vec<(i32, f64)> =
            neg.iter().map(|(i, c)| (*i, *c)).filter(|(_, c)| *c != 0.0).collect();
        let total = zero + positive.iter().chain(&negative).map(|b| b.1).sum::<f64>();
        let nhcb = schema == -53;
        let h = FloatHistogram {
            counter_reset_hint: hint,
            schema,
            zero_threshold: if nhcb { 0.0 } else { zero_threshold },
            zero_count: if nhcb { 0.0 } else { zero },
            // A float histogram's count is a bit more than its buckets (NaN-free but not integer).
            count: total + if float { 0.5 } else { 0.0 },
            sum,
            positive,
            negative,
            custom_values: if nhcb { vec![0.005, 1.0, 2.5, 1e6] } else { Vec::new() },
        };
        t += 15_000 + gaps[k % gaps.len()];
        out.push(HistogramSample { t, h });
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Series of growing, resetting, rescaled, integer and float histograms decode to what was
    /// encoded, chunk by chunk, with headers a reader can trust.
    #[test]
    fn histogram_series_round_trip(
        start_schema in prop_oneof![-4i32..=8, Just(-53)],
        steps in proptest::collection::vec(arb_step(), 1..300),
        gaps in proptest::collection::vec(-2_000i64..5_000, 1..5),
        zero_threshold in prop_oneof![Just(0.0), Just(2f64.powi(-128)), Just(0.001), Just(1024.0)],
        sum_seed in -1e6f64..1e6,
    ) {
        check_round_trip(&series(start_schema, &steps, &gaps, zero_threshold, sum_seed))?;
    }

    /// Independent histograms, one after the other: every sample may change kind, schema or
    /// hint, so chunks are cut often; gauges stay gauges and may go down freely.
    #[test]
    fn unrelated_histograms_round_trip(
        hs in proptest::collection::vec(
            (prop_oneof![-4i32..=8, Just(-53)], 0u8..4, any::<bool>(),
             proptest::collection::btree_map(-20i32..20, 0u32..5000, 0..6), 0u32..9, any::<f64>()),
            1..40),
    ) {
        let samples: Vec<HistogramSample> = hs
            .into_iter()
            .enumerate()
            .map(|(i, (schema, k, float, buckets, zero, sum))| {
                let nhcb = schema == -53;
                let scale = if float { 0.125 } else { 1.0 };
                let positive: Vec<(i32, f64)> = buckets
                    .into_iter()
                    .filter(|(i, _)| !nhcb || (0..3).contains(i))
                    .map(|(i, c)| (i, f64::from(c) * scale))
                    .collect();
                let zero_count = if nhcb { 0.0 } else { f64::from(zero) };
                let count = zero_count + positive.iter().map(|b| b.1).sum::<f64>();
                HistogramSample {
                    t: i as i64 * 1000 - 5000,
                    h: FloatHistogram {
                        counter_reset_hint: hint_of(k),
                        schema,
                        zero_threshold: if nhcb { 0.0 } else { 0.5 },
                        zero_count,
                        count,
                        sum,
                        positive,
                        negative: Vec::new(),
                        custom_values: if nhcb { vec![-1.5, 0.25, 33554.43] } else { Vec::new() },
                    },
                }
            })
            .collect();
        check_round_trip(&samples)?;
    }
}

// ---------------------------------------------------------------- fixed cases

fn counter(t: i64, count: f64, positive: Vec<(i32, f64)>) -> HistogramSample {
    HistogramSample {
        t,
        h: FloatHistogram {
            counter_reset_hint: CounterResetHint::Unknown,
            schema: 0,
            zero_threshold: 0.0,
            zero_count: 0.0,
            count,
            sum: count,
            positive,
            negative: Vec::new(),
            custom_values: Vec::new(),
        },
    }
}

fn headers(chunks: &[Chunk]) -> Vec<(usize, u8)> {
    chunks.iter().map(|c| (usize::from(u16::from_be_bytes([c.data[0], c.data[1]])), c.data[2] >> 6)).collect()
}

/// 250 samples of one counter: chunks of 120, 120 and 10; the first header is unknown (there
/// is no chunk before it), the next ones say "not a reset" (`prev.appendable` found none).
#[test]
fn full_chunks_are_cut_at_120_samples() {
    let samples: Vec<_> = (0..250).map(|i| counter(i * 1000, i as f64, vec![(1, i as f64)])).collect();
    let chunks = check_round_trip(&samples).unwrap();
    assert_eq!(headers(&chunks), vec![(120, 0b00), (120, 0b01), (10, 0b01)]);
    assert!(chunks.iter().all(|c| c.r#type == CHUNK_HISTOGRAM));
}

/// A bucket that appears later widens the chunk's layout instead of cutting it; a decrease cuts
/// it with a reset header; another schema cuts it with an unknown header; a float histogram
/// gets a float chunk with an unknown header (no previous float chunk).
#[test]
fn resets_schema_changes_and_kinds_start_chunks() {
    let mut samples = vec![
        counter(0, 1.0, vec![(1, 1.0)]),
        counter(10, 3.0, vec![(1, 1.0), (4, 2.0)]),
        counter(20, 2.0, vec![(4, 2.0)]),
    ];
    let mut rescaled = counter(30, 5.0, vec![(1, 5.0)]);
    rescaled.h.schema = 2;
    samples.push(rescaled);
    samples.push(counter(40, 5.5, vec![(1, 5.0)]));
    let chunks = check_round_trip(&samples).unwrap();
    assert_eq!(headers(&chunks), vec![(2, 0b00), (1, 0b10), (1, 0b00), (1, 0b00)]);
    assert_eq!(
        chunks.iter().map(|c| c.r#type).collect::<Vec<_>>(),
        vec![CHUNK_HISTOGRAM, CHUNK_HISTOGRAM, CHUNK_HISTOGRAM, CHUNK_FLOAT_HISTOGRAM]
    );
    let first = decode(&chunks[0]).unwrap();
    assert_eq!(first[0].h.positive, vec![(1, 1.0), (4, 0.0)], "the union layout, 0 where absent");
}

/// Golden bytes, worked out by hand from the Go code (docs/formats.md shows the derivation):
/// two integer histograms, schema 0, zero threshold 2^-128, positive buckets 0 and 1.
///
/// sample 0: t=1000, count 3, zero count 1, sum 2.5, buckets 0: 1, 1: 1 (deltas 1, 0);
/// sample 1: t=2000, count 5, zero count 1, sum 4, buckets 0: 2, 1: 2 (deltas 2, 0).
#[test]
fn golden_integer_histogram_chunk() {
    let h = |t: i64, count: f64, sum: f64, b: f64| HistogramSample {
        t,
        h: FloatHistogram {
            counter_reset_hint: CounterResetHint::Unknown,
            schema: 0,
            zero_threshold: 2f64.powi(-128),
            zero_count: 1.0,
            count,
            sum,
            positive: vec![(0, b), (1, b)],
            negative: Vec::new(),
            custom_values: Vec::new(),
        },
    };
    let chunks = histogram_chunks(&[h(1000, 3.0, 2.5, 1.0), h(2000, 5.0, 4.0, 2.0)]);
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0].r#type, CHUNK_HISTOGRAM);
    let golden: &[u8] = &[
        0x00, 0x02, 0x00, // 2 samples, unknown counter-reset header
        0x74, // zero threshold 2^-128: Frexp gives 0.5·2^-127, -127 + 243 = 116
        // schema 0 '0' | 1 positive span '10 001' | length 2 '10 010', offset 0 '0' | no
        // negative spans '0' | t 1000 '11110 001111101000' | count 3 '10 011' | zero count 1
        // '10 001' (40 bits: five bytes)
        0x46, 0x47, 0x8F, 0xA2, 0x71, // sum 2.5, 64 bits
        0x40, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        // buckets: delta 1 '10 001', delta 0 '0' | sample 1: t dod 1000 '11110 001111101000' |
        // count dod 2 '10 010' | zero count dod 0 '0' | sum 4 XOR 2.5 = 0x0014<<48: '1' '1',
        // 11 leading zeros '01011', 3 significant bits '000011', '101' | bucket 0: delta
        // 2-1=1, dod 1 '10 001' | bucket 1: dod 0 '0' | 5 bits of padding
        0x8B, 0xC7, 0xD1, 0x26, 0xB0, 0xEC, 0x40,
    ];
    assert_eq!(chunks[0].data, golden, "{:02X?}", chunks[0].data);
    let decoded = decode(&chunks[0]).unwrap();
    assert_eq!(decoded[1].h.positive, vec![(0, 2.0), (1, 2.0)]);
    assert_eq!(decoded[1].h.sum, 4.0);
}

/// A series that switches between floats and histograms gets its XOR and histogram chunks in
/// time order, none overlapping.
#[test]
fn floats_and_histograms_interleave_in_time_order() {
    let floats = [storage::Sample::new(0, 1.0), storage::Sample::new(1, 2.0), storage::Sample::new(4, 3.0)];
    let hs =
        [counter(2, 1.0, vec![(0, 1.0)]), counter(3, 2.0, vec![(0, 2.0)]), counter(5, 1.0, vec![(0, 1.0)])];
    let chunks = remote::read::series_chunks(&floats, &hs);
    let got: Vec<_> = chunks.iter().map(|c| (c.r#type, c.min_time_ms, c.max_time_ms)).collect();
    use remote::read::proto::CHUNK_XOR;
    assert_eq!(
        got,
        vec![(CHUNK_XOR, 0, 1), (CHUNK_HISTOGRAM, 2, 3), (CHUNK_XOR, 4, 4), (CHUNK_HISTOGRAM, 5, 5)]
    );
    assert_eq!(decode(&chunks[3]).unwrap()[0].h.positive, vec![(0, 1.0)]);
    assert!(remote::read::series_chunks(&[], &[]).is_empty());
}

/// A float and a histogram at one timestamp (storage never returns both) still end.
#[test]
fn a_float_and_a_histogram_at_one_timestamp_do_not_hang() {
    let chunks = remote::read::series_chunks(&[storage::Sample::new(7, 1.0)], &[counter(7, 1.0, vec![])]);
    assert_eq!(chunks.len(), 2);
}

//! Deterministic data shapes for storage measurements.

/// A small, fast, seedable PRNG (splitmix64): the same seed gives the same data everywhere.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.f64().max(f64::MIN_POSITIVE);
        let u2 = self.f64();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
    /// Uniform integer in [lo, hi].
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as i64
    }
}

/// The data shapes measured in `docs/benchmarks/storage.md` ("Disk and head memory per data
/// shape").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// TSBS devops cpu as TSBS generates it: a float random walk with N(0, 1) steps clamped to
    /// [0, 100], written truncated to an integer (`usage_user=58i`), regular interval.
    TsbsInt,
    /// Full-precision noisy floats.
    NoisyFloat,
    /// The same value forever.
    Constant,
    /// A value that changes rarely (a step function), e.g. a config gauge.
    Step,
    /// Integer random walk with jittered (irregular) timestamps.
    Irregular,
    /// A monotonically increasing counter with varying increments.
    Counter,
}

impl Shape {
    /// All shapes.
    pub const ALL: [Shape; 6] =
        [Shape::TsbsInt, Shape::NoisyFloat, Shape::Constant, Shape::Step, Shape::Irregular, Shape::Counter];

    /// Short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            Shape::TsbsInt => "tsbs-int",
            Shape::NoisyFloat => "noisy-float",
            Shape::Constant => "constant",
            Shape::Step => "step",
            Shape::Irregular => "irregular-ts",
            Shape::Counter => "counter",
        }
    }

    /// `n` samples of one series starting at `start` with nominal interval `interval_ms`.
    pub fn series(self, rng: &mut Rng, start: i64, interval_ms: i64, n: usize) -> Vec<(i64, f64)> {
        let mut out = Vec::with_capacity(n);
        let mut v = rng.range(0, 100) as f64;
        let mut walk = rng.f64() * 100.0;
        let mut t = start;
        for i in 0..n {
            let value = match self {
                Shape::TsbsInt | Shape::Irregular => {
                    walk = (walk + rng.normal()).clamp(0.0, 100.0);
                    walk.trunc()
                }
                Shape::NoisyFloat => rng.f64() * 100.0,
                Shape::Constant => 42.0,
                Shape::Step => {
                    if i.is_multiple_of(360) {
                        v = rng.range(0, 10) as f64;
                    }
                    v
                }
                Shape::Counter => {
                    v += rng.range(0, 500) as f64;
                    v
                }
            };
            out.push((t, value));
            t += match self {
                Shape::Irregular => interval_ms + rng.range(-interval_ms / 5, interval_ms / 5),
                _ => interval_ms,
            };
        }
        out
    }
}

//! A native histogram as Prometheus' JSON API writes it (`jsonutil.MarshalHistogram` over
//! `FloatHistogram.AllBucketIterator`):
//!
//! ```text
//! {"count":"42","sum":"34593.34","buckets":[[1,"-4","-2","6"],[3,"-0.25","0.25","3"],[0,"0.25","0.5","12"]]}
//! ```
//!
//! `count`, `sum` and every bound and bucket count are strings in the sample-value notation.
//! Buckets come in ascending value order: negative buckets (highest index, the most negative,
//! first), the zero bucket when its count is above zero, then positive buckets. Buckets with a
//! count of zero are left out, and so is the `buckets` key when none remains. The first element
//! of a bucket is its boundary rule: 0 = `(lower, upper]`, 1 = `[lower, upper)`, 2 =
//! `(lower, upper)`, 3 = `[lower, upper]`. Exponential buckets are `[` on the negative and `]`
//! on the positive side (the rule compares the bound with zero: `lower < 0` is inclusive,
//! `upper > 0` is inclusive), the zero bucket is closed, and custom buckets (schema -53) are
//! upper-inclusive with the first (`-Inf` lower bound) closed (`baseBucketIterator.at`). A
//! bucket overlapping the zero bucket has that bound moved to the zero threshold.
//!
//! The bounds must come out as the very floats Go computes, or their shortest decimal digits
//! differ: Go takes them from a precomputed table (not correctly rounded in its last bits) and
//! `math.Ldexp`, and so does [`exponential_bound`].

use storage::FloatHistogram;

use super::encode::sample_value;

/// Appends `{"count":"..","sum":"..","buckets":[..]}` for `h`.
pub fn histogram(out: &mut Vec<u8>, h: &FloatHistogram) {
    out.extend_from_slice(b"{\"count\":");
    quoted_value(out, h.count);
    out.extend_from_slice(b",\"sum\":");
    quoted_value(out, h.sum);
    let mut found = false;
    let mut write = |out: &mut Vec<u8>, b: Bucket| {
        if b.count == 0.0 {
            return;
        }
        out.extend_from_slice(if found { b"," } else { b",\"buckets\":[" });
        found = true;
        let rule = match (b.lower_inclusive, b.upper_inclusive) {
            (false, true) => b'0',
            (true, false) => b'1',
            (false, false) => b'2',
            (true, true) => b'3',
        };
        out.push(b'[');
        out.push(rule);
        out.push(b',');
        quoted_value(out, b.lower);
        out.push(b',');
        quoted_value(out, b.upper);
        out.push(b',');
        quoted_value(out, b.count);
        out.push(b']');
    };
    let zt = h.zero_threshold;
    for &(idx, count) in h.negative.iter().rev() {
        let mut b = Bucket::new(h, idx, count, false);
        b.clip_to_zero_bucket(zt);
        write(out, b);
    }
    if h.zero_count > 0.0 {
        let zero = Bucket {
            lower: -zt,
            upper: zt,
            lower_inclusive: true,
            upper_inclusive: true,
            count: h.zero_count,
        };
        write(out, zero);
    }
    for &(idx, count) in &h.positive {
        let mut b = Bucket::new(h, idx, count, true);
        b.clip_to_zero_bucket(zt);
        write(out, b);
    }
    if found {
        out.push(b']');
    }
    out.push(b'}');
}

/// Appends `"<value>"`.
fn quoted_value(out: &mut Vec<u8>, v: f64) {
    out.push(b'"');
    sample_value(out, v);
    out.push(b'"');
}

/// One bucket with its bounds, as Prometheus' `histogram.Bucket`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Bucket {
    lower: f64,
    upper: f64,
    lower_inclusive: bool,
    upper_inclusive: bool,
    count: f64,
}

impl Bucket {
    /// Bucket `idx` on the positive or negative side, with the inclusiveness Prometheus gives it.
    fn new(h: &FloatHistogram, idx: i32, count: f64, positive: bool) -> Bucket {
        let bound = |i: i32| bound(h, i);
        let (lower, upper) =
            if positive { (bound(idx - 1), bound(idx)) } else { (-bound(idx), -bound(idx - 1)) };
        let (lower_inclusive, upper_inclusive) =
            if h.uses_custom_buckets() { (idx == 0, true) } else { (lower < 0.0, upper > 0.0) };
        Bucket { lower, upper, lower_inclusive, upper_inclusive, count }
    }

    /// Moves a bound that lies inside the zero bucket to its edge (the inclusiveness stays).
    fn clip_to_zero_bucket(&mut self, zero_threshold: f64) {
        if self.upper < 0.0 && self.upper > -zero_threshold {
            self.upper = -zero_threshold;
        } else if self.lower > 0.0 && self.lower < zero_threshold {
            self.lower = zero_threshold;
        }
    }
}

/// Upper bound of positive bucket `idx` (Prometheus' `getBound`): a custom bound, `-Inf` below
/// the first and `+Inf` from the last on, or an exponential bound.
fn bound(h: &FloatHistogram, idx: i32) -> f64 {
    if !h.uses_custom_buckets() {
        return exponential_bound(idx, h.schema);
    }
    // Stored histograms never index past their bounds; out-of-range indexes (where Go panics)
    // are answered with the infinite bound on their side.
    match usize::try_from(idx) {
        Ok(i) => h.custom_values.get(i).copied().unwrap_or(f64::INFINITY),
        Err(_) => f64::NEG_INFINITY,
    }
}

/// Upper bound of positive exponential bucket `idx` in `schema`, bit for bit as Prometheus'
/// `getBoundExponential`: `2^(idx·2^-schema)`, taken for positive schemas as a fraction from
/// [`BOUNDS_SCHEMA_8`] times a power of two, and `f64::MAX` (not `+Inf`) for the last bucket
/// of finite values.
pub(crate) fn exponential_bound(idx: i32, schema: i32) -> f64 {
    if schema < 0 {
        let exp = i64::from(idx) << (-schema).min(32);
        if exp == 1024 {
            return f64::MAX;
        }
        return ldexp(1.0, exp.clamp(-2200, 2200) as i32);
    }
    if schema > 8 {
        // Not a schema storage keeps (it reduces 9..=52 to 8); an approximation will do.
        return 2f64.powf(f64::from(idx) / f64::from(1u32 << schema.min(30)));
    }
    let frac_idx = (idx & ((1 << schema) - 1)) as usize;
    let frac = BOUNDS_SCHEMA_8[frac_idx << (8 - schema)];
    let exp = (idx >> schema) + 1;
    if frac == 0.5 && exp == 1025 {
        return f64::MAX;
    }
    ldexp(frac, exp)
}

/// `x · 2^exp` rounded once, as Go's `math.Ldexp` (and C's `scalbn`): the power of two is
/// applied in steps that stay representable, so only the last multiplication can round.
fn ldexp(x: f64, exp: i32) -> f64 {
    let pow2 = |e: i32| f64::from_bits(((e + 1023) as u64) << 52);
    let mut y = x;
    let mut e = exp;
    if e > 1023 {
        y *= pow2(1023);
        e -= 1023;
        if e > 1023 {
            y *= pow2(1023);
            e = (e - 1023).min(1023);
        }
    } else if e < -1022 {
        // 2^-969 = 2^-1022 · 2^53: stays normal while keeping all 53 bits for the last step.
        y *= pow2(-969);
        e += 969;
        if e < -1022 {
            y *= pow2(-969);
            e = (e + 969).max(-1022);
        }
    }
    y * pow2(e)
}

/// Prometheus' `exponentialBounds[8]`: `2^(i/256) / 2` for `i` in `0..256`, the values exactly
/// as Go's table holds them (several are a few ulps off the correctly rounded value, and the
/// JSON shows it). Schema `s` uses every `2^(8-s)`-th entry, which is what its own table in
/// Prometheus holds.
#[rustfmt::skip]
const BOUNDS_SCHEMA_8: [f64; 256] = [
    0.5, 0.5013556375251013, 0.5027149505564014, 0.5040779490592088,
    0.5054446430258502, 0.5068150424757447, 0.5081891574554764, 0.509566998038869,
    0.5109485743270583, 0.5123338964485679, 0.5137229745593818, 0.5151158188430205,
    0.5165124395106142, 0.5179128468009786, 0.5193170509806894, 0.520725062344158,
    0.5221368912137069, 0.5235525479396449, 0.5249720429003435, 0.526395386502313,
    0.5278225891802786, 0.5292536613972564, 0.5306886136446309, 0.5321274564422321,
    0.5335702003384117, 0.5350168559101208, 0.5364674337629877, 0.5379219445313954,
    0.5393803988785598, 0.5408428074966075, 0.5423091811066545, 0.5437795304588847,
    0.5452538663326288, 0.5467321995364429, 0.5482145409081883, 0.549700901315111,
    0.5511912916539204, 0.5526857228508706, 0.5541842058618393, 0.5556867516724088,
    0.5571933712979462, 0.5587040757836845, 0.5602188762048033, 0.5617377836665098,
    0.5632608093041209, 0.564787964283144, 0.5663192597993595, 0.5678547070789026,
    0.5693943173783458, 0.5709381019847808, 0.572486072215902, 0.5740382394200894,
    0.5755946149764913, 0.5771552102951081, 0.5787200368168754, 0.5802891060137493,
    0.5818624293887887, 0.5834400184762408, 0.585021884841625, 0.5866080400818185,
    0.5881984958251406, 0.5897932637314379, 0.5913923554921704, 0.5929957828304968,
    0.5946035575013605, 0.5962156912915756, 0.5978321960199137, 0.5994530835371903,
    0.6010783657263515, 0.6027080545025619, 0.6043421618132907, 0.6059806996384005,
    0.6076236799902344, 0.6092711149137041, 0.6109230164863786, 0.6125793968185725,
    0.6142402680534349, 0.6159056423670379, 0.6175755319684665, 0.6192499490999082,
    0.620928906036742, 0.622612415087629, 0.6243004885946023, 0.6259931389331581,
    0.6276903785123455, 0.6293922197748583, 0.6310986751971253, 0.6328097572894031,
    0.6345254785958666, 0.6362458516947014, 0.637970889198196, 0.6397006037528346,
    0.6414350080393891, 0.6431741147730128, 0.6449179367033329, 0.6466664866145447,
    0.6484197773255048, 0.6501778216898253, 0.6519406325959679, 0.6537082229673385,
    0.6554806057623822, 0.6572577939746774, 0.659039800633032, 0.6608266388015788,
    0.6626183215798706, 0.6644148621029772, 0.6662162735415805, 0.6680225691020727,
    0.6698337620266515, 0.6716498655934177, 0.6734708931164728, 0.6752968579460171,
    0.6771277734684463, 0.6789636531064505, 0.6808045103191123, 0.6826503586020058,
    0.6845012114872953, 0.6863570825438342, 0.688217985377265, 0.690083933630119,
    0.6919549409819159, 0.6938310211492645, 0.6957121878859629, 0.6975984549830999,
    0.6994898362691555, 0.7013863456101023, 0.7032879969095076, 0.7051948041086352,
    0.7071067811865475, 0.7090239421602076, 0.7109463010845827, 0.7128738720527471,
    0.7148066691959849, 0.7167447066838943, 0.718687998724491, 0.7206365595643126,
    0.7225904034885232, 0.7245495448210174, 0.7265139979245261, 0.7284837772007218,
    0.7304588970903234, 0.7324393720732029, 0.7344252166684908, 0.7364164454346837,
    0.7384130729697496, 0.7404151139112358, 0.7424225829363761, 0.7444354947621984,
    0.7464538641456323, 0.7484777058836176, 0.7505070348132126, 0.7525418658117031,
    0.7545822137967112, 0.7566280937263048, 0.7586795205991071, 0.7607365094544071,
    0.762799075372269, 0.7648672334736434, 0.7669409989204777, 0.7690203869158282,
    0.7711054127039704, 0.7731960915705107, 0.7752924388424999, 0.7773944698885442,
    0.7795022001189185, 0.7816156449856788, 0.7837348199827764, 0.7858597406461707,
    0.7879904225539431, 0.7901268813264122, 0.7922691326262467, 0.7944171921585818,
    0.7965710756711334, 0.7987307989543135, 0.8008963778413465, 0.8030678282083853,
    0.805245165974627, 0.8074284071024302, 0.8096175675974316, 0.8118126635086642,
    0.8140137109286738, 0.8162207259936375, 0.8184337248834821, 0.820652723822003,
    0.8228777390769823, 0.8251087869603088, 0.8273458838280969, 0.8295890460808079,
    0.8318382901633681, 0.8340936325652911, 0.8363550898207981, 0.8386226785089391,
    0.8408964152537144, 0.8431763167241966, 0.8454623996346523, 0.8477546807446661,
    0.8500531768592616, 0.8523579048290255, 0.8546688815502312, 0.8569861239649629,
    0.8593096490612387, 0.8616394738731368, 0.8639756154809185, 0.8663180910111553,
    0.8686669176368529, 0.871022112577578, 0.8733836930995842, 0.8757516765159389,
    0.8781260801866495, 0.8805069215187917, 0.8828942179666361, 0.8852879870317771,
    0.8876882462632604, 0.890095013257712, 0.8925083056594671, 0.8949281411607002,
    0.8973545375015533, 0.8997875124702672, 0.9022270839033115, 0.9046732696855155,
    0.9071260877501991, 0.909585556079304, 0.9120516927035263, 0.9145245157024483,
    0.9170040432046711, 0.9194902933879467, 0.9219832844793128, 0.9244830347552253,
    0.9269895625416926, 0.92950288621441, 0.9320230241988943, 0.9345499949706191,
    0.9370838170551498, 0.93962450902828, 0.9421720895161669, 0.9447265771954693,
    0.9472879907934827, 0.9498563490882775, 0.9524316709088368, 0.9550139751351947,
    0.9576032806985735, 0.9601996065815236, 0.9628029718180622, 0.9654133954938133,
    0.9680308967461471, 0.9706554947643201, 0.9732872087896164, 0.9759260581154889,
    0.9785720620876999, 0.9812252401044634, 0.9838856116165875, 0.9865531961276168,
    0.9892280131939752, 0.9919100824251095, 0.9945994234836328, 0.9972960560854698,
];

#[cfg(test)]
mod tests {
    use storage::{CounterResetHint, FloatHistogram};

    use super::*;

    fn exponential(schema: i32, zero_threshold: f64, zero_count: f64) -> FloatHistogram {
        FloatHistogram {
            counter_reset_hint: CounterResetHint::Unknown,
            schema,
            zero_threshold,
            zero_count,
            count: 0.0,
            sum: 0.0,
            positive: Vec::new(),
            negative: Vec::new(),
            custom_values: Vec::new(),
        }
    }

    fn json(h: &FloatHistogram) -> String {
        let mut out = Vec::new();
        histogram(&mut out, h);
        String::from_utf8(out).unwrap()
    }

    /// The histogram of Prometheus' own codec test (web/api/v1/json_codec_test.go, the matrix
    /// with `HPoint{T: 1000}`): spans `{3,2},{1,3}` positive and `{2,2}` negative, schema 2. Its
    /// bounds show Go's table: `-1.414213562373095` is one ulp below the correctly rounded √2.
    #[test]
    fn prometheus_codec_test_histogram() {
        let mut h = exponential(2, 0.001, 12.0);
        h.count = 10.0;
        h.sum = 20.0;
        h.positive = vec![(3, 1.0), (4, 2.0), (6, 2.0), (7, 1.0), (8, 1.0)];
        h.negative = vec![(2, 2.0), (3, 1.0)];
        assert_eq!(
            json(&h),
            r#"{"count":"10","sum":"20","buckets":[[1,"-1.6817928305074288","-1.414213562373095","1"],[1,"-1.414213562373095","-1.189207115002721","2"],[3,"-0.001","0.001","12"],[0,"1.414213562373095","1.6817928305074288","1"],[0,"1.6817928305074288","2","2"],[0,"2.378414230005442","2.82842712474619","2"],[0,"2.82842712474619","3.3635856610148576","1"],[0,"3.3635856610148576","4","1"]]}"#
        );
    }

    /// No bucket with a count: no `buckets` key at all (`bucketFound` stays false); a zero
    /// bucket with a zero count is not written, empty buckets are skipped.
    #[test]
    fn empty_buckets_are_left_out() {
        let mut h = exponential(0, 0.001, 0.0);
        h.count = 0.0;
        h.sum = 0.0;
        assert_eq!(json(&h), r#"{"count":"0","sum":"0"}"#);
        h.positive = vec![(1, 0.0), (2, 3.0), (3, -0.0)];
        h.count = 3.0;
        h.sum = 9.5;
        assert_eq!(json(&h), r#"{"count":"3","sum":"9.5","buckets":[[0,"2","4","3"]]}"#);
    }

    /// Buckets inside the zero bucket's range are clipped to its threshold (the
    /// `allFloatBucketIterator` switch); their boundary rule stays that of the unclipped bucket.
    /// Schema 0 bucket -1 is `(0.25, 0.5]`, negative -1 is `[-0.5, -0.25)`.
    #[test]
    fn zero_bucket_and_clipping() {
        let mut h = exponential(0, 0.3, 3.0);
        h.count = 10.0;
        h.sum = -1.0;
        h.positive = vec![(-1, 1.0), (0, 2.0)];
        h.negative = vec![(-1, 4.0)];
        assert_eq!(
            json(&h),
            r#"{"count":"10","sum":"-1","buckets":[[1,"-0.5","-0.3","4"],[3,"-0.3","0.3","3"],[0,"0.3","0.5","1"],[0,"0.5","1","2"]]}"#
        );
    }

    /// Negative schemas are powers of two (schema -2: bucket 256 is `(2^1020, 2^1024)`, whose
    /// upper bound Go writes as `f64::MAX`); the last finite bucket ends at `f64::MAX`, the next
    /// one at `+Inf`; counts may be fractional, NaN or infinite.
    #[test]
    fn negative_schema_and_extremes() {
        let mut h = exponential(-2, 0.0, 0.0);
        h.count = f64::NAN;
        h.sum = f64::INFINITY;
        h.positive = vec![(-1, 0.5), (1, 1e-7), (256, 2.0), (257, f64::NAN)];
        h.negative = vec![(1, 1.0), (2, 2.0)];
        assert_eq!(
            json(&h),
            concat!(
                r#"{"count":"NaN","sum":"+Inf","buckets":[[1,"-256","-16","2"],[1,"-16","-1","1"],"#,
                r#"[0,"0.00390625","0.0625","0.5"],[0,"1","16","1e-07"],"#,
                r#"[0,"1.1235582092889474e+307","1.7976931348623157e+308","2"],"#,
                r#"[0,"1.7976931348623157e+308","+Inf","NaN"]]}"#
            )
        );
    }

    /// Custom buckets (schema -53): bucket `i` is `(bound[i-1], bound[i]]`, the first is
    /// `[-Inf, bound[0]]`, the one past the last bound ends at `+Inf` (`getBound`,
    /// `baseBucketIterator.at`).
    #[test]
    fn custom_buckets() {
        let mut h = exponential(FloatHistogram::CUSTOM_BUCKETS_SCHEMA, 0.0, 0.0);
        h.custom_values = vec![-1.0, 0.5, 2.5];
        h.count = 12.0;
        h.sum = 20.25;
        h.positive = vec![(0, 1.0), (1, 2.0), (2, 0.0), (3, 9.0)];
        assert_eq!(
            json(&h),
            r#"{"count":"12","sum":"20.25","buckets":[[3,"-Inf","-1","1"],[0,"-1","0.5","2"],[0,"2.5","+Inf","9"]]}"#
        );
    }

    /// Positive schemas take every `2^(8-schema)`-th entry of the table, and bounds at whole
    /// octaves are exact powers of two, down into subnormal numbers.
    #[test]
    // Go's √2 is one ulp below `SQRT_2`, which is the point of the check.
    #[allow(clippy::approx_constant)]
    fn exponential_bounds_follow_gos_table() {
        assert_eq!(exponential_bound(1, 1), 1.414213562373095);
        assert_eq!(exponential_bound(-1, 1), 0.7071067811865475);
        assert_ne!(exponential_bound(1, 1), std::f64::consts::SQRT_2);
        assert_eq!(exponential_bound(3, 3), 1.2968395546510096);
        assert_eq!(exponential_bound(255, 8), 1.9945921121709396);
        assert_eq!(exponential_bound(0, 5), 1.0);
        assert_eq!(exponential_bound(8, 3), 2.0);
        assert_eq!(exponential_bound(-1074, 0), 5e-324);
        assert_eq!(exponential_bound(-1075, 0), 0.0);
        assert_eq!(exponential_bound(1023, 0), 2f64.powi(1023));
        assert_eq!(exponential_bound(1024, 0), f64::MAX);
        assert_eq!(exponential_bound(1025, 0), f64::INFINITY);
        assert_eq!(exponential_bound(1024 * 256, 8), f64::MAX);
        assert_eq!(exponential_bound(64, -4), f64::MAX);
        // Every entry is within a few ulps of 2^(i/256)/2 (Go generated them with small
        // rounding drift), so a transcription error would show here.
        for (i, &b) in BOUNDS_SCHEMA_8.iter().enumerate() {
            let exact = 2f64.powf(i as f64 / 256.0) / 2.0;
            assert!((b - exact).abs() <= 6.0 * f64::EPSILON, "{i}: {b} vs {exact}");
        }
    }
}

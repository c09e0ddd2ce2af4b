//! Native histogram samples through the whole engine: append, WAL replay, flush, compaction,
//! float/histogram rewrites at one timestamp, stale markers, deletion; and a database written
//! before histograms existed (golden copy in `testdata/format/database_before_histograms`).

use storage::{
    Batch, CounterResetHint, Db, FloatHistogram, HistogramSample, Labels, MatchOp, Matcher, Options, Querier,
    Sample, stale_nan,
};

use crate::common;

const BASE: i64 = 1_700_000_000_000;

fn opts(dir: &std::path::Path) -> Options {
    let mut o = Options::new(dir);
    o.maintenance_interval = std::time::Duration::from_secs(3600);
    o
}

fn h(k: i64) -> FloatHistogram {
    FloatHistogram {
        counter_reset_hint: CounterResetHint::NotReset,
        schema: 1,
        zero_threshold: 1e-128,
        zero_count: k as f64,
        count: (4 * k) as f64,
        sum: k as f64 * 0.1,
        positive: vec![(-1, k as f64), (2, k as f64)],
        negative: vec![(3, k as f64)],
        custom_values: Vec::new(),
    }
}

/// (floats with their bits, histograms) of every series whose name matches `name`.
type Dump = Vec<(String, Vec<(i64, u64)>, Vec<HistogramSample>)>;

fn dump(db: &Db) -> Dump {
    let snap = db.snapshot();
    let all =
        snap.select(&[Matcher::new(MatchOp::Regex, "__name__", ".+").unwrap()], i64::MIN, i64::MAX).unwrap();
    all.iter()
        .map(|s| {
            let (mut f, mut hs) = (Vec::new(), Vec::new());
            snap.samples(s, i64::MIN, i64::MAX, &mut f).unwrap();
            snap.histograms(s, i64::MIN, i64::MAX, &mut hs).unwrap();
            (s.labels.to_string(), f.iter().map(|x| (x.t, x.v.to_bits())).collect(), hs)
        })
        .collect()
}

#[test]
fn histograms_survive_restart_flush_compaction_and_rewrites() {
    let d = tempfile::tempdir().unwrap();
    let l = Labels::from_pairs(&[("__name__", "latency")]);
    let db = Db::open(opts(d.path())).unwrap();
    let mut b = Batch::new();
    b.push_histograms(l.clone(), (0..10).map(|k| HistogramSample { t: BASE + k * 1000, h: h(k) }).collect());
    let out = db.append(&b).unwrap();
    assert_eq!((out.appended, out.histograms_appended), (10, 10));
    // A float rewrites t=3s, a histogram rewrites the float... and a stale marker ends it.
    let mut b = Batch::new();
    b.push(l.clone(), vec![Sample::new(BASE + 3000, 7.0), Sample::new(BASE + 10_000, stale_nan())]);
    b.push_histograms(l.clone(), vec![HistogramSample { t: BASE + 5000, h: h(50) }]);
    db.append(&b).unwrap();
    let mut want_h: Vec<HistogramSample> = (0..10)
        .filter(|k| *k != 3)
        .map(|k| HistogramSample { t: BASE + k * 1000, h: if k == 5 { h(50) } else { h(k) } })
        .collect();
    let want_f = vec![(BASE + 3000, 7f64.to_bits()), (BASE + 10_000, stale_nan().to_bits())];
    let expect = |want_h: &Vec<HistogramSample>, want_f: &Vec<(i64, u64)>| {
        vec![("latency{}".to_string(), want_f.clone(), want_h.clone())]
    };
    assert_eq!(dump(&db), expect(&want_h, &want_f));
    // Replayed from the WAL.
    drop(db);
    let db = Db::open(opts(d.path())).unwrap();
    assert_eq!(dump(&db), expect(&want_h, &want_f));
    // Flushed, then overwritten out of order in the head, then compacted with a second file.
    db.flush().unwrap();
    assert_eq!(dump(&db), expect(&want_h, &want_f));
    let mut b = Batch::new();
    b.push(l.clone(), vec![Sample::new(BASE + 1000, 1.5)]);
    b.push_histograms(l.clone(), vec![HistogramSample { t: BASE + 3000, h: h(33) }]);
    db.append(&b).unwrap();
    want_h.retain(|x| x.t != BASE + 1000);
    want_h.insert(2, HistogramSample { t: BASE + 3000, h: h(33) });
    let want_f = vec![(BASE + 1000, 1.5f64.to_bits()), (BASE + 10_000, stale_nan().to_bits())];
    assert_eq!(dump(&db), expect(&want_h, &want_f));
    db.flush().unwrap();
    db.compact().unwrap();
    assert_eq!(dump(&db), expect(&want_h, &want_f));
    // Deleted ranges take histograms with them.
    db.delete(&[Matcher::equal("__name__", "latency")], BASE + 6000, BASE + 7000).unwrap();
    want_h.retain(|x| x.t < BASE + 6000 || x.t > BASE + 7000);
    assert_eq!(dump(&db), expect(&want_h, &want_f));
    db.close().unwrap();
    drop(db);
    let db = Db::open(opts(d.path())).unwrap();
    assert_eq!(dump(&db), expect(&want_h, &want_f));
}

/// The golden database's contents: 2 series of 20 samples, 15 s apart, the first 12 flushed to
/// a partition file, the rest in WAL records of type 1 (series "0") and type 2 (series "1",
/// with start timestamps).
fn golden_floats(k: i64) -> Vec<(i64, u64)> {
    (0..20).map(|i| (BASE + i * 15_000, ((k * 100 + i) as f64).to_bits())).collect()
}

fn write_golden(dir: &std::path::Path) {
    let db = Db::open(opts(dir)).unwrap();
    for (from, to) in [(0, 12), (12, 20)] {
        for k in 0..2i64 {
            let v = k.to_string();
            let mut b = storage::BatchRef::new();
            let mut s = b.series();
            s.label("__name__", "golden");
            s.label("s", &v);
            for i in from..to {
                let sample = Sample::new(BASE + i * 15_000, (k * 100 + i) as f64);
                s.sample_with_start(sample, if k == 1 { BASE - 60_000 } else { 0 });
            }
            s.finish();
            db.append_ref(&b).unwrap();
        }
        if from == 0 {
            db.flush().unwrap();
        }
    }
    drop(db); // no close: the WAL keeps the tail
}

/// A database from before histograms (WAL record types 1 and 2, partition files without a
/// histogram table) opens unchanged and takes histograms afterwards. `STRATA_WRITE_GOLDEN=1`
/// rewrites the golden copy (only meaningful from a build that predates histograms).
#[test]
fn database_from_before_histograms_opens() {
    let golden =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/format/database_before_histograms");
    if std::env::var_os("STRATA_WRITE_GOLDEN").is_some() {
        let _ = std::fs::remove_dir_all(&golden);
        write_golden(&golden);
        std::fs::remove_file(golden.join("LOCK")).ok();
    }
    let d = tempfile::tempdir().unwrap();
    common::copy_tree(&golden, d.path());
    let db = Db::open(opts(d.path())).unwrap();
    let want: Dump = (0..2).map(|k| (format!("golden{{s=\"{k}\"}}"), golden_floats(k), Vec::new())).collect();
    assert_eq!(dump(&db), want);
    let l = Labels::from_pairs(&[("__name__", "golden"), ("s", "0")]);
    let mut b = Batch::new();
    b.push_histograms(l, vec![HistogramSample { t: BASE + 20 * 15_000, h: h(1) }]);
    db.append(&b).unwrap();
    db.flush().unwrap();
    db.compact().unwrap();
    db.close().unwrap();
    drop(db);
    let db = Db::open(opts(d.path())).unwrap();
    let mut want = want;
    want[0].2.push(HistogramSample { t: BASE + 20 * 15_000, h: h(1) });
    assert_eq!(dump(&db), want);
}

/// The latest float sample of a series whose newest head sample is a histogram: no marker
/// leaks out of `samples_latest`, from the head or from a flushed file, and it agrees with a
/// full read's last float sample.
#[test]
fn the_latest_float_sample_never_is_a_histogram_marker() {
    let d = tempfile::tempdir().unwrap();
    let l = Labels::from_pairs(&[("__name__", "mixed")]);
    let db = Db::open(opts(d.path())).unwrap();
    let mut b = Batch::new();
    b.push(l.clone(), (0..5).map(|k| Sample::new(BASE + k * 1000, k as f64)).collect());
    b.push_histograms(l.clone(), vec![HistogramSample { t: BASE + 5000, h: h(5) }]);
    db.append(&b).unwrap();
    for flushed in [false, true] {
        if flushed {
            db.flush().unwrap();
        }
        let snap = db.snapshot();
        let s = &snap.select(&[Matcher::equal("__name__", "mixed")], i64::MIN, i64::MAX).unwrap()[0];
        let (mut latest, mut all) = (Vec::new(), Vec::new());
        let mut st = storage::window_agg::ScanStats::default();
        snap.samples_latest(s, BASE, BASE + 10_000, &mut latest, &mut st).unwrap();
        snap.samples_scanned(s, BASE, BASE + 10_000, &mut all, &mut st).unwrap();
        let last = |v: &[Sample]| v.last().map(|x| (x.t, x.v.to_bits()));
        assert_eq!(last(&latest), last(&all), "flushed: {flushed}");
        assert_eq!(last(&latest), Some((BASE + 4000, 4f64.to_bits())), "flushed: {flushed}");
    }
}

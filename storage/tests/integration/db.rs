//! Behaviour of the whole engine through its public API.

use storage::{Batch, Db, Labels, MatchOp, Matcher, Options, Querier, Sample, stale_nan};

use crate::common;

const BASE: i64 = 1_700_000_000_000; // a fixed past time: never "too far in the future"
const HOUR: i64 = 3_600_000;

fn opts(dir: &std::path::Path) -> Options {
    let mut o = Options::new(dir);
    // Tests drive flushes and compactions explicitly.
    o.maintenance_interval = std::time::Duration::from_secs(3600);
    o
}

fn series(name: &str, host: &str) -> Labels {
    Labels::from_pairs(&[("__name__", name), ("host", host)])
}

fn append(db: &Db, l: &Labels, samples: &[(i64, f64)]) -> storage::AppendOutcome {
    let mut b = Batch::new();
    b.push(l.clone(), samples.iter().map(|&(t, v)| Sample::new(t, v)).collect());
    db.append(&b).unwrap()
}

fn read(db: &Db, l: &Labels) -> Vec<(i64, u64)> {
    let snap = db.snapshot();
    let m: Vec<Matcher> = l.iter().map(|x| Matcher::equal(x.name.as_ref(), x.value.as_ref())).collect();
    let sel = snap.select(&m, i64::MIN, i64::MAX).unwrap();
    let mut out = Vec::new();
    for s in sel.iter().filter(|s| &s.labels == l) {
        snap.samples(s, i64::MIN, i64::MAX, &mut out).unwrap();
    }
    out.iter().map(|s| (s.t, s.v.to_bits())).collect()
}

fn bits(v: &[(i64, f64)]) -> Vec<(i64, u64)> {
    v.iter().map(|&(t, v)| (t, v.to_bits())).collect()
}

#[test]
fn append_flush_reopen_round_trip() {
    let d = tempfile::tempdir().unwrap();
    let a = series("up", "a");
    let data: Vec<(i64, f64)> =
        (0..5000).map(|i| (BASE + i * 10_000, if i == 7 { stale_nan() } else { (i % 13) as f64 })).collect();
    {
        let db = Db::open(opts(d.path())).unwrap();
        append(&db, &a, &data[..2500]);
        db.flush().unwrap();
        append(&db, &a, &data[2500..]);
        assert_eq!(read(&db, &a), bits(&data));
        // Dropped without close: like a crash, the second half is in the WAL only.
    }
    let db = Db::open(opts(d.path())).unwrap();
    assert_eq!(read(&db, &a), bits(&data));
    db.close().unwrap();
    drop(db);
    let db = Db::open(opts(d.path())).unwrap();
    assert_eq!(read(&db, &a), bits(&data));
}

#[test]
fn out_of_order_window_duplicates_and_last_write_wins() {
    let d = tempfile::tempdir().unwrap();
    let mut o = opts(d.path());
    o.ooo_window_ms = Some(HOUR);
    let db = Db::open(o).unwrap();
    let a = series("m", "a");
    append(&db, &a, &[(BASE + 2 * HOUR, 1.0)]);
    let o = append(&db, &a, &[(BASE + HOUR + 1, 2.0), (BASE + HOUR - 1, 3.0)]);
    assert_eq!((o.appended, o.too_old), (1, 1));
    db.flush().unwrap();
    // Rewrite an already flushed timestamp: the newer write wins across file and head.
    append(&db, &a, &[(BASE + HOUR + 1, 5.0), (BASE + 2 * HOUR, 1.0)]);
    assert_eq!(read(&db, &a), bits(&[(BASE + HOUR + 1, 5.0), (BASE + 2 * HOUR, 1.0)]));
    db.flush().unwrap();
    db.compact().unwrap();
    assert_eq!(read(&db, &a), bits(&[(BASE + HOUR + 1, 5.0), (BASE + 2 * HOUR, 1.0)]));
    let o = append(&db, &a, &[(i64::MAX / 2, 1.0)]);
    assert_eq!(o.too_far_future, 1);
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// With an out-of-order window each sample is refused exactly when it lies more than the
    /// window behind the newest sample of its series before it (earlier batches and earlier
    /// samples of its own batch), in order or not, sorted or not; the rest are stored, the
    /// last write of a timestamp winning.
    #[test]
    fn the_out_of_order_window_refuses_per_sample(
        batches in proptest::collection::vec(
            proptest::collection::vec((-100i64..200, 0u32..4), 1..20), 1..12),
    ) {
        const W: i64 = 100;
        let d = tempfile::tempdir().unwrap();
        let mut o = opts(d.path());
        o.ooo_window_ms = Some(W);
        let db = Db::open(o).unwrap();
        let a = series("m", "a");
        let mut newest = i64::MIN;
        let mut stored = std::collections::BTreeMap::new();
        for (i, batch) in batches.iter().enumerate() {
            let samples: Vec<(i64, f64)> =
                batch.iter().map(|&(dt, v)| (BASE + 50 * i as i64 + dt, f64::from(v))).collect();
            let (mut appended, mut too_old) = (0, 0);
            for &(t, v) in &samples {
                if newest != i64::MIN && t < newest - W {
                    too_old += 1;
                } else {
                    appended += 1;
                    newest = newest.max(t);
                    stored.insert(t, v.to_bits());
                }
            }
            let got = append(&db, &a, &samples);
            proptest::prop_assert_eq!((got.appended, got.too_old), (appended, too_old));
        }
        proptest::prop_assert_eq!(read(&db, &a), stored.into_iter().collect::<Vec<_>>());
    }
}

/// Without an out-of-order window (the default) any sample inside retention is stored, however
/// far behind its series' newest; one that the next retention pass would delete (its partition
/// ends before the newest sample minus retention) is refused and counted, and so is one that a
/// newer sample in the same batch puts out of retention.
#[test]
fn any_order_inside_retention_and_nothing_outside() {
    const DAY: i64 = 24 * HOUR;
    let d = tempfile::tempdir().unwrap();
    let mut o = opts(d.path());
    o.retention_ms = 10 * DAY;
    let db = Db::open(o).unwrap();
    let a = series("m", "a");
    let day0 = BASE - BASE.rem_euclid(DAY);
    append(&db, &a, &[(day0 + 12 * HOUR, 1.0)]);
    // Nine days back and then some: the partition of day0 - 10d still ends after the cutoff.
    let o = append(&db, &a, &[(day0 - 9 * DAY, 2.0), (day0 - 10 * DAY + HOUR, 3.0), (day0 + HOUR, 4.0)]);
    assert_eq!((o.appended, o.rejected()), (3, 0), "{o:?}");
    db.flush().unwrap();
    // Eleven days back: its partition ends before day0 + 12h - 10d.
    let o = append(&db, &a, &[(day0 - 11 * DAY, 5.0), (day0 - 2 * DAY, 6.0)]);
    assert_eq!((o.appended, o.outside_retention), (1, 1), "{o:?}");
    assert_eq!(o.retention_first_kept, Some(day0 - 10 * DAY));
    assert_eq!(o.first_rejected.map(|(_, s)| s.t), Some(day0 - 11 * DAY));
    // A new series whose batch holds a sample far newer than the rest: those the newest one
    // puts out of retention are refused too, not stored to be deleted.
    let b = series("m", "b");
    let o = append(&db, &b, &[(day0 - 20 * DAY, 1.0), (day0 + 13 * HOUR, 2.0)]);
    assert_eq!((o.appended, o.outside_retention), (1, 1), "{o:?}");
    db.compact().unwrap();
    assert_eq!(
        read(&db, &a),
        bits(&[
            (day0 - 10 * DAY + HOUR, 3.0),
            (day0 - 9 * DAY, 2.0),
            (day0 - 2 * DAY, 6.0),
            (day0 + HOUR, 4.0),
            (day0 + 12 * HOUR, 1.0)
        ])
    );
    assert_eq!(db.apply_retention().unwrap(), 0, "nothing stored was outside retention");
}

/// A series' WAL id is the id of the process that wrote it, so after a crash restart the same
/// series may have another id (and another replay thread) in the next segments. Replay must
/// still apply the segments in order: each process here rewrites every series' samples, and
/// after each crash the last write must be what is read. (Replay once applied two processes'
/// segments on separate threads at once, and an older value could win.)
#[test]
fn rewrites_after_crash_restarts_win_over_what_they_replaced() {
    let d = tempfile::tempdir().unwrap();
    let all: Vec<Labels> = (0..64).map(|i| series("m", &format!("h{i}"))).collect();
    let times = [BASE, BASE + 10_000, BASE + 20_000];
    for generation in 0..4 {
        let db = Db::open(opts(d.path())).unwrap();
        if generation > 0 {
            let want: Vec<(i64, f64)> = times.iter().map(|&t| (t, f64::from(generation - 1))).collect();
            for l in &all {
                assert_eq!(read(&db, l), bits(&want), "{l} after crash {generation}");
            }
        }
        // A new order each time, in batches of a few series, so ids and batches differ.
        let mut order: Vec<&Labels> = all.iter().collect();
        order.rotate_left(generation as usize * 13);
        if generation % 2 == 1 {
            order.reverse();
        }
        for chunk in order.chunks(5) {
            let mut b = Batch::new();
            for l in chunk {
                b.push((*l).clone(), times.iter().map(|&t| Sample::new(t, f64::from(generation))).collect());
            }
            db.append(&b).unwrap();
        }
        // Dropped without close: a crash, everything since the start is in the WAL only.
    }
}

#[test]
fn compaction_merges_files_and_keeps_data() {
    let d = tempfile::tempdir().unwrap();
    let mut o = opts(d.path());
    o.compact_files_min = 2;
    let db = Db::open(o).unwrap();
    let mut want = Vec::new();
    for round in 0..6 {
        for h in 0..20 {
            let l = series("cpu", &format!("h{h}"));
            let s: Vec<(i64, f64)> =
                (0..30).map(|i| (BASE + (round * 30 + i) * 10_000, (h * i) as f64)).collect();
            append(&db, &l, &s);
            if h == 3 {
                want.extend(s);
            }
        }
        db.flush().unwrap();
    }
    let files_before = std::fs::read_dir(d.path().join("partitions")).unwrap().count();
    assert!(files_before >= 1);
    db.compact().unwrap();
    db.compact().unwrap();
    assert_eq!(read(&db, &series("cpu", "h3")), bits(&want));
    let snap = db.snapshot();
    let sel =
        snap.select(&[Matcher::new(MatchOp::Regex, "host", "h1.*").unwrap()], i64::MIN, i64::MAX).unwrap();
    assert_eq!(sel.len(), 11);
}

#[test]
fn delete_hides_then_clean_tombstones_removes() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(opts(d.path())).unwrap();
    let a = series("m", "a");
    let b = series("m", "b");
    let pts: Vec<(i64, f64)> = (0..100).map(|i| (BASE + i * 1000, i as f64)).collect();
    append(&db, &a, &pts);
    append(&db, &b, &pts);
    db.delete(&[Matcher::equal("host", "a")], BASE + 10_000, BASE + 19_000).unwrap();
    let expect: Vec<(i64, f64)> =
        pts.iter().copied().filter(|(t, _)| *t < BASE + 10_000 || *t > BASE + 19_000).collect();
    assert_eq!(read(&db, &a), bits(&expect));
    assert_eq!(read(&db, &b), bits(&pts));
    // New data written after the deletion in the deleted range is not hidden.
    append(&db, &a, &[(BASE + 15_000, 42.0)]);
    db.flush().unwrap();
    db.clean_tombstones().unwrap();
    drop(db);
    let db = Db::open(opts(d.path())).unwrap();
    let mut e2 = expect.clone();
    e2.push((BASE + 15_000, 42.0));
    e2.sort_by_key(|x| x.0);
    assert_eq!(read(&db, &a), bits(&e2));
    let m = std::fs::read_to_string(d.path().join("MANIFEST")).unwrap();
    assert!(!m.contains("tombstone"), "tombstone should be gone after cleaning:\n{m}");
}

/// A series deleted whole leaves the index (and `strata_storage_series`) when its tombstone is
/// cleaned, as retention removes the series whose data it dropped; one with data left stays.
#[test]
fn clean_tombstones_removes_series_left_without_data() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(opts(d.path())).unwrap();
    let pts: Vec<(i64, f64)> = (0..10).map(|i| (BASE + i * 1000, i as f64)).collect();
    for host in ["a", "b", "c"] {
        append(&db, &series("m", host), &pts);
    }
    assert_eq!(db.series_count(), 3);
    db.delete(&[Matcher::equal("host", "a")], i64::MIN, i64::MAX).unwrap();
    db.delete(&[Matcher::equal("host", "b")], BASE, BASE + 4_000).unwrap();
    // Hidden, but the files still hold the data until the tombstones are cleaned.
    assert_eq!(db.series_count(), 3);
    db.clean_tombstones().unwrap();
    assert_eq!(db.series_count(), 2);
    assert!(read(&db, &series("m", "a")).is_empty());
    assert_eq!(read(&db, &series("m", "b")), bits(&pts[5..]));
    // A series of the deleted name written again is a new series.
    append(&db, &series("m", "a"), &[(BASE + 20_000, 1.0)]);
    assert_eq!(db.series_count(), 3);
    assert_eq!(read(&db, &series("m", "a")), bits(&[(BASE + 20_000, 1.0)]));
}

#[test]
fn retention_drops_old_partitions() {
    let d = tempfile::tempdir().unwrap();
    let mut o = opts(d.path());
    o.retention_ms = 2 * 24 * HOUR;
    let db = Db::open(o).unwrap();
    let a = series("m", "a");
    append(&db, &series("m", "gone"), &[(BASE, 1.0)]);
    for day in 0..5 {
        append(&db, &a, &[(BASE + day * 24 * HOUR, day as f64)]);
        db.flush().unwrap();
    }
    assert_eq!(db.series_count(), 2);
    let removed = db.apply_retention().unwrap();
    // The series whose only data expired is gone from the index too.
    assert_eq!(db.series_count(), 1);
    assert!(read(&db, &series("m", "gone")).is_empty());
    assert!(removed >= 2, "removed {removed}");
    let got = read(&db, &a);
    assert!(got.iter().all(|(t, _)| *t >= BASE + 2 * 24 * HOUR - 24 * HOUR), "{got:?}");
    assert_eq!(got.last().map(|x| x.0), Some(BASE + 4 * 24 * HOUR));
}

#[test]
fn matchers_labels_and_values() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(opts(d.path())).unwrap();
    append(&db, &series("a", "x"), &[(BASE, 1.0)]);
    append(&db, &Labels::from_pairs(&[("__name__", "b"), ("zone", "z")]), &[(BASE + 5000, 1.0)]);
    db.flush().unwrap();
    append(&db, &series("a", "y"), &[(BASE + 10_000, 1.0)]);
    let s = db.snapshot();
    assert_eq!(s.label_names(&[], i64::MIN, i64::MAX).unwrap(), vec!["__name__", "host", "zone"]);
    assert_eq!(s.label_values("host", &[], i64::MIN, i64::MAX).unwrap(), vec!["x", "y"]);
    // Time ranges restrict: only the head series has data after BASE+6s.
    assert_eq!(s.label_values("host", &[], BASE + 6000, i64::MAX).unwrap(), vec!["y"]);
    // {host=""} selects series without the label.
    let sel = s
        .select(
            &[Matcher::equal("host", ""), Matcher::new(MatchOp::Regex, "__name__", ".+").unwrap()],
            i64::MIN,
            i64::MAX,
        )
        .unwrap();
    assert_eq!(sel.len(), 1);
    assert!(s.select(&[Matcher::equal("host", "")], 0, 1).is_err(), "must have a non-empty matcher");
}

#[test]
fn block_views_report_exclusive_blocks() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(opts(d.path())).unwrap();
    let a = series("m", "a");
    let pts: Vec<(i64, f64)> = (0..720).map(|i| (BASE + i * 10_000, i as f64)).collect();
    append(&db, &a, &pts);
    db.flush().unwrap();
    let s = db.snapshot();
    let sel = s.select(&[Matcher::equal("host", "a")], i64::MIN, i64::MAX).unwrap();
    let blocks = s.blocks(&sel[0], i64::MIN, i64::MAX).unwrap();
    assert!(blocks.len() >= 2);
    assert!(blocks.iter().all(|b| b.exclusive));
    let total: u32 = blocks.iter().map(|b| b.meta.stats.count).sum();
    assert_eq!(total, 720);
    // A rewrite in the head makes the block it overlaps non-exclusive.
    let o = append(&db, &a, &[(BASE + 719 * 10_000, 99.0)]);
    assert_eq!(o.appended, 1);
    let s = db.snapshot();
    let blocks = s.blocks(&sel[0], i64::MIN, i64::MAX).unwrap();
    let (last, rest) = blocks.split_last().unwrap();
    assert!(!last.exclusive);
    assert!(rest.iter().all(|b| b.exclusive));
}

#[test]
fn second_open_of_same_dir_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let _db = Db::open(opts(d.path())).unwrap();
    let err = Db::open(opts(d.path())).err().unwrap();
    // Its own error, not "invalid input: ...": nothing about the request was wrong.
    assert!(matches!(err, storage::Error::DirectoryInUse(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!("data directory {} is in use by another strata process", d.path().display())
    );
}

/// A database written before start timestamps existed (WAL record type 1 only, partition files
/// without the start-timestamp table) opens unchanged, and new writes with start timestamps
/// go into the same database.
#[test]
fn database_from_before_start_timestamps_opens() {
    /// One series as the test compares it: labels, samples, (t, start) pairs.
    type Dumped = (String, Vec<Sample>, Vec<(i64, i64)>);
    let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/format/database_before_start_timestamps");
    let d = tempfile::tempdir().unwrap();
    common::copy_tree(&golden, d.path());
    let dump = |db: &Db| {
        let snap = db.snapshot();
        let all = snap
            .select(&[Matcher::new(MatchOp::Regex, "__name__", ".+").unwrap()], i64::MIN, i64::MAX)
            .unwrap();
        let mut dump = Vec::new();
        for s in &all {
            let (mut samples, mut starts) = (Vec::new(), Vec::new());
            snap.samples(s, i64::MIN, i64::MAX, &mut samples).unwrap();
            snap.start_timestamps(s, i64::MIN, i64::MAX, &mut starts).unwrap();
            let starts: Vec<(i64, i64)> = starts.iter().map(|st| (st.t, st.st)).collect();
            dump.push((s.labels.to_string(), samples, starts));
        }
        dump.sort_by(|a, b| a.0.cmp(&b.0));
        dump
    };
    // What the golden database holds: 3 series of 30 samples 15 s apart, the first 20 in a
    // partition file, the last 10 only in the WAL.
    let expected: Vec<Dumped> = (0..3)
        .map(|k| {
            let samples = (0..30).map(|i| Sample::new(BASE + i * 15_000, (k * 100 + i) as f64)).collect();
            (format!("golden{{s=\"{k}\"}}"), samples, Vec::new())
        })
        .collect();
    let db = Db::open(opts(d.path())).unwrap();
    assert_eq!(dump(&db), expected);

    // New samples with start timestamps, flushed next to the old file and compacted with it.
    let mut b = storage::BatchRef::new();
    let mut s = b.series();
    s.label("__name__", "golden");
    s.label("s", "0");
    s.sample_with_start(Sample::new(BASE + 450_000, 30.0), BASE - 60_000);
    s.finish();
    db.append_ref(&b).unwrap();
    let mut expected = expected;
    expected[0].1.push(Sample::new(BASE + 450_000, 30.0));
    expected[0].2.push((BASE + 450_000, BASE - 60_000));
    assert_eq!(dump(&db), expected);
    db.flush().unwrap();
    db.compact().unwrap();
    assert_eq!(dump(&db), expected);
    db.close().unwrap();
    drop(db);
    let db = Db::open(opts(d.path())).unwrap();
    assert_eq!(dump(&db), expected);
    // Merged with the new file, the version 1 file becomes one of the current version.
    db.compact_all().unwrap();
    assert_eq!(dump(&db), expected);
    let mut versions = Vec::new();
    for part in std::fs::read_dir(d.path().join("partitions")).unwrap() {
        for file in std::fs::read_dir(part.unwrap().path()).unwrap() {
            let bytes = std::fs::read(file.unwrap().path()).unwrap();
            versions.push(u32::from_le_bytes(bytes[8..12].try_into().unwrap()));
        }
    }
    assert_eq!(versions, vec![storage::partition::VERSION]);
}

/// The engine asks for an inverted range when a window saturates at the ends of i64 (found by
/// the `promql_eval` fuzz target against `MemStore`); the real storage, in the head and in
/// files, answers nothing, as `MemStore` now does.
#[test]
fn an_inverted_range_holds_nothing() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(opts(d.path())).unwrap();
    let a = series("up", "a");
    append(&db, &a, &[(BASE, 1.0), (BASE + 1000, 2.0)]);
    let m = [Matcher::equal("__name__", "up")];
    for flushed in [false, true] {
        if flushed {
            db.flush().unwrap();
        }
        let snap = db.snapshot();
        assert!(snap.select(&m, BASE + 1, BASE).unwrap().is_empty());
        assert!(snap.select(&m, i64::MIN + 1, i64::MIN).unwrap().is_empty());
        let all = snap.select(&m, i64::MIN, i64::MAX).unwrap();
        let mut out = Vec::new();
        snap.samples(&all[0], BASE + 1000, BASE, &mut out).unwrap();
        assert!(out.is_empty(), "flushed: {flushed}");
    }
}

/// A bulk load of hours of data in one go is flushed by its time span, without waiting for
/// the sample limit or the head's age (the worker is woken by the append), and a head of
/// only a few samples with an odd timestamp is not.
#[test]
fn a_head_spanning_more_than_head_span_max_is_flushed_by_the_worker() {
    let d = tempfile::tempdir().unwrap();
    let mut o = opts(d.path());
    o.head_samples_max = 64 * 100; // a span flush needs 100 samples
    o.head_span_max_ms = 3 * HOUR;
    let db = Db::open(o).unwrap();
    let pause = || std::thread::sleep(std::time::Duration::from_millis(300));
    // 2.5 h of data: within the span, stays in the head.
    let a = series("bulk", "a");
    let load: Vec<(i64, f64)> = (0..1000).map(|i| (BASE + i * 9_000, i as f64)).collect();
    append(&db, &a, &load);
    pause();
    assert_eq!(db.disk_stats().unwrap().partitions.len(), 0, "nothing flushed yet");
    // One more hour of it: the head now spans more than 3 h.
    let more: Vec<(i64, f64)> = (1000..1400).map(|i| (BASE + i * 9_000, i as f64)).collect();
    append(&db, &a, &more);
    let started = std::time::Instant::now();
    while db.head_stats().samples > 0 {
        assert!(started.elapsed() < std::time::Duration::from_secs(20), "the span flush did not happen");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(!db.disk_stats().unwrap().partitions.is_empty());
    let all: Vec<(i64, f64)> = load.iter().chain(&more).copied().collect();
    assert_eq!(read(&db, &a), bits(&all));
    // Two samples a day apart: too few for a file of their own.
    append(&db, &series("odd", "a"), &[(BASE, 1.0), (BASE + 24 * HOUR, 2.0)]);
    pause();
    assert_eq!(db.head_stats().samples, 2, "a nearly empty head is not flushed for its span");
}

/// A live head with a few late samples (a skewed clock, a sender catching up) spans more than
/// `head_span_max` too, but its samples are mostly recent: it is not flushed for its span, so a
/// trickle of old samples cannot make strata flush again and again.
#[test]
fn a_few_old_samples_do_not_make_a_live_head_due() {
    let d = tempfile::tempdir().unwrap();
    let mut o = opts(d.path());
    o.head_samples_max = 64 * 100;
    o.head_span_max_ms = 3 * HOUR;
    let db = Db::open(o).unwrap();
    append(&db, &series("late", "a"), &(0..5).map(|i| (BASE + i * 1000, 1.0)).collect::<Vec<_>>());
    let live: Vec<(i64, f64)> = (0..2000).map(|i| (BASE + 24 * HOUR + i * 1000, i as f64)).collect();
    append(&db, &series("live", "a"), &live);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(db.head_stats().samples, 2005);
    assert!(db.disk_stats().unwrap().partitions.is_empty());
}

/// `compact_all` merges every partition's files into one, whatever their sizes, and keeps
/// every sample.
#[test]
fn compact_all_leaves_one_file_per_partition() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(opts(d.path())).unwrap();
    let a = series("m", "a");
    let mut all = Vec::new();
    // Files of very different sizes, which the tiered policy would not merge.
    for (round, n) in [1000i64, 10, 200].into_iter().enumerate() {
        let from = round as i64 * 2000;
        let part: Vec<(i64, f64)> = (from..from + n).map(|i| (BASE + i * 10_000, i as f64)).collect();
        append(&db, &a, &part);
        db.flush().unwrap();
        all.extend(part);
    }
    db.compact().unwrap();
    let files = |db: &Db| db.disk_stats().unwrap().partitions.iter().map(|p| p.files).collect::<Vec<_>>();
    assert!(files(&db).iter().any(|&f| f > 1), "the policy left several files: {:?}", files(&db));
    db.compact_all().unwrap();
    assert!(files(&db).iter().all(|&f| f == 1), "{:?}", files(&db));
    assert_eq!(read(&db, &a), bits(&all));
    db.close().unwrap();
    drop(db);
    let db = Db::open(opts(d.path())).unwrap();
    assert_eq!(read(&db, &a), bits(&all));
}

/// A sender that writes nothing in order (every batch behind the one before, by an hour) is
/// bounded like any other: its samples sit compressed in the head's out-of-order runs, count
/// toward `head_samples_max`, and at twice it appends are refused with a transient error (a 503
/// that senders retry) until a flush catches up; then everything acknowledged is there, and
/// compaction merges each partition's files into one. Flushes are held back (the disk refuses
/// partition files) so that the limit, not the flush's timing, decides.
#[test]
fn an_all_out_of_order_sender_is_bounded_and_then_stored_whole() {
    use storage::fault::{self, Fault, Op};
    let d = tempfile::tempdir().unwrap();
    let mut o = opts(d.path());
    const LIMIT: u64 = 200_000;
    const PER_BATCH: u64 = 100 * 360;
    o.head_samples_max = LIMIT as usize;
    o.retention_ms = 400 * 24 * HOUR;
    let db = Db::open(o).unwrap();
    let blocked = fault::inject(&d.path().join("partitions"), Fault::new(&Op::ALL));
    let series: Vec<Labels> = (0..100).map(|i| series("cpu", &format!("h{i}"))).collect();
    let mut acknowledged = 0u64;
    let mut refused = None;
    // Hour-long batches at 10 s, newest hour first.
    for hour in (0..100i64).rev() {
        let mut b = Batch::new();
        for l in &series {
            let t0 = BASE - 200 * HOUR + hour * HOUR;
            b.push(l.clone(), (0..360).map(|i| Sample::new(t0 + i * 10_000, (i % 5) as f64)).collect());
        }
        match db.append(&b) {
            Ok(outcome) => {
                assert_eq!(outcome.rejected(), 0, "{outcome:?}");
                acknowledged += outcome.appended;
            }
            Err(e) => {
                refused = Some((hour, e));
                break;
            }
        }
    }
    let (hour, e) = refused.expect("refused once twice the sample limit is pending");
    assert!(matches!(e, storage::Error::FlushBacklog { .. }) && e.is_transient(), "{e}");
    assert_eq!(acknowledged, (2 * LIMIT).div_ceil(PER_BATCH) * PER_BATCH, "refused at hour {hour}");
    let head = db.head_stats();
    assert_eq!(head.samples, acknowledged);
    // All but the first batch of each head (a flush that failed froze the head it tried) is
    // out of order.
    let in_order = PER_BATCH * (head.frozen_heads as u64 + 1);
    assert!(
        (acknowledged - in_order..=acknowledged - PER_BATCH).contains(&head.out_of_order_samples),
        "{head:?}"
    );
    // Compressed: a few bytes a sample, each head's fixed structures included (16 raw). Where
    // the last batches land (a fresh head, with its own per-series structures, or the one the
    // failed flush froze) depends on the flush thread's timing: 4.8 or 5.2 bytes a sample.
    assert!(head.memory_bytes < 6 * acknowledged as usize, "{head:?}");
    drop(blocked);
    db.flush().unwrap();
    let mut b = Batch::new();
    b.push(series[0].clone(), vec![Sample::new(BASE - 300 * HOUR, 1.0)]);
    assert_eq!(db.append(&b).unwrap().appended, 1, "accepted again once flushed");
    acknowledged += 1;
    db.compact_all().unwrap();
    let stored: usize = series.iter().map(|l| read(&db, l).len()).sum();
    assert_eq!(stored as u64, acknowledged);
    assert!(db.disk_stats().unwrap().partitions.iter().all(|p| p.files == 1));
}

/// A partition that no longer takes in-order data is merged into one file only once flushes
/// have stopped writing to it for three maintenance intervals: a backfill that adds a file to
/// an old partition at every flush is merged by the size tiers meanwhile, not rewritten whole
/// each time.
#[test]
fn a_cold_partition_is_merged_whole_once_writes_to_it_pause() {
    const DAY: i64 = 24 * HOUR;
    let d = tempfile::tempdir().unwrap();
    let mut o = opts(d.path());
    o.maintenance_interval = std::time::Duration::from_secs(1);
    o.retention_ms = 30 * DAY;
    let db = Db::open(o).unwrap();
    let a = series("m", "a");
    let today = BASE - BASE.rem_euclid(DAY);
    append(&db, &a, &[(today + HOUR, 1.0)]);
    let old = today - 5 * DAY;
    for k in 0..3 {
        append(&db, &a, &[(old + k * HOUR, k as f64)]);
        db.flush().unwrap();
    }
    let files_of_old =
        |db: &Db| db.disk_stats().unwrap().partitions.iter().find(|p| p.start_ms == old).map(|p| p.files);
    // Three files (fewer than compact_files_min, 4): the tiers leave them, and the partition
    // was written to just now.
    db.compact().unwrap();
    assert_eq!(files_of_old(&db), Some(3));
    std::thread::sleep(std::time::Duration::from_millis(3_500));
    db.compact().unwrap();
    assert_eq!(files_of_old(&db), Some(1));
    assert_eq!(read(&db, &a).len(), 4);
}

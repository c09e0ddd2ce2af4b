//! The database's use of WAL runs: a series' labels are written once per run (not once per
//! segment), replay maps ids run by run, version-1 segments replay by the per-segment rule,
//! and a log cut at a run start (what a flush leaves) replays.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::batch_codec;
use crate::error::Error;
use crate::filenames;
use crate::labels_ref::RawLabels;
use crate::manifest::Manifest;
use crate::wal::tests::{SegmentKind, write_segment};
use crate::wal::{Position, Wal, WalOptions};
use crate::{Batch, Db, Labels, Matcher, Options, Querier, Sample, SeriesId};

const BASE: i64 = 1_700_000_000_000;
const SERIES: usize = 20;

/// Segments of 1 KiB (a few records each) and no background maintenance: the test flushes.
fn options(dir: &Path) -> Options {
    let mut o = Options::new(dir);
    o.wal_segment_bytes = 1024;
    o.maintenance_interval = Duration::from_secs(3600);
    o.head_samples_max = usize::MAX;
    o
}

fn labels(k: usize) -> Labels {
    Labels::from_pairs(&[("__name__", "runs"), ("k", &k.to_string()), ("host", "a-host-name-of-some-length")])
}

/// Batch `b`: one sample at `BASE + b s` for each series, value `b`.
fn batch(b: u64) -> Batch {
    let mut batch = Batch::new();
    for k in 0..SERIES {
        batch.push(labels(k), vec![Sample::new(BASE + b as i64 * 1000, b as f64)]);
    }
    batch
}

/// Every record in the WAL of `data`, read from a copy (opening a WAL starts a segment): its
/// position, the WAL ids it defines and the WAL ids it has samples for.
fn wal_records(data: &Path) -> Vec<(Position, Vec<SeriesId>, Vec<SeriesId>)> {
    let copy = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(filenames::wal_dir(data)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), copy.path().join(entry.file_name())).unwrap();
    }
    let mut records = Vec::new();
    let (wal, _) = Wal::open(WalOptions::new(copy.path()), 0, |at, payload| {
        let batch = batch_codec::decode(payload).unwrap();
        records.push((
            at,
            batch.defs().map(|(id, _)| id).collect(),
            batch.series().map(|(id, _)| id).collect(),
        ));
        Ok(())
    })
    .unwrap();
    drop(wal);
    records
}

/// Per run: how many segments it spans and how often each WAL id is defined in it. Checks
/// that no record uses an id its run has not defined by then.
fn definitions_per_run(
    records: &[(Position, Vec<SeriesId>, Vec<SeriesId>)],
) -> BTreeMap<u64, (usize, BTreeMap<SeriesId, usize>)> {
    let mut runs: BTreeMap<u64, (std::collections::BTreeSet<u64>, BTreeMap<SeriesId, usize>)> =
        BTreeMap::new();
    for (at, defs, used) in records {
        let (segments, defined) = runs.entry(at.run).or_default();
        segments.insert(at.segment);
        for id in defs {
            *defined.entry(*id).or_default() += 1;
        }
        for id in used {
            assert!(defined.contains_key(id), "{at:?}: id {id} used before its run defined it");
        }
    }
    runs.into_iter().map(|(run, (segments, defined))| (run, (segments.len(), defined))).collect()
}

/// Every sample of the series `runs{k}`, read from `db`.
fn samples(db: &Db, k: usize) -> Vec<Sample> {
    let snap = db.snapshot();
    let series = snap
        .select(&[Matcher::equal("__name__", "runs"), Matcher::equal("k", k.to_string())], i64::MIN, i64::MAX)
        .unwrap();
    assert_eq!(series.len(), 1, "series {k}");
    let mut out = Vec::new();
    snap.samples(&series[0], i64::MIN, i64::MAX, &mut out).unwrap();
    out
}

fn expect_batches(db: &Db, batches: std::ops::Range<u64>) {
    let want: Vec<Sample> = batches.map(|b| Sample::new(BASE + b as i64 * 1000, b as f64)).collect();
    for k in 0..SERIES {
        assert_eq!(samples(db, k), want, "series {k}");
    }
}

#[test]
fn a_series_is_defined_once_per_run_across_size_rotations() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(options(dir.path())).unwrap();
    for b in 0..60 {
        db.append(&batch(b)).unwrap();
    }
    let runs = definitions_per_run(&wal_records(dir.path()));
    assert_eq!(runs.len(), 1, "{runs:?}");
    let (segments, defined) = &runs[&1];
    assert!(*segments >= 3, "the run spans several segments: {segments}");
    assert_eq!(defined.len(), SERIES);
    assert!(defined.values().all(|&n| n == 1), "each series defined once in its run: {defined:?}");

    // A flush cuts the log: the next run defines every series it uses again, once.
    db.flush().unwrap();
    for b in 60..120 {
        db.append(&batch(b)).unwrap();
    }
    let runs = definitions_per_run(&wal_records(dir.path()));
    assert_eq!(runs.len(), 1, "the flushed run is deleted: {runs:?}");
    let (&run, (segments, defined)) = runs.iter().next().unwrap();
    assert!(run > 1 && *segments >= 3, "run {run}, {segments} segments");
    assert_eq!(defined.len(), SERIES);
    assert!(defined.values().all(|&n| n == 1), "{defined:?}");

    // A crash (no close): the files hold the first run, the WAL the second.
    drop(db);
    let db = Db::open(options(dir.path())).unwrap();
    expect_batches(&db, 0..120);
    db.close().unwrap();
}

#[test]
fn a_log_cut_at_a_run_start_replays_and_old_runs_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let wal_dir = filenames::wal_dir(dir.path());
    let db = Db::open(options(dir.path())).unwrap();
    for b in 0..60 {
        db.append(&batch(b)).unwrap();
    }
    // Keep the first run's segments, to put them back as a crash between the manifest commit
    // and their deletion would leave them (all of them, or the part after the first).
    let kept = tempfile::tempdir().unwrap();
    let mut first_run = Vec::new();
    for entry in std::fs::read_dir(&wal_dir).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), kept.path().join(entry.file_name())).unwrap();
        first_run.push(entry.file_name());
    }
    first_run.sort();
    assert!(first_run.len() >= 3, "{first_run:?}");
    db.flush().unwrap();
    for b in 60..120 {
        db.append(&batch(b)).unwrap();
    }
    drop(db);
    let manifest = Manifest::load(&filenames::manifest(dir.path())).unwrap().unwrap();
    let records = wal_records(dir.path());
    assert!(
        records.iter().all(|(at, _, _)| at.run == manifest.wal_first_segment),
        "replay starts at a run start"
    );

    for restored in [&first_run[..], &first_run[1..]] {
        for name in restored {
            std::fs::copy(kept.path().join(name), wal_dir.join(name)).unwrap();
        }
        let db = Db::open(options(dir.path())).unwrap();
        expect_batches(&db, 0..120);
        drop(db);
        for name in restored {
            assert!(!wal_dir.join(name).exists(), "{name:?}: flushed segments are deleted at open");
        }
    }
}

/// Appends from several threads while another flushes again and again, then crashes: every
/// acknowledged batch is there after replay (ids defined once per run, runs cut by flushes,
/// segments cut by size under concurrent appenders).
#[test]
fn concurrent_appends_and_flushes_replay_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(options(dir.path())).unwrap());
    std::thread::scope(|s| {
        for w in 0..3u64 {
            let db = &db;
            s.spawn(move || {
                for b in 0..100u64 {
                    let mut batch = Batch::new();
                    for k in 0..SERIES {
                        let l = Labels::from_pairs(&[
                            ("__name__", "conc"),
                            ("w", &w.to_string()),
                            ("k", &k.to_string()),
                        ]);
                        batch.push(l, vec![Sample::new(BASE + b as i64 * 1000, (w * 1000 + b) as f64)]);
                    }
                    db.append(&batch).unwrap();
                }
            });
        }
        let db = &db;
        s.spawn(move || {
            for _ in 0..10 {
                std::thread::sleep(Duration::from_millis(5));
                db.flush().unwrap();
            }
        });
    });
    drop(db);
    let db = Db::open(options(dir.path())).unwrap();
    let snap = db.snapshot();
    let series = snap.select(&[Matcher::equal("__name__", "conc")], i64::MIN, i64::MAX).unwrap();
    assert_eq!(series.len(), 3 * SERIES);
    for s in &series {
        let w: u64 = s.labels.get("w").unwrap().parse().unwrap();
        let mut v = Vec::new();
        snap.samples(s, i64::MIN, i64::MAX, &mut v).unwrap();
        let want: Vec<Sample> =
            (0..100u64).map(|b| Sample::new(BASE + b as i64 * 1000, (w * 1000 + b) as f64)).collect();
        assert_eq!(v, want, "{}", s.labels);
    }
    db.close().unwrap();
}

/// A record defining `defs` (WAL id, series `runs{k}`) and holding one sample (at `t`, value
/// `v`) per id in `series`: of type 1, as version 1 segments hold.
fn record(defs: &[(SeriesId, usize)], series: &[SeriesId], t: i64, v: f64) -> Vec<u8> {
    let names: Vec<(String, String)> = defs.iter().map(|(_, k)| ("k".to_string(), k.to_string())).collect();
    let pairs: Vec<Vec<crate::labels_ref::RawPair<'_>>> = names
        .iter()
        .map(|(n, v)| vec![(b"__name__".as_slice(), b"runs".as_slice()), (n.as_bytes(), v.as_bytes())])
        .collect();
    let defs: Vec<(SeriesId, RawLabels<'_>)> =
        defs.iter().zip(&pairs).map(|((id, _), p)| (*id, RawLabels::new(p).unwrap())).collect();
    let samples = [Sample::new(t, v)];
    let series: Vec<(SeriesId, &[Sample])> = series.iter().map(|id| (*id, &samples[..])).collect();
    let mut out = Vec::new();
    batch_codec::encode_type1(&defs, &series, &mut out);
    out
}

fn open_hand_written(
    segments: &[(u64, SegmentKind, Vec<Vec<u8>>)],
) -> (tempfile::TempDir, crate::Result<Db>) {
    let dir = tempfile::tempdir().unwrap();
    for (number, kind, payloads) in segments {
        write_segment(&filenames::wal_dir(dir.path()), *number, *kind, payloads);
    }
    let db = Db::open(options(dir.path()));
    (dir, db)
}

fn values(db: &Db, k: usize) -> Vec<f64> {
    samples(db, k).iter().map(|s| s.v).collect()
}

#[test]
fn replay_maps_ids_per_run_and_per_version_1_segment() {
    use SegmentKind::{ContinuesRun, StartsRun, Version1};
    // Version 1: each segment defines what it uses (here WAL id 3 is series 0 in segment 1 and
    // series 1 in segment 2, as two processes may have written them).
    let (_d, db) = open_hand_written(&[
        (1, Version1, vec![record(&[(3, 0)], &[3], BASE, 1.0), record(&[], &[3], BASE + 1000, 2.0)]),
        (2, Version1, vec![record(&[(3, 1)], &[3], BASE, 3.0)]),
    ]);
    let db = db.unwrap();
    assert_eq!((values(&db, 0), values(&db, 1)), (vec![1.0, 2.0], vec![3.0]));
    drop(db);

    // A run: what segment 1 defined, segment 2 uses; a new run (segment 3) defines again.
    let (_d, db) = open_hand_written(&[
        (1, StartsRun, vec![record(&[(3, 0)], &[3], BASE, 1.0)]),
        (2, ContinuesRun, vec![record(&[(4, 1)], &[3, 4], BASE + 1000, 2.0)]),
        (3, StartsRun, vec![record(&[(4, 0)], &[4], BASE + 2000, 3.0)]),
    ]);
    let db = db.unwrap();
    assert_eq!((values(&db, 0), values(&db, 1)), (vec![1.0, 2.0, 3.0], vec![2.0]));
    drop(db);

    // An id its run has not defined is corruption: in a version-1 segment after the one that
    // defined it, and in a new run.
    for segments in [
        vec![
            (1, Version1, vec![record(&[(3, 0)], &[3], BASE, 1.0)]),
            (2, Version1, vec![record(&[], &[3], BASE, 2.0)]),
        ],
        vec![
            (1, StartsRun, vec![record(&[(3, 0)], &[3], BASE, 1.0)]),
            (2, StartsRun, vec![record(&[], &[3], BASE, 2.0)]),
        ],
        vec![
            (1, Version1, vec![record(&[(3, 0)], &[3], BASE, 1.0)]),
            (2, StartsRun, vec![record(&[], &[3], BASE, 2.0)]),
        ],
    ] {
        let (_d, db) = open_hand_written(&segments);
        match db {
            Err(Error::Corruption { reason, .. }) => {
                assert!(
                    reason.contains("segment 2 (run 2)") && reason.contains("before its definition"),
                    "{reason}"
                )
            }
            Err(e) => panic!("unexpected error {e}"),
            Ok(_) => panic!("an undefined id was accepted"),
        }
    }
}

/// The batches of the checked-in WAL: series with integer values, float values, start
/// timestamps and native histograms, batch `b` one sample a series at `BASE + b × 15 s`.
fn golden_batches() -> Vec<crate::BatchRef<'static>> {
    (0..12i64)
        .map(|b| {
            let t = BASE + b * 15_000;
            let mut batch = crate::BatchRef::new();
            let mut s = batch.series();
            s.label("__name__", "golden_ints");
            s.sample(Sample::new(t, (b * 7 % 100) as f64));
            s.finish();
            let mut s = batch.series();
            s.label("__name__", "golden_floats");
            s.sample(Sample::new(t, b as f64 / 3.0));
            s.finish();
            let mut s = batch.series();
            s.label("__name__", "golden_counter");
            s.label("job", "a");
            s.sample_with_start(Sample::new(t, (b * 10) as f64), BASE - 60_000);
            s.finish();
            let mut s = batch.series();
            s.label("__name__", "golden_hist");
            let h =
                crate::types::FloatHistogram { count: b as f64, sum: b as f64 * 1.5, ..Default::default() };
            s.histogram(t, h);
            s.finish();
            batch
        })
        .collect()
}

/// Everything `db` holds, series by series: labels, samples, start timestamps, histograms.
fn dump(db: &Db) -> Vec<String> {
    let snap = db.snapshot();
    let all =
        snap.select(&[Matcher::new(crate::MatchOp::Regex, "__name__", ".+").unwrap()], i64::MIN, i64::MAX);
    let mut out = Vec::new();
    for s in &all.unwrap() {
        let (mut samples, mut starts, mut hists) = (Vec::new(), Vec::new(), Vec::new());
        snap.samples(s, i64::MIN, i64::MAX, &mut samples).unwrap();
        snap.start_timestamps(s, i64::MIN, i64::MAX, &mut starts).unwrap();
        snap.histograms(s, i64::MIN, i64::MAX, &mut hists).unwrap();
        out.push(format!("{} {samples:?} {starts:?} {hists:?}", s.labels));
    }
    out.sort();
    out
}

/// A WAL as this version writes it, checked in (`storage/testdata/format/wal_runs`): one run
/// over several segments of type 4 records. Later versions must replay it to the same data.
/// `STRATA_BLESS=1` rewrites it (only when the format changes on purpose: then
/// docs/format/wal.md and batch.md change too).
#[test]
fn golden_wal_of_one_run_replays() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/format/wal_runs");
    let fresh = tempfile::tempdir().unwrap();
    let mut o = options(fresh.path());
    o.wal_segment_bytes = 256;
    let db = Db::open(o).unwrap();
    for b in golden_batches() {
        db.append_ref(&b).unwrap();
    }
    let expected = dump(&db);
    assert_eq!(expected.len(), 4);
    drop(db);
    if std::env::var("STRATA_BLESS").as_deref() == Ok("1") {
        let _ = std::fs::remove_dir_all(&golden);
        let wal = filenames::wal_dir(&golden);
        std::fs::create_dir_all(&wal).unwrap();
        for entry in std::fs::read_dir(filenames::wal_dir(fresh.path())).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), wal.join(entry.file_name())).unwrap();
        }
    }
    let records = wal_records(&golden);
    assert!(records.iter().any(|(at, _, _)| at.segment > at.run), "the run spans segments: {records:?}");
    let d = tempfile::tempdir().unwrap();
    let wal = filenames::wal_dir(d.path());
    std::fs::create_dir_all(&wal).unwrap();
    for entry in std::fs::read_dir(filenames::wal_dir(&golden)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), wal.join(entry.file_name())).unwrap();
    }
    let db = Db::open(options(d.path())).unwrap();
    assert_eq!(dump(&db), expected);
    db.close().unwrap();
}

/// A power cut after every operation of a script whose WAL runs span several segments: a run
/// over many segments, a flush (which starts a run and deletes the old run's segments), another
/// run, a flush, a third run. Whatever the cut, every acknowledged batch is there, whole, and no
/// batch is there in part.
#[test]
fn a_power_cut_after_every_operation_of_runs_over_many_segments() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("db");
    std::fs::create_dir(&root).unwrap();
    let mut o = options(&root);
    o.wal_segment_bytes = 512;
    let rec = crate::powercut::record(&root).unwrap();
    let mut acked_at = Vec::new();
    {
        let db = Db::open(o.clone()).unwrap();
        for b in 0..90u64 {
            db.append(&batch(b)).unwrap();
            acked_at.push(rec.ops());
            if b % 30 == 29 && b < 89 {
                db.flush().unwrap();
            }
        }
        let runs = definitions_per_run(&wal_records(&root));
        let (_, (segments, _)) = runs.iter().next().unwrap();
        assert!(*segments >= 4, "the last run spans {segments} segments");
        // Dropped, not closed: the last run stays in the WAL.
    }
    let total = rec.ops();
    for n in 0..=total {
        let cut = tempfile::tempdir().unwrap();
        let dir = cut.path().join("db");
        rec.materialise(n, &dir).unwrap();
        let mut o = o.clone();
        o.data_dir = dir.clone();
        let db = Db::open(o).unwrap_or_else(|e| panic!("cut at op {n}: {e}"));
        let present: Vec<Vec<Sample>> = (0..SERIES).map(|k| samples_or_none(&db, k)).collect();
        for b in 0..90u64 {
            let t = BASE + b as i64 * 1000;
            let with = present.iter().filter(|s| s.iter().any(|x| x.t == t && x.v == b as f64)).count();
            assert!(with == 0 || with == SERIES, "cut at op {n}: batch {b} in {with} of {SERIES} series");
            if acked_at[b as usize] <= n {
                assert_eq!(with, SERIES, "cut at op {n}: acknowledged batch {b} lost");
            }
        }
        drop(db);
    }
}

/// The samples of `runs{k}`, none if the series does not exist.
fn samples_or_none(db: &Db, k: usize) -> Vec<Sample> {
    let snap = db.snapshot();
    let matchers = [Matcher::equal("__name__", "runs"), Matcher::equal("k", k.to_string())];
    let mut out = Vec::new();
    for s in snap.select(&matchers, i64::MIN, i64::MAX).unwrap() {
        snap.samples(&s, i64::MIN, i64::MAX, &mut out).unwrap();
    }
    out
}

/// The two halves of an append: after the WAL write the batch may go and nothing is visible;
/// `finish` makes it durable and visible. A pending append dropped unfinished (a handler that
/// panicked between the halves, so nothing was acknowledged) stores nothing in the head and
/// releases the append lock.
#[test]
fn a_deferred_append_is_visible_after_finish() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(options(dir.path())).unwrap();
    let owned = batch(0);
    let pending = db.append_ref_deferred(&crate::BatchRef::from(&owned)).unwrap();
    drop(owned);
    assert_eq!(pending.outcome().appended, 0, "filled in by finish");
    let outcome = pending.finish().unwrap();
    assert_eq!(outcome.appended, SERIES as u64);
    expect_batches(&db, 0..1);

    let owned = batch(1);
    let pending = db.append_ref_deferred(&crate::BatchRef::from(&owned)).unwrap();
    drop(pending);
    expect_batches(&db, 0..1);
    // The append lock went with it: a flush (which takes it exclusively) does not wait.
    db.flush().unwrap();
    db.append(&batch(2)).unwrap();
    let want = [Sample::new(BASE, 0.0), Sample::new(BASE + 2000, 2.0)];
    for k in 0..SERIES {
        assert_eq!(samples(&db, k), want, "series {k}");
    }
}

//! Cardinality limits through `Db::append`: refused series are not stored, everything else in
//! the batch is, and concurrent appenders never push the database past a limit.

use std::sync::Arc;

use storage::cardinality::{SeriesLimit, SeriesLimits};
use storage::{Batch, Db, Labels, Options, Sample};

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

fn open(dir: &std::path::Path, limits: SeriesLimits) -> Db {
    let mut o = Options::new(dir);
    o.series_limits = limits;
    Db::open(o).unwrap()
}

fn series(metric: &str, id: usize) -> Labels {
    Labels::from_pairs(&[("__name__", metric), ("id", &id.to_string())])
}

#[test]
fn a_refused_series_is_not_stored_and_the_rest_of_the_batch_is() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), SeriesLimits { max_series_per_metric: 1, ..SeriesLimits::default() });
    let t = now_ms();
    let mut b = Batch::new();
    b.push(series("a", 1), vec![Sample::new(t, 1.0)]);
    b.push(series("a", 2), vec![Sample::new(t, 2.0), Sample::new(t + 1, 3.0)]);
    b.push(series("b", 1), vec![Sample::new(t, 4.0)]);
    let out = db.append(&b).unwrap();
    assert_eq!((out.appended, out.series_limited, out.series_created), (2, 2, 2));
    assert_eq!(out.series_rejected.max_series_per_metric, 1);
    let first = out.first_rejected_series.unwrap();
    assert_eq!((first.labels, first.limit, first.max), (series("a", 2), SeriesLimit::MaxSeriesPerMetric, 1));
    assert_eq!(db.series_count(), 2);
    assert_eq!(db.counters().rejected_series_limit.load(std::sync::atomic::Ordering::Relaxed), 2);
    assert_eq!(db.series_rejected_total().max_series_per_metric, 1);
    let stats = db.cardinality_stats(&[None], 10);
    assert_eq!((stats.created_today, stats.rejected_today), (2, 1));
    assert_eq!(stats.rejected_today_by_metric[0].name, "a");
    db.close().unwrap();
}

#[test]
fn concurrent_appenders_never_exceed_the_series_limit() {
    let dir = tempfile::tempdir().unwrap();
    let max = 50;
    let db = Arc::new(open(dir.path(), SeriesLimits { max_series: max, ..SeriesLimits::default() }));
    let t = now_ms();
    let threads: Vec<_> = (0..4)
        .map(|w| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                let (mut stored, mut refused) = (0u64, 0u64);
                for round in 0..10 {
                    let mut b = Batch::new();
                    for k in 0..10 {
                        // Overlapping ids across writers, so they race to create the same series.
                        b.push(series("m", (w * 7 + round * 10 + k) % 120), vec![Sample::new(t, 1.0)]);
                    }
                    let out = db.append(&b).unwrap();
                    stored += out.appended;
                    refused += out.series_limited;
                }
                (stored, refused)
            })
        })
        .collect();
    let (stored, refused) =
        threads.into_iter().map(|t| t.join().unwrap()).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    assert_eq!(stored + refused, 400);
    assert_eq!(db.series_count() as u64, max);
    assert!(db.series_rejected_total().max_series > 0);
    db.close().unwrap();
}

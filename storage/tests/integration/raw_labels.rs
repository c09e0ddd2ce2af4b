//! Label strings a batch carries unchecked (`BatchRef` byte pairs): storage checks the UTF-8 of
//! new series only, refuses invalid ones with nothing stored, and never lets other bytes match a
//! known series.

use proptest::prelude::*;
use storage::{BatchRef, Db, Error, Labels, MatchOp, Matcher, Options, Querier, Sample};

const BASE: i64 = 1_700_000_000_000; // a fixed past time: never "too far in the future"

fn opts(dir: &std::path::Path) -> Options {
    let mut o = Options::new(dir);
    o.maintenance_interval = std::time::Duration::from_secs(3600);
    o
}

/// A batch of series given as byte pairs (sorted by name, values non-empty), one sample each.
fn batch<'a>(series: &[&[(&'a [u8], &'a [u8])]], t: i64) -> BatchRef<'a> {
    let mut b = BatchRef::new();
    for pairs in series {
        let mut s = b.series();
        for &(n, v) in *pairs {
            s.label_bytes_checked(n, v);
        }
        s.sample(Sample::new(t, 1.0));
        s.finish();
    }
    b
}

/// Every stored series with its sample timestamps.
fn stored(db: &Db) -> Vec<(Labels, Vec<i64>)> {
    let snap = db.snapshot();
    let all = [Matcher::new(MatchOp::Regex, "__name__", ".+").unwrap()];
    let mut out = Vec::new();
    for s in snap.select(&all, i64::MIN, i64::MAX).unwrap() {
        let mut samples = Vec::new();
        snap.samples(&s, i64::MIN, i64::MAX, &mut samples).unwrap();
        out.push((s.labels, samples.iter().map(|x| x.t).collect()));
    }
    out
}

const NAME: &[u8] = b"__name__";

#[test]
fn a_new_series_with_invalid_utf8_is_refused_and_nothing_is_stored() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(opts(d.path())).unwrap();
    let good: &[(&[u8], &[u8])] = &[(NAME, b"up"), (b"job", b"a")];
    let bad: &[(&[u8], &[u8])] = &[(NAME, b"up"), (b"job", b"\xc3\x28")];
    let err = db.append_ref(&batch(&[good, bad], BASE)).unwrap_err();
    assert!(matches!(err, Error::InvalidLabels { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "invalid labels in series up{job=\"\u{fffd}(\"}: label name or value is not valid UTF-8"
    );
    assert!(!err.is_transient());
    // Not even the valid new series of the same batch was created.
    assert_eq!(db.series_count(), 0);
    assert!(stored(&db).is_empty());
    // An invalid name is refused as well.
    let bad_name: &[(&[u8], &[u8])] = &[(NAME, b"up"), (b"j\xff", b"a")];
    assert!(matches!(db.append_ref(&batch(&[bad_name], BASE)), Err(Error::InvalidLabels { .. })));
    // Nothing reached the WAL either.
    db.close().unwrap();
    drop(db);
    let db = Db::open(opts(d.path())).unwrap();
    assert_eq!(db.series_count(), 0);
    // The valid series alone is stored.
    db.append_ref(&batch(&[good], BASE)).unwrap();
    assert_eq!(stored(&db), vec![(Labels::from_pairs(&[("__name__", "up"), ("job", "a")]), vec![BASE])]);
}

#[test]
fn bytes_unequal_to_a_known_series_never_match_it() {
    let d = tempfile::tempdir().unwrap();
    let db = Db::open(opts(d.path())).unwrap();
    let known = Labels::from_pairs(&[("__name__", "up"), ("job", "\u{e9}")]);
    let exact: &[(&[u8], &[u8])] = &[(NAME, b"up"), (b"job", "\u{e9}".as_bytes())];
    let out = db.append_ref(&batch(&[exact], BASE)).unwrap();
    assert_eq!(out.series_created, 1);
    // The known series' bytes, unchecked, find it without creating anything.
    let out = db.append_ref(&batch(&[exact], BASE + 1)).unwrap();
    assert_eq!((out.series_created, out.appended), (0, 1));
    // A prefix of the value (cut inside its character), the value with an invalid byte after it.
    for value in [&b"\xc3"[..], b"\xc3\xa9\xff", b"\xa9"] {
        let other: &[(&[u8], &[u8])] = &[(NAME, b"up"), (b"job", value)];
        let err = db.append_ref(&batch(&[exact, other], BASE + 2)).unwrap_err();
        assert!(matches!(err, Error::InvalidLabels { .. }), "{value:x?}: {err:?}");
    }
    assert_eq!(db.series_count(), 1);
    assert_eq!(stored(&db), vec![(known, vec![BASE, BASE + 1])]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever the bytes: valid UTF-8 is stored under exactly those strings; anything else is
    /// refused with `InvalidLabels` and leaves the database as it was.
    #[test]
    fn only_valid_utf8_becomes_a_series(
        values in proptest::collection::vec(
            proptest::collection::vec(prop_oneof![0x61u8..0x63, 0xc3u8..0xc4, 0xa9u8..0xaa, 0xffu8..=0xff], 1..4),
            1..4,
        ),
    ) {
        let d = tempfile::tempdir().unwrap();
        let db = Db::open(opts(d.path())).unwrap();
        let series: Vec<Vec<(&[u8], &[u8])>> =
            values.iter().map(|v| vec![(NAME, &b"m"[..]), (&b"v"[..], v.as_slice())]).collect();
        let refs: Vec<&[(&[u8], &[u8])]> = series.iter().map(Vec::as_slice).collect();
        let result = db.append_ref(&batch(&refs, BASE));
        let strings: Option<Vec<&str>> = values.iter().map(|v| std::str::from_utf8(v).ok()).collect();
        match strings {
            Some(strings) => {
                prop_assert!(result.is_ok(), "{:?}", result);
                let mut want: Vec<Labels> =
                    strings.iter().map(|v| Labels::from_pairs(&[("__name__", "m"), ("v", *v)])).collect();
                want.sort();
                want.dedup();
                let mut got: Vec<Labels> = stored(&db).into_iter().map(|(l, _)| l).collect();
                got.sort();
                prop_assert_eq!(got, want);
            }
            None => {
                prop_assert!(matches!(result, Err(Error::InvalidLabels { .. })), "{:?}", result);
                prop_assert_eq!(db.series_count(), 0);
            }
        }
    }
}

//! Helpers shared by the integration tests: rendering batches and golden files.

use std::fmt::Write;
use std::path::PathBuf;

use storage::Batch;

/// A stable text form of a batch: one line per sample, `labels @t = value (bits)`.
pub fn render_batch(batch: &Batch) -> String {
    let mut out = String::new();
    for (labels, samples) in &batch.series {
        for s in samples {
            let _ = writeln!(out, "{labels} @{} = {:?} ({:#018x})", s.t, s.v, s.v.to_bits());
        }
    }
    out
}

/// Path of a file under `remote/testdata/`.
pub fn testdata(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata").join(name)
}

/// Compares `actual` with the golden file `name`; with `STRATA_BLESS=1` rewrites the file.
pub fn golden(name: &str, actual: &[u8]) {
    let path = testdata(name);
    if std::env::var_os("STRATA_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected =
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e} (run with STRATA_BLESS=1)", path.display()));
    if expected != actual {
        panic!(
            "{} differs from the actual output (run with STRATA_BLESS=1 to accept):\n--- expected\n{}\n--- actual\n{}",
            path.display(),
            String::from_utf8_lossy(&expected),
            String::from_utf8_lossy(actual)
        );
    }
}

/// Reads a golden input file.
pub fn read(name: &str) -> Vec<u8> {
    let path = testdata(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

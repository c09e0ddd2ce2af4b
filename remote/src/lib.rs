//! Wire formats (remote write/read, Influx line protocol): bytes in, `storage` batches out.

// Filled in by issue 3 (ingest) and issue 5 (remote read).

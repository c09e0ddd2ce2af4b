//! Command-line flags and their translation into `storage::Options` and the server's settings.
//!
//! Every flag's doc comment is its `--help` text. Defaults are written out as literals so that
//! `--help` shows them exactly; a test checks that they equal `storage::Options::new`'s defaults,
//! and another that README.md and docs/operations.md list every flag.

use std::path::PathBuf;

use std::collections::BTreeMap;

use clap::{CommandFactory, FromArgMatches, Parser};

use crate::api::query::QueryConfig;
use crate::api::status::StatusConfig;
use crate::duration::PromDuration;
use crate::server::ServerConfig;
use crate::size::ByteSize;

/// `--role`: which parts of strata this process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// Ingest, storage and queries in one process (the default).
    All,
    /// Ingest and storage for one bucket prefix (queries over it too).
    Write,
    /// Queries over every writer's prefix in the bucket; no ingest.
    Query,
    /// Writes only, forwarded to the ingest log (--log.url); no database, no queries.
    Distributor,
}

/// A writer's default name among lease holders: the host name and the process id.
fn default_member() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host = host.trim();
    format!("{}-{}", if host.is_empty() { "strata" } else { host }, std::process::id())
}

/// strata: a Prometheus-compatible remote storage with its own PromQL engine.
///
/// Durations are written as in Prometheus (15d, 12h, 90m, 1h30m, 100ms; units y w d h m s ms),
/// sizes as 128MiB, 64MB or a plain number of bytes.
#[derive(Debug, Clone, Parser)]
#[command(name = "strata", version)]
pub struct Cli {
    /// Directory that holds the WAL and the partition files; created if missing.
    /// Prometheus' --storage.tsdb.path is accepted as another name for it.
    #[arg(long, alias = "storage.tsdb.path", value_name = "DIR", default_value = "./data")]
    pub data_dir: PathBuf,

    /// Address to serve HTTP on, as host:port; ":PORT" listens on every IPv4 interface
    /// (0.0.0.0:PORT), as Prometheus' ":9090" does. Port 0 picks a free port; the bound address
    /// is logged as "strata listening on ADDR". Prometheus' --web.listen-address is accepted as
    /// another name for it.
    #[arg(long, alias = "web.listen-address", value_name = "ADDR", default_value = "127.0.0.1:9201", value_parser = listen_addr)]
    pub listen: String,

    /// Remove a time partition once all of its data is older than this, measured back from the
    /// newest sample. Prometheus' --storage.tsdb.retention.time is accepted as another name
    /// for it.
    #[arg(long, aliases = ["storage.tsdb.retention.time", "storage.tsdb.retention"], value_name = "DURATION", default_value = "15d", value_parser = positive_duration)]
    pub retention: PromDuration,

    /// Width of one time partition (one directory of files). Retention removes whole partitions,
    /// so this is also the granularity of retention.
    #[arg(long, value_name = "DURATION", default_value = "1d", value_parser = positive_duration)]
    pub partition_duration: PromDuration,

    /// Optional limit on out-of-order writes: accept a sample at most this far behind the
    /// newest sample of its series, and reject and count older ones (0 accepts none, as
    /// Prometheus does by default). Without it (the default) any sample inside --retention is
    /// accepted in any order, as VictoriaMetrics and InfluxDB do.
    #[arg(long, value_name = "DURATION")]
    pub ooo_window: Option<PromDuration>,

    /// Reject samples more than this far ahead of the wall clock.
    #[arg(long, value_name = "DURATION", default_value = "10m")]
    pub future_window: PromDuration,

    /// WAL durability: "batch" fsyncs before acknowledging every write (concurrent writes share
    /// one fsync; nothing acknowledged is lost on power loss), or an interval such as 100ms that
    /// acknowledges after write(2) and fsyncs in the background (a power loss may lose up to
    /// that interval; a process crash loses nothing).
    #[arg(long, value_name = "batch|DURATION", default_value = "batch", value_parser = wal_sync)]
    pub wal_sync: storage::WalSync,

    /// Start a new WAL segment file when the current one reaches this size.
    #[arg(long, value_name = "SIZE", default_value = "128MiB", value_parser = positive_size)]
    pub wal_segment_size: ByteSize,

    /// At startup, cut the WAL at a corrupt record in its middle and start, instead of refusing
    /// to start. Loses every write after the corrupt record; for getting a server back when its
    /// WAL cannot be repaired.
    #[arg(long)]
    pub wal_truncate_corrupt: bool,

    /// Most samples in one compressed block of a partition file.
    #[arg(long, value_name = "N", default_value = "1024", value_parser = positive_count)]
    pub block_samples_max: usize,

    /// Blocks never cross a multiple of this duration, so block statistics line up with common
    /// query windows and can answer them without decoding.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = positive_duration)]
    pub block_grid: PromDuration,

    /// Flush the in-memory head to partition files when it holds this many samples.
    #[arg(long, value_name = "N", default_value = "50000000", value_parser = positive_count)]
    pub head_samples_max: usize,

    /// Flush the in-memory head to partition files when its oldest write is this old.
    #[arg(long, value_name = "DURATION", default_value = "2h", value_parser = positive_duration)]
    pub head_flush_interval: PromDuration,

    /// Flush the head when its samples span more than this (newest minus oldest timestamp)
    /// with their mean more than half of it before the newest, once it holds at least 1/64 of
    /// --head-samples-max: a backfill or bulk load goes to partition files as it arrives
    /// instead of waiting in memory.
    #[arg(long, value_name = "DURATION", default_value = "3h", value_parser = positive_duration)]
    pub head_span_max: PromDuration,

    /// How often the background worker looks for flush, compaction and retention work.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = positive_duration)]
    pub maintenance_interval: PromDuration,

    /// Compact a partition into one file once it has this many files.
    #[arg(long, value_name = "N", default_value = "4", value_parser = compact_files_min)]
    pub compact_files_min: usize,

    /// Most live series in the database; a write creating more has its new series refused
    /// (400), its other samples stored. 0: unlimited.
    #[arg(long, value_name = "N", default_value = "0")]
    pub series_max: u64,

    /// Most live series per metric name; beyond it new series of that metric are refused
    /// (400). 0: unlimited.
    #[arg(long, value_name = "N", default_value = "0")]
    pub series_per_metric_max: u64,

    /// Most series created per UTC day (counted from process start on the first day); beyond
    /// it new series are refused (400) until 00:00 UTC. 0: unlimited.
    #[arg(long, value_name = "N", default_value = "0")]
    pub new_series_per_day_max: u64,

    /// Largest write request body accepted as received (still compressed). Larger bodies are
    /// refused with 413, which senders do not retry: keep it well above their batch size.
    #[arg(long, value_name = "SIZE", default_value = "32MiB", value_parser = positive_size)]
    pub write_body_bytes_max: ByteSize,

    /// Largest write request body after snappy or gzip decompression; checked before the memory
    /// is allocated. Larger bodies are refused with 413.
    #[arg(long, value_name = "SIZE", default_value = "256MiB", value_parser = positive_size)]
    pub write_decoded_bytes_max: ByteSize,

    /// Most write requests read, decoded and stored at once; others wait for a slot (see
    /// --write-max-queue-duration). Bounds the memory bodies in flight take. Default: two per
    /// core.
    #[arg(long, value_name = "N", value_parser = positive_count)]
    pub write_max_concurrency: Option<usize>,

    /// Longest a write request waits for a slot before it is answered 503 with Retry-After
    /// (which senders retry).
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = positive_duration)]
    pub write_max_queue_duration: PromDuration,

    /// Longest time to read a request, headers and body, and to keep an idle connection
    /// open, as Prometheus' flag of the same name: a client that sends slowly or not at all
    /// cannot hold a connection forever.
    #[arg(long = "web.read-timeout", value_name = "DURATION", default_value = "5m", value_parser = positive_duration)]
    pub web_read_timeout: PromDuration,

    /// Most labels one series may have, __name__ included. A write with a series over it is
    /// refused with 400.
    #[arg(long, value_name = "N", default_value = "64", value_parser = positive_count)]
    pub labels_per_series_max: usize,

    /// Longest label name in bytes. A write with a longer one is refused with 400.
    #[arg(long, value_name = "SIZE", default_value = "1KiB", value_parser = positive_size)]
    pub label_name_bytes_max: ByteSize,

    /// Longest label value in bytes, the metric name included. A write with a longer one is
    /// refused with 400.
    #[arg(long, value_name = "SIZE", default_value = "16KiB", value_parser = positive_size)]
    pub label_value_bytes_max: ByteSize,

    /// Log filter: a level (error, warn, info, debug, trace, off; "warning" means warn) or
    /// comma-separated directives, each a level or target=level, such as "info,storage=debug".
    /// Anything else is refused. When absent, RUST_LOG (read the same way) is used if set, else
    /// "info".
    #[arg(long, value_name = "FILTER", value_parser = log_filter)]
    pub log_level: Option<String>,

    /// Longest time one PromQL query may run; a request's `timeout` parameter can only
    /// shorten it. Time spent waiting for a free query slot counts.
    #[arg(long = "query.timeout", value_name = "DURATION", default_value = "2m", value_parser = positive_duration)]
    pub query_timeout: PromDuration,

    /// Most samples one query may hold in memory at once; a query over it fails with 422.
    #[arg(long = "query.max-samples", value_name = "N", default_value = "50000000", value_parser = positive_count)]
    pub query_max_samples: usize,

    /// Most series one selector of a query may match; a query over it fails with 422 naming
    /// the limit. 0: unlimited.
    #[arg(long = "query.max-series", value_name = "N", default_value = "0")]
    pub query_max_series: usize,

    /// Largest encoded answer of one query; a query whose answer would be larger fails with
    /// 422 instead of building it. 0: unlimited.
    #[arg(long = "query.max-response-bytes", value_name = "SIZE", default_value = "1GiB")]
    pub query_max_response_bytes: ByteSize,

    /// How far back an instant selector looks for a series' latest sample; a request's
    /// `lookback_delta` parameter overrides it.
    #[arg(long = "query.lookback-delta", value_name = "DURATION", default_value = "5m", value_parser = positive_duration)]
    pub query_lookback_delta: PromDuration,

    /// Step of a subquery written without one, such as `rate(x[5m])[1h:]`. Prometheus uses its
    /// global evaluation_interval there (default 1m): set this to that of the Prometheus whose
    /// dashboards and rules point at strata, or their answers differ.
    #[arg(long = "query.default-subquery-step", value_name = "DURATION", default_value = "1m", value_parser = positive_duration)]
    pub query_default_subquery_step: PromDuration,

    /// Most queries evaluating at once; further queries wait for a slot (within their timeout).
    #[arg(long = "query.max-concurrency", value_name = "N", default_value = "20", value_parser = positive_count)]
    pub query_max_concurrency: usize,

    /// Worker threads, shared by all queries, that evaluate the series of large selectors in
    /// parallel (0: one per core; 1: every query on one thread). Lower it to leave cores to
    /// ingest under heavy query load.
    #[arg(long = "query.max-parallelism", value_name = "N", default_value = "0")]
    pub query_max_parallelism: usize,

    /// Queries estimated below this many points (steps plus samples read) are evaluated on the
    /// server's async threads, one at a time per spare thread, instead of being handed to a
    /// blocking thread and back (about 50 us less per small query); larger ones stop early and
    /// run on a blocking thread. 0: every query on a blocking thread.
    #[arg(long = "query.inline-max-points", value_name = "N", default_value = "50000")]
    pub query_inline_max_points: usize,

    /// Optional PromQL features, by Prometheus' names, comma-separated or repeated:
    /// promql-experimental-functions, promql-duration-expr, promql-extended-range-selectors,
    /// promql-binop-fill-modifiers, promql-delayed-name-removal, type-and-unit-labels,
    /// use-start-timestamps (st-storage is accepted: start timestamps are always stored). Other
    /// names (Prometheus features strata has no use for) are logged and ignored.
    #[arg(long = "enable-feature", value_name = "FEATURE", value_delimiter = ',')]
    pub enable_feature: Vec<String>,

    /// Mirror partition files and manifests to an object store: `s3://BUCKET/PREFIX` (S3 or an
    /// S3-compatible store; credentials, region and endpoint from the AWS_* environment
    /// variables or the flags below) or `file:///DIR`. The data directory stays the working
    /// copy; a data directory without a manifest is restored from the bucket at start. One
    /// writer per prefix: a second one started on it fences the first, which then refuses
    /// writes.
    #[arg(long = "storage.bucket", value_name = "URL", value_parser = bucket_url)]
    pub storage_bucket: Option<String>,

    /// S3 endpoint of an S3-compatible store, e.g. http://127.0.0.1:7480 (else AWS_ENDPOINT, or
    /// AWS itself).
    #[arg(long = "storage.bucket-endpoint", value_name = "URL")]
    pub storage_bucket_endpoint: Option<String>,

    /// S3 region (else AWS_REGION or AWS_DEFAULT_REGION).
    #[arg(long = "storage.bucket-region", value_name = "REGION")]
    pub storage_bucket_region: Option<String>,

    /// S3 access key id (else AWS_ACCESS_KEY_ID).
    #[arg(long = "storage.bucket-access-key-id", value_name = "ID")]
    pub storage_bucket_access_key_id: Option<String>,

    /// File holding the S3 secret access key (else AWS_SECRET_ACCESS_KEY); a file, so the
    /// secret stays out of the process list.
    #[arg(long = "storage.bucket-secret-access-key-file", value_name = "FILE")]
    pub storage_bucket_secret_access_key_file: Option<PathBuf>,

    /// With --storage.bucket: most bytes of partition files kept on the local disk. Beyond it
    /// the least recently read files the bucket holds are dropped locally and read from the
    /// bucket again, by ranged reads, when a query needs them. 0: no limit.
    #[arg(long = "storage.bucket-cache-size", value_name = "SIZE", default_value = "0")]
    pub storage_bucket_cache_size: ByteSize,

    /// How long a file that no manifest lists any more (a compaction's inputs, an expired
    /// partition) stays in the bucket before it is deleted: longer than any reader keeps an
    /// older manifest.
    #[arg(long = "storage.bucket-delete-delay", value_name = "DURATION", default_value = "2h")]
    pub storage_bucket_delete_delay: PromDuration,

    /// What this process does. `all`: everything, on its own data directory (and bucket
    /// prefix, if --storage.bucket is set). `write`: the same, and requires a bucket: ingest,
    /// uploads and compaction for its prefix. `query`: a stateless query node over every
    /// writer's prefix at and one level below --storage.bucket; its data directory is only a
    /// cache, and writes to it are refused with 503.
    #[arg(long, value_enum, default_value = "all")]
    pub role: Role,

    /// The ingest log, NATS JetStream (`nats://host:port`, comma-separated for a cluster):
    /// writes are published to it, split by series into --log.partitions partitions, and
    /// acknowledged once it holds every part; with --role all or write this process also
    /// consumes the partitions of --log.consume into its database. Required by --role
    /// distributor
    #[arg(long = "log.url", value_name = "URL")]
    pub log_url: Option<String>,

    /// Names the ingest log's streams (`<NAME>-p<k>`) and subjects (`<NAME>.p<k>`)
    #[arg(long = "log.name", value_name = "NAME", default_value = "strata")]
    pub log_name: String,

    /// Partitions of the ingest log. Fixed for the life of a log: a series' partition is its
    /// labels' hash modulo this number (docs/operations.md, "Replicated ingest")
    #[arg(long = "log.partitions", value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub log_partitions: u32,

    /// Replicas of each partition's stream: a write is acknowledged once a majority of them
    /// hold it. 3 needs a JetStream cluster of at least 3 servers; 1 suits a single server
    #[arg(long = "log.replicas", value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=5))]
    pub log_replicas: u64,

    /// How long the ingest log keeps a record: longer than an ingester may take to store and
    /// upload what it consumed
    #[arg(long = "log.retention", value_name = "DURATION", default_value = "24h")]
    pub log_retention: PromDuration,

    /// The partitions of the ingest log this process consumes (with --role all or write), as
    /// a list of numbers and ranges: `0-3,8`. Default: all of them
    #[arg(long = "log.consume", value_name = "LIST")]
    pub log_consume: Option<String>,

    /// etcd endpoints (`http://host:port`, comma-separated) where writers with --log.url claim
    /// the log's partitions with leases: each takes its share, and a dead writer's partitions
    /// are taken over once its lease expires. Without it, --log.consume says what to consume
    #[arg(long = "leases.url", value_name = "URLS")]
    pub leases_url: Option<String>,

    /// How long a writer's lease lasts without renewal: the longest a dead writer's partitions
    /// wait for another
    #[arg(long = "leases.ttl", value_name = "DURATION", default_value = "10s")]
    pub leases_ttl: PromDuration,

    /// This writer's name among the lease holders (unique among live writers). Default: the
    /// host name and the process id
    #[arg(long = "leases.member", value_name = "NAME")]
    pub leases_member: Option<String>,

    /// Keep one replica of each Prometheus HA pair: of the writes whose series carry the
    /// --ha-tracker.cluster-label and --ha-tracker.replica-label labels, only the elected
    /// replica's are kept (without the replica label); another replica of the cluster takes
    /// over once the elected one has been silent for --ha-tracker.failover-timeout. The election
    /// is in etcd (--leases.url), shared by all distributors. Needs --log.url
    #[arg(long = "ha-tracker")]
    pub ha_tracker: bool,

    /// The label naming an HA pair's cluster (a Prometheus external label)
    #[arg(long = "ha-tracker.cluster-label", value_name = "NAME", default_value = "cluster")]
    pub ha_tracker_cluster_label: String,

    /// The label naming the replica within its cluster, removed from what is kept
    #[arg(long = "ha-tracker.replica-label", value_name = "NAME", default_value = "__replica__")]
    pub ha_tracker_replica_label: String,

    /// How often the elected replica's last-seen time is written to etcd while it sends
    #[arg(long = "ha-tracker.update-timeout", value_name = "DURATION", default_value = "15s")]
    pub ha_tracker_update_timeout: PromDuration,

    /// How long the elected replica may be silent before another replica of its cluster is
    /// elected (longer than --ha-tracker.update-timeout)
    #[arg(long = "ha-tracker.failover-timeout", value_name = "DURATION", default_value = "30s")]
    pub ha_tracker_failover_timeout: PromDuration,

    /// On a query node (--role query): a writer (`http://host:port`) to read the data it has not
    /// uploaded yet from, by remote read, so that queries see every acknowledged sample. Repeat
    /// for each writer. Without any, a query node sees what writers have uploaded.
    #[arg(long = "query.writer", value_name = "URL")]
    pub query_writer: Vec<String>,

    /// On a query node (--role query): how often the writers' prefixes are checked for new
    /// manifests (one HEAD request per prefix) and new prefixes looked for (a LIST every 8th
    /// time).
    #[arg(long = "storage.bucket-refresh", value_name = "DURATION", default_value = "15s")]
    pub storage_bucket_refresh: PromDuration,

    /// Enable the admin endpoints under /api/v1/admin/tsdb/ (delete series, clean tombstones,
    /// snapshot). Off, they answer 503 "admin APIs disabled", as in Prometheus.
    #[arg(long = "web.enable-admin-api")]
    pub web_enable_admin_api: bool,

    /// Let a read name several tenants in X-Scope-OrgID (`a|b`, Mimir's tenant federation):
    /// each series then carries its tenant in the label __tenant_id__. Off, such reads are
    /// refused with 400. Writes always go to one tenant.
    #[arg(long = "tenant.federation")]
    pub tenant_federation: bool,

    /// Most samples one query of a remote-read request answered with raw samples may return;
    /// more is refused with 400. 0 means no limit. Streamed (chunked) answers are not limited.
    #[arg(long = "storage.remote.read-sample-limit", value_name = "N", default_value = "50000000")]
    pub remote_read_sample_limit: usize,

    /// Most remote-read requests served at once; further ones wait. 0 means no limit.
    #[arg(long = "storage.remote.read-concurrent-limit", value_name = "N", default_value = "10")]
    pub remote_read_concurrent_limit: usize,

    /// Chunk bytes after which a frame of a streamed remote-read answer is closed (a frame can
    /// exceed it by one chunk).
    #[arg(
        long = "storage.remote.read-max-bytes-in-frame",
        value_name = "SIZE",
        default_value = "1048576",
        value_parser = positive_size
    )]
    pub remote_read_max_bytes_in_frame: ByteSize,

    // Authentication and TLS (src/auth.rs, src/tls.rs). Secrets are read from files, never
    // taken on the command line, so they stay out of `ps`, shell history and
    // /api/v1/status/flags. Each file flag may also come from the environment variable named.
    /// User name that read requests (queries, metadata, remote read, UI, /metrics) must send
    /// with HTTP basic auth. Needs --auth.read.basic-password-file.
    #[arg(long = "auth.read.basic-user", value_name = "USER", requires = "auth_read_basic_password_file")]
    pub auth_read_basic_user: Option<String>,

    /// File holding the basic-auth password for reads (surrounding whitespace is ignored, as
    /// Prometheus' `password_file` does). Needs --auth.read.basic-user.
    #[arg(
        long = "auth.read.basic-password-file",
        value_name = "FILE",
        env = "STRATA_AUTH_READ_BASIC_PASSWORD_FILE",
        requires = "auth_read_basic_user"
    )]
    pub auth_read_basic_password_file: Option<PathBuf>,

    /// File holding a bearer token that grants read access (`Authorization: Bearer <token>`).
    #[arg(
        long = "auth.read.bearer-token-file",
        value_name = "FILE",
        env = "STRATA_AUTH_READ_BEARER_TOKEN_FILE"
    )]
    pub auth_read_bearer_token_file: Option<PathBuf>,

    /// User name that write requests (remote write, Influx writes and /query, admin endpoints)
    /// must send with HTTP basic auth. Write credentials also grant read access. Needs
    /// --auth.write.basic-password-file.
    #[arg(long = "auth.write.basic-user", value_name = "USER", requires = "auth_write_basic_password_file")]
    pub auth_write_basic_user: Option<String>,

    /// File holding the basic-auth password for writes. Needs --auth.write.basic-user.
    #[arg(
        long = "auth.write.basic-password-file",
        value_name = "FILE",
        env = "STRATA_AUTH_WRITE_BASIC_PASSWORD_FILE",
        requires = "auth_write_basic_user"
    )]
    pub auth_write_basic_password_file: Option<PathBuf>,

    /// File holding a bearer token that grants write (and read) access; InfluxDB 2 clients
    /// send it as `Authorization: Token <token>`.
    #[arg(
        long = "auth.write.bearer-token-file",
        value_name = "FILE",
        env = "STRATA_AUTH_WRITE_BEARER_TOKEN_FILE"
    )]
    pub auth_write_bearer_token_file: Option<PathBuf>,

    /// PEM certificate chain to serve HTTPS with (leaf first). Needs --tls.key-file. Reloaded
    /// on SIGHUP and when the files change.
    #[arg(long = "tls.cert-file", value_name = "FILE", requires = "tls_key_file")]
    pub tls_cert_file: Option<PathBuf>,

    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of --tls.cert-file.
    #[arg(long = "tls.key-file", value_name = "FILE", requires = "tls_cert_file")]
    pub tls_key_file: Option<PathBuf>,

    /// How often the TLS certificate and key files are checked for changes; a changed pair
    /// that loads replaces the served one, a broken one is logged and the old one kept.
    #[arg(long = "tls.reload-interval", value_name = "DURATION", default_value = "10s", value_parser = positive_duration)]
    pub tls_reload_interval: PromDuration,
}

/// The `--enable-feature` names strata knows, as Prometheus spells them. `st-storage` is
/// accepted and changes nothing: strata always stores start timestamps it receives.
pub const PROMQL_FEATURES: [&str; 8] = [
    "promql-experimental-functions",
    "promql-duration-expr",
    "promql-extended-range-selectors",
    "promql-binop-fill-modifiers",
    "promql-delayed-name-removal",
    "type-and-unit-labels",
    "use-start-timestamps",
    "st-storage",
];

impl Cli {
    /// The storage engine's options: every knob set from its flag, everything else (fields
    /// storage adds later) left at `storage::Options::new`'s default.
    pub fn storage_options(&self) -> storage::Options {
        let mut opts = storage::Options::new(&self.data_dir);
        opts.retention_ms = self.retention.as_millis();
        opts.partition_ms = self.partition_duration.as_millis();
        opts.ooo_window_ms = self.ooo_window.map(|w| w.as_millis());
        opts.future_window_ms = self.future_window.as_millis();
        opts.wal_sync = self.wal_sync;
        opts.wal_segment_bytes = self.wal_segment_size.0;
        opts.wal_truncate_corrupt = self.wal_truncate_corrupt;
        opts.block_samples_max = self.block_samples_max;
        opts.block_grid_ms = self.block_grid.as_millis();
        opts.head_samples_max = self.head_samples_max;
        opts.head_flush_interval = self.head_flush_interval.as_std();
        opts.head_span_max_ms = self.head_span_max.as_millis();
        opts.maintenance_interval = self.maintenance_interval.as_std();
        opts.compact_files_min = self.compact_files_min;
        opts.series_limits = storage::cardinality::SeriesLimits {
            max_series: self.series_max,
            max_series_per_metric: self.series_per_metric_max,
            max_new_series_per_day: self.new_series_per_day_max,
        };
        opts.bucket = self.storage_bucket.as_ref().map(|url| storage::BucketOptions {
            url: url.clone(),
            endpoint: self.storage_bucket_endpoint.clone(),
            region: self.storage_bucket_region.clone(),
            access_key_id: self.storage_bucket_access_key_id.clone(),
            secret_access_key: None,
            delete_delay: self.storage_bucket_delete_delay.as_std(),
            cache_bytes_max: self.storage_bucket_cache_size.0,
            store: None,
        });
        opts.follow = (self.role == Role::Query).then(|| self.storage_bucket_refresh.as_std());
        opts
    }

    /// Refuses flag combinations that cannot work: a writer or query node without a bucket.
    pub fn check_role(&self) -> Result<(), String> {
        match (self.role, &self.log_url) {
            (Role::Distributor, None) => return Err("--role distributor needs --log.url".into()),
            (Role::Query, Some(_)) => {
                return Err("--log.url is for distributors and writers, not query nodes".into());
            }
            _ => {}
        }
        let consumes = matches!((self.role, &self.log_url), (Role::All | Role::Write, Some(_)));
        if self.log_consume.is_some() && !consumes {
            return Err("--log.consume is for --role all or write with --log.url".into());
        }
        if self.leases_url.is_some() && !consumes && !(self.ha_tracker && self.log_url.is_some()) {
            return Err("--leases.url is for --role all or write with --log.url, or with --ha-tracker".into());
        }
        if self.leases_url.is_some() && self.log_consume.is_some() {
            return Err(
                "--log.consume and --leases.url exclude each other: with leases, writers claim partitions"
                    .into(),
            );
        }
        if self.ha_tracker && (self.log_url.is_none() || self.leases_url.is_none()) {
            return Err("--ha-tracker needs --log.url and --leases.url (the election is in etcd)".into());
        }
        if self.ha_tracker
            && self.ha_tracker_failover_timeout.as_std() <= self.ha_tracker_update_timeout.as_std()
        {
            return Err(
                "--ha-tracker.failover-timeout must be longer than --ha-tracker.update-timeout".into()
            );
        }
        if self.leases_ttl.as_std() < std::time::Duration::from_secs(2) {
            return Err("--leases.ttl must be at least 2s".into());
        }
        self.log_consume_partitions()?;
        match (self.role, &self.storage_bucket) {
            (Role::Write | Role::Query, None) => {
                let name = clap::ValueEnum::to_possible_value(&self.role).map(|v| v.get_name().to_string());
                Err(format!("--role {} needs --storage.bucket", name.unwrap_or_default()))
            }
            (Role::All | Role::Write | Role::Distributor, _) if !self.query_writer.is_empty() => {
                Err("--query.writer is for query nodes (--role query)".into())
            }
            _ => Ok(()),
        }
    }

    /// The partitions `--log.consume` names (all of them by default), sorted, each once.
    pub fn log_consume_partitions(&self) -> Result<Vec<u32>, String> {
        let n = self.log_partitions;
        let Some(list) = &self.log_consume else { return Ok((0..n).collect()) };
        let bad = |why: &str| format!("--log.consume {list:?}: {why}");
        let mut out = Vec::new();
        for item in list.split(',').map(str::trim) {
            let (lo, hi) = item.split_once('-').unwrap_or((item, item));
            let (lo, hi): (u32, u32) = match (lo.trim().parse(), hi.trim().parse()) {
                (Ok(lo), Ok(hi)) if lo <= hi => (lo, hi),
                _ => return Err(bad(&format!("{item:?} is not a partition or a range lo-hi"))),
            };
            if hi >= n {
                return Err(bad(&format!("partition {hi} does not exist (--log.partitions {n})")));
            }
            out.extend(lo..=hi);
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    /// The etcd endpoints of `--leases.url`.
    fn leases_endpoints(&self) -> Vec<String> {
        let urls = self.leases_url.as_deref().unwrap_or_default();
        urls.split(',').map(|u| u.trim().to_string()).filter(|u| !u.is_empty()).collect()
    }

    /// The ingest log's settings, with `--log.url`.
    pub fn log_settings(&self) -> Option<crate::log::LogSettings> {
        let url = self.log_url.clone()?;
        Some(crate::log::LogSettings {
            jetstream: crate::log::jetstream::JetStreamConfig {
                url,
                prefix: self.log_name.clone(),
                partitions: self.log_partitions,
                replicas: usize::try_from(self.log_replicas).unwrap_or(1),
                retention: self.log_retention.as_std(),
            },
            consume: match (self.role, &self.leases_url) {
                (Role::All | Role::Write, Some(_)) => {
                    Some(crate::log::ingester::Ownership::Leased(crate::log::leases::LeaseConfig {
                        endpoints: self.leases_endpoints(),
                        ttl: self.leases_ttl.as_std(),
                        member: self.leases_member.clone().unwrap_or_else(default_member),
                    }))
                }
                (Role::All | Role::Write, None) => {
                    self.log_consume_partitions().ok().map(crate::log::ingester::Ownership::Fixed)
                }
                (Role::Query | Role::Distributor, _) => None,
            },
            future_window_ms: self.future_window.as_millis(),
            ha: self.ha_tracker.then(|| crate::log::ha::HaConfig {
                endpoints: self.leases_endpoints(),
                cluster_label: self.ha_tracker_cluster_label.clone(),
                replica_label: self.ha_tracker_replica_label.clone(),
                update_timeout: self.ha_tracker_update_timeout.as_std(),
                failover_timeout: self.ha_tracker_failover_timeout.as_std(),
            }),
        })
    }

    /// Reads the secret named by `--storage.bucket-secret-access-key-file` into `opts`.
    pub fn read_bucket_secret(&self, opts: &mut storage::Options) -> Result<(), String> {
        let (Some(path), Some(bucket)) = (&self.storage_bucket_secret_access_key_file, opts.bucket.as_mut())
        else {
            return Ok(());
        };
        let secret = std::fs::read_to_string(path)
            .map_err(|e| format!("--storage.bucket-secret-access-key-file {}: {e}", path.display()))?;
        bucket.secret_access_key = Some(secret.trim().to_string());
        Ok(())
    }

    /// What one write request may contain, for the `remote` crate's decoders. A size too large
    /// for this machine's address space saturates at `usize::MAX`, which no body reaches.
    pub fn limits(&self) -> remote::Limits {
        let bytes = |size: ByteSize| usize::try_from(size.0).unwrap_or(usize::MAX);
        remote::Limits {
            body_bytes_max: bytes(self.write_body_bytes_max),
            decoded_bytes_max: bytes(self.write_decoded_bytes_max),
            labels_per_series_max: self.labels_per_series_max,
            label_name_bytes_max: bytes(self.label_name_bytes_max),
            label_value_bytes_max: bytes(self.label_value_bytes_max),
        }
    }

    /// Everything `server::run` needs.
    pub fn server_config(&self) -> ServerConfig {
        ServerConfig {
            listen: self.listen.clone(),
            storage: self.storage_options(),
            limits: self.limits(),
            query: self.query_config(),
            status: StatusConfig { flags: BTreeMap::new(), retention: self.retention.to_string() },
            remote_read: crate::api::read::RemoteReadConfig {
                sample_limit: self.remote_read_sample_limit,
                concurrency: self.remote_read_concurrent_limit,
                frame_bytes_max: usize::try_from(self.remote_read_max_bytes_in_frame.0).unwrap_or(usize::MAX),
            },
            admin_api: self.web_enable_admin_api,
            tenant_federation: self.tenant_federation,
            write_admission: crate::ingest::admission::WriteAdmission::new(
                self.write_max_concurrency
                    .unwrap_or_else(crate::ingest::admission::WriteAdmission::default_concurrency),
                self.write_max_queue_duration.as_std(),
            ),
            read_timeout: self.web_read_timeout.as_std(),
            log: self.log_settings(),
            writers: match self.role {
                Role::Query if !self.query_writer.is_empty() => Some(crate::query_node::Writers::new(
                    self.query_writer.clone(),
                    self.query_timeout.as_std(),
                )),
                _ => None,
            },
            auth: crate::auth::AuthSettings {
                read: crate::auth::ScopeSettings {
                    basic_user: self.auth_read_basic_user.clone(),
                    basic_password_file: self.auth_read_basic_password_file.clone(),
                    bearer_token_file: self.auth_read_bearer_token_file.clone(),
                },
                write: crate::auth::ScopeSettings {
                    basic_user: self.auth_write_basic_user.clone(),
                    basic_password_file: self.auth_write_basic_password_file.clone(),
                    bearer_token_file: self.auth_write_bearer_token_file.clone(),
                },
            },
            tls: self.tls_cert_file.clone().zip(self.tls_key_file.clone()).map(|(cert_file, key_file)| {
                crate::tls::TlsSettings {
                    cert_file,
                    key_file,
                    reload_interval: self.tls_reload_interval.as_std(),
                }
            }),
        }
    }

    /// The PromQL engine's settings: `--query.*` flags and the enabled features, everything
    /// else at `EngineOptions`' defaults.
    pub fn query_config(&self) -> QueryConfig {
        let mut options = promql::EngineOptions {
            timeout: self.query_timeout.as_std(),
            max_samples: self.query_max_samples,
            max_series: self.query_max_series,
            lookback_delta_ms: self.query_lookback_delta.as_millis(),
            default_subquery_step_ms: self.query_default_subquery_step.as_millis(),
            ..promql::EngineOptions::default()
        };
        for feature in &self.enable_feature {
            match feature.trim() {
                "promql-experimental-functions" => options.experimental_functions = true,
                "promql-duration-expr" => options.duration_expressions = true,
                "promql-extended-range-selectors" => options.extended_range_selectors = true,
                "promql-binop-fill-modifiers" => options.binop_fill_modifiers = true,
                "promql-delayed-name-removal" => options.delayed_name_removal = true,
                "type-and-unit-labels" => options.type_and_unit_labels = true,
                "use-start-timestamps" => options.use_start_timestamps = true,
                _ => {}
            }
        }
        QueryConfig {
            options,
            max_concurrency: self.query_max_concurrency,
            max_parallelism: self.query_max_parallelism,
            max_response_bytes: usize::try_from(self.query_max_response_bytes.0).unwrap_or(usize::MAX),
            inline_max_points: self.query_inline_max_points,
        }
    }

    /// `--enable-feature` values strata does not know, for a warning at startup (Prometheus
    /// also only warns, so a command line shared with Prometheus still starts strata).
    pub fn unknown_features(&self) -> Vec<&str> {
        self.enable_feature
            .iter()
            .map(|f| f.trim())
            .filter(|f| !f.is_empty() && !PROMQL_FEATURES.contains(f))
            .collect()
    }

    /// Parses `args` (program name first) and also returns every flag's effective value as
    /// text, keyed by its name without dashes, for `/api/v1/status/flags` (defaults included;
    /// an absent optional flag is "").
    pub fn parse_with_flags<I, T>(args: I) -> Result<(Cli, BTreeMap<String, String>), clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let args: Vec<T> = args.into_iter().collect();
        if let Some(err) = prometheus_only_flag(&args) {
            return Err(err);
        }
        let matches = Cli::command().try_get_matches_from(args)?;
        let cli = Cli::from_arg_matches(&matches)?;
        let mut flags = BTreeMap::new();
        for arg in Cli::command().get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            if long == "help" || long == "version" {
                continue;
            }
            let value = matches
                .get_raw(arg.get_id().as_str())
                .map(|raw| raw.map(|v| v.to_string_lossy().into_owned()).collect::<Vec<_>>().join(","))
                .unwrap_or_default();
            flags.insert(long.to_owned(), value);
        }
        Ok((cli, flags))
    }
}

/// `--storage.bucket`: a URL of a scheme strata can write to.
fn bucket_url(s: &str) -> Result<String, String> {
    let ok = match s.split_once("://") {
        Some(("s3", rest)) => !rest.is_empty() && !rest.starts_with('/'),
        Some(("file", rest)) => rest.starts_with('/'),
        _ => false,
    };
    if ok { Ok(s.to_string()) } else { Err("expected s3://BUCKET/PREFIX or file:///DIR".into()) }
}

/// Prometheus flags that strata has no counterpart for, with what to do instead. Without this
/// clap answers with its nearest-spelling guess (`--storage.tsdb.retention.size` → a "similar"
/// `--retention`, which means something else).
const PROMETHEUS_ONLY_FLAGS: [(&str, &str); 6] = [
    (
        "config.file",
        "strata does not scrape and reads no configuration file: keep Prometheus (or vmagent) \
         scraping and point its remote_write at http://HOST:9201/api/v1/write; strata's settings \
         are its flags (strata --help)",
    ),
    ("storage.tsdb.retention.size", "strata has no size-based retention; --retention removes data by age"),
    ("storage.tsdb.min-block-duration", "strata's files cover --partition-duration of time each"),
    ("storage.tsdb.max-block-duration", "strata's files cover --partition-duration of time each"),
    (
        "storage.tsdb.out-of-order-time-window",
        "strata accepts out-of-order samples anywhere inside --retention by default; \
         --ooo-window limits how far behind its newest sample a series may be written",
    ),
    ("web.enable-lifecycle", "strata has no reload or quit endpoint; stop it with SIGTERM"),
];

/// A clap error naming strata's way to do what a Prometheus-only flag in `args` asks, if any.
fn prometheus_only_flag<T: Into<std::ffi::OsString> + Clone>(args: &[T]) -> Option<clap::Error> {
    for arg in args.iter().skip(1) {
        let arg: std::ffi::OsString = arg.clone().into();
        let arg = arg.to_string_lossy();
        if arg == "--" {
            break;
        }
        let Some(name) = arg.strip_prefix("--") else { continue };
        let name = name.split_once('=').map_or(name, |(n, _)| n);
        if let Some((_, hint)) = PROMETHEUS_ONLY_FLAGS.iter().find(|(flag, _)| *flag == name) {
            let msg = format!("unexpected argument '--{name}' (a Prometheus flag): {hint}\n");
            return Some(Cli::command().error(clap::error::ErrorKind::UnknownArgument, msg));
        }
    }
    None
}

fn positive_duration(s: &str) -> Result<PromDuration, String> {
    let d: PromDuration = s.parse().map_err(|e| format!("{e}"))?;
    if d.is_zero() {
        return Err("must be greater than 0".into());
    }
    Ok(d)
}

fn wal_sync(s: &str) -> Result<storage::WalSync, String> {
    if s == "batch" {
        return Ok(storage::WalSync::PerBatch);
    }
    positive_duration(s)
        .map(|d| storage::WalSync::Interval(d.as_std()))
        .map_err(|e| format!("expected \"batch\" or an interval such as 100ms ({e})"))
}

fn positive_size(s: &str) -> Result<ByteSize, String> {
    let size: ByteSize = s.parse().map_err(|e| format!("{e}"))?;
    if size.0 == 0 {
        return Err("must be greater than 0".into());
    }
    Ok(size)
}

fn positive_count(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err("must be a whole number greater than 0".into()),
    }
}

fn compact_files_min(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        // One file "compacted into one" would be rewritten forever.
        Ok(n) if n >= 2 => Ok(n),
        _ => Err("must be a whole number of at least 2".into()),
    }
}

/// A `--listen` value: `host:port` as given, `:port` as `0.0.0.0:port`; a bare port is refused
/// with the two spellings that mean what was probably meant.
fn listen_addr(s: &str) -> Result<String, String> {
    let is_port = |p: &str| !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit());
    if let Some(port) = s.strip_prefix(':').filter(|p| is_port(p)) {
        return Ok(format!("0.0.0.0:{port}"));
    }
    if is_port(s) {
        return Err(format!(
            "give host:port: 127.0.0.1:{s} for this machine only, or :{s} for every interface"
        ));
    }
    Ok(s.to_owned())
}

/// The log levels a filter may name, as `--log-level` documents them.
const LOG_LEVELS: &str = "error, warn (or warning), info, debug, trace, off";

/// Checks a log filter and returns it as tracing reads it (`warning` becomes `warn`). Tracing
/// itself takes any bare word as a target name, so `warning`, `verbose` or a typo would start a
/// server that logs nothing at all, fatal errors included: here a bare word must be a level
/// and a target is written `target=level`.
pub fn log_filter(s: &str) -> Result<String, String> {
    let level = |l: &str| -> Option<&'static str> {
        Some(match l.trim().to_ascii_lowercase().as_str() {
            "error" => "error",
            "warn" | "warning" => "warn",
            "info" => "info",
            "debug" => "debug",
            "trace" => "trace",
            "off" => "off",
            _ => return None,
        })
    };
    let target_ok = |t: &str| {
        !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '-' | '.'))
    };
    let mut directives = Vec::new();
    for d in s.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let normalized = match d.rsplit_once('=') {
            None => level(d).map(str::to_owned),
            Some((target, l)) if target_ok(target.trim()) => {
                level(l).map(|l| format!("{}={l}", target.trim()))
            }
            Some(_) => None,
        };
        match normalized {
            Some(n) => directives.push(n),
            None => {
                return Err(format!(
                    "{d:?} is neither a log level ({LOG_LEVELS}) nor target=level (e.g. info,storage=debug)"
                ));
            }
        }
    }
    if directives.is_empty() {
        return Err(format!("empty log filter: give a level ({LOG_LEVELS})"));
    }
    let filter = directives.join(",");
    tracing_subscriber::EnvFilter::try_new(&filter).map(|_| filter).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;

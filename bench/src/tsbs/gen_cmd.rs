//! `strata-bench tsbs-gen`: writes the dataset to a file or stdout, for inspection and for
//! loading with other tools (line protocol), or as remote-write requests.

use std::io::Write as _;
use std::path::PathBuf;

use super::{Dataset, ValueModel, encode};

/// The flags that choose a dataset; shared by `tsbs-gen` and `compare`.
#[derive(clap::Args, Debug, Clone)]
pub struct DatasetArgs {
    /// Number of hosts (TSBS's --scale); each writes one row of ten fields per interval.
    #[arg(long, default_value_t = 100)]
    pub hosts: usize,
    /// Time between two rows of a host (TSBS's --log-interval), e.g. 10s.
    #[arg(long, default_value = "10s", value_parser = parse_duration_ms)]
    pub interval: i64,
    /// Length of the dataset, e.g. 3h or 1d (24h at 10 s and 100 hosts = 8.64 M points).
    #[arg(long, default_value = "1d", value_parser = parse_duration_ms)]
    pub duration: i64,
    /// Time of the first row: RFC 3339 (2016-01-01T00:00:00Z), Unix seconds, or "auto" (the
    /// last midnight UTC minus the duration, so the data ends in the past and is within every
    /// system's default retention).
    #[arg(long, default_value = "auto")]
    pub start: String,
    /// Seed of every random choice: the same seed gives the same data and queries everywhere.
    #[arg(long, default_value_t = 123)]
    pub seed: u64,
    /// Value model: tsbs (integer random walks, TSBS) or noisy (full-precision floats).
    #[arg(long, value_enum, default_value_t = ValueModel::Tsbs)]
    pub values: ValueModel,
}

impl DatasetArgs {
    /// The dataset these flags describe; `now_ms` resolves `--start auto`.
    pub fn dataset(&self, now_ms: i64) -> Result<Dataset, String> {
        if self.interval <= 0 || self.duration < self.interval {
            return Err("--interval must be positive and --duration at least one interval".into());
        }
        let start_ms = match self.start.as_str() {
            "auto" => {
                const DAY_MS: i64 = 86_400_000;
                now_ms.div_euclid(DAY_MS) * DAY_MS - self.duration
            }
            s => parse_time_ms(s)?,
        };
        Ok(Dataset {
            hosts: self.hosts,
            start_ms,
            interval_ms: self.interval,
            epochs: (self.duration / self.interval) as usize,
            model: self.values,
            seed: self.seed,
        })
    }
}

/// Parses `10s`, `5m`, `3h`, `1d`, `250ms` (one number and unit) into milliseconds.
pub fn parse_duration_ms(s: &str) -> Result<i64, String> {
    let split =
        s.find(|c: char| !c.is_ascii_digit()).ok_or_else(|| format!("{s:?}: missing unit (s, m, h, d)"))?;
    let (num, unit) = s.split_at(split);
    let n: i64 = num.parse().map_err(|_| format!("{s:?}: not a duration"))?;
    let unit_ms = match unit {
        "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("{s:?}: unit must be ms, s, m, h or d")),
    };
    n.checked_mul(unit_ms).ok_or_else(|| format!("{s:?}: too long"))
}

/// Parses RFC 3339 or Unix seconds into milliseconds since the epoch.
pub fn parse_time_ms(s: &str) -> Result<i64, String> {
    if let Ok(secs) = s.parse::<i64>() {
        return Ok(secs * 1000);
    }
    chrono::DateTime::parse_from_rfc3339(s)
        .map(|t| t.timestamp_millis())
        .map_err(|e| format!("{s:?}: not RFC 3339 or Unix seconds: {e}"))
}

/// Formats milliseconds since the epoch as RFC 3339 (UTC, seconds).
pub fn format_time_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|| format!("{ms} ms"))
}

/// Output formats of `tsbs-gen`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Influx line protocol, one row per line, as TSBS writes it.
    Influx,
    /// Remote-write 1.0 requests (snappy protobuf), each preceded by its length as a 4-byte
    /// little-endian integer.
    Prw,
}

/// Flags of `strata-bench tsbs-gen`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    dataset: DatasetArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Influx)]
    format: Format,
    /// Rows per remote-write request (prw format).
    #[arg(long, default_value_t = 10_000)]
    batch_size: usize,
    /// Output file (default: stdout).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Writes the dataset.
pub fn run(args: Args) -> Result<(), String> {
    let now_ms = chrono::Utc::now().timestamp_millis();
    let dataset = args.dataset.dataset(now_ms)?;
    let mut out: Box<dyn std::io::Write> = match &args.out {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let io = |e: std::io::Error| format!("writing: {e}");
    match args.format {
        Format::Influx => encode::line_protocol(&dataset, |b| out.write_all(b)).map_err(io)?,
        Format::Prw => {
            for req in encode::prw_requests(&dataset, args.batch_size, 1, 1).into_iter().flatten() {
                let len = u32::try_from(req.body.len()).map_err(|_| "request over 4 GiB".to_owned())?;
                out.write_all(&len.to_le_bytes()).map_err(io)?;
                out.write_all(&req.body).map_err(io)?;
            }
        }
    }
    out.flush().map_err(io)?;
    eprintln!(
        "tsbs-gen: {} hosts, {} rows, {} points from {} every {} ms, seed {}, values {}",
        dataset.hosts,
        dataset.rows(),
        dataset.points(),
        format_time_ms(dataset.start_ms),
        dataset.interval_ms,
        dataset.seed,
        dataset.model.name()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_times_parse() {
        assert_eq!(parse_duration_ms("10s"), Ok(10_000));
        assert_eq!(parse_duration_ms("3h"), Ok(10_800_000));
        assert_eq!(parse_duration_ms("1d"), Ok(86_400_000));
        assert!(parse_duration_ms("10").is_err() && parse_duration_ms("1y").is_err());
        assert_eq!(parse_time_ms("2016-01-01T00:00:00Z"), Ok(1_451_606_400_000));
        assert_eq!(parse_time_ms("1451606400"), Ok(1_451_606_400_000));
        assert_eq!(format_time_ms(1_451_606_400_000), "2016-01-01T00:00:00Z");
    }

    #[test]
    fn auto_start_ends_at_the_last_midnight() {
        let a = DatasetArgs {
            hosts: 2,
            interval: 10_000,
            duration: 3 * 3_600_000,
            start: "auto".into(),
            seed: 1,
            values: ValueModel::Tsbs,
        };
        let now = parse_time_ms("2026-11-30T23:17:03Z").unwrap();
        let ds = a.dataset(now).unwrap();
        assert_eq!(ds.end_ms(), parse_time_ms("2026-11-30T00:00:00Z").unwrap());
        assert_eq!(ds.epochs, 1080);
    }
}

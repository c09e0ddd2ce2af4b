//! Rows of the `cpu` measurement: one per host per interval, ten fields each.
//!
//! TSBS's model (`pkg/data/usecases/devops/cpu.go`, `common/distribution.go`): every field is a
//! `ClampedRandomWalkDistribution` over [0, 100] whose steps are N(0, 1) and whose state starts
//! uniform in [0, 100); the first row of a host carries the starting state, every later row the
//! state after one more step; a row writes `int64(state)` (truncation). Each host draws from its
//! own random stream ([`super::hosts::stream`]), so a host's values do not depend on the other
//! hosts or on the order rows are produced in.

use super::hosts::{STREAM_VALUES, stream};
use super::{Dataset, ValueModel};
use crate::datagen::Rng;

/// One row: a host's ten field values at one time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    /// Index of the host (its `hostname` is `host_<host>`).
    pub host: usize,
    /// Timestamp, milliseconds since the Unix epoch.
    pub t_ms: i64,
    /// Field values in [`FIELDS`] order, exactly as they are written (integral for TSBS's model).
    pub values: [f64; 10],
}

/// The value state of one host.
#[derive(Debug, Clone)]
struct HostValues {
    rng: Rng,
    walk: [f64; 10],
    /// Rows produced so far; the first row carries the starting state.
    produced: usize,
}

impl HostValues {
    fn new(seed: u64, host: usize) -> Self {
        let mut rng = stream(seed, host as u64, STREAM_VALUES);
        let walk = std::array::from_fn(|_| rng.f64() * 100.0);
        HostValues { rng, walk, produced: 0 }
    }

    /// The next row's values under `model`.
    fn next(&mut self, model: ValueModel) -> [f64; 10] {
        let first = self.produced == 0;
        self.produced += 1;
        match model {
            ValueModel::Tsbs => {
                if !first {
                    for state in &mut self.walk {
                        *state = (*state + self.rng.normal()).clamp(0.0, 100.0);
                    }
                }
                self.walk.map(f64::trunc)
            }
            ValueModel::Noisy => std::array::from_fn(|_| self.rng.f64() * 100.0),
        }
    }
}

/// Produces the rows of a [`Dataset`] in TSBS's order: every host at the first time, then every
/// host at the next time, and so on.
#[derive(Debug, Clone)]
pub struct Generator {
    dataset: Dataset,
    hosts: Vec<HostValues>,
    epoch: usize,
    host: usize,
}

impl Generator {
    /// A generator at the first row of `dataset`.
    pub fn new(dataset: Dataset) -> Self {
        let hosts = (0..dataset.hosts).map(|h| HostValues::new(dataset.seed, h)).collect();
        Generator { dataset, hosts, epoch: 0, host: 0 }
    }
}

impl Iterator for Generator {
    type Item = Row;

    fn next(&mut self) -> Option<Row> {
        if self.host == self.dataset.hosts {
            self.host = 0;
            self.epoch += 1;
        }
        if self.epoch >= self.dataset.epochs || self.dataset.hosts == 0 {
            return None;
        }
        let host = self.host;
        self.host += 1;
        let values = self.hosts[host].next(self.dataset.model);
        Some(Row { host, t_ms: self.dataset.start_ms + self.epoch as i64 * self.dataset.interval_ms, values })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// All rows of one host in time order, straight from its own stream.
    fn host_rows(dataset: Dataset, host: usize) -> impl Iterator<Item = Row> {
        let mut values = HostValues::new(dataset.seed, host);
        (0..dataset.epochs).map(move |epoch| Row {
            host,
            t_ms: dataset.start_ms + epoch as i64 * dataset.interval_ms,
            values: values.next(dataset.model),
        })
    }

    fn dataset(model: ValueModel) -> Dataset {
        Dataset { hosts: 7, start_ms: 1_451_606_400_000, interval_ms: 10_000, epochs: 500, model, seed: 42 }
    }

    #[test]
    fn tsbs_model_is_an_integral_walk_clamped_to_0_100_with_small_steps() {
        let rows: Vec<Row> = Generator::new(dataset(ValueModel::Tsbs)).collect();
        assert_eq!(rows.len(), 7 * 500);
        for r in &rows {
            for v in r.values {
                assert!((0.0..=100.0).contains(&v) && v.fract() == 0.0, "{v}");
            }
        }
        // Consecutive rows of one host move by a truncated N(0, 1) step: rarely more than 5.
        let host0: Vec<&Row> = rows.iter().filter(|r| r.host == 0).collect();
        let big =
            host0.windows(2).flat_map(|w| (0..10).map(move |f| (w[1].values[f] - w[0].values[f]).abs()));
        assert!(big.clone().all(|d| d <= 7.0));
        assert!(big.filter(|d| *d > 0.0).count() > 1000, "the walk moves");
    }

    #[test]
    fn rows_come_in_tsbs_order_with_regular_timestamps() {
        let ds = dataset(ValueModel::Tsbs);
        let rows: Vec<Row> = Generator::new(ds).take(15).collect();
        let order: Vec<(usize, i64)> = rows.iter().map(|r| (r.host, r.t_ms)).collect();
        assert_eq!(order[0], (0, ds.start_ms));
        assert_eq!(order[6], (6, ds.start_ms));
        assert_eq!(order[7], (0, ds.start_ms + 10_000));
        assert_eq!(order[14], (0, ds.start_ms + 20_000));
    }

    #[test]
    fn host_by_host_gives_the_same_values_as_tsbs_order() {
        for model in [ValueModel::Tsbs, ValueModel::Noisy] {
            let ds = dataset(model);
            let all: Vec<Row> = Generator::new(ds).collect();
            for host in [0, 3, 6] {
                let mine: Vec<Row> = all.iter().filter(|r| r.host == host).copied().collect();
                assert_eq!(mine, host_rows(ds, host).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn same_seed_same_rows_other_seed_other_rows() {
        let ds = dataset(ValueModel::Noisy);
        let a: Vec<Row> = Generator::new(ds).collect();
        assert_eq!(a, Generator::new(ds).collect::<Vec<_>>());
        let b: Vec<Row> = Generator::new(Dataset { seed: 43, ..ds }).collect();
        assert_ne!(a, b);
        assert!(a.iter().any(|r| r.values.iter().any(|v| v.fract() != 0.0)), "full-precision floats");
    }
}

//! The cardinality query types: what a dashboard asks of a store holding many series with few
//! samples each (`--hosts 100000 --duration 5m`: 1 M series), apart from TSBS's types. They are
//! selected by name with `--query-types`, or all at once with [`CARDINALITY`], and never run by
//! default, so the TSBS runs keep their set of types.
//!
//! * count-all, sum-by-region: instant aggregations over one metric of every host
//!   (`count(cpu_usage_user)`, `sum by (region) (cpu_usage_user)`) at the end of the data: the
//!   cost of selecting and reading one sample each of many series.
//! * label-values: `/api/v1/label/hostname/values`, one value per host (Grafana's variable query).
//! * label-names: `/api/v1/labels` (Grafana's label browser).
//! * series-one-host: `/api/v1/series?match[]={hostname="host_N"}`, a random host per query (its
//!   ten series): an index look-up among many series.
//! * series-regex: `/api/v1/series?match[]=cpu_usage_user{hostname=~"host_D.*"}`, a random
//!   leading digit D from 1 to 9 per query: 11,111 series at 100,000 hosts, a regex over the
//!   values of a label with a moderate answer.
//!
//! The metadata requests cover the whole data (`start` at its first row, `end` one interval past
//! its last), so systems whose time filter is coarser than a sample (VictoriaMetrics' per-day
//! index, Prometheus' blocks and head) select the same series as an exact one.

use super::{Api, Query, host_matcher};
use crate::datagen::Rng;
use crate::tsbs::Dataset;

/// The cardinality query types, by name.
pub const CARDINALITY_TYPES: [&str; 6] =
    ["count-all", "sum-by-region", "label-values", "label-names", "series-one-host", "series-regex"];

/// The `--query-types` name that stands for every one of [`CARDINALITY_TYPES`].
pub const CARDINALITY: &str = "cardinality";

/// One query of the cardinality type `kind` (one of [`CARDINALITY_TYPES`]), `None` for another
/// name.
pub(super) fn one(rng: &mut Rng, ds: &Dataset, kind: &'static str) -> Option<Query> {
    // Instant queries half an interval after the last row, as lastpoint: every series' last
    // sample is within the lookback.
    let instant = Api::Instant { time_ms: ds.last_ms() + ds.interval_ms / 2 };
    let (start_ms, end_ms) = (ds.start_ms, ds.end_ms());
    let (promql, api) = match kind {
        "count-all" => ("count(cpu_usage_user)".to_owned(), instant),
        "sum-by-region" => ("sum by (region) (cpu_usage_user)".to_owned(), instant),
        "label-values" => (String::new(), Api::LabelValues { label: "hostname", start_ms, end_ms }),
        "label-names" => (String::new(), Api::LabelNames { start_ms, end_ms }),
        "series-one-host" => {
            (format!("{{{}}}", host_matcher(rng, ds.hosts, 1)), Api::Series { start_ms, end_ms })
        }
        "series-regex" => {
            // host_D.* for D in 1..=9 has the same size for each D once there are 10^k hosts;
            // with fewer than 10 hosts, only the digits that exist.
            let digit = if ds.hosts < 2 { 0 } else { rng.range(1, 9.min(ds.hosts as i64 - 1)) };
            (format!("cpu_usage_user{{hostname=~\"host_{digit}.*\"}}"), Api::Series { start_ms, end_ms })
        }
        _ => return None,
    };
    Some(Query { kind, promql, api })
}

#[cfg(test)]
mod tests {
    use super::super::{TYPES, generate, resolve_types};
    use super::*;
    use crate::tsbs::ValueModel;

    fn ds() -> Dataset {
        Dataset {
            hosts: 100_000,
            start_ms: 1_700_000_000_000,
            interval_ms: 10_000,
            epochs: 30,
            model: ValueModel::Tsbs,
            seed: 3,
        }
    }

    #[test]
    fn every_cardinality_type_generates_its_request() {
        let qs = generate(&ds(), &CARDINALITY_TYPES, 3).unwrap();
        assert_eq!(qs.len(), 18);
        let first = |k: &str| qs.iter().find(|q| q.kind == k).unwrap().clone();
        let count = first("count-all");
        assert_eq!(count.api, Api::Instant { time_ms: ds().last_ms() + 5_000 });
        assert_eq!(
            count.path(),
            format!(
                "/api/v1/query?query=count%28cpu_usage_user%29&time={}.000",
                (ds().last_ms() + 5_000) / 1000
            )
        );
        assert_eq!(first("sum-by-region").promql, "sum by (region) (cpu_usage_user)");
        let (start, end) = (1_700_000_000, 1_700_000_300);
        assert_eq!(
            first("label-values").path(),
            format!("/api/v1/label/hostname/values?start={start}.000&end={end}.000")
        );
        assert_eq!(first("label-names").path(), format!("/api/v1/labels?start={start}.000&end={end}.000"));
        let one_host = first("series-one-host");
        assert!(
            one_host.promql.starts_with("{hostname=\"host_") && one_host.promql.ends_with("\"}"),
            "{one_host:?}"
        );
        assert!(
            one_host.path().starts_with(&format!(
                "/api/v1/series?start={start}.000&end={end}.000&match%5B%5D=%7Bhostname%3D%22host_"
            )),
            "{}",
            one_host.path()
        );
        let hosts: std::collections::BTreeSet<String> =
            qs.iter().filter(|q| q.kind == "series-one-host").map(|q| q.promql.clone()).collect();
        assert_eq!(hosts.len(), 3, "a random host per query");
        for q in qs.iter().filter(|q| q.kind == "series-regex") {
            let digit = q.promql.strip_prefix("cpu_usage_user{hostname=~\"host_").unwrap();
            assert!(
                digit.ends_with(".*\"}") && ('1'..='9').contains(&digit.chars().next().unwrap()),
                "{q:?}"
            );
        }
        let metadata: std::collections::BTreeSet<&str> =
            qs.iter().filter(|q| q.api.is_metadata()).map(|q| q.kind).collect();
        assert_eq!(
            metadata.into_iter().collect::<Vec<_>>(),
            ["label-names", "label-values", "series-one-host", "series-regex"]
        );
    }

    #[test]
    fn the_shorthand_selects_every_cardinality_type_and_the_default_stays_tsbs() {
        assert_eq!(resolve_types(&[]).unwrap(), TYPES.to_vec());
        assert_eq!(resolve_types(&[CARDINALITY.to_owned()]).unwrap(), CARDINALITY_TYPES.to_vec());
        let mixed = resolve_types(&["lastpoint".into(), "count-all".into(), CARDINALITY.into()]).unwrap();
        assert_eq!(mixed[..2], ["lastpoint", "count-all"]);
        assert_eq!(mixed.len(), 1 + CARDINALITY_TYPES.len(), "no type twice: {mixed:?}");
        assert!(resolve_types(&["count-everything".into()]).is_err());
    }

    #[test]
    fn few_hosts_only_ask_for_digits_that_exist() {
        let tiny = Dataset { hosts: 3, ..ds() };
        for q in generate(&tiny, &["series-regex"], 20).unwrap() {
            assert!(q.promql.contains("host_1.*") || q.promql.contains("host_2.*"), "{q:?}");
        }
    }
}

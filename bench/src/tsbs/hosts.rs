//! The tags of each simulated host, from TSBS's value sets (`pkg/data/usecases/devops/host.go`).

use crate::datagen::Rng;

/// Tag keys in the order TSBS writes them.
pub const TAG_KEYS: [&str; 10] = [
    "hostname",
    "region",
    "datacenter",
    "rack",
    "os",
    "arch",
    "team",
    "service",
    "service_version",
    "service_environment",
];

/// TSBS's regions and the datacenters of each.
const REGIONS: [(&str, &[&str]); 9] = [
    ("us-east-1", &["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1e"]),
    ("us-west-1", &["us-west-1a", "us-west-1b"]),
    ("us-west-2", &["us-west-2a", "us-west-2b", "us-west-2c"]),
    ("eu-west-1", &["eu-west-1a", "eu-west-1b", "eu-west-1c"]),
    ("eu-central-1", &["eu-central-1a", "eu-central-1b"]),
    ("ap-southeast-1", &["ap-southeast-1a", "ap-southeast-1b"]),
    ("ap-southeast-2", &["ap-southeast-2a", "ap-southeast-2b"]),
    ("ap-northeast-1", &["ap-northeast-1a", "ap-northeast-1c"]),
    ("sa-east-1", &["sa-east-1a", "sa-east-1b", "sa-east-1c"]),
];
const TEAMS: [&str; 4] = ["SF", "NYC", "LON", "CHI"];
const OSES: [&str; 3] = ["Ubuntu16.10", "Ubuntu16.04LTS", "Ubuntu15.10"];
const ARCHES: [&str; 2] = ["x64", "x86"];
const ENVIRONMENTS: [&str; 3] = ["production", "staging", "test"];
/// Racks per datacenter, services and service versions: tag values are `0..N` as decimal.
const RACKS: i64 = 100;
const SERVICES: i64 = 20;
const SERVICE_VERSIONS: i64 = 2;

/// Purposes of the independent random streams derived from the seed.
pub(crate) const STREAM_TAGS: u64 = 1;
pub(crate) const STREAM_VALUES: u64 = 2;
pub(crate) const STREAM_QUERIES: u64 = 3;
pub(crate) const STREAM_ARRIVAL: u64 = 4;

/// An independent random stream for `(seed, index, purpose)`: each host draws its tags and its
/// values from its own streams, so a host's data does not depend on how many hosts there are or
/// in which order rows are produced.
pub(crate) fn stream(seed: u64, index: u64, purpose: u64) -> Rng {
    let mut mix = Rng::new(seed ^ purpose.wrapping_mul(0xD1B5_4A32_D192_ED03));
    let base = mix.next_u64();
    let mut rng = Rng::new(base ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    rng.next_u64();
    rng
}

/// One simulated host: its tag values in [`TAG_KEYS`] order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// Tag values, `tags[i]` belongs to `TAG_KEYS[i]`.
    pub tags: [String; 10],
}

impl Host {
    /// Host number `id` of a dataset with `seed`: `hostname` is `host_<id>`, the other tags are
    /// drawn as TSBS draws them (datacenter within the region).
    pub fn new(seed: u64, id: usize) -> Host {
        let mut rng = stream(seed, id as u64, STREAM_TAGS);
        let pick = |rng: &mut Rng, n: usize| rng.range(0, n as i64 - 1) as usize;
        let (region, datacenters) = REGIONS[pick(&mut rng, REGIONS.len())];
        let datacenter = datacenters[pick(&mut rng, datacenters.len())];
        let rack = rng.range(0, RACKS - 1).to_string();
        let arch = ARCHES[pick(&mut rng, ARCHES.len())];
        let os = OSES[pick(&mut rng, OSES.len())];
        let service = rng.range(0, SERVICES - 1).to_string();
        let service_version = rng.range(0, SERVICE_VERSIONS - 1).to_string();
        let environment = ENVIRONMENTS[pick(&mut rng, ENVIRONMENTS.len())];
        let team = TEAMS[pick(&mut rng, TEAMS.len())];
        Host {
            tags: [
                format!("host_{id}"),
                region.to_owned(),
                datacenter.to_owned(),
                rack,
                os.to_owned(),
                arch.to_owned(),
                team.to_owned(),
                service,
                service_version,
                environment.to_owned(),
            ],
        }
    }

    /// `(key, value)` pairs in TSBS's order.
    pub fn pairs(&self) -> impl Iterator<Item = (&'static str, &str)> {
        TAG_KEYS.iter().copied().zip(self.tags.iter().map(String::as_str))
    }
}

/// A TSBS-shaped label set for metric `name` on host `h`, with the ten tags derived from `h`
/// by fixed arithmetic instead of the seeded generator: for benchmarks that need millions of
/// distinct, realistic series cheaply and the same on every run.
pub fn synthetic_host_labels(name: &str, h: usize) -> storage::Labels {
    storage::Labels::from_pairs(&[
        ("__name__", name),
        ("hostname", &format!("host_{h}")),
        ("region", ["us-east-1", "eu-west-1", "ap-south-1"][h % 3]),
        ("datacenter", &format!("dc{}", h % 7)),
        ("rack", &format!("{}", h % 50)),
        ("os", "Ubuntu16.04LTS"),
        ("arch", if h.is_multiple_of(2) { "x64" } else { "x86" }),
        ("team", TEAMS[h % 4]),
        ("service", &format!("{}", h % 20)),
        ("service_version", &format!("{}", h % 2)),
        ("service_environment", ENVIRONMENTS[h % 3]),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_come_from_tsbs_value_sets() {
        for id in 0..200 {
            let h = Host::new(7, id);
            assert_eq!(h.tags[0], format!("host_{id}"));
            let (_, dcs) = REGIONS.iter().find(|(r, _)| *r == h.tags[1]).unwrap();
            assert!(dcs.contains(&h.tags[2].as_str()), "{:?}", h.tags);
            assert!((0..RACKS).contains(&h.tags[3].parse::<i64>().unwrap()));
            assert!(OSES.contains(&h.tags[4].as_str()));
            assert!(ARCHES.contains(&h.tags[5].as_str()));
            assert!(TEAMS.contains(&h.tags[6].as_str()));
            assert!((0..SERVICES).contains(&h.tags[7].parse::<i64>().unwrap()));
            assert!((0..SERVICE_VERSIONS).contains(&h.tags[8].parse::<i64>().unwrap()));
            assert!(ENVIRONMENTS.contains(&h.tags[9].as_str()));
        }
    }

    #[test]
    fn a_host_depends_only_on_seed_and_id() {
        assert_eq!(Host::new(1, 5), Host::new(1, 5));
        let differs = (0..50).any(|id| Host::new(1, id).tags[1..] != Host::new(2, id).tags[1..]);
        assert!(differs, "another seed draws other tags");
    }
}

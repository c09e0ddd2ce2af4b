#!/usr/bin/env bash
# The TSBS devops comparison in one command: builds strata and the harness (release), then runs
# `strata-bench compare`, which finds VictoriaMetrics, Prometheus and InfluxDB if installed
# (Debian: apt-get install victoria-metrics prometheus influxdb; this script installs nothing),
# loads the same data into each, one at a time, and writes report.md and SVG plots.
#
#   bench/run.sh                                   # 100 hosts x 1 day (8.64 M points)
#   bench/run.sh --hosts 10 --duration 3h          # a quick check
#   bench/run.sh --duration 3d                     # the full TSBS 3-day dataset (25.9 M points)
#
# Every flag goes to `compare` (see `bench/run.sh --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p strata --bin strata -p bench --bin strata-bench
exec target/release/strata-bench compare "$@"

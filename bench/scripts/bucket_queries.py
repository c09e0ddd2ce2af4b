#!/usr/bin/env python3
"""TSBS query types on a query node reading a bucket, beside the same data on local disk.

Usage: bucket_queries.py BINARY DATA_DIR --start SECONDS --span SECONDS --hosts N
                         [-n N] [--settle SECONDS] [S3 flags as query_node_start.py]

DATA_DIR is a strata data directory holding TSBS cpu-only data from `strata-bench compare
--keep-data` (`<out>/data/strata-remote-write/data`); it is copied, never changed. A writer
(`--role write`) started on the copy uploads its files to a fresh prefix of the bucket (a
`file://` directory unless `--s3-url` is given) and stops. Then, for each query type:

- local: strata (`--role all`) on a copy of the directory, the OS page cache dropped before
  the first query (cold), then N more queries (warm);
- bucket: a query node (`--role query`) started on an empty directory for the type, its first
  query cold (files opened and blocks fetched), then N more (warm, from its local cache).

With --settle, both wait that long after the cold query before the warm ones: a query node
enters the rest of the series chunks a cold query fetched in the background, and the queries
meanwhile scan those chunks (the default, 0, times them back to back).

Each query asks for `stats=all`: the report gives, per type and system, the cold query's time
and its ranged reads and bytes from the bucket, and the warm queries' p50 and p99. Dropping
the page cache needs root (`/proc/sys/vm/drop_caches`); without it "cold" local is warm.
"""
import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

from bucket_flags import add_s3_args, bucket_args

FIELDS = ["usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait", "usage_irq",
          "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice"]


def types(start, span, hosts):
    """Query generators of TSBS's shapes (bench/src/tsbs/queries.rs), each seeded alike."""
    end = start + span

    def cpu_max_all_8(rng):
        hs = "|".join(f"host_{rng.randrange(hosts)}" for _ in range(8))
        q = " or ".join(f'label_replace(max(max_over_time(cpu_{f}{{hostname=~"{hs}"}}[1h])), "metric", "{f}", "", "")'
                        for f in FIELDS)
        return "query_range", {"query": q, "start": end - 7200, "end": end, "step": 3600}

    def single_groupby_5_8_1(rng):
        hs = "|".join(f"host_{rng.randrange(hosts)}" for _ in range(8))
        q = " or ".join(f'label_replace(max(max_over_time(cpu_{f}{{hostname=~"{hs}"}}[1m])), "metric", "{f}", "", "")'
                        for f in FIELDS[:5])
        s = start + rng.randrange(0, max(1, span - 3600))
        return "query_range", {"query": q, "start": s, "end": s + 3600, "step": 60}

    def double_groupby_1(rng):
        q = "avg by (hostname) (avg_over_time(cpu_usage_user[1h]))"
        return "query_range", {"query": q, "start": end - 7200 + 3600, "end": end, "step": 3600}

    def high_cpu_all(rng):
        s = end - 3600
        return "query_range", {"query": "cpu_usage_user > 90", "start": s, "end": end, "step": 60}

    def lastpoint(rng):
        return "query", {"query": '{__name__=~"cpu_.*"}', "time": end - 5}

    return [("cpu-max-all-8", cpu_max_all_8), ("single-groupby-5-8-1", single_groupby_5_8_1),
            ("double-groupby-1", double_groupby_1), ("high-cpu-all", high_cpu_all), ("lastpoint", lastpoint)]


def start_strata(binary, data_dir, args, log_path):
    log = open(log_path, "w")
    p = subprocess.Popen([binary, "--data-dir", data_dir, "--listen", "127.0.0.1:0", *args],
                         stdout=log, stderr=subprocess.STDOUT)
    until = time.time() + 600
    port = None
    while port is None and time.time() < until:
        with open(log_path) as f:
            for line in f:
                if "strata listening on " in line:
                    port = line.split("strata listening on ")[1].split()[0].split(":")[-1]
        time.sleep(0.01)
    while time.time() < until:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=5) as r:
                if r.status == 200:
                    return p, log, port
        except (urllib.error.HTTPError, OSError):
            pass
        time.sleep(0.01)
    sys.exit(f"strata did not get ready: {log_path}")


def stop(p, log):
    p.terminate()
    if p.wait(timeout=600) != 0:
        sys.exit("strata exited with an error")
    log.close()


def ask(port, kind, params):
    params = dict(params, stats="all")
    url = f"http://127.0.0.1:{port}/api/v1/{kind}?" + urllib.parse.urlencode(params)
    t = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as r:
        body = r.read()
    ms = (time.perf_counter() - t) * 1000
    answer = json.loads(body)
    samples = answer["data"]["stats"]["samples"]
    del answer["data"]["stats"]
    return ms, samples.get("bucketRangeReads", 0), samples.get("bucketBytesRead", 0), answer["data"]


def drop_page_cache():
    try:
        subprocess.run(["sync"], check=True)
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("data_dir")
    ap.add_argument("--start", type=int, required=True)
    ap.add_argument("--span", type=int, required=True)
    ap.add_argument("--hosts", type=int, required=True)
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--settle", type=float, default=0.0)
    add_s3_args(ap)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="bucketq-")
    flags = ["--retention", "100y"]
    try:
        root = f"{a.s3_url.rstrip('/')}/run{os.getpid()}" if a.s3_url else f"file://{work}/bucket"
        wdir = os.path.join(work, "writer")
        shutil.copytree(a.data_dir, wdir)
        t = time.time()
        w, wlog, _ = start_strata(a.binary, wdir, bucket_args(root + "/w", a) + flags + ["--role", "write"],
                                  os.path.join(work, "writer.log"))
        stop(w, wlog)
        print(f"upload: {time.time() - t:.1f} s")
        local_dir = os.path.join(work, "local")
        shutil.copytree(a.data_dir, local_dir)
        dropped = drop_page_cache()
        print(f"page cache dropped before each local cold query: {dropped}")
        print("| type | system | cold ms | cold bucket reads | cold bucket MB | warm p50 ms | warm p99 ms |")
        print("|---|---|---|---|---|---|---|")
        for name, gen in types(a.start, a.span, a.hosts):
            answers = {}
            for system in ["local", "bucket"]:
                rng = random.Random(name)
                if system == "local":
                    drop_page_cache()
                    p, log, port = start_strata(a.binary, local_dir, flags, os.path.join(work, f"{name}-local.log"))
                else:
                    p, log, port = start_strata(a.binary, os.path.join(work, f"q-{name}"),
                                                bucket_args(root, a) + flags + ["--role", "query"],
                                                os.path.join(work, f"{name}-query.log"))
                cold, reads, nbytes, data = ask(port, *gen(rng))
                time.sleep(a.settle)
                warm = []
                for _ in range(a.n):
                    ms, _, _, _ = ask(port, *gen(rng))
                    warm.append(ms)
                answers[system] = data
                stop(p, log)
                print(f"| {name} | {system} | {cold:.1f} | {reads} | {nbytes / 1e6:.2f} | "
                      f"{statistics.median(warm):.2f} | {pct(warm, 99):.2f} |", flush=True)
            if answers["local"] != answers["bucket"]:
                sys.exit(f"{name}: the answers differ")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

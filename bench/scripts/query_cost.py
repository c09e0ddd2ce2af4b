#!/usr/bin/env python3
"""Where the time of TSBS's all-host query types goes, on strata alone: server CPU, wall time and
the phases strata reports in `stats` (selection, storage reads, evaluation, JSON encoding).

Usage: query_cost.py BINARY DATA_DIR --start SECONDS --span SECONDS [-n N] [--gzip]

DATA_DIR is a strata data directory holding TSBS cpu-only data from `strata-bench compare
--keep-data` (`<out>/data/strata-remote-write/data`); it is copied, so it is left as it was.
--start and --span are the data's first timestamp and length in seconds (the report's "Data:"
line). The copy is served by BINARY on a free loopback port; each type's query is sent once
untimed, then N times (default 10) over one keep-alive connection, uncompressed unless --gzip.
Prints per type: answer series and points, wall p50, server CPU per query (user + system of the
process, from /proc), and the p50 of strata's phases (select and read are thread time summed
over the query's threads; eval is innerEvalTime less both, so it can be negative when the
pool read in parallel).

The queries keep the shapes of `bench/src/tsbs/queries.rs` over the whole dataset:
high-cpu-all `cpu_usage_user > 90` at the 10 s interval, lastpoint `{__name__=~"cpu_.*"}` at
the end, groupby-orderby-limit `max(max_over_time(cpu_usage_user[1m]))` over 5 minutes in the
middle, double-groupby-all the ten hourly `avg by (hostname) (avg_over_time(...[1h]))` joined
with `or`.
"""
import argparse
import gzip
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse

FIELDS = ["usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait", "usage_irq",
          "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice"]


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def unpacked(response):
    """The response's body, gunzipped if it came gzipped (the timed wall includes that)."""
    body = response.read()
    return gzip.decompress(body) if response.getheader("Content-Encoding") == "gzip" else body


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def queries(start, span):
    end = start + span
    per_metric = " or ".join(
        f'label_replace(avg by (hostname) (avg_over_time(cpu_{m}[1h])), "metric", "{m}", "", "")'
        for m in FIELDS)
    mid = start + span // 2
    yield "high-cpu-all", "/api/v1/query_range", {
        "query": "cpu_usage_user > 90", "start": start + 5, "end": end - 5, "step": 10}
    yield "lastpoint", "/api/v1/query", {"query": '{__name__=~"cpu_.*"}', "time": end - 5}
    yield "groupby-orderby-limit", "/api/v1/query_range", {
        "query": "max(max_over_time(cpu_usage_user[1m]))", "start": mid - 235, "end": mid + 5, "step": 60}
    yield "double-groupby-all", "/api/v1/query_range", {
        "query": per_metric, "start": start + 5, "end": end - 5, "step": 3600}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary")
    ap.add_argument("data_dir")
    ap.add_argument("--start", type=int, required=True)
    ap.add_argument("--span", type=int, required=True)
    ap.add_argument("-n", type=int, default=10)
    ap.add_argument("--gzip", action="store_true")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="query-cost-")
    data = os.path.join(tmp, "data")
    shutil.copytree(args.data_dir, data)
    port = free_port()
    server = subprocess.Popen(
        [args.binary, "--listen", f"127.0.0.1:{port}", "--data-dir", data],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "log"), "w"))
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        for _ in range(3000):
            try:
                conn.request("GET", "/-/ready")
                ready = conn.getresponse()
                ready.read()
                if ready.status == 200:
                    break
            except OSError:
                conn.close()
            time.sleep(0.1)
        else:
            sys.exit("the server did not become ready in 5 minutes")
        headers = {"Accept-Encoding": "gzip"} if args.gzip else {}
        print("| type | series | points | wall p50 ms | server CPU ms | select | read | eval | encode |")
        print("|---|---|---|---|---|---|---|---|---|")
        for name, path, params in queries(args.start, args.span):
            url = path + "?" + urllib.parse.urlencode({**params, "stats": "all"})
            walls, phases = [], []
            conn.request("GET", url, headers=headers)
            first = conn.getresponse()
            body = unpacked(first)
            if first.status != 200:
                sys.exit(f"{name}: HTTP {first.status}: {body[:300]!r}")
            cpu0 = cpu_seconds(server.pid)
            for _ in range(args.n):
                began = time.perf_counter()
                conn.request("GET", url, headers=headers)
                response = conn.getresponse()
                raw = unpacked(response)
                walls.append(time.perf_counter() - began)
                t = json.loads(raw)["data"]["stats"]["timings"]
                if "strataSelectTime" in t:  # builds before 2026-12-06 do not report phases
                    phases.append((t["strataSelectTime"], t["strataReadTime"],
                                   t["innerEvalTime"] - t["strataSelectTime"] - t["strataReadTime"],
                                   t["strataEncodeTime"]))
            cpu = (cpu_seconds(server.pid) - cpu0) / args.n
            result = json.loads(body)["data"]["result"]
            points = sum(len(s.get("values", [])) or 1 for s in result)
            ms = lambda xs: f"{statistics.median(xs) * 1000:.1f}"
            cols = [ms([p[i] for p in phases]) for i in range(4)] if phases else ["-"] * 4
            print(f"| {name} | {len(result):,} | {points:,} | {ms(walls)} | {cpu * 1000:.0f} | " + " | ".join(cols) + " |",
                  flush=True)
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()

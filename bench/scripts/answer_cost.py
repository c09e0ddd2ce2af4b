#!/usr/bin/env python3
"""Wall time and server CPU of query answers of several sizes, uncompressed and gzipped.

Usage: answer_cost.py NAME:PORT:PID [NAME:PORT:PID ...]

Each server must hold the 1-day TSBS data of `strata-bench compare --keep-data` (100 hosts from
2026-12-01T00:00:00Z, the default `--start auto` on 2026-12-02) and answer the Prometheus API on
127.0.0.1:PORT; PID is its process, whose user+system CPU is read from /proc. Every shape is sent
over one keep-alive connection, once untimed, then timed, first without and then with
`Accept-Encoding: gzip` (what Go's HTTP client sends: Grafana, TSBS's query runner). Prints the
answer size, the wall p50 and the server CPU per query. Pass --start SECONDS for other data.
"""
import http.client
import os
import sys
import time
import urllib.parse


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def shapes(start):
    one = 'max(max_over_time(cpu_usage_user{hostname="host_5"}[1m]))'
    yield "single-groupby-1-1-12 shape", one, 12 * 3600, 60, 200
    for hosts, reps in [(1, 100), (20, 20), (100, 6)]:
        names = "|".join(f"host_{i}" for i in range(hosts))
        yield f"raw, {hosts} hosts x 6 h", f'cpu_usage_user{{hostname=~"{names}"}}', 6 * 3600, 10, reps


def main(argv):
    start = 1796083200 + 5
    if "--start" in argv:
        i = argv.index("--start")
        start = int(argv[i + 1]) + 5
        del argv[i : i + 2]
    for spec in argv:
        name, port, pid = spec.split(":")
        conn = http.client.HTTPConnection("127.0.0.1", int(port))
        for label, query, span, step, reps in shapes(start):
            path = (
                "/api/v1/query_range?query="
                + urllib.parse.quote(query)
                + f"&start={start}&end={start + span}&step={step}"
            )
            cells = []
            for headers in ({}, {"Accept-Encoding": "gzip"}):
                conn.request("GET", path, headers=headers)
                answer = conn.getresponse()
                body = answer.read()
                if answer.status != 200:
                    sys.exit(f"{name}: {answer.status}: {body[:300]!r}")
                walls = []
                cpu_before = cpu_seconds(pid)
                for _ in range(reps):
                    began = time.perf_counter()
                    conn.request("GET", path, headers=headers)
                    body = conn.getresponse().read()
                    walls.append(time.perf_counter() - began)
                cpu = (cpu_seconds(pid) - cpu_before) / reps
                walls.sort()
                cells.append(f"{len(body):>9} B  p50 {walls[len(walls) // 2] * 1e3:7.2f} ms  cpu {cpu * 1e3:7.2f} ms")
            print(f"{name:16} {label:28} plain {cells[0]} | gzip {cells[1]}")


if __name__ == "__main__":
    main(sys.argv[1:])

#!/usr/bin/env python3
"""Latency of a query with a Grafana multi-value variable, for one or more strata builds.

Usage: grafana_variables.py STRATA_BINARY [STRATA_BINARY ...]

Grafana's Prometheus data source sends a multi-value variable as one regex group of the values
with their metacharacters escaped: `hostname=~"(host-0\\.example\\.com|host-7\\.example\\.com)"`.
Each binary is started in turn on a fresh temporary data directory, given 20,000 series
(`cpu,hostname=host-N.example.com usage_user=...`, 10 samples each) over line protocol, and asked
`sum(cpu_usage_user{hostname=~"(...)"})` with 10, 100 and 1,000 selected hosts, 60 times each
over a new connection per request; prints the p50 and the answer, which must agree between builds.
"""
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

T0 = 1700000000


def measure(binary, port):
    with tempfile.TemporaryDirectory() as data:
        return measure_in(binary, port, data)


def measure_in(binary, port, data):
    server = subprocess.Popen(
        [binary, "--data-dir", data, "--listen", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/ready")
                break
            except OSError:
                time.sleep(0.1)
        lines = [
            f"cpu,hostname=host-{h}.example.com usage_user={h + i} {(T0 + i * 10) * 10**9}"
            for h in range(20000)
            for i in range(10)
        ]
        urllib.request.urlopen(urllib.request.Request(base + "/write?db=grafana", data="\n".join(lines).encode())).read()
        results = []
        for n in [10, 100, 1000]:
            # Escaped once for the regex (`\.`), once more for the PromQL string (`\\.`).
            values = "|".join(f"host-{h * 7}\\\\.example\\\\.com" for h in range(n))
            query = 'sum(cpu_usage_user{hostname=~"(%s)"})' % values
            form = urllib.parse.urlencode({"query": query, "time": str(T0 + 90)}).encode()
            times = []
            for _ in range(60):
                start = time.perf_counter()
                answer = urllib.request.urlopen(urllib.request.Request(base + "/api/v1/query", data=form)).read()
                times.append(time.perf_counter() - start)
            times.sort()
            results.append((n, times[len(times) // 2] * 1000, answer.decode()))
        return results
    finally:
        server.kill()
        server.wait()


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for i, binary in enumerate(sys.argv[1:]):
        for n, p50, answer in measure(binary, 19500 + i):
            print(f"{binary}\t{n} values\tp50 {p50:.2f} ms\t{answer[-50:]}")


if __name__ == "__main__":
    main()

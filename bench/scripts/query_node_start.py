#!/usr/bin/env python3
"""How long a query node (`--role query`) takes to be ready, and to answer its first queries,
with N partition files in the bucket.

Usage: query_node_start.py BINARY [--files 10 10000] [--rounds 3] [S3 flags...]

For each N: a writer (`--role write --partition-duration 1h`) on `<bucket>/w` is sent one
sample an hour for N hours (one series, `m_v`), so that its shutdown flush writes one file to
each of N hourly partitions and uploads them; then a query node on `<bucket>` is started ROUNDS times on an empty data
directory, and the script reports the time from spawn to `/-/ready` answering 200, and to the
answer of an instant query over the newest hour and of a range query over every file, and how
long that range query takes again (warm). The
bucket is a fresh `file://` directory unless `--s3-url s3://BUCKET/PREFIX` is given with
`--s3-endpoint`, `--s3-region`, `--s3-key-id` and `--s3-secret-file` (e.g. the RADOS Gateway of
`tests/ceph-rgw/run-rgw.sh`).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

from bucket_flags import add_s3_args, bucket_args

HOUR = 3600


def start(binary, data_dir, args, log_path):
    log = open(log_path, "w")
    p = subprocess.Popen([binary, "--data-dir", data_dir, "--listen", "127.0.0.1:0", *args],
                         stdout=log, stderr=subprocess.STDOUT)
    return p, log


def port_of(log_path, deadline=60):
    until = time.time() + deadline
    while time.time() < until:
        with open(log_path) as f:
            for line in f:
                if "strata listening on " in line:
                    return line.split("strata listening on ")[1].split()[0].strip().split(":")[-1]
        time.sleep(0.002)
    sys.exit(f"no listening line in {log_path}")


def get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError:
        return None, b""


def stop(p, log):
    p.terminate()
    code = p.wait(timeout=600)
    log.close()
    if code != 0:
        sys.exit(f"strata exited with {code}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--files", type=int, nargs="+", default=[10, 10000])
    ap.add_argument("--rounds", type=int, default=3)
    add_s3_args(ap)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="qnstart-")
    end = (int(time.time()) // HOUR - 2) * HOUR
    try:
        for n in a.files:
            root = (f"{a.s3_url.rstrip('/')}/files{n}-{os.getpid()}" if a.s3_url
                    else f"file://{work}/bucket{n}")
            wdir = os.path.join(work, f"w{n}")
            w, wlog = start(a.binary, wdir, bucket_args(root + "/w", a) + ["--role", "write", "--retention", "100y", "--partition-duration", "1h"],
                            os.path.join(work, f"w{n}.log"))
            port = port_of(os.path.join(work, f"w{n}.log"))
            while get(port, "/-/ready")[0] != 200:
                time.sleep(0.01)
            lines = "".join(f"m,host=a v={i} {(end - (n - 1 - i) * HOUR) * 10**9}\n" for i in range(n))
            req = urllib.request.Request(f"http://127.0.0.1:{port}/write?db=x", data=lines.encode(), method="POST")
            with urllib.request.urlopen(req, timeout=600) as r:
                assert r.status == 204, r.status
            t0 = time.time()
            stop(w, wlog)
            upload_s = time.time() - t0
            for r in range(a.rounds):
                qdir = os.path.join(work, f"q{n}-{r}")
                log_path = os.path.join(work, f"q{n}-{r}.log")
                t0 = time.time()
                q, qlog = start(a.binary, qdir, bucket_args(root, a) + ["--role", "query"], log_path)
                port = port_of(log_path)
                while get(port, "/-/ready")[0] != 200:
                    time.sleep(0.002)
                ready = time.time() - t0
                status, body = get(port, f"/api/v1/query?query=m_v&time={end}")
                first = time.time() - t0
                assert status == 200 and b'"host":"a"' in body, body[:300]
                span = urllib.parse.urlencode({"query": "count_over_time(m_v[1h])", "start": end - (n - 1) * HOUR,
                                               "end": end, "step": HOUR})
                status, body = get(port, f"/api/v1/query_range?{span}")
                points = len(json.loads(body)["data"]["result"][0]["values"])
                whole = time.time() - t0
                assert status == 200 and points == n, (status, points)
                t1 = time.time()
                status, body = get(port, f"/api/v1/query_range?{span}")
                warm = time.time() - t1
                assert status == 200
                stop(q, qlog)
                print(f"files={n} round={r} upload_s={upload_s:.1f} ready_s={ready:.3f} "
                      f"first_query_s={first:.3f} all_files_query_s={whole:.3f} "
                      f"same_query_warm_s={warm:.4f}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

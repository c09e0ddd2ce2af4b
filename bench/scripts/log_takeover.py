#!/usr/bin/env python3
"""How long a dead writer's partitions of the ingest log wait for another writer.

Starts a JetStream server, etcd and two strata writers sharing the log's partitions by leases
(`--role all --log.url ... --leases.url ...`), then, round after round, SIGKILLs the writer
holding partitions that the other does not, times from the kill until the survivor has logged
claiming every one of them, and restarts the dead one (which takes its share back). Prints each
takeover and their p50 and p99. Usage:

    bench/scripts/log_takeover.py target/release/strata [--rounds 20] [--ttl 10s] [--partitions 8]

Needs `nats-server` and `etcd` on PATH.
"""

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait(what, ready, timeout=60):
    deadline = time.time() + timeout
    while not ready():
        if time.time() > deadline:
            sys.exit(f"gave up waiting for {what}")
        time.sleep(0.05)


def http_ok(url):
    try:
        return urllib.request.urlopen(url, timeout=2).status == 200
    except OSError:
        return False


def claimed(log_path, since):
    """Partitions the log at `log_path` says were claimed after byte offset `since`."""
    with open(log_path) as f:
        f.seek(since)
        return {int(m) for m in re.findall(r"claimed partition partition=(\d+)", f.read())}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("strata")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--ttl", default="10s")
    ap.add_argument("--partitions", type=int, default=8)
    args = ap.parse_args()
    for tool in ("nats-server", "etcd"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is not on PATH")
    work = tempfile.mkdtemp(prefix="log-takeover-")
    procs = []

    def spawn(argv, log):
        p = subprocess.Popen(argv, stdout=open(log, "a"), stderr=subprocess.STDOUT)
        procs.append(p)
        return p

    try:
        nats_port, etcd_port, peer_port = free_port(), free_port(), free_port()
        spawn(["nats-server", "-js", "-sd", f"{work}/js", "-a", "127.0.0.1", "-p", str(nats_port)], f"{work}/nats.log")
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        spawn(["etcd", "--data-dir", f"{work}/etcd", "--listen-client-urls", etcd_url, "--advertise-client-urls",
               etcd_url, "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
               "--initial-cluster", f"default={peer_url}"], f"{work}/etcd.log")
        wait("etcd", lambda: http_ok(f"{etcd_url}/health"))
        ports = {"a": free_port(), "b": free_port()}

        def start(name):
            argv = [args.strata, "--listen", f"127.0.0.1:{ports[name]}", "--data-dir", f"{work}/{name}",
                    "--log.url", f"nats://127.0.0.1:{nats_port}", "--log.replicas", "1",
                    "--log.partitions", str(args.partitions), "--leases.url", etcd_url,
                    "--leases.ttl", args.ttl, "--leases.member", name]
            p = spawn(argv, f"{work}/{name}.log")
            wait(f"writer {name}", lambda: http_ok(f"http://127.0.0.1:{ports[name]}/-/ready"))
            return p

        def held(name):
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{ports[name]}/metrics", timeout=2).read().decode()
            except OSError:
                return set()
            return {int(p) for p, v in re.findall(r'strata_log_partition_held\{partition="(\d+)"\} (\d+)', text) if v == "1"}

        writers = {"a": start("a"), "b": start("b")}
        share = (args.partitions + 1) // 2
        wait("both writers to hold their share", lambda: len(held("a")) >= args.partitions // 2
             and len(held("b")) >= args.partitions // 2 and len(held("a") | held("b")) == args.partitions)
        times = []
        for r in range(args.rounds):
            victim = "a" if r % 2 == 0 else "b"
            survivor = "b" if victim == "a" else "a"
            lost = held(victim)
            since = os.path.getsize(f"{work}/{survivor}.log")
            writers[victim].send_signal(signal.SIGKILL)
            killed = time.time()
            writers[victim].wait()
            wait("the takeover", lambda: lost <= claimed(f"{work}/{survivor}.log", since), timeout=120)
            took = time.time() - killed
            times.append(took)
            print(f"round {r + 1}: {sorted(lost)} of {victim} taken over by {survivor} in {took:.2f} s", flush=True)
            writers[victim] = start(victim)
            wait("the shares to even out", lambda: len(held(victim)) >= args.partitions - share
                 and len(held(victim) | held(survivor)) == args.partitions, timeout=120)
        times.sort()
        p99 = times[min(len(times) - 1, int(round(0.99 * (len(times) - 1))))]
        print(f"{len(times)} takeovers with --leases.ttl {args.ttl}: p50 {statistics.median(times):.2f} s, "
              f"p99 {p99:.2f} s, max {times[-1]:.2f} s")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

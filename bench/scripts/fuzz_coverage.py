#!/usr/bin/env python3
"""Which lines a fuzz corpus reaches, and what new inputs add, by crate and module.

libFuzzer's edge count covers every crate linked into a target, so a count that keeps rising
says nothing about where: for the targets that compile regexes, most late growth is inside
regex-syntax, regex-automata and aho-corasick. This builds the target with coverage
instrumentation (`cargo fuzz coverage`, no sanitizer, release), replays a corpus, and prints
lines covered per module of strata's own crates and per dependency; with `--add`, replays the
corpus plus the new inputs too and prints what they add. A corpus is a local, grown one
(`<fuzz dir>/corpus/<target>`, not in git) or the named inputs (`<fuzz dir>/regressions/<target>`);
see docs/fuzzing.md.

    python3 bench/scripts/fuzz_coverage.py promql/fuzz promql_eval promql/fuzz/corpus/promql_eval \\
        --add /path/to/new/inputs

Needs the nightly toolchain, cargo-fuzz and the nightly `llvm-tools` component
(`rustup component add llvm-tools --toolchain nightly`). Run from the repository root.
"""

import argparse
import collections
import functools
import pathlib
import re
import shutil
import subprocess
import sys

ROOT = pathlib.Path.cwd()


@functools.cache
def llvm_cov() -> pathlib.Path:
    sysroot = subprocess.run(["rustc", "+nightly", "--print", "sysroot"], check=True,
                             capture_output=True, text=True).stdout.strip()
    host = re.search(r"host: (\S+)", subprocess.run(["rustc", "+nightly", "-vV"], check=True,
                                                    capture_output=True, text=True).stdout).group(1)
    tool = pathlib.Path(sysroot) / "lib" / "rustlib" / host / "bin" / "llvm-cov"
    if not tool.exists():
        sys.exit(f"{tool} is missing: rustup component add llvm-tools --toolchain nightly")
    return tool


def replay(fuzz_dir: str, target: str, corpora: list[str], out: pathlib.Path) -> dict[str, tuple[int, int]]:
    """Replays the corpora under coverage; returns {file: (lines, lines covered)}."""
    cmd = ["cargo", "+nightly", "fuzz", "coverage", "-O", "-s", "none", "--fuzz-dir", fuzz_dir, target,
           *corpora]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    profdata = ROOT / fuzz_dir / "coverage" / target / "coverage.profdata"
    shutil.copy(profdata, out)
    # cargo-fuzz builds under the target directory of the directory it runs in (here the root),
    # or of the fuzz directory when run there: take the newest build.
    builds = [b for d in (ROOT / "target", ROOT / fuzz_dir / "target")
              for b in d.glob(f"*/coverage/*/release/{target}")]
    if not builds:
        sys.exit(f"no coverage build of {target} found")
    binary = max(builds, key=lambda b: b.stat().st_mtime)
    report = subprocess.run([str(llvm_cov()), "report", str(binary), f"-instr-profile={out}"],
                            check=True, capture_output=True, text=True).stdout
    files = {}
    for line in report.splitlines():
        f = line.split()
        # Filename, regions, missed, cover, functions, missed, executed, lines, missed lines, ...
        if len(f) >= 10 and f[1].isdigit() and f[0] != "TOTAL":
            files[f[0]] = (int(f[7]), int(f[7]) - int(f[8]))
    return files


def group(path: str) -> str:
    """`promql/src/eval`, `storage/src/wal.rs`, or `dep:regex-syntax`."""
    m = re.search(r"index\.crates\.io-[^/]+/([^/]+?)-\d[^/]*/", path)
    if m:
        return "dep:" + m.group(1)
    if "/rustc/" in path or path.startswith("rustc/"):
        return "std"
    parts = path.split("/")
    for i, p in enumerate(parts):
        if p in ("src", "fuzz_targets") and i > 0:
            # The server crate's `src/` is at the repository root.
            first = i if parts[i - 1] == ROOT.name else i - 1
            return "/".join(parts[first:i + 2])
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fuzz_dir", help="e.g. promql/fuzz, remote/fuzz, tests/fuzz")
    ap.add_argument("target")
    ap.add_argument("corpus", nargs="+", help="corpus directories (the baseline)")
    ap.add_argument("--add", nargs="*", default=[], help="new inputs: their addition is reported")
    ap.add_argument("--out", default="/tmp", help="where the profdata files are kept")
    args = ap.parse_args()

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    before = replay(args.fuzz_dir, args.target, args.corpus, out / f"{args.target}-before.profdata")
    after = before
    if args.add:
        after = replay(args.fuzz_dir, args.target, args.corpus + args.add,
                       out / f"{args.target}-after.profdata")

    groups = collections.defaultdict(lambda: [0, 0, 0])
    for path, (lines, covered) in after.items():
        g = groups[group(path)]
        g[0] += lines
        g[1] += covered
        g[2] += covered - before.get(path, (0, 0))[1]
    totals = {"ours": [0, 0, 0], "deps": [0, 0, 0]}
    print(f"{'module':<48} {'lines':>7} {'covered':>8} {'%':>6} {'added':>6}")
    for name, (lines, covered, added) in sorted(groups.items()):
        kind = "deps" if name.startswith("dep:") or name == "std" else "ours"
        for k, v in enumerate((lines, covered, added)):
            totals[kind][k] += v
        # Modules linked in but never reached (most of storage, for the PromQL targets) are
        # left out of the listing, not of the totals.
        if (kind == "ours" and covered) or added:
            print(f"{name:<48} {lines:>7} {covered:>8} {100 * covered / max(lines, 1):>5.1f}% {added:>+6}")
    for kind, (lines, covered, added) in totals.items():
        label = "strata's crates (all linked lines)" if kind == "ours" else "dependencies and std"
        print(f"{label:<48} {lines:>7} {covered:>8} {100 * covered / max(lines, 1):>5.1f}% {added:>+6}")


if __name__ == "__main__":
    main()

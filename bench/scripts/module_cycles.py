#!/usr/bin/env python3
"""Import circles between the files of one crate.

Builds the graph "file A names an item of file B" from the crate's `use` declarations and from
paths written in code (`crate::a::b`, `super::x::f(..)`, `child::f(..)` in a parent module),
resolving re-exports (`pub(crate) use series::FPoint` in `eval/mod.rs` makes `super::FPoint`
an edge to `eval/series.rs`), and prints its strongly connected components of more than one
file: the import circles.

Method calls and trait impls are invisible to it (`impl Evaluator` in `range_fn.rs` is an edge
to the file defining `Evaluator`; `mod.rs` calling `self.range_call(..)` is none), so a circle
it prints is real and a circle it misses may exist. Inline `#[cfg(test)]` modules are left out
unless `--tests` is given.

    python3 bench/scripts/module_cycles.py promql/src [--tests] [--edges]

A circle of files that split one type (`impl Evaluator` over several files) is fine; a circle
through a helper that lives with its first caller is what this is for.
"""

import argparse
import os
import re
from collections import defaultdict

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip(src):
    """Source text with comments, string and char literals blanked (lengths and newlines kept)."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif re.match(r'b?r#*"', src[i:i + 40]) and (i == 0 or not re.match(r"\w", src[i - 1])):
            m = re.match(r'b?r(#*)"', src[i:])
            end = src.find('"' + m.group(1), i + m.end())
            j = n if end < 0 else end + 1 + len(m.group(1))
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == '"' or (c == "b" and src.startswith('b"', i) and (i == 0 or not re.match(r"\w", src[i - 1]))):
            j = i + (2 if c == "b" else 1)
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}'), else a lifetime or label.
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", src[i:])
            if m:
                out.append(" " * m.end())
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


class Module:
    def __init__(self, path, file, is_test):
        self.path = path  # ('crate', 'eval', 'series')
        self.file = file  # file that holds its text
        self.is_test = is_test
        self.children = {}  # name -> Module path
        self.aliases = {}  # name -> absolute path (tuple), from `use`
        self.globs = []  # absolute module paths from `use x::*`
        self.refs = []  # (absolute path tuple) named in code


def module_path_of(root, file):
    rel = os.path.relpath(file, root)[:-3].split(os.sep)
    if rel[-1] in ("lib", "main", "mod"):
        rel = rel[:-1]
    return ("crate",) + tuple(rel)


def parse_use_tree(text):
    """`a::{b, c::d as e, f::*}` -> [(['a','b'], 'b'), (['a','c','d'], 'e'), (['a','f','*'], None)]."""
    text = re.sub(r"\s+as\s+", " as ", text.strip())
    text = re.sub(r"\s*([{},:])\s*", r"\1", text)
    out = []

    def walk(prefix, s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        if cur:
            parts.append(cur)
        for p in parts:
            if "{" in p:
                head, rest = p.split("{", 1)
                rest = rest[: rest.rfind("}")]
                head = [x for x in head.split("::") if x]
                walk(prefix + head, rest)
            else:
                alias = None
                if " as " in p:
                    p, alias = p.split(" as ")
                segs = [x for x in p.split("::") if x]
                if segs == ["self"]:
                    segs = []
                elif segs and segs[-1] == "self":
                    segs = segs[:-1]
                if not (prefix + segs):
                    continue
                full = prefix + segs
                out.append((full, None if full[-1] == "*" else (alias or full[-1])))

    walk([], text)
    return out


def absolute(mod_path, segs, extern):
    """Absolute path for `segs` as written inside module `mod_path`, or None if outside the crate."""
    if not segs:
        return None
    if segs[0] == "crate":
        return tuple(segs)
    if segs[0] in ("self", "super"):
        base = list(mod_path)
        i = 0
        while i < len(segs) and segs[i] in ("self", "super"):
            if segs[i] == "super":
                base.pop()
            i += 1
        return tuple(base) + tuple(segs[i:])
    if segs[0] in extern:
        return None
    return tuple(mod_path) + tuple(segs)  # a child module or a local name: resolved later


def collect(root):
    modules = {}
    files = []
    for dirpath, _, names in os.walk(root):
        files += [os.path.join(dirpath, n) for n in names if n.endswith(".rs")]
    for f in sorted(files):
        src = strip(open(f, encoding="utf-8").read())
        base = module_path_of(root, f)
        modules.setdefault(base, Module(base, f, False)).file = f
        # Inline modules by brace depth.
        stack = [(base, -1, False)]  # (module path, brace depth at which it closes, is_test)
        depth = 0
        pending_test = False
        pos = 0
        token = re.compile(
            r"#\[cfg\(test\)\]|\buse\s+([^;]*);|\b(?:pub(?:\([^)]*\))?\s+)?mod\s+(" + IDENT + r")\s*([;{])"
            r"|((?:::)?(?:" + IDENT + r"::)+" + IDENT + r")|[{}]"
        )
        for m in token.finditer(src):
            cur, _, cur_test = stack[-1]
            tok = m.group(0)
            if tok == "#[cfg(test)]":
                pending_test = True
                continue
            if tok == "{":
                depth += 1
                continue
            if tok == "}":
                depth -= 1
                if depth == stack[-1][1]:
                    stack.pop()
                continue
            if m.group(2):  # mod declaration
                name, kind = m.group(2), m.group(3)
                child = cur + (name,)
                is_test = cur_test or pending_test
                pending_test = False
                mod = modules.setdefault(child, Module(child, f, is_test))
                mod.is_test = mod.is_test or is_test
                modules.setdefault(cur, Module(cur, f, cur_test)).children[name] = child
                if kind == "{":
                    mod.file = f
                    stack.append((child, depth, is_test))
                    depth += 1
                continue
            pending_test = False
            mod = modules.setdefault(cur, Module(cur, f, cur_test))
            if m.group(1) is not None:  # use declaration
                for segs, alias in parse_use_tree(m.group(1)):
                    segs = [s for s in segs if s]
                    if segs and segs[0] == "":
                        continue
                    mod.refs.append(("use", segs, alias))
                continue
            if m.group(4):  # a path in code
                segs = m.group(4).split("::")
                if segs[0] == "":
                    continue  # ::std::..
                mod.refs.append(("path", segs, None))
    # A file is a child of its parent module even where its `mod` line is written by a macro
    # (storage's `testing_pub_mod!(fault, powercut)`), which the scan above does not expand.
    for f in files:
        base = module_path_of(root, f)
        if base:
            parent = modules.setdefault(base[:-1], Module(base[:-1], f, False))
            parent.children.setdefault(base[-1], base)
    return modules


def resolve(modules, path, seen=None):
    """The module that defines the item named by absolute `path`."""
    seen = seen or set()
    if path in seen:
        return None
    seen = seen | {path}
    cur = ("crate",)
    for i, seg in enumerate(path[1:], start=1):
        mod = modules.get(cur)
        if mod is None:
            return cur
        if seg == "*":
            return cur
        if seg in mod.children:
            cur = mod.children[seg]
            continue
        if seg in mod.aliases:
            target = mod.aliases[seg]
            if target is None:
                return None
            rest = path[i + 1:]
            if not rest:
                # The alias names an item: where it is defined (or a module).
                if target in modules:
                    return target
                return resolve(modules, target, seen)
            return resolve(modules, target + rest, seen)
        return cur  # defined here (or a glob import, or a method/variant of an item here)
    return cur


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src", help="the crate's source directory, e.g. promql/src")
    ap.add_argument("--tests", action="store_true", help="count edges from #[cfg(test)] modules too")
    ap.add_argument("--edges", action="store_true", help="print each edge of every circle with the names behind it")
    args = ap.parse_args()
    root = args.src.rstrip("/")
    modules = collect(root)
    extern = {"std", "core", "alloc"}

    # First pass: record aliases (absolute or None for external).
    for mod in modules.values():
        for kind, segs, alias in mod.refs:
            if kind != "use" or alias is None:
                continue
            first = segs[0]
            local_child = first in mod.children
            if first in ("crate", "self", "super") or local_child:
                mod.aliases[alias] = absolute(mod.path, segs, extern)
            else:
                mod.aliases[alias] = None  # external crate item

    def file_of(path):
        m = modules.get(path)
        return os.path.relpath(m.file, root) if m else None

    edges = defaultdict(set)  # (from file, to file) -> names
    for mod in modules.values():
        if mod.is_test and not args.tests:
            continue
        for kind, segs, alias in mod.refs:
            first = segs[0]
            if first in ("crate", "self", "super"):
                target = absolute(mod.path, segs, extern)
            elif first in mod.children:
                target = mod.path + tuple(segs)
            elif kind == "path" and first in mod.aliases and mod.aliases[first] is not None:
                target = mod.aliases[first] + tuple(segs[1:])
            else:
                continue
            if target is None:
                continue
            owner = resolve(modules, target)
            if owner is None:
                continue
            a, b = os.path.relpath(mod.file, root), file_of(owner)
            if b and a != b:
                edges[(a, b)].add("::".join(segs))

    graph = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    nodes = sorted({x for e in edges for x in e})

    # Tarjan's strongly connected components, iteratively.
    index, low, on, stack, sccs, counter = {}, {}, set(), [], [], [0]
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    sccs.append(sorted(comp))

    sccs.sort(key=lambda c: (-len(c), c))
    print(f"{root}: {len(nodes)} files with edges, {len(edges)} edges, {len(sccs)} circle(s)")
    for comp in sccs:
        print(f"\n{len(comp)} files: {' '.join(comp)}")
        if args.edges:
            members = set(comp)
            for (a, b), names in sorted(edges.items()):
                if a in members and b in members:
                    print(f"  {a} -> {b}: {', '.join(sorted(names))}")


if __name__ == "__main__":
    main()

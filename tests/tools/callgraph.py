#!/usr/bin/env python3
"""The file-level call graph of the objects of a build, from `nm`: file A calls file B when A
uses a symbol that B defines. Prints the edges, the files called from nowhere, and every circle
(a group of files that reach each other), and with --check exits 1 when there is a circle.

    python3 tests/tools/callgraph.py build                 # the graph of src/ as built in build/
    python3 tests/tools/callgraph.py build --check         # make layout-check: no circle allowed
    python3 tests/tools/callgraph.py build --summary       # counts only

Objects are build/**/*.o except the tests' (build/tests/); a .cu.o counts as its .cu file.
"""
import os
import subprocess
import sys
from collections import defaultdict


def objects(build):
    for root, dirs, files in os.walk(build):
        rel_root = os.path.relpath(root, build)
        if rel_root.split(os.sep)[0] in ("tests",):
            dirs[:] = []
            continue
        for f in files:
            if f.endswith(".o"):
                yield os.path.join(root, f)


def source_name(build, obj):
    rel = os.path.relpath(obj, build)
    return rel[:-5] + ".cu" if rel.endswith(".cu.o") else rel[:-2] + ".c"


def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            used.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRVWGS" and parts[1].isupper():
            defined.add(parts[2])
    return defined, used


def circles(nodes, edges):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, on_stack, stack, result, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                result.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return result


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if not args:
        sys.exit(__doc__)
    build = args[0]
    check, summary = "--check" in sys.argv, "--summary" in sys.argv
    defs, uses = {}, {}
    for obj in objects(build):
        name = source_name(build, obj)
        defs[name], uses[name] = symbols(obj)
    owner = {}
    for name, ds in defs.items():
        for d in ds:
            owner.setdefault(d, name)
    edges = defaultdict(set)
    for name, us in uses.items():
        for u in us:
            if u in owner and owner[u] != name:
                edges[name].add(owner[u])
    n_edges = sum(len(v) for v in edges.values())
    found = circles(defs.keys(), edges)
    print(f"{len(defs)} files, {n_edges} file-to-file calls, {len(found)} circle(s)")
    if not summary:
        for name in sorted(edges):
            print(f"  {name} -> {', '.join(sorted(edges[name]))}")
    for group in found:
        print("circle: " + " <-> ".join(group))
    if check and found:
        sys.exit(1)


if __name__ == "__main__":
    main()

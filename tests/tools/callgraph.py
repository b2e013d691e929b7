#!/usr/bin/env python3
"""The file-level call graph of the objects of a build, from `nm`: file A calls file B when A
uses a symbol that B defines. Prints the edges, every circle (a group of files that reach each
other) and every call against the order of the rooms, and with --check exits 1 when there is a
circle or such a call.

    python3 tests/tools/callgraph.py build                 # the graph of src/ as built in build/
    python3 tests/tools/callgraph.py build --check         # make layout-check: no circle, rooms in order
    python3 tests/tools/callgraph.py build --summary       # counts only

Objects are build/**/*.o except the tests' (build/tests/); a .cu.o counts as its .cu file. An
object whose source is no longer in src/ (left in an older build folder by a file since moved or
renamed) is not part of the build and is passed over. Run from the repository root.

The rooms of src/ (docs/ARCHITECTURE.md, "Layout"), in order: a file calls only files of its own
room or of rooms before it. A plugin (src/cuda/, src/comm/mpi/) is reached from the rooms before
it only through its entry table, at run time: a weak reference in a build that loads the plugin,
which no "U" of nm shows, but a plain one in a build that links the plugin's objects (make sim's,
the GPU part compiled by the host compiler). A use of an entry table is therefore no call.
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


# err.c, clock.c and option.c, which every room uses and which use nothing, come first, before proc.
BASE = ("err.c", "clock.c", "option.c")
ROOMS = ["base", "proc", "core", "nn", "data", "report", "cuda", "comm", "comm/mpi", "train", "cuda/train", "cli"]


def room_of(name):
    """The room of a source file named as source_name gives it ("proc/shm.c" -> "proc")."""
    parts = name.split("/")
    if name in BASE:
        return "base"
    if len(parts) == 1:
        return "core"
    if len(parts) >= 3 and "/".join(parts[:2]) in ROOMS:
        return "/".join(parts[:2])
    return parts[0]


# The plugins' entry tables (src/cuda/train/entry.c, src/comm/mpi/entry.c): the one way in.
ENTRY_TABLES = {"hw_cuda_plugin", "hw_mpi_plugin"}


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
        if not os.path.exists(os.path.join("src", name)):
            continue
        defs[name], uses[name] = symbols(obj)
    owner = {}
    for name, ds in defs.items():
        for d in ds:
            owner.setdefault(d, name)
    edges = defaultdict(set)
    for name, us in uses.items():
        for u in us:
            if u in owner and owner[u] != name and u not in ENTRY_TABLES:
                edges[name].add(owner[u])
    n_edges = sum(len(v) for v in edges.values())
    found = circles(defs.keys(), edges)
    upward = []
    for name in sorted(edges):
        for callee in sorted(edges[name]):
            a, b = room_of(name), room_of(callee)
            if a not in ROOMS or b not in ROOMS:
                upward.append(f"{name} -> {callee}: a room not in the order ({a}, {b})")
            elif ROOMS.index(b) > ROOMS.index(a):
                upward.append(f"{name} -> {callee}: room {a} calls room {b}, which comes after it")
    print(f"{len(defs)} files, {n_edges} file-to-file calls, {len(found)} circle(s), "
          f"{len(upward)} call(s) against the rooms' order")
    if not summary:
        for name in sorted(edges):
            print(f"  {name} -> {', '.join(sorted(edges[name]))}")
    for group in found:
        print("circle: " + " <-> ".join(group))
    for line in upward:
        print("against the order: " + line)
    if check and (found or upward):
        sys.exit(1)


if __name__ == "__main__":
    main()

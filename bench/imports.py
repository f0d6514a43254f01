#!/usr/bin/env python3
"""Import circles between the 6.18 glue's modules (kmod/picoevb/*.rs), from their `crate::` paths.

Memory and hardware objects never reach back into their owner (issue 24): any circle fails. Prints the
import graph's circles and closes with "N passed, M failed". Usage: bench/imports.py [DIR] (default: kmod/picoevb beside this script).
"""
import pathlib
import re
import sys


def imports(folder):
    """Module name -> the sibling glue modules its `crate::` paths name."""
    mods = {p.stem: p.read_text() for p in folder.glob("*.rs") if not p.stem.endswith("_main")}
    graph = {}
    for name, text in mods.items():
        used = set(re.findall(r"crate::([a-z_][a-z0-9_]*)", text))
        for group in re.findall(r"crate::\{([^}]*)\}", text):
            used |= set(re.findall(r"\b([a-z_][a-z0-9_]*)\b", group))
        graph[name] = sorted(m for m in used if m in mods and m != name)
    return graph


def circles(graph):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main():
    folder = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent / "kmod/picoevb"
    graph = imports(folder)
    if not graph:
        print(f"FAIL no Rust modules in {folder}")
        print("0 passed, 1 failed")
        return 1
    comps = circles(graph)
    for comp in comps:
        edges = [f"{a} -> {b}" for a in sorted(comp) for b in graph[a] if b in comp]
        print(f"FAIL circle {sorted(comp)}: {', '.join(edges)}: point the dependency one way")
    print(f"CHECK kmod/picoevb has no import circle ... {'FAILED' if comps else 'ok'}")
    print(f"{0 if comps else 1} passed, {1 if comps else 0} failed")
    return 1 if comps else 0


if __name__ == "__main__":
    sys.exit(main())

"""No import circle among the lab's modules: every `import` statement of lab/ (at module level or
inside a function, relative ones resolved) is an edge, and the graph has no cycle. A circle
means two modules own each other's pieces; the fix is to move the shared piece down into one
module both import (lab/benchmarks/layouts.py, lab.emoji.scenes.prompt_scenes)."""

from __future__ import annotations

import ast
from pathlib import Path

from support import ROOT

LAB = ROOT / "lab"


def dotted(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the lab modules it imports (a package counts as its __init__)."""
    modules = {dotted(p, root): p for p in (root / "lab").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [base, *(f"{base}.{a.name}" for a in node.names)]
            else:
                continue
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and not name.startswith(target + "."):
                    edges.add(target)
        graph[name] = edges
    return graph


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def test_the_walk_finds_a_circle_through_relative_and_late_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "lab" / "bench"
    pkg.mkdir(parents=True)
    (tmp_path / "lab" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import x\n")
    (pkg / "b.py").write_text("def f():\n    from lab.bench.c import y\n")
    (pkg / "c.py").write_text("import lab.bench.a\n")
    (pkg / "d.py").write_text("from lab.bench import c\n")
    graph = import_graph(tmp_path)
    assert graph["lab.bench.d"] == {"lab.bench.c"}  # its own package is not an edge
    assert circles(graph) == [frozenset({"lab.bench.a", "lab.bench.b", "lab.bench.c"})]


def test_the_lab_has_no_import_circle() -> None:
    found = circles(import_graph(ROOT))
    assert len(import_graph(ROOT)) > 100
    named = [sorted(c) for c in found]
    assert not named, f"import circles in lab/ (move the shared piece down): {named}"

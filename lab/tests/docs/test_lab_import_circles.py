"""No import circle among the lab's modules: every `import` statement of lab/ (at module level or
inside a function, relative ones resolved) is an edge, and the graph has no cycle. A circle
means two modules own each other's pieces; the fix is to move the shared piece down into one
module both import (lab/benchmarks/layouts.py, lab.emoji.scenes.prompt_scenes)."""

from __future__ import annotations

import ast
from pathlib import Path

from support import ROOT
from support.import_graph import cycles

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
    assert cycles(graph) == [["lab.bench.a", "lab.bench.b", "lab.bench.c"]]


def test_the_lab_has_no_import_circle() -> None:
    graph = import_graph(ROOT)
    assert len(graph) > 100
    found = cycles(graph)
    assert not found, f"import circles in lab/ (move the shared piece down): {found}"

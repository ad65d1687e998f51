"""The product's code read as a newcomer reads it, checked from the source (ast), not from a list:
no private name (`_x`) of one module used by another, and no function over 60 lines in
ladr_core/ or nodes/ (docs/CONVENTIONS.md, Small files, plain names)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("ladr_core", "nodes")
MAX_LINES = 60


def product_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")) + [
        ROOT / "__init__.py", ROOT / "demo.py"]


def module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_of(p) for p in product_files()}


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def imported_from(path: Path, node: ast.ImportFrom) -> str:
    """The absolute module a `from ... import` statement reads from."""
    if not node.level:
        return node.module or ""
    name = module_of(path)
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def crossings(path: Path, source: str | None = None) -> list[str]:
    """`from other import _x` and `other._x`, where `other` is another module of the product
    (`source`: the file's text, read from `path` when None)."""
    tree = ast.parse(path.read_text(encoding="utf-8") if source is None else source)
    aliases: set[str] = set()  # local names bound to a product module
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases |= {a.asname or a.name for a in node.names if a.name in MODULES}
        elif isinstance(node, ast.ImportFrom):
            source = imported_from(path, node)
            for a in node.names:
                if f"{source}.{a.name}" in MODULES:
                    aliases.add(a.asname or a.name)
                elif private(a.name) and source in MODULES:
                    found.append(f"line {node.lineno}: from {source} import {a.name}")
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and private(node.attr)
                and isinstance(node.value, ast.Name) and node.value.id in aliases):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


@pytest.mark.parametrize("path", product_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_private_name_crosses_modules(path: Path) -> None:
    assert crossings(path) == [], "give the name a public spelling or move it to its user"


def test_the_private_name_check_sees_both_spellings() -> None:
    """The check itself: a private import and a private attribute of a product module."""
    probe = "from .registry import _REGISTRY\nfrom . import stats\nstats._hidden\nstats.ok\n"
    assert [line.split(": ")[1] for line in crossings(ROOT / "ladr_core" / "probe.py", probe)] \
        == ["from ladr_core.registry import _REGISTRY", "stats._hidden"]


def long_functions(package: str) -> list[str]:
    out = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if length > MAX_LINES:
                    out.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length})")
    return out


@pytest.mark.parametrize("package", [
    "ladr_core",
    "nodes",
])
def test_no_function_is_over_60_lines(package: str) -> None:
    assert long_functions(package) == []

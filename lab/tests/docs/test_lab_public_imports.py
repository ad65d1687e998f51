"""The lab uses the product through its public names only (docs/CONVENTIONS.md, "Public
names"): a product package's public names are its ``__all__``, read here from the packages
themselves; its modules are its own business. Every import of the product in lab/ names a
package and only names that package exports, so the product can move its insides without the lab
noticing, and the lab can be deleted without the product noticing."""

from __future__ import annotations

import ast
import importlib
from functools import cache
from pathlib import Path

import pytest
from support import ROOT

PRODUCT = ("ladr_core", "nodes")


def packages() -> set[str]:
    """Every product package (a folder with an __init__.py), dotted."""
    return {".".join(p.parent.relative_to(ROOT).parts) for top in PRODUCT
            for p in (ROOT / top).rglob("__init__.py")}


@cache
def public(package: str) -> frozenset[str]:
    return frozenset(getattr(importlib.import_module(package), "__all__", ()))


def product_imports(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, name) of each import of the product in a file (name None: `import m`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, None) for a in node.names
                      if a.name.split(".")[0] in PRODUCT]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] in PRODUCT:
            found += [(node.lineno, node.module, a.name) for a in node.names]
    return found


WAIVER = "# reaches in: "  # after an import, with the reason (test_each_waiver_says_why...)


def waived(path: Path) -> list[int]:
    return [i for i, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if WAIVER in text and text.lstrip().startswith(("from ", "import "))]


def private_uses(path: Path) -> list[str]:
    packs = packages()
    bad = []
    for line, module, name in product_imports(path):
        if line in waived(path):
            continue
        if module not in packs:
            bad.append(f"line {line}: {module} is a module of the product, not a package")
        elif name is not None and name not in public(module):
            bad.append(f"line {line}: {module} does not export {name} (its __all__)")
    return bad


LAB_FILES = sorted((ROOT / "lab").rglob("*.py"))


def test_the_rule_sees_the_products_packages_and_their_exports():
    assert {"ladr_core", "ladr_core.dimoo", "nodes"} <= packages()
    assert "load_dimoo" in public("ladr_core") and "Strategy" in public("ladr_core")
    assert private_uses(ROOT / "ladr_core" / "dimoo" / "pipeline.py") == []  # relative imports
    assert len(LAB_FILES) > 100 and sum(len(product_imports(p)) for p in LAB_FILES) > 100


def test_each_waiver_says_why_and_stays_rare():
    """A waiver names what the lab needs that no public name gives (a seam the product should
    grow); there are few, each on an import of the product."""
    found = {(p, i) for p in LAB_FILES for i in waived(p)}
    for path, line in found:
        text = path.read_text(encoding="utf-8").splitlines()[line - 1]
        assert any(at == line for at, _, _ in product_imports(path)), (path, line)
        assert len(text.split(WAIVER, 1)[1].split()) >= 4, f"{path}:{line}: say why"
    assert len(found) <= 1, sorted((str(p.relative_to(ROOT)), i) for p, i in found)


@pytest.mark.parametrize("path", LAB_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_lab_imports_only_public_product_names(path: Path) -> None:
    bad = private_uses(path)
    assert not bad, (f"{path.relative_to(ROOT)} reaches into the product (import the name from "
                     f"its package, exporting it there in __all__ if the lab needs it): {bad}")

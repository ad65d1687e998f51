"""The lab uses the product through its public names only (docs/CONVENTIONS.md, "Public
names"): a package's `__all__`, or a name of one of its named modules (a module path without a
leading underscore); never an underscore name, imported or reached as an attribute. The product
can then change its insides behind those names, and the lab can be deleted without the product
noticing; what the lab needs beyond a package's `__all__` it imports from the module that owns it,
so no package exports a name for the lab alone (tests/core/test_public_names.py)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
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


def underscore_uses(path: Path) -> list[tuple[int, str]]:
    """(line, what) of each underscore name of the product a file reaches: `from m import _x`,
    a module path with an `_` part, or `_x` read off a name bound to the product."""
    bound: dict[str, str] = {}
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for line, module, name in product_imports(path):
        dotted = module if name is None else f"{module}.{name}"
        if any(part.startswith("_") for part in dotted.split(".")):
            found.append((line, dotted))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] in PRODUCT:
            bound.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
        elif isinstance(node, ast.Import):
            bound.update({a.asname or a.name.split(".")[0]: a.name if a.asname else
                          a.name.split(".")[0] for a in node.names
                          if a.name.split(".")[0] in PRODUCT})
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            chain, base = [node.attr], node.value
            while isinstance(base, ast.Attribute):
                chain.insert(0, base.attr)
                base = base.value
            if isinstance(base, ast.Name) and base.id in bound:
                found.append((node.lineno, ".".join([bound[base.id], *chain])))
    return found


def private_uses(path: Path) -> list[str]:
    packs = packages()
    bad = []
    for line, module, name in product_imports(path):
        if module in packs and name is not None and name not in public(module) \
                and importlib.util.find_spec(f"{module}.{name}") is None:
            bad.append(f"line {line}: {module} does not export {name} (its __all__): import it "
                       f"from the module that owns it")
    bad += [f"line {line}: {what} is an underscore name" for line, what in underscore_uses(path)]
    return bad


LAB_FILES = sorted((ROOT / "lab").rglob("*.py"))


def test_the_rule_sees_the_products_packages_and_their_exports(tmp_path: Path):
    assert {"ladr_core", "ladr_core.dimoo", "nodes"} <= packages()
    assert "load_dimoo" in public("ladr_core") and "Strategy" in public("ladr_core")
    assert private_uses(ROOT / "ladr_core" / "dimoo" / "pipeline.py") == []  # relative imports
    assert len(LAB_FILES) > 100 and sum(len(product_imports(p)) for p in LAB_FILES) > 100
    probe = tmp_path / "probe.py"
    probe.write_text("import ladr_core.sampling as s\nfrom ladr_core import sampling, sample\n"
                     "from ladr_core.dimoo.model.packed import full_pass\n"
                     "from ladr_core import gumbel_\nfrom ladr_core._lazy import by_module\n"
                     "s._Run\nsampling._Run\nimport ladr_core\nladr_core.sampling._Run\n",
                     encoding="utf-8")
    assert private_uses(probe) == [
        "line 4: ladr_core does not export gumbel_ (its __all__): import it from the module "
        "that owns it", "line 5: ladr_core._lazy.by_module is an underscore name",
        "line 6: ladr_core.sampling._Run is an underscore name",
        "line 7: ladr_core.sampling._Run is an underscore name",
        "line 9: ladr_core.sampling._Run is an underscore name"]


@pytest.mark.parametrize("path", LAB_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_lab_imports_only_public_product_names(path: Path) -> None:
    bad = private_uses(path)
    assert not bad, (f"{path.relative_to(ROOT)} reaches into the product (import a part from "
                     f"the module that owns it; an underscore name is that module's own): {bad}")

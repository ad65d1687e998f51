"""The product's public names (docs/CONVENTIONS.md, "Public names"): each package's `__all__`
names something its modules define, so an export left behind by a rename fails here, not in the
code outside the product that uses it; and `ladr_core` and `ladr_core.dimoo` export what a user or
a node calls, each documented, so `dir(ladr_core.dimoo)` reads as the API rather than the parts.

"What a user or a node calls" is read from the code and the user's guides, not from a list kept
here: a name is called if the nodes (nodes/) or demo.py reach it through the package, or a user's
guide (README.md, docs/USAGE.md, docs/SAMPLING.md) shows it in code. What the lab and the tests
need beyond that they import from the module that owns it."""

from __future__ import annotations

import ast
import importlib
import re
import types
from functools import cache

import pytest
from support import ROOT

PACKAGES = sorted(".".join(p.parent.relative_to(ROOT).parts) for top in ("ladr_core", "nodes")
                  for p in (ROOT / top).rglob("__init__.py"))
SURFACES = ("ladr_core", "ladr_core.dimoo")  # the packages a user holds
CALLERS = (ROOT / "demo.py", *sorted((ROOT / "nodes").rglob("*.py")))
GUIDES = (ROOT / "README.md", ROOT / "docs" / "USAGE.md", ROOT / "docs" / "SAMPLING.md")


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    names = getattr(module, "__all__", [])
    missing = [n for n in names if not hasattr(module, n)]
    assert not missing, f"{package}.__all__ names what it does not have: {missing}"
    assert len(set(names)) == len(names), f"{package}.__all__ repeats a name"


def test_the_packages_that_export_are_found() -> None:
    assert {"ladr_core", "ladr_core.dimoo", "ladr_core.calibrate", "nodes"} <= set(PACKAGES)
    assert all(importlib.import_module(p).__all__ for p in ("ladr_core", "nodes"))


def reached(source: str, package: str) -> set[str]:
    """The names a Python source reaches through `package`: `from package import x`,
    `package.x` on any name bound to it (`import ladr_core`, `from ladr_core import dimoo`,
    `import ... as`), and the strings of a file that reaches it with `getattr(package, name)`."""
    tree = ast.parse(source)
    bound: dict[str, str] = {}  # local name -> the package or module it is bound to
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                bound[a.asname or a.name.split(".")[0]] = a.name if a.asname else \
                    a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for a in node.names:
                if node.module == package:
                    found.add(a.name)
                bound[a.asname or a.name] = f"{node.module}.{a.name}"
    dynamic = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            chain, value = [], node
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in bound:
                dotted = ".".join([bound[value.id], *reversed(chain)])
                if dotted.startswith(package + "."):
                    found.add(dotted[len(package) + 1:].split(".")[0])
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "getattr" and node.args \
                and isinstance(node.args[0], ast.Name) and bound.get(node.args[0].id) == package:
            dynamic = True
    if dynamic:
        found |= {n.value for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return found


@cache
def called(package: str) -> frozenset[str]:
    return frozenset().union(*(reached(p.read_text(encoding="utf-8"), package) for p in CALLERS))


@cache
def shown() -> frozenset[str]:
    """Identifiers a user's guide shows in code (`inline` or fenced)."""
    code = []
    for path in GUIDES:
        text = path.read_text(encoding="utf-8")
        code += re.findall(r"```.*?```", text, flags=re.S)
        code += re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    return frozenset(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", "\n".join(code)))


def test_reached_follows_every_way_a_caller_names_a_package() -> None:
    source = ("import ladr_core\nimport ladr_core.dimoo as d\nfrom ladr_core import dimoo, LADR\n"
              "from ladr_core.dimoo import PaintOptions\nfrom ladr_core.dimoo.model import vq\n"
              "ladr_core.load_dimoo(); d.check_job(); dimoo.fit_image(); vq.decode_codes()\n"
              "ladr_core.dimoo.formats.x\n")
    assert reached(source, "ladr_core") == {"load_dimoo", "dimoo", "LADR"}
    assert reached(source, "ladr_core.dimoo") == {"PaintOptions", "check_job", "fit_image",
                                                  "formats", "model"}
    dynamic = "import ladr_core\nWHICH = {'a': 'nano_model_path'}\ngetattr(ladr_core, WHICH['a'])"
    assert "nano_model_path" in reached(dynamic, "ladr_core")
    assert "load_dimoo" in called("ladr_core") and "PaintOptions" in called("ladr_core.dimoo")
    assert {"sample", "LADRPolicy", "load_dimoo"} <= shown()


@pytest.mark.parametrize("package", SURFACES)
def test_a_surface_exports_only_what_a_node_demo_or_guide_calls(package: str) -> None:
    """A name nobody outside the package calls is a part, not the API: the lab and the tests
    import it from the module that owns it (docs/CONVENTIONS.md, "Public names")."""
    exported = set(importlib.import_module(package).__all__)
    unused = sorted(exported - called(package) - shown())
    assert not unused, (f"{package}.__all__ exports names that no node, demo.py or user's guide "
                        f"calls: {unused}; import them from their own module where needed")


def own_doc(value: object) -> str:
    """A docstring of its own: not inherited, and not the signature a dataclass writes."""
    doc = (vars(value).get("__doc__") if isinstance(value, type) else value.__doc__) or ""
    name = getattr(value, "__name__", "")
    return "" if doc.startswith(f"{name}(") else doc.strip()


@pytest.mark.parametrize("package", SURFACES)
def test_every_exported_function_class_and_namespace_says_what_it_is(package: str) -> None:
    module = importlib.import_module(package)
    bare = [n for n in module.__all__
            if isinstance(value := getattr(module, n), (type, types.FunctionType,
                                                         types.ModuleType))
            and not own_doc(value)]
    assert not bare, f"{package} exports names without a docstring of their own: {bare}"

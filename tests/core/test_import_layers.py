"""The import structure of ladr_core, walked from the source: no import circle anywhere, and
ladr_core.dimoo's layers import downward only (docs/ARCHITECTURE.md, "What may import what").

Every `import` / `from ... import` statement counts, including those inside functions (a lazy
import is still a dependency). The modules come from the tree, not from a list.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from support.import_graph import cycles

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "ladr_core"
DIMOO = "ladr_core.dimoo"
# ladr_core.dimoo's layers, bottom first: a module may import its own layer and those below.
# `weights` and `denoise` are siblings: each imports `model` only, neither the other.
LAYERS = {"model": {"model"}, "weights": {"model", "weights"},
          "denoise": {"model", "denoise"}, "tasks": {"model", "denoise", "tasks"}}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in CORE.rglob("*.py")}


def imports(path: Path, known: set[str]) -> set[str]:
    """The ladr_core modules `path` imports (a `from pkg import name` of a submodule counts as
    that submodule; of a package's lazy export, as the package)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in known:
                    found.add(sub)
                elif target in known:
                    found.add(target)
    found.discard(name)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {m: imports(p, known) for m, p in mods.items()}


def test_the_walk_sees_the_imports_it_must():
    """The walker is not blind: known edges of the tree are found."""
    g = graph()
    assert f"{DIMOO}.model.transformer" in g[f"{DIMOO}.weights.checkpoint"]
    assert f"{DIMOO}.model.offload" in g[f"{DIMOO}.load"]  # an import inside a function
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle_in_ladr_core():
    assert cycles(graph()) == []


def layer_of(module: str) -> str | None:
    rest = module.removeprefix(DIMOO + ".").split(".")
    return rest[0] if module.startswith(DIMOO + ".") and rest[0] in LAYERS else None


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_dimoo_layers_import_downward_only(layer):
    g = graph()
    wrong = {}
    for module, deps in g.items():
        if layer_of(module) != layer:
            continue
        bad = sorted(d for d in deps if d.startswith(DIMOO) and layer_of(d) not in LAYERS[layer])
        if bad:
            wrong[module] = bad
    assert wrong == {}, f"{layer} may import only {sorted(LAYERS[layer])} of ladr_core.dimoo"


def test_every_dimoo_subpackage_is_a_layer():
    """A module lands in a layer, where the layer test sees it, or on top (any module directly
    in ladr_core.dimoo: the entry points, free to import every layer); a new subpackage is a
    new layer and needs its rule here. No list of the top modules: adding one changes nothing."""
    packages = {m.split(".")[2] for m in modules() if m.startswith(DIMOO + ".") and m.count(".") >= 3}
    assert sorted(packages - set(LAYERS)) == []

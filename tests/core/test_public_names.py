"""Every public name of the product resolves: each package's `__all__` (docs/CONVENTIONS.md,
"Public names"; resolved lazily from its modules) names something its modules define, so an
export left behind by a rename fails here, not in the code outside the product that uses it."""

from __future__ import annotations

import importlib

import pytest
from support import ROOT

PACKAGES = sorted(".".join(p.parent.relative_to(ROOT).parts) for top in ("ladr_core", "nodes")
                  for p in (ROOT / top).rglob("__init__.py"))


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

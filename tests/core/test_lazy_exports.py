"""The packages' public-name tables (`by_module`): each name under one module, and every module a
table names exists, so a name fails only where an optional piece is missing, never by a typo."""

from __future__ import annotations

import importlib
import importlib.util

import pytest

from ladr_core._lazy import by_module

PACKAGES = ("ladr_core", "ladr_core.dimoo", "ladr_core.calibrate")


def test_by_module_inverts_the_table_and_refuses_a_name_listed_twice() -> None:
    assert by_module({".a": "x y", ".b": "z"}) == {"x": ".a", "y": ".a", "z": ".b"}
    with pytest.raises(ValueError, match="'x' is exported from .a and .b"):
        by_module({".a": "x", ".b": "x"})


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_points_at_an_existing_module(package: str) -> None:
    exports = importlib.import_module(package)._EXPORTS
    assert exports, f"{package} exports nothing"
    missing = {name: module for name, module in exports.items()
               if importlib.util.find_spec(module, package) is None}
    assert not missing, f"{package}: names exported from modules that do not exist: {missing}"

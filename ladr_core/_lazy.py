"""Lazy public names for a package: ``module.__getattr__`` resolving from a name -> module map."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def by_module(table: dict[str, str]) -> dict[str, str]:
    """{relative module: "its public names, space-separated"} -> {name: module}; a name listed
    under two modules is a ValueError (the table would otherwise keep one silently)."""
    out: dict[str, str] = {}
    for module, names in table.items():
        for name in names.split():
            if name in out:
                raise ValueError(f"{name!r} is exported from {out[name]} and {module}")
            out[name] = module
    return out


def lazy_exports(package: str, namespace: dict[str, Any], exports: dict[str, str],
                 modules: dict[str, str] | None = None
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """(__getattr__, __dir__) for `package`: name -> relative module, imported on first use;
    `modules`: name -> relative module exported as the module itself (a namespace).

    The resolved value is cached in `namespace` (the package's globals), so each name is looked
    up once and a missing optional piece fails only where it is used.
    """

    whole = modules or {}

    def __getattr__(name: str) -> Any:
        if name in whole:
            value = importlib.import_module(whole[name], package)
            namespace[name] = value
            return value
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(exports) | set(whole))

    return __getattr__, __dir__

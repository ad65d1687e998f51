"""The lab's tests use what the product's tests use: tests/conftest.py runs for them too (it
puts tests/ on sys.path for `support` and installs the V3 stand-in without ComfyUI), and its
fixtures (and its xdist thread share) are this folder's. Nothing is copied: they are read from that
file (the module pytest already loaded when both folders run, else loaded here)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_PRODUCT = Path(__file__).resolve().parents[2] / "tests" / "conftest.py"
_HOOKS = ("pytest_configure",)  # under xdist: each worker's share of the cores


def _product_conftest():
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) and Path(module.__file__).resolve() == _PRODUCT:
            return module
    spec = importlib.util.spec_from_file_location("product_tests_conftest", _PRODUCT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


globals().update({name: value for name, value in vars(_product_conftest()).items()
                  if type(value).__name__ == "FixtureFunctionDefinition"
                  or hasattr(value, "_pytestfixturefunction") or name in _HOOKS})

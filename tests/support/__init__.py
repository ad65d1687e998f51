"""What the tests share: the official loops transcribed once (official.py, official_i2i.py),
fake denoisers (fakes.py), the strict stand-in for ComfyUI's V3 API (comfy_stand_in.py), a
ComfyUI-Distributed cluster (comfy_cluster.py) and small helpers. The host-sync counter the
tests and the benchmarks share is tests.kit.syncs; fixtures live in tests/conftest.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root folder."""


def strategy_from(name: str, policy: Any = None) -> Any:
    """A registered strategy object by name, with ``policy`` when given and the strategy takes
    one (LADR(policy), Prophet(policy)); else the strategy's defaults (Baseline())."""
    from dataclasses import fields

    from ladr_core import resolve_strategy

    default = resolve_strategy(name)
    takes_policy = any(f.name == "policy" for f in fields(default))
    return type(default)(policy) if policy is not None and takes_policy else default

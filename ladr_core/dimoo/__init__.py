"""Lumina-DiMOO runtime: native LLaDA model, official-layout loader, prompt layout, batched CFG,
ML-Cache, VQ decode and previews (docs/ARCHITECTURE.md section 2).

Submodules are imported on use so that ``import ladr_core.dimoo`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "LLaDAConfig": ".config",
    "DiMOOIds": ".config",
    "LLaDAModel": ".model",
    "CheckpointError": ".checkpoint",
    "MLCacheConfig": ".cache",
    "load_dimoo": ".pipeline",
    "DiMOOPipeline": ".pipeline",
    "GenerationResult": ".pipeline",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ladr_core.dimoo' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value

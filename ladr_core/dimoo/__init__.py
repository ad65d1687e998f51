"""Lumina-DiMOO runtime: native LLaDA model, official-layout loader, prompt layout, batched CFG,
ML-Cache, VQ decode and previews (docs/ARCHITECTURE.md section 2).

Submodules are imported on use so that ``import ladr_core.dimoo`` stays cheap.
"""

from __future__ import annotations

from .._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "LLaDAConfig": ".config",
    "DiMOOIds": ".config",
    "LLaDAModel": ".model",
    "CheckpointError": ".checkpoint",
    "MLCacheConfig": ".cache",
    "load_dimoo": ".pipeline",
    "save_dimoo": ".save",
    "DiMOOPipeline": ".pipeline",
    "GenerationResult": ".pipeline",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)

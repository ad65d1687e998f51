"""ladr_core: host-independent LADR sampling for Lumina-DiMOO.

Imports nothing from ComfyUI. Public names are resolved lazily so that importing the
package is cheap and a missing optional piece fails only where it is used.
"""

from __future__ import annotations

from ._lazy import lazy_exports

__version__ = "0.1.0"

# public name -> module that defines it (relative to this package)
_EXPORTS: dict[str, str] = {
    "sample": ".sampling",
    "SampleResult": ".sampling",
    "STEP_RECORD_KEYS": ".sampling",
    "Baseline": ".strategies",
    "LADR": ".ladr",
    "Prophet": ".strategies",
    "Strategy": ".step",
    "Preset": ".policy",
    "PRESETS": ".policy",
    "LADRPolicy": ".policy",
    "ProphetPolicy": ".policy",
    "POLICY_PRESETS": ".policy",
    "PRESET_STEPS": ".policy",
    "get_schedule": ".schedules",
    "load_dimoo": ".dimoo.pipeline",
    "save_dimoo": ".dimoo.save",
    "DiMOOPipeline": ".dimoo.pipeline",
    "GenerationResult": ".dimoo.pipeline",
    "MLCacheConfig": ".dimoo.cache",
    "nano_model_path": ".assets",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)

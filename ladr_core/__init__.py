"""ladr_core: host-independent LADR sampling for Lumina-DiMOO.

Imports nothing from ComfyUI. Public names are resolved lazily so that importing the
package is cheap and a missing optional piece fails only where it is used.
"""

from __future__ import annotations

from ._lazy import lazy_exports

__version__ = "0.1.0"

# public name -> module that defines it (relative to this package)
_EXPORTS: dict[str, str] = {
    # the sampler
    "sample": ".sampling",
    "SampleResult": ".sampling",
    "KnownTokens": ".validation",
    "STEP_RECORD_KEYS": ".sampling",
    "get_schedule": ".schedules",
    # strategies and how a name becomes one
    "Strategy": ".step",
    "DEFAULT_STEPS": ".step",
    "Baseline": ".baseline",
    "LADR": ".ladr",
    "Prophet": ".prophet",
    "ProphetPolicy": ".prophet",
    "Threshold": ".threshold",
    "ThresholdFrontier": ".threshold",
    "EntropyBound": ".entropy",
    "Halton": ".halton",
    "HaltonLADR": ".halton_ladr",
    "LADRGlobal": ".ladr_global",
    "resolve_strategy": ".registry",
    "register_strategy": ".registry",
    "strategy_names": ".registry",
    "preset_names": ".registry",
    # LADR's policy as data
    "LADRPolicy": ".policy",
    "AdaptiveRescue": ".policy",
    "ADAPTIVE_REPLACES": ".policy",
    "PACE_RANGE": ".policy",
    "Preset": ".policy",
    "PRESETS": ".policy",
    "PHASE_NAMES": ".policy",
    "NO_TAU": ".policy",
    "METRICS": ".policy",
    "CANDIDATES": ".policy",
    "SELECTIONS": ".policy",
    "RESCUE_TOKENS": ".policy",
    "tau_from_number": ".policy",
    # the Lumina-DiMOO runtime
    "InputError": ".errors",
    "official_passes": ".official_cost",
    "load_dimoo": ".dimoo",
    "save_dimoo": ".dimoo",
    "DiMOOPipeline": ".dimoo",
    "GenerationResult": ".dimoo",
    "MLCacheConfig": ".dimoo",
    "SIZE_STEP": ".dimoo",
    "size_problem": ".dimoo",
    "COMPILE_BACKENDS": ".dimoo",
    "COMPILE_MODES": ".dimoo",
    "nano_model_path": ".assets",
    "nano_default_cfg": ".assets",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)

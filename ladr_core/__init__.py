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
    "Baseline": ".strategies.baseline",
    "LADR": ".strategies.ladr",
    "Prophet": ".strategies.prophet",
    "ProphetPolicy": ".strategies.prophet",
    "Threshold": ".strategies.threshold",
    "ThresholdFrontier": ".strategies.threshold",
    "EntropyBound": ".strategies.entropy",
    "Halton": ".strategies.halton",
    "HaltonLADR": ".strategies.halton_ladr",
    "LADRGlobal": ".strategies.ladr_global",
    "resolve_strategy": ".registry",
    "register_strategy": ".registry",
    "strategy_names": ".registry",
    "preset_names": ".registry",
    "strategy_class": ".registry",
    "unregister_strategy": ".registry",
    # LADR's policy as data
    "LADRPolicy": ".strategies.policy",
    "AdaptiveRescue": ".strategies.policy",
    "ADAPTIVE_REPLACES": ".strategies.policy",
    "PACE_RANGE": ".strategies.policy",
    "Preset": ".strategies.policy",
    "PRESETS": ".strategies.policy",
    "PHASE_NAMES": ".strategies.policy",
    "NO_TAU": ".strategies.policy",
    "METRICS": ".strategies.policy",
    "CANDIDATES": ".strategies.policy",
    "SELECTIONS": ".strategies.policy",
    "RESCUE_TOKENS": ".strategies.policy",
    "tau_from_number": ".strategies.policy",
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

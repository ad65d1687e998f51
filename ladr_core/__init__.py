"""ladr_core: host-independent LADR sampling for Lumina-DiMOO.

Imports nothing from ComfyUI. The names here are what a user or a node calls: the sampler
(``sample``, ``KnownTokens``, the schedule), the strategies and their presets and registry, LADR's
policy, loading and saving Lumina-DiMOO (``load_dimoo``, ``save_dimoo``; the runtime's own surface
is ``ladr_core.dimoo``), the shipped models, ``diagnose`` and ``InputError``. Everything else is a
part: import it from the module that owns it (``ladr_core.step``, ``ladr_core.strength``, ...).
Public names are resolved lazily so that importing the package is cheap and a missing optional
piece fails only where it is used.
"""

from __future__ import annotations

from ._lazy import by_module, lazy_exports

__version__ = "0.1.0"

# public name -> module that defines it (relative to this package)
_EXPORTS = by_module({
    # the sampler
    ".sampling": "sample",
    ".validation": "KnownTokens",
    ".schedules": "get_schedule StepSchedule DEFAULT_STEPS MAX_STEPS check_denoise",
    # strategies and how a name becomes one
    ".step": "Strategy Needs",
    ".strategies.baseline": "Baseline",
    ".strategies.ladr": "LADR",
    ".strategies.prophet": "Prophet ProphetPolicy",
    ".strategies.threshold": "Threshold ThresholdFrontier",
    ".strategies.entropy": "EntropyBound",
    ".strategies.halton": "Halton",
    ".strategies.halton_ladr": "HaltonLADR",
    ".strategies.ladr_global": "LADRGlobal",
    ".registry": "DEFAULT_STRATEGY resolve_strategy register_strategy strategy_names preset_names strategy_class",
    # LADR's policy as data
    ".strategies.policy": "LADRPolicy AdaptiveRescue ADAPTIVE_REPLACES PACE_RANGE Preset PRESETS "
                          "PHASE_NAMES NO_TAU METRICS CANDIDATES SELECTIONS RESCUE_TOKENS "
                          "tau_from_number",
    # the Lumina-DiMOO runtime
    ".errors": "InputError",
    ".doctor": "diagnose",
    ".official_cost": "official_passes",
    ".dimoo": "load_dimoo save_dimoo DiMOOPipeline GenerationResult MLCacheConfig AnswerRule "
              "answer_rule_names",
    ".dimoo.denoise.prompt": "SIZE_STEP",
    ".dimoo.model.compile": "COMPILE_BACKENDS COMPILE_MODES",
    ".assets": "nano_model_path nano_mmu_model_path nano_default_cfg nano_vq_factor "
               "vq_factor_of emoji_model_path emoji_default_cfg",
    "._lazy": "by_module lazy_exports",  # a package's lazy public names (nodes/ uses them too)
})

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)

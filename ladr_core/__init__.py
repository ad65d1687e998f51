"""ladr_core: host-independent LADR sampling for Lumina-DiMOO.

Imports nothing from ComfyUI. Public names are resolved lazily so that importing the
package is cheap and a missing optional piece fails only where it is used.
"""

from __future__ import annotations

from ._lazy import by_module, lazy_exports

__version__ = "0.1.0"

# public name -> module that defines it (relative to this package)
_EXPORTS = by_module({
    # the sampler
    ".sampling": "sample SampleResult STEP_RECORD_KEYS",
    ".validation": "KnownTokens",
    ".schedules": "get_schedule StepSchedule DEFAULT_STEPS MAX_STEPS check_denoise",
    # strategies and how a name becomes one
    ".step": "Strategy Commit Needs RunInfo Stats StepRule",
    ".strategies.baseline": "Baseline",
    ".strategies.ladr": "LADR",
    ".strategies.prophet": "Prophet ProphetPolicy",
    ".strategies.threshold": "Threshold ThresholdFrontier",
    ".strategies.entropy": "EntropyBound",
    ".strategies.halton": "Halton",
    ".strategies.halton_ladr": "HaltonLADR",
    ".strategies.ladr_global": "LADRGlobal",
    ".registry": "resolve_strategy register_strategy strategy_names preset_names strategy_class "
                 "unregister_strategy",
    # LADR's policy as data
    ".strategies.policy": "LADRPolicy AdaptiveRescue ADAPTIVE_REPLACES PACE_RANGE PACE_UNIT Preset PRESETS "
                          "PHASE_NAMES NO_TAU METRICS CANDIDATES SELECTIONS RESCUE_TOKENS "
                          "tau_from_number",
    # the Lumina-DiMOO runtime
    ".errors": "InputError",
    ".doctor": "diagnose",
    ".official_cost": "official_passes",
    # image to image by a denoise strength
    ".strength": "remask_count remask_positions",
    ".dimoo": "load_dimoo save_dimoo DiMOOPipeline GenerationResult MLCacheConfig SIZE_STEP "
              "size_problem COMPILE_BACKENDS COMPILE_MODES AnswerResult AnswerRule "
              "answer_rule_names resolve_answer_rule",
    ".assets": "nano_model_path nano_mmu_model_path nano_default_cfg nano_vq_factor "
               "vq_factor_of emoji_model_path emoji_default_cfg",
    ".strategies.select": "effective_time no_phase",
    ".noise": "gumbel_",
    "._lazy": "by_module lazy_exports",  # a package's lazy public names (nodes/ uses them too)
})

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)

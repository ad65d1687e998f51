"""Calibration: measure LADR against the official sampler on the checkpoint you run, judged by
the model's own self-score (ladr_core.dimoo.tasks.selfscore), and keep the verdict beside it
(docs/ARCHITECTURE.md section 4).

It runs the official sampler at T (the reference), each candidate (candidates.py) and the
official sampler at each candidate's measured NFE on the same (prompt, seed) images; compares
them by paired bootstrap intervals (stats.py); recommends by non-inferiority (a setting
qualifies when the lower end of its paired 95 % interval against the reference is above
-margin, margin.py); and reports a table, plot (report.py) and A/B sheet (sheet.py). The run
resumes from a partial state file (runner.py), skips settings ``budget_minutes`` cannot fit and
calls ``check()`` every step (ComfyUI's interrupt). The report ``ladr_calibration.json`` lies
beside the checkpoint, keyed to its weights' fingerprint (state.py), where
``calibrated_strategy`` and the LADR Calibrate node read it back. Bad arguments raise
``CalibrationInputError`` (an ``InputError``) naming the flag or widget.

    python -m ladr_core.calibrate MODEL_FOLDER [--prompts FILE] [--json OUT] ...
"""

from __future__ import annotations

from .._lazy import by_module, lazy_exports

_EXPORTS = by_module({
    ".api": "calibrate calibrated_strategy read_prompts default_prompts sheet_path",
    ".prompts": "BUILTIN_COUNT BUILTIN_PROMPTS HANDWRITTEN",
    ".margin": "DEFAULT_MARGIN PRIOR_SPREAD SPREAD_FLOOR prompts_needed",
    ".state": "CalibrationError CalibrationInputError CALIBRATION_FILE fingerprint "
              "load_calibration",
    ".candidates": "Candidate default_candidates strategy_spec strategy_from_spec TAU_GRID "
                   "tau_policy",
    ".report": "plot_report report_text build_report judge rejudge",
    ".runner": "CALIBRATION_SELF_SCORE Calibration CalibrationConfig",
    ".stats": "auroc paired_mean_ci paired_spread spearman t_interval",
})

_MODULES = {"cli": ".cli"}  # the command (`python -m ladr_core.calibrate`): cli.main(argv)

__all__ = sorted([*_EXPORTS, *_MODULES])

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS, _MODULES)

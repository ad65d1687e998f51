"""Calibration: measure LADR against the official sampler on the checkpoint you run, judged by
the model's own self-score (ladr_core.dimoo.tasks.selfscore), and keep the verdict beside it.

    python -m ladr_core.calibrate MODEL_FOLDER [--prompts FILE] [--json OUT] ...

``calibrate`` runs it, ``calibrated_strategy`` reads the recommendation back for a checkpoint,
``load_calibration`` checks a file. Submodules: candidates (what runs), runner (the resumable
loop), report (comparisons, recommendation, plot), margin (the non-inferiority margin and the
prompts it needs), prompts (the built-in list), sheet (the A/B contact sheet), state (files),
stats (bootstrap, Student t, ranks).
"""

from __future__ import annotations

from .._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "calibrate": ".api",
    "calibrated_strategy": ".api",
    "read_prompts": ".api",
    "default_prompts": ".api",
    "sheet_path": ".api",
    "BUILTIN_COUNT": ".prompts",
    "DEFAULT_MARGIN": ".margin",
    "CalibrationError": ".state",
    "CalibrationInputError": ".state",
    "CALIBRATION_FILE": ".state",
    "fingerprint": ".state",
    "load_calibration": ".state",
    "Candidate": ".candidates",
    "default_candidates": ".candidates",
    "strategy_spec": ".candidates",
    "strategy_from_spec": ".candidates",
    "plot_report": ".report",
    "report_text": ".report",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)

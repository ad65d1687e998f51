"""Calibration: measure LADR against the official sampler on the checkpoint you run, judged by
the model's own self-score (ladr_core.dimoo.tasks.selfscore), and keep the verdict beside it
(docs/ARCHITECTURE.md section 4; the submodules: its Layout).

    python -m ladr_core.calibrate MODEL_FOLDER [--prompts FILE] [--json OUT] ...

``calibrate`` runs it, ``calibrated_strategy`` reads the recommendation back for a checkpoint,
``load_calibration`` checks a file.
"""

from __future__ import annotations

from .._lazy import by_module, lazy_exports

_EXPORTS = by_module({
    ".api": "calibrate calibrated_strategy read_prompts default_prompts sheet_path",
    ".prompts": "BUILTIN_COUNT",
    ".margin": "DEFAULT_MARGIN",
    ".state": "CalibrationError CalibrationInputError CALIBRATION_FILE fingerprint "
              "load_calibration",
    ".candidates": "Candidate default_candidates strategy_spec strategy_from_spec",
    ".report": "plot_report report_text",
})

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)

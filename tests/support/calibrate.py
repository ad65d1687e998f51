"""What the calibration tests share: a finished run of one setting with made-up self-scores."""

from __future__ import annotations

import numpy as np

from ladr_core import Baseline
from ladr_core.calibrate.candidates import Candidate


def made_up_run(name: str, steps: int, scores: np.ndarray, role: str = "candidate") -> dict:
    """The runner's record of ``name`` at ``steps`` forwards whose images self-scored
    ``scores`` (one per prompt), as report.build_report reads it."""
    n = len(scores)
    return {"candidate": Candidate(name, Baseline(), steps, role), "nfe": [steps] * n,
            "nfe_mean": float(steps), "token_forwards": [100.0 * steps] * n, "seconds": 1.0,
            "row_calls": steps * n, "score_seconds": 0.1, "scores": {"guided": list(scores)},
            "self_score": list(scores)}

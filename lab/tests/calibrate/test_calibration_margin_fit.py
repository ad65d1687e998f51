"""The calibration's default margin and prior spread (ladr_core/calibrate/margin.py) are the
committed fit, lab/results/calibration_margin.json (written by lab/studies/calibration.py)."""

from __future__ import annotations

import json

import pytest
from support import ROOT

from ladr_core.calibrate import DEFAULT_MARGIN, PRIOR_SPREAD


@pytest.mark.committed_result("lab/results/calibration_margin.json")
def test_the_default_margin_is_the_fitted_one() -> None:
    """margin.py carries the committed fit (rounded), made with the calibration's self-score."""
    from ladr_core.calibrate import CALIBRATION_SELF_SCORE

    fit = json.loads((ROOT / "lab" / "results" / "calibration_margin.json").read_text())
    assert fit["set"] == "validation" and fit["evaluator_drop"] == 0.05
    assert abs(DEFAULT_MARGIN - fit["margin"]) < 5e-5
    assert abs(PRIOR_SPREAD - fit["spread"]) < 5e-4
    c = CALIBRATION_SELF_SCORE
    assert fit["variant"] == f"b{c.block}p{c.passes}/{c.kind}" and c.fraction == 0.25

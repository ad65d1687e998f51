"""The non-inferiority margin of a calibration and the prompts it needs.

A setting qualifies only when the LOWER end of its paired 95 % interval against the reference
is above ``-margin`` (report.py). ``DEFAULT_MARGIN`` and ``PRIOR_SPREAD`` were fitted on
DiMOO-nano's validation set (``lab/studies/calibration.py margin``; ``--margin`` overrides);
``prompts_needed`` is the power rule n >= ((1.96 + 0.84) * sd / margin) ** 2; the decisive
Student-t interval uses ``max(observed sd, SPREAD_FLOOR)``. How each was fitted and the
rule's measured error rate: docs/reports/CALIBRATION.md.
"""

from __future__ import annotations

import math
from typing import Any

from .state import CalibrationInputError
from .stats import t_quantile_975

__all__ = ["DEFAULT_MARGIN", "EVALUATOR_DROP", "MARGIN_SOURCE", "POWER", "PRIOR_SPREAD",
           "SPREAD_FLOOR", "check_margin", "lead_needed", "margin_info", "prompts_needed",
           "shortfall_message"]

EVALUATOR_DROP = 0.05
"""The evaluator loss (overall GenEval-style score, 0..1) the default margin stands for."""
DEFAULT_MARGIN = 0.0169
"""Self-score units (the calibration's self-score, runner.CALIBRATION_SELF_SCORE);
lab/results/calibration_margin.json ``margin`` (0.01693, 95 % interval 0.0142 to
0.0203), rounded."""
PRIOR_SPREAD = 0.135
"""sd of the per-prompt paired self-score differences to baseline-64 on nano's validation set,
median over the three settings the evaluator puts closest to it (same file, ``spread``)."""
SPREAD_FLOOR = PRIOR_SPREAD
"""The least sd of the per-prompt differences a setting's deciding interval is computed with
(docs/reports/CALIBRATION.md): the spread the validation fit says a setting's differences
have; the spread the margin's prompt count was planned with. Kept for a user's ``--margin``
too (it is a statement about the self-score's spread, not about the margin)."""
MARGIN_SOURCE = ("fitted on DiMOO-nano's validation set (lab/studies/calibration_margin.py -> "
                 "lab/results/calibration_margin.json): the self-score difference to "
                 "baseline-64 that goes with an evaluator drop of 0.05 (least squares through "
                 "the reference over the 17 settings that are not broken)")
POWER = 0.8
_Z_INTERVAL = 1.959964  # two-sided 95 %
_Z_POWER = 0.841621  # one-sided 80 %


def check_margin(value: Any, name: str = "margin") -> float:
    """The margin as a float; CalibrationInputError naming ``name`` (the command line names
    its flag, ``--margin``) unless it is a finite number > 0."""
    ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
          and math.isfinite(value) and value > 0)
    if not ok:
        raise CalibrationInputError(
            name, "must be a positive number (the most self-score a setting may lose against "
            f"the reference and still qualify), got {value!r}",
            f"leave it out for the fitted default {DEFAULT_MARGIN:g}, or give a number such as "
            "0.02")
    return float(value)


def prompts_needed(spread: float, margin: float) -> int:
    """Prompts at which a setting as good as the reference qualifies with probability
    ``POWER``, at a per-prompt spread ``spread`` (docs/reports/CALIBRATION.md); at least 2."""
    if not spread > 0:
        return 2
    return max(2, math.ceil(((_Z_INTERVAL + _Z_POWER) * spread / margin) ** 2))


def lead_needed(prompts: int, margin: float, floor: float = SPREAD_FLOOR) -> float:
    """The least mean lead over the reference that qualifies on ``prompts`` prompts: Student's
    half-width at the spread floor minus the margin (inf under 2 prompts)."""
    if prompts < 2:
        return math.inf
    return t_quantile_975(prompts - 1) * floor / math.sqrt(prompts) - margin


def shortfall_message(prompts: int, seeds: int, margin: float,
                      spread: float = PRIOR_SPREAD) -> str | None:
    """None when ``prompts`` suffice for ``margin`` at the prior spread, else one line naming
    the prompts needed, the lead needed on these and the fix (the run still goes ahead)."""
    need = prompts_needed(spread, margin)
    if prompts >= need:
        return None
    more = " (a second seed of a prompt helps less than a new prompt)" if seeds > 1 else ""
    lead = lead_needed(prompts, margin, spread)
    can = ("no setting can qualify on fewer than 2 prompts" if math.isinf(lead) else
           f"on {prompts} prompts a cheaper setting qualifies only when its self-score is at "
           f"least {lead:+.3f} above the reference's (the interval is never computed with an "
           f"sd below {spread:g})")
    return (f"prompts: {prompts} prompts are too few for margin {margin:g}: a setting as good "
            f"as the reference qualifies {POWER:.0%} of the time only from about {need} prompts "
            f"(at the self-score spread seen on DiMOO-nano, sd {spread:g}){more}, and {can}. "
            f"The calibration runs and writes its report, but expect it to recommend the "
            f"reference; give about {need} prompts (--prompts FILE) or a larger --margin")


def margin_info(margin: float) -> dict[str, Any]:
    """The report's ``margin`` entry: value, where it comes from, what it stands for."""
    default = margin == DEFAULT_MARGIN
    return {"value": margin, "default": default,
            "source": MARGIN_SOURCE if default else "given by the user (--margin / margin=)",
            "evaluator_drop": EVALUATOR_DROP if default else None,
            "prior_spread": PRIOR_SPREAD, "spread_floor": SPREAD_FLOOR, "power": POWER}

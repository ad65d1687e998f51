"""The spread floor through the LADR Calibrate node: its policy, its report text and the saved JSON say the
same thing, and a calibration saved by the rule before the spread floor (a cheaper setting
"shown within the margin" on a few prompts) is not handed to the sampler as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.nodes import calibrate_outputs

from ladr_core.calibrate import CALIBRATION_FILE, strategy_from_spec
from ladr_core.calibrate.margin import DEFAULT_MARGIN, shortfall_message

ARGS = {"prompts": "a red circle\na blue square\na green triangle", "seeds": 1, "size": 32,
        "steps": 4, "budget_minutes": 0.0, "batch": 3}


pytestmark = pytest.mark.usefixtures("three_candidates")


def _agree(out: dict, saved: dict) -> None:
    """The node's policy and text against the JSON the run saved (or the loader judged)."""
    rec = next(c for c in saved["candidates"] if c["name"] == saved["recommended"])
    strategy, steps = strategy_from_spec(rec["strategy"], "strategy")
    assert out["policy"] == strategy and rec["strategy"]["steps"] == steps
    text = out["report"]
    assert f"recommended: {saved['recommended']} " in text
    assert all(f"warning: {w}" in text for w in saved["warnings"])
    assert ("to try with more prompts: " in text) == bool(saved["to_try"])
    short = any(w.startswith("prompts: ") for w in saved["warnings"])
    assert not (short and saved["recommended"] != saved["reference"])


def test_the_policy_the_text_and_the_json_agree(model) -> None:
    out = calibrate_outputs(model=model, mode="run", **ARGS)
    saved = json.loads((model.pipe.source_folder / CALIBRATION_FILE).read_text())
    assert saved["margin"]["spread_floor"] == 0.135 and "lead_needed" in saved
    assert saved["recommended"] == saved["reference"] == "baseline-4"  # 3 prompts: too few
    assert saved["warnings"] == [shortfall_message(3, 1, DEFAULT_MARGIN)]
    _agree(out, saved)


def _as_saved_by_the_old_rule(path: Path) -> str:
    """Rewrite a saved calibration as the rule before the floor made the issue's: a cheaper
    setting at +0.0007 [-0.0007, +0.0030] 'qualifies' on a few prompts. Returns its name."""
    data = json.loads(path.read_text())
    cheap = min(data["candidates"][1:], key=lambda c: c["token_forwards"])
    n = cheap["vs_reference"]["n"]
    cheap.update(vs_reference={"diff": 0.0007, "lo": -0.0007, "hi": 0.0030, "n": n},
                 vs_reference_t={"diff": 0.0007, "lo": -0.0011, "hi": 0.0025, "n": n},
                 spread=0.0018, noninferiority_lo=-0.0011, qualifies=True)
    data.update(recommended=cheap["name"], why=f"{cheap['name']} is the cheapest setting "
                "shown to lose at most the margin")
    for key in ("to_try", "lead_needed"):
        data.pop(key)
    data["margin"].pop("spread_floor")
    path.write_text(json.dumps(data))
    return cheap["name"]


def test_a_calibration_saved_by_the_old_rule_is_judged_again(model) -> None:
    calibrate_outputs(model=model, mode="run", **ARGS)
    path = model.pipe.source_folder / CALIBRATION_FILE
    cheap = _as_saved_by_the_old_rule(path)
    loaded = calibrate_outputs(model=model, mode="load", **ARGS)
    from ladr_core.calibrate import calibrated_strategy

    _, _, judged = calibrated_strategy(model.pipe.source_folder)
    assert judged["rejudged"] and judged["recommended"] == "baseline-4"
    assert judged["to_try"] == [cheap] and judged["warnings"]
    _agree(loaded, judged)
    assert f"to try with more prompts: {cheap}" in loaded["report"]
    # its sheet marks the old recommendation: a card says so instead
    assert loaded["sheet"].shape[1] < 200
    again = calibrate_outputs(model=model, mode="load or run", **ARGS)
    assert "judged by an older rule: ran again" in again["report"]
    _agree(again, json.loads(path.read_text()))

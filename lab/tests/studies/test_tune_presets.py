"""The preset tuning study (lab.studies.tune_presets): its comparison at the same forwards, and
its committed results file held to its own criterion and to the run store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab.studies import tune_presets as T

RESULTS = Path(T.RESULTS)


def test_the_official_score_at_a_forward_count_is_linear_between_its_steps() -> None:
    curve = [(4, 0.2), (8, 0.6), (16, 0.8)]
    assert T.at_forwards(curve, 6.0) == pytest.approx(0.4)
    assert T.at_forwards(curve, 12.0) == pytest.approx(0.7)
    assert T.at_forwards(curve, 2.0) == 0.2 and T.at_forwards(curve, 30.0) == 0.8  # clamped


def test_every_candidate_of_a_family_is_a_distinct_policy_and_ladr_plans_within_steps() -> None:
    for family, cands in T.FAMILIES.items():
        assert len(set(map(repr, cands.values()))) == len(cands), family
    assert max(T.STEPS) <= max(T.BASELINE_STEPS)  # every candidate's forwards lie on the curve


@pytest.mark.committed_result("lab/results/preset_tuning.json")
def test_the_committed_picks_follow_the_criterion() -> None:
    """gain = score - the official sampler's at the same forwards; worth = the smallest gain;
    the pick = the largest worth (the first candidate on a tie), recomputed from the rows."""
    doc = json.loads(RESULTS.read_text())
    assert "validation" in doc["prompts"]["nano"] and "VALIDATION" in doc["prompts"]["emoji"]
    for family, cands in T.FAMILIES.items():
        worth = {}
        for label in cands:
            row = doc["rows"][f"{family}: {label}"]
            cells = {k: v for k, v in row.items() if k != "worth"}
            assert sorted(cells) == sorted(f"{m}@{s}" for m in ("nano", "emoji") for s in T.STEPS)
            for key, c in cells.items():
                assert c["gain"] == pytest.approx(c["score"] - c["official_at_same_forwards"],
                                                  abs=2e-4)
                assert c["forwards"] <= int(key.split("@")[1])  # the cost contract
                if label == next(iter(cands)):  # the current setting: nothing to compare
                    assert c["vs_current"] is None
                else:
                    assert c["vs_current"]["lo"] <= c["vs_current"]["diff"] <= c["vs_current"]["hi"]
            worth[label] = min(c["gain"] for c in cells.values())
            assert row["worth"] == pytest.approx(worth[label])
            assert doc["policies"][f"{family}: {label}"] == repr(cands[label])
        best = max(worth.values())
        assert doc["picks"][family] == next(lab for lab in cands if worth[lab] == best)


@pytest.mark.committed_result("lab/results/preset_tuning.json")
def test_the_committed_rows_are_the_run_store() -> None:
    """The report, read again from the committed store, gives the committed rows."""
    doc = json.loads(RESULTS.read_text())
    again = T.report(T.RUNS, T.PROMPTS)
    assert again["rows"] == doc["rows"] and again["picks"] == doc["picks"]

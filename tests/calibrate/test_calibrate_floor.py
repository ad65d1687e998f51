"""The spread floor (margin.SPREAD_FLOOR): an interval cannot be narrower than the evidence allows. The Student-t interval that
decides is computed with the spread floored at the validation fit's (margin.SPREAD_FLOOR); a
report never recommends a setting while saying the prompts are too few; a calibration saved
before the floor is judged again when it is loaded. Made-up self-scores, where the answer is
known, and the issue's own six-prompt verdict."""

from __future__ import annotations

import math

import numpy as np
import pytest
from support.calibrate import made_up_run

from ladr_core.calibrate.margin import (
    DEFAULT_MARGIN,
    PRIOR_SPREAD,
    SPREAD_FLOOR,
    lead_needed,
    prompts_needed,
    shortfall_message,
)
from ladr_core.calibrate.report import build_report, decision_interval, rejudge, report_text
from ladr_core.calibrate.stats import paired_t_interval, t_quantile_975


def _report(diffs: dict[str, np.ndarray], margin: float = DEFAULT_MARGIN) -> dict:
    n = len(next(iter(diffs.values())))
    ref = np.random.default_rng(0).normal(-0.3, 0.2, n)
    runs = {"baseline-64": made_up_run("baseline-64", 64, ref, "reference")}
    for k, (name, d) in enumerate(diffs.items()):
        runs[name] = made_up_run(name, 20 - k, ref + d)
    report = build_report(runs, list(range(n)), "baseline-64", margin)
    report["text"] = report_text(report)
    return report


def test_the_spread_floor_is_the_validation_fits_spread() -> None:
    assert SPREAD_FLOOR == PRIOR_SPREAD == 0.135
    d = np.array([0.01, -0.01, 0.0, 0.002, 0.001, -0.002])
    ci = paired_t_interval(d, np.zeros(6), min_sd=SPREAD_FLOOR)
    assert ci["sd"] == SPREAD_FLOOR > d.std(ddof=1)
    assert ci["lo"] == pytest.approx(d.mean() - t_quantile_975(5) * 0.135 / math.sqrt(6))
    wide = np.array([0.5, -0.5, 0.2, -0.2, 0.0, 0.1])
    assert paired_t_interval(wide, np.zeros(6), min_sd=SPREAD_FLOOR)["sd"] == pytest.approx(
        wide.std(ddof=1))
    # the lead a setting needs on n prompts: below 0 from the prompts the margin plans for
    assert lead_needed(6, DEFAULT_MARGIN) == pytest.approx(
        t_quantile_975(5) * 0.135 / math.sqrt(6) - DEFAULT_MARGIN)
    need = prompts_needed(SPREAD_FLOOR, DEFAULT_MARGIN)
    assert lead_needed(need, DEFAULT_MARGIN) < 0 < lead_needed(need // 4, DEFAULT_MARGIN)
    assert lead_needed(1, DEFAULT_MARGIN) == math.inf


def test_six_prompts_that_miss_the_tail_do_not_prove_a_setting() -> None:
    """The issue's case: +0.0007 with a bootstrap interval [-0.0007, +0.0030] from six prompts
    whose differences hardly spread. Before the floor it qualified; now the reference is
    recommended, nano is named to try with more prompts, and the warning says why."""
    d = np.array([0.0031, -0.0009, 0.0012, 0.0004, -0.0002, 0.0006])
    report = _report({"nano": d, "paper": d - 0.6})
    nano = report["candidates"][1]
    assert nano["vs_reference"]["lo"] > -DEFAULT_MARGIN  # the old rule's proof
    assert nano["vs_reference_t"]["sd"] == SPREAD_FLOOR
    assert nano["noninferiority_lo"] < -DEFAULT_MARGIN and not nano["qualifies"]
    assert report["recommended"] == "baseline-64" and report["to_try"] == ["nano"]
    assert "Worth trying with more prompts" in report["why"] and "nano" in report["why"]
    assert report["warnings"] == [shortfall_message(6, 1, DEFAULT_MARGIN)]
    assert "+0.125 above the reference" in report["warnings"][0]
    text = report["text"]
    assert "recommended: baseline-64 (the reference" in text
    assert "to try with more prompts: nano" in text and f"warning: {report['warnings'][0]}" in text
    assert f"{decision_interval(nano)['lo']:+.4f}" in text  # the table shows what decides


def test_a_lead_larger_than_the_floor_allows_qualifies_without_the_shortfall_warning() -> None:
    """Six prompts can show a setting within the margin only by a lead of at least
    lead_needed(6); then the report recommends it and does not call the prompts too few."""
    lead = lead_needed(6, DEFAULT_MARGIN)
    d = lead + 0.01 + np.array([0.01, -0.01, 0.0, 0.002, 0.001, -0.003])
    report = _report({"cheap": d})
    assert report["recommended"] == "cheap" and report["warnings"] == [] and not report["to_try"]
    assert f"more than the {lead:+.4f} these prompts require" in report["why"]
    assert "too few" not in report["text"]
    short = _report({"cheap": d - 0.02})
    assert short["recommended"] == "baseline-64" and short["warnings"]


@pytest.mark.parametrize("n", [2, 3, 6, 12, 24, 48, 120])
def test_a_report_never_recommends_a_setting_and_calls_the_prompts_too_few(n: int) -> None:
    """Random settings, some heavy-tailed, some far ahead: whatever is recommended, the text and
    the JSON say one thing."""
    rng = np.random.default_rng(n)
    for _ in range(40):
        diffs = {}
        for k in range(4):
            tail = (rng.random(n) < 0.1) * rng.exponential(0.6, n)
            diffs[f"s{k}"] = rng.normal(rng.choice([0.0, 0.2, 0.5]), rng.choice([0.001, 0.1]),
                                        n) - tail
        report = _report(diffs)
        cheaper = report["recommended"] != "baseline-64"
        warned = any(w.startswith("prompts: ") for w in report["warnings"])
        assert not (cheaper and warned)
        assert ("too few" in report["text"]) == warned
        assert f"recommended: {report['recommended']} " in report["text"]
        if cheaper:
            rec = next(c for c in report["candidates"] if c["name"] == report["recommended"])
            assert rec["qualifies"] and report["to_try"] == []
            assert rec["vs_reference"]["diff"] > lead_needed(n, DEFAULT_MARGIN) or (
                n >= prompts_needed(SPREAD_FLOOR, DEFAULT_MARGIN))


def _old_saved(d: np.ndarray) -> dict:
    """A report as the rule before the floor saved it: nano 'shown within the margin'."""
    report = _report({"nano": d, "paper": d - 0.6})
    old = {**report, "candidates": [dict(c) for c in report["candidates"]]}
    nano = old["candidates"][1]
    nano["vs_reference_t"] = paired_t_interval(d, np.zeros(d.size))  # unfloored
    nano["noninferiority_lo"] = min(nano["vs_reference"]["lo"], nano["vs_reference_t"]["lo"])
    nano["qualifies"] = True
    old.update(recommended="nano", why="nano is the cheapest setting shown to lose at most the "
               "margin", warnings=[shortfall_message(6, 1, DEFAULT_MARGIN)],
               conditions={"prompts": 6, "seeds": 1})
    old["margin"] = {k: v for k, v in old["margin"].items() if k != "spread_floor"}
    for k in ("to_try", "lead_needed"):
        old.pop(k)
    return old


def test_a_report_saved_before_the_floor_is_judged_again() -> None:
    d = np.array([0.0031, -0.0009, 0.0012, 0.0004, -0.0002, 0.0006])
    old = _old_saved(d)
    new = rejudge(old)
    assert new["rejudged"] and new["recommended"] == "baseline-64" and new["to_try"] == ["nano"]
    assert new["margin"]["spread_floor"] == SPREAD_FLOOR
    assert new["candidates"][1]["vs_reference_t"]["sd"] == SPREAD_FLOOR
    assert len(new["warnings"]) == 1 and "to try with more prompts: nano" in new["text"]
    assert old["recommended"] == "nano"  # the saved report itself is left as it was
    assert rejudge(new) is new  # judged with the floor: unchanged

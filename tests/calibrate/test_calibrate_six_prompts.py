"""Six prompts (lab/results/calibration_nano_six.txt) through the real code path: ``calibrate`` on the shipped DiMOO-nano
(CPU, float32, T = 64), with the candidate list reduced to the reference and ``nano`` (plus the
baseline at nano's NFE, which the runner adds) so it takes seconds, not the full command's
minutes (the full list is lab/results/calibration_nano_six.json, checked in
lab/tests/bench). The rule before the spread floor recommended nano from these prompts; now the
reference is recommended and nano is named to try with more prompts."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

import ladr_core
from ladr_core.calibrate import calibrate
from ladr_core.calibrate.candidates import default_candidates
from ladr_core.calibrate.margin import DEFAULT_MARGIN, SPREAD_FLOOR, shortfall_message
from ladr_core.calibrate.stats import t_quantile_975

PROMPTS = ["a circle", "a circle and a square", "one circle", "a red circle",
           "a circle to the left of a triangle", "a blue circle and a purple triangle"]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    tmp = tmp_path_factory.mktemp("six_prompts")
    folder = ladr_core.nano_model_path()
    pipe = ladr_core.load_dimoo(folder, dtype=torch.float32)
    cands = [c for c in default_candidates(64) if c.name in ("baseline-64", "nano")]
    out = tmp / "report.json"
    got = calibrate(pipe, folder, out, PROMPTS, candidates=cands,
                    calibration_file=tmp / "beside.json")
    return got, out


def test_the_six_prompts_recommend_the_reference_and_name_nano_to_try(report) -> None:
    got, out = report
    assert [c["name"] for c in got["candidates"]] == ["baseline-64", "nano", "baseline-18"]
    nano = got["candidates"][1]
    assert abs(nano["vs_reference"]["diff"]) < 0.005  # the issue's +0.0007
    # what the rule before the floor read: the bootstrap and the unfloored Student t
    raw_lo = nano["vs_reference"]["diff"] - t_quantile_975(5) * nano["spread"] / math.sqrt(6)
    assert nano["spread"] < SPREAD_FLOOR and min(raw_lo, nano["vs_reference"]["lo"]) > \
        -DEFAULT_MARGIN
    assert nano["vs_reference_t"]["sd"] == SPREAD_FLOOR and not nano["qualifies"]
    assert got["recommended"] == "baseline-64" and got["to_try"] == ["nano"]
    assert got["warnings"] == [shortfall_message(6, 1, DEFAULT_MARGIN)]
    saved = json.loads(out.read_text())
    assert saved["recommended"] == got["recommended"] and saved["to_try"] == got["to_try"]
    assert "recommended: baseline-64 (the reference" in saved["text"]
    assert "to try with more prompts: nano" in saved["text"]
    assert f"warning: {saved['warnings'][0]}" in saved["text"]

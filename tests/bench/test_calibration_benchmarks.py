"""The calibration benchmarks run as programs: the projected GPU time of the built-in list is
the committed H100 per-call figure times the calls a nano calibration made, labelled projected
and tied to the commit the per-call figure was measured on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import ROOT
from support.scripts import run_script

from ladr_core.calibrate import BUILTIN_COUNT

RESULTS = ROOT / "benchmarks" / "results"


@pytest.mark.committed_result("benchmarks/results/calibration_nano_48.json")
def test_the_projection_is_calls_times_the_measured_call(tmp_path: Path) -> None:
    run_script("benchmarks.calibration_projection", "--out", str(tmp_path))
    got = json.loads((tmp_path / "calibration_projection.json").read_text())
    nano = json.loads((RESULTS / "calibration_nano_48.json").read_text())
    gpu = json.loads((RESULTS / "gpu_nvidia_h100_80gb_hbm3.json").read_text())
    passes = nano["conditions"]["self_score_passes_per_image"]
    calls = sum(c["nfe"] + passes for c in nano["candidates"])
    ms = gpu["step"]["packed_ms"]
    row = got["rows"][0]
    assert got["projected"] is True and "predates" in got["note"]
    assert row["prompts"] == BUILTIN_COUNT and row["calls_per_image"] == pytest.approx(calls)
    assert row["projected_gpu_s"] == pytest.approx(BUILTIN_COUNT * calls * ms / 1000)
    assert gpu["env"]["git_commit"] in got["inputs"]["per_call"]

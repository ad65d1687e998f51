"""demo.py (the README's main job) on the shipped nano model: output, PNGs, bad preset."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]


def _demo():
    spec = importlib.util.spec_from_file_location("demo", ROOT / "demo.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_demo_writes_both_images_and_reports_the_speedup(tmp_path, capsys):
    out = tmp_path / "d.png"
    assert _demo().main(["--prompt", "a blue circle", "--out", str(out), "--baseline-steps",
                         "8", "--steps", "8"]) == 0
    text = capsys.readouterr().out
    assert "policy nano, T=8" in text and "T=8:" in text and "fewer forward passes" in text
    for path in (out, tmp_path / "d_baseline.png"):
        assert Image.open(path).size == (240, 240)  # 48 px nano image, nearest x5


def test_demo_names_an_unknown_policy(tmp_path):
    with pytest.raises(SystemExit, match="--policy: 'fast' is not a preset"):
        _demo().main(["--policy", "fast", "--out", str(tmp_path / "x.png"), "--no-baseline"])


def test_demo_passes_a_bad_step_count_through_to_the_pipelines_check(tmp_path):
    with pytest.raises(ValueError, match="steps"):
        _demo().main(["--steps", "0", "--out", str(tmp_path / "x.png"), "--no-baseline"])

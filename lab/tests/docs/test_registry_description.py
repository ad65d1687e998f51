"""pyproject's description (the Registry entry) says what the pack measured, as README's
headline table does, from the same results file; never the paper's figure."""

from __future__ import annotations

import json
import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "lab/results/quality_mlcache_test.json"
KEY = "ladr-nano"  # README's row "LADR, `nano` preset"


def _description() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["description"]


def test_the_description_figures_are_the_results_files() -> None:
    text, doc = _description(), json.loads(RESULTS.read_text())
    run, ref = doc["strategies"][KEY], doc["strategies"]["baseline-64"]
    cut = float(re.search(r"(\d+\.\d)x fewer token-forwards", text).group(1))
    assert round(ref["token_forwards_mean"] / run["token_forwards_mean"], 1) == cut
    ours, theirs = map(float, re.search(r"scoring (\d\.\d{3}) against its (\d\.\d{3})",
                                        text).groups())
    assert (round(run["score_overall"], 3), round(ref["score_overall"], 3)) == (ours, theirs)
    same = next(c for c in doc["compare"] if c["a"] == KEY and c["b"] == f"baseline@{KEY}")
    d = same["diff"]["overall"]
    assert "no difference" in text and d["lo"] < 0 < d["hi"]  # "not detected" = 0 inside
    assert "~4x" not in text and "4x faster" not in text  # the paper's figure, not ours

"""benchmarks/samplers.py and benchmarks/rivals.py: setting strings, the validation picks and
the tables that run them (quality.py, painting.py), end to end on the shipped nano model at a
tiny size."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks import rivals, samplers
from ladr_core import PRESETS, EntropyBound, Halton, HaltonLADR, LADRGlobal, Threshold

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


@pytest.mark.parametrize(("spec", "want"), [
    ("threshold:tau=0.9,token=sample,steps=32", Threshold(0.9, token="sample", steps=32)),
    ("entropy:gamma=1.5,token=sample,steps=32", EntropyBound(1.5, token="sample", steps=32)),
    ("halton:steps=12", Halton(steps=12)),
    ("ladr-global:tau=0.95,steps=128", LADRGlobal(
        replace(PRESETS["nano"].policy, tau=(0.95,) * 3), 128)),
    ("halton-ladr:preset=adaptive,steps=64", HaltonLADR(PRESETS["adaptive"].policy, 64)),
])
def test_a_setting_string_builds_its_strategy(spec: str, want) -> None:
    assert rivals.build(spec) == want
    entry = rivals.table_entry(spec)
    assert entry["strategy"] == want and entry["steps"] == want.run_steps()


@pytest.mark.parametrize(("spec", "message"), [
    ("threshold:tau", r"'tau' is not key=value"),
    ("threshold:gamma=1", r"unknown keys \['gamma'\]"),
    ("fastest:steps=3", r"'fastest' is not a strategy"),
    ("threshold:tau=2", r"tau must be a finite number in \(0, 1\]"),
])
def test_a_bad_setting_string_is_named(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        rivals.build(spec)


def test_picks_take_the_best_score_within_the_band_of_each_budget() -> None:
    settings = {
        "a": {"rival": "threshold", "nfe_mean": 11.2, "score_overall": 0.5},
        "b": {"rival": "threshold", "nfe_mean": 12.9, "score_overall": 0.6},
        "c": {"rival": "threshold", "nfe_mean": 13.1, "score_overall": 0.9},  # outside the band
        "d": {"rival": "threshold", "nfe_mean": 18.0, "score_overall": 0.4},
        "e": {"rival": "threshold", "nfe_mean": 17.5, "score_overall": 0.4},  # tie: fewer NFE
        "f": {"rival": "halton", "nfe_mean": 12.0, "score_overall": 0.1},
    }
    got = samplers.picks(settings)
    assert {k: v["setting"] for k, v in got.items()} == {
        "threshold-n12": "b", "threshold-n18": "e", "halton-n12": "f"}


def test_near_takes_the_closest_settings_of_each_rival_to_each_budget() -> None:
    scan = {"settings": {
        f"threshold:tau={t}": {"rival": "threshold", "nfe_mean": n}
        for t, n in ((0.5, 9.0), (0.6, 11.0), (0.7, 12.2), (0.8, 13.4), (0.9, 14.0),
                     (0.95, 18.5))}}
    got = samplers.near(scan)
    assert got[:2] == ["baseline:steps=12", "baseline:steps=18"]
    assert got[2:] == ["threshold:tau=0.7", "threshold:tau=0.6", "threshold:tau=0.8",
                       "threshold:tau=0.95"]


def test_the_picks_table_is_the_committed_validation_pick() -> None:
    """benchmarks/rivals.PICKS is what benchmarks/samplers.py picked on the validation set."""
    doc = json.loads((RESULTS / "samplers_validation.json").read_text())
    assert {k: v["setting"] for k, v in doc["picks"].items()} == rivals.PICKS
    assert doc["meta"]["set"] == "validation" and doc["env"]["git_commit"]
    for name, spec in rivals.PICKS.items():
        budget = int(re.search(r"(\d+)$", name).group(1))
        assert abs(doc["settings"][spec]["nfe_mean"] - budget) <= samplers.BAND


def test_the_sweep_runs_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "v.json"
    doc = samplers.main(["--prompts", "2", "--grid", "", "--settings",
                         "halton:steps=4;threshold:tau=0.5,token=sample,steps=4", "--batch", "2",
                         "--runs", str(tmp_path / "runs"), "--json", str(out)])
    saved = json.loads(out.read_text())
    assert set(saved["settings"]) == set(doc["settings"]) == {
        "halton:steps=4", "threshold:tau=0.5,token=sample,steps=4"}
    assert saved["settings"]["halton:steps=4"]["nfe_mean"] == 4
    assert saved["env"]["git_commit"] and out.with_suffix(".md").is_file()
    again = samplers.main(["--prompts", "2", "--grid", "", "--settings", "halton:steps=4",
                           "--batch", "2", "--runs", str(tmp_path / "runs"), "--json", str(out)])
    assert len(again["meta"]["commands"]) == 2 and len(again["settings"]) == 2


def test_the_quality_and_painting_tables_run_the_picks(tmp_path: Path) -> None:
    from benchmarks import painting, quality

    table = quality.strategy_table(64)
    assert set(rivals.PICKS) <= set(table)
    name = sorted(rivals.PICKS)[0]
    doc = painting.main(["--prompts", "2", "--tasks", "quarter", "--presets", "",
                         "--strategies", name, "--threads", "0", "--max-batch", "2",
                         "--json", str(tmp_path / "p.json")])
    rows = doc["tasks"]["quarter"]["settings"]
    assert list(rows)[:2] == ["baseline-64", name] and f"baseline@{name}" in rows
    assert all(r["known_unchanged"] == r["items"] == 2 for r in rows.values())
    assert [c["b"] for c in doc["tasks"]["quarter"]["compare"]] == ["baseline-64",
                                                                   f"baseline@{name}"]

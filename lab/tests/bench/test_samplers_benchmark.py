"""lab/studies/samplers.py and lab/studies/rivals.py, run as programs: setting strings, the
validation picks and the tables that run them (quality.py, painting.py), end to end on the
shipped nano model at a tiny size."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from support import ROOT
from support.scripts import run_script

from ladr_core import PRESETS, EntropyBound, Halton, HaltonLADR, LADRGlobal, Threshold
from ladr_core.calibrate import strategy_from_spec

RESULTS = ROOT / "lab" / "results"

GOOD = {  # setting -> (strategy, the run's steps)
    "threshold:tau=0.9,token=sample,steps=32": (Threshold(0.9, token="sample"), 32),
    "entropy:gamma=1.5,token=sample,steps=32": (EntropyBound(1.5, token="sample"), 32),
    "halton:steps=12": (Halton(), 12),
    "ladr-global:tau=0.95,steps=128": (LADRGlobal(
        replace(PRESETS["nano"].policy, tau=(0.95,) * 3)), 128),
    "halton-ladr:preset=adaptive": (HaltonLADR(PRESETS["adaptive"].policy), 64),
}
BAD = {
    "threshold:tau": r"'tau' is not key=value",
    "threshold:gamma=1": r"unknown keys \['gamma'\]",
    "fastest:steps=3": r"'fastest' is not a strategy",
    "threshold:tau=2": r"tau must be a finite number in \(0, 1\]",
}


def _rivals(*specs: str, ok: bool = True) -> dict:
    return json.loads(run_script("lab.studies.rivals", *specs, ok=ok).stdout)


def test_a_setting_string_builds_its_strategy() -> None:
    got = _rivals(*GOOD)["settings"]
    for spec, (want, want_steps) in GOOD.items():
        strategy, steps = strategy_from_spec(got[spec]["strategy"])
        assert strategy == want and steps == got[spec]["steps"] == want_steps, spec


def test_a_bad_setting_string_is_named() -> None:
    proc = run_script("lab.studies.rivals", "halton:steps=12", *BAD, ok=False)
    assert proc.returncode == 1
    got = json.loads(proc.stdout)["settings"]
    assert "error" not in got["halton:steps=12"]
    for spec, message in BAD.items():
        assert re.search(message, got[spec]["error"]), (spec, got[spec])


def test_picks_take_the_best_score_within_the_band_of_each_budget(tmp_path: Path) -> None:
    settings = {
        "a": {"rival": "threshold", "nfe_mean": 11.2, "score_overall": 0.5},
        "b": {"rival": "threshold", "nfe_mean": 12.9, "score_overall": 0.6},
        "c": {"rival": "threshold", "nfe_mean": 13.1, "score_overall": 0.9},  # outside the band
        "d": {"rival": "threshold", "nfe_mean": 18.0, "score_overall": 0.4},
        "e": {"rival": "threshold", "nfe_mean": 17.5, "score_overall": 0.4},  # tie: fewer NFE
        "f": {"rival": "halton", "nfe_mean": 12.0, "score_overall": 0.1},
        "g": {"rival": "ladr", "nfe_mean": 17.6, "score_overall": 0.7},
        "h": {"rival": "ladr-global", "nfe_mean": 18.5, "score_overall": 0.8},
        "i": {"rival": "ladr-global", "nfe_mean": 17.8, "score_overall": 0.6},  # LADR's NFE
    }
    out = tmp_path / "v.json"
    out.write_text(json.dumps({"meta": {"prompts": 2}, "settings": settings}))
    run_script("lab.studies.samplers", "--prompts", "2", "--grid", "", "--json", str(out))
    got = json.loads(out.read_text())["picks"]
    assert {k: v["setting"] for k, v in got.items()} == {
        "threshold-n12": "b", "threshold-n18": "e", "halton-n12": "f", "ladr-n18": "g",
        "ladr-global-n18": "h", "ladr-global-eq18": "i"}
    # without any LADR-without-locality setting there is no ablation pick (and no failure)
    out.write_text(json.dumps({"meta": {"prompts": 2}, "settings": {"g": settings["g"]}}))
    run_script("lab.studies.samplers", "--prompts", "2", "--grid", "", "--json", str(out))
    assert {k: v["setting"] for k, v in json.loads(out.read_text())["picks"].items()} == {
        "ladr-n18": "g"}


def test_near_takes_the_closest_settings_of_each_rival_to_each_budget(tmp_path: Path) -> None:
    scan = {"settings": {
        f"threshold:tau={t}": {"rival": "threshold", "nfe_mean": n}
        for t, n in ((0.5, 9.0), (0.6, 11.0), (0.7, 12.2), (0.8, 13.4), (0.9, 14.0),
                     (0.95, 18.5))}}
    path = tmp_path / "scan.json"
    path.write_text(json.dumps(scan))
    proc = run_script("lab.studies.samplers", "--grid", "", "--near", str(path), "--list")
    got = proc.stdout.split()
    assert got[:2] == ["baseline:steps=12", "baseline:steps=18"]
    assert got[2:] == ["threshold:tau=0.7", "threshold:tau=0.6", "threshold:tau=0.8",
                       "threshold:tau=0.95"]


@pytest.mark.committed_result("lab/results/samplers_validation.json")
def test_the_picks_table_is_the_committed_validation_pick() -> None:
    """lab/studies/rivals.PICKS is what lab/studies/samplers.py picked on the validation set."""
    doc = json.loads((RESULTS / "samplers_validation.json").read_text())
    picks = _rivals()["picks"]
    assert {k: v["setting"] for k, v in doc["picks"].items()} == picks
    assert doc["meta"]["set"] == "validation" and doc["env"]["git_commit"]
    for name, spec in picks.items():
        budget = int(re.search(r"(\d+)$", name).group(1))
        assert abs(doc["settings"][spec]["nfe_mean"] - budget) <= doc["meta"]["band"]


def test_the_sweep_runs_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "v.json"
    common = ("--prompts", "2", "--grid", "", "--batch", "2", "--runs", str(tmp_path / "runs"),
              "--json", str(out))
    run_script("lab.studies.samplers", "--settings",
               "halton:steps=4;threshold:tau=0.5,token=sample,steps=4", *common)
    saved = json.loads(out.read_text())
    assert set(saved["settings"]) == {"halton:steps=4", "threshold:tau=0.5,token=sample,steps=4"}
    assert saved["settings"]["halton:steps=4"]["nfe_mean"] == 4
    assert saved["env"]["git_commit"] and out.with_suffix(".md").is_file()
    run_script("lab.studies.samplers", "--settings", "halton:steps=4", *common)
    again = json.loads(out.read_text())
    assert len(again["meta"]["commands"]) == 2 and len(again["settings"]) == 2


def test_the_painting_table_runs_the_picks(tmp_path: Path) -> None:
    name = sorted(_rivals()["picks"])[0]
    out = tmp_path / "p.json"
    run_script("lab.studies.painting", "--prompts", "2", "--tasks", "quarter", "--presets", "",
               "--strategies", name, "--threads", "0", "--max-batch", "2", "--json", str(out))
    doc = json.loads(out.read_text())
    rows = doc["tasks"]["quarter"]["settings"]
    assert list(rows)[:2] == ["baseline-64", name] and f"baseline@{name}" in rows
    assert all(r["known_unchanged"] == r["items"] == 2 for r in rows.values())
    assert [c["b"] for c in doc["tasks"]["quarter"]["compare"]] == ["baseline-64",
                                                                   f"baseline@{name}"]

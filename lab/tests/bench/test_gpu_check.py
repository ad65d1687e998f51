"""lab/benchmarks/gpu_check as a program: the smoke run (tiny shapes on the CPU, no timing claims)
names every section and check the GPU run makes, without diffusers; bad options are refused in
one line with exit status 2; the documents' generated parts match the committed results.

The smoke run compares the CPU with itself, so its equalities say only that every path ran;
what it asserts is that each one ran and reported (a path that breaks fails here before a GPU
run is spent on it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from support import ROOT
from support.scripts import run_script

from ladr_core import preset_names, strategy_names
from ladr_core.calibrate import CALIBRATION_SELF_SCORE, default_candidates

NO_DIFFUSERS = ("import runpy, sys; sys.modules['diffusers'] = None; "
                "sys.argv = ['gpu_check', *sys.argv[1:]]; "
                "runpy.run_module('lab.benchmarks.gpu_check', run_name='__main__')")


@pytest.fixture(scope="module")
def smoke_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gpu_check") / "smoke.json"
    proc = subprocess.run([sys.executable, "-c", NO_DIFFUSERS, "--smoke", "--device", "cpu",
                           "--json", str(out)], cwd=ROOT, text=True, capture_output=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def smoke(smoke_file: Path) -> dict[str, Any]:
    return json.loads(smoke_file.read_text())


def test_smoke_runs_every_section_and_records_the_run(smoke: dict[str, Any]) -> None:
    assert smoke["smoke"] is True and smoke["device"] == "cpu"
    assert {"git_commit", "torch", "utc"} <= set(smoke["env"]) and smoke["torch"]
    for key, name in (("a", "correctness"), ("b", "speed"), ("c", "per_image"),
                      ("d", "calibration")):
        section = smoke["sections"][key]
        assert section["name"] == name and section["status"] == "measured", section
        assert section["seconds"] > 0 and section["estimate_s"] > 0
    assert smoke["seconds"] <= smoke["budget_s"]
    assert smoke["failures"] == []  # what the exit status counts (each with section and case)


def test_smoke_correctness_names_every_case(smoke: dict[str, Any]) -> None:
    a = smoke["sections"]["a"]
    assert a["summary"]["failed"] == 0 and a["summary"]["error"] == 0, a["summary"]
    tiny = a["models"]["tiny"]
    cases = {r["case"]: r for r in tiny["cases"]}
    want = {f"text/{n}" for n in (*strategy_names(), *preset_names())} | {
        "cache/official+baseline", "cache/ladr+ladr-nano", "paint/inpaint", "paint/outpaint",
        "edit/edit", "rolling/2-of-4", "stream/blocks", "compile/eager+official-cache"} | {
        f"format/{f}" for f in ("fp8", "comfy_fp8", "int8", "q8_0", "q4_k_m")}
    assert set(cases) == want
    for name, row in cases.items():
        assert row["check"] == "passed" and row["tokens_equal"], (name, row)
        assert row["syncs"] >= row["steps_run"] - 1, (name, row)  # the sampler's reads seen
    assert cases["rolling/2-of-4"]["item_nfe_device"] == cases["rolling/2-of-4"]["item_nfe_cpu"]
    assert len(cases["rolling/2-of-4"]["item_nfe_device"]) == 4
    rolling = cases["rolling/2-of-4"]  # measured against each item alone on the device
    assert (rolling["items"], rolling["items_agree"], rolling["agreement"]) == (4, 4, 1.0)
    assert [r["format"] for r in tiny["bf16_logits"]] == ["bf16", "fp8", "comfy_fp8", "int8",
                                                          "q8_0", "q4_k_m"]
    assert all(r["bound"] > 0 for r in tiny["bf16_logits"])  # bf16 rounds on the CPU too
    assert tiny["self_score"]["check"] == "passed" and tiny["self_score"]["bound"] > 0
    assert len(a["sampler_syncs"]) == 3 * (len(strategy_names()) + len(preset_names()))
    assert a["models"]["nano"]["status"].startswith("not run")
    assert a["gpu_tests"]["check"].startswith("not run")


def test_smoke_speed_per_image_and_calibration(smoke: dict[str, Any]) -> None:
    b = smoke["sections"]["b"]
    assert set(b["layouts"]) == {"bf16", "fp8", "low_vram", "comfy_fp8", "int8", "q8_0",
                                 "q4_k_m"}
    for name, row in b["layouts"].items():
        assert row["status"] == "measured", (name, row)
        assert row["peak_gib"] > 0 and row["peak_ml_cache_gib"] > 0
        assert set(row["eager"]) == {str(s) for s in b["sizes"]}
    assert all(b["compiled"][k]["status"] == "measured" for k in b["compiled"] if "/" in k)
    assert b["vq_decode"]["status"] == "not measured: no diffusers"
    assert b["previous"]["peak_gib"]["bf16"] > 0  # the older figures, to compare with
    c = smoke["sections"]["c"]
    assert [r["case"] for r in c["per_image"]] == ["baseline-8", "ml-cache-official",
                                                   "ladr-nano", "ladr-nano+ml-cache-ladr"]
    assert c["source"]["file"] == "lab/results/quality_test.json"
    ladr = c["per_image"][2]
    assert ladr["how"] == "projected" and ladr["calls"] == ladr["replayed_nfe"]
    assert [r["in_flight"] for r in c["rolling"]] == [1, 2, 4, 8]
    assert len({r["calls"] for r in c["rolling"]}) > 1  # fewer passes with more in flight
    d = smoke["sections"]["d"]
    assert d["prompts"] == 16 and d["short_run"]["settings"] == ["baseline-4", "nano"]
    passes = CALIBRATION_SELF_SCORE.passes  # the calibration's self-score passes per image
    assert d["short_run"]["image_calls"] == 2 * 16 * (4 + passes)
    full = d["full"]  # every default candidate counted with its measured validation NFE
    assert d["how"] == "projected" and set(full["candidates_nfe"]) == {
        c.name for c in default_candidates(64) if c.role != "reference"}
    assert full["calls_per_image"] == pytest.approx(
        full["reference"] + sum(full["candidates_nfe"].values()) + sum(full["matched_baselines"])
        + full["self_score_passes"])
    assert full["matched_baselines"] == sorted({max(1, round(v)) for v in
                                                full["candidates_nfe"].values()} - {64})


@pytest.mark.parametrize(("args", "names"), [
    (["--smoke", "--device", "cpu", "--sections", "a,speedy"], "--sections: 'speedy'"),
    (["--smoke", "--device", "cpu", "--budget-minutes", "0.05"], "--budget-minutes 0.05"),
    (["--device", "cpu"], "--device cpu"),
    (["--device", "cuda"], "--device cuda"),
])
def test_bad_options_are_one_line_and_exit_2(tmp_path: Path, args: list[str],
                                             names: str) -> None:
    if args == ["--device", "cuda"] and torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    out = tmp_path / "x.json"
    proc = run_script("lab.benchmarks.gpu_check", *args, "--json", str(out), ok=False, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"gpu_check: {names}") and ("give" in lines[0] or "use" in
                                                            lines[0] or "add" in lines[0])
    assert not out.exists()


def test_documents_hold_what_the_committed_results_say() -> None:
    proc = run_script("lab.benchmarks.gpu_check", "--docs", "--check", ok=False, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_documents_render_a_measured_run(smoke_file: Path) -> None:
    """Every block renders from a run's JSON (the smoke's, read as if a GPU had made it),
    writing nothing under --check."""
    proc = run_script("lab.benchmarks.gpu_check", "--docs", "--check", "--json", str(smoke_file),
                      ok=False, timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "docs/reports/GPU.md" in proc.stdout and "docs/USAGE.md" in proc.stdout

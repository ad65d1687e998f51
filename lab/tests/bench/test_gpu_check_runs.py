"""lab/benchmarks/gpu_check's run control, in process with its sections replaced by fakes (no model
is built): where the JSON goes, what counts in the exit status, the budget's estimate of
section a, an optional compile that runs out of time, the alarm with no time left, and the
packages checked before any section.

Unlike test_gpu_check.py (the smoke run as a program), these import the script's modules, so a
section can fail, time can run out and a package can be missing on demand.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from lab.benchmarks.gpu_check import budget, correctness, speed
from lab.benchmarks.gpu_check import main as gc
from lab.benchmarks.gpu_check.cases import Case
from lab.benchmarks.gpu_check.failures import failures
from tests.kit.cuda_emu import emulated_cuda

PROBE = {"full_ms": {"128": 1.0, "64": 1.0}, "block_ms": {"128": 1.0, "64": 1.0},
         "step_ms": {"cpu": 1.0, "device": 1.0}, "sizes": [128, 64]}
SMOKE = ["--smoke", "--device", "cpu"]


def _measured(key: str) -> dict[str, Any]:
    """What each section returns when all is well (the parts the run control reads)."""
    if key == "a":
        return {"models": {"tiny": {"status": "measured", "cases": [
            {"case": "text/baseline", "check": "passed"}]}},
            "sampler_syncs": [], "summary": {"passed": 1, "failed": 0, "error": 0}}
    if key == "b":
        return {"layouts": {"bf16": {"status": "measured"}, "q4_k_m": {"status": "measured"}},
                "compiled": {"status": "pending"}, "vq_decode": {"status": "not measured"}}
    return {}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> SimpleNamespace:
    """main() with the probe and every section faked: ``sections[key]`` is what a section
    returns (or an exception it raises); ``compiled`` is what the compiled shapes return (or
    raise); ``ran`` lists what ran. The committed results folder is kept out of reach."""
    state = SimpleNamespace(sections={k: _measured(k) for k in "abcd"}, ran=[],
                            compiled={"backend": "eager", "layout": "bf16"})
    monkeypatch.delenv("OUT", raising=False)
    monkeypatch.setattr(gc, "RESULTS_DIR", tmp_path / "results")
    monkeypatch.setattr(gc, "probe", lambda device, smoke: dict(PROBE))

    def section(key: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        state.ran.append(key)
        if isinstance(state.sections[key], BaseException):
            raise state.sections[key]
        return json.loads(json.dumps(state.sections[key]))

    def compiled(*args: Any, **kwargs: Any) -> dict[str, Any]:
        state.ran.append("compiled")
        if isinstance(state.compiled, BaseException):
            raise state.compiled
        return dict(state.compiled)

    monkeypatch.setattr(gc, "_run_section", section)
    monkeypatch.setattr(speed, "compiled_section", compiled)
    state.json = tmp_path / "run.json"
    state.doc = lambda: json.loads(state.json.read_text())
    return state


# ------------------------------------------------------------ 1. the JSON's default place
def test_the_json_goes_under_out_when_the_machine_sets_it(fake: SimpleNamespace,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    out = tmp_path / "out"
    monkeypatch.setenv("OUT", str(out))
    assert gc.main(SMOKE) == 0
    assert json.loads((out / "gpu_check_cpu_smoke.json").read_text())["smoke"] is True
    assert not (tmp_path / "results").exists()


def test_the_json_goes_to_the_results_folder_without_out(fake: SimpleNamespace,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    monkeypatch.setenv("OUT", "")
    assert gc.main(SMOKE) == 0
    assert (tmp_path / "results" / "gpu_check_cpu_smoke.json").is_file()


def test_help_says_where_the_json_goes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        gc.parse(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert exit_.value.code == 0
    assert "$OUT" in text and "lab/results/" in text, text


# ---------------------------------------------------------- 5. the alarm with no time left
@pytest.fixture
def alarm() -> Any:
    """The process's SIGALRM handler and timer as they were, whatever the test left."""
    before = signal.getsignal(signal.SIGALRM) if hasattr(signal, "SIGALRM") else None
    yield
    gc._disarm()
    if before is not None:
        signal.signal(signal.SIGALRM, before)


@pytest.mark.parametrize("seconds", [0.0, -3.0])
def test_the_alarm_fires_at_once_when_no_time_is_left(alarm: None, seconds: float) -> None:
    with pytest.raises(gc.OverBudget):
        gc._arm(seconds)
    if hasattr(signal, "getitimer"):
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # nothing left pending


def test_the_alarm_armed_with_time_left_is_disarmed_without_firing(alarm: None) -> None:
    gc._arm(60.0)
    gc._disarm()
    if hasattr(signal, "getitimer"):
        assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


# ------------------------------------------- 4. an optional compile that runs out of time
def test_a_compile_stopped_by_the_budget_is_skipped_not_failed(
        fake: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    def stopped(device: Any, smoke: bool, deadline: Any, compile_s: float,
                out: dict[str, Any]) -> dict[str, Any]:
        out["128/full"] = {"status": "measured", "ms": 1.0, "compile_s": 2.0}
        raise gc.OverBudget  # what the alarm raises inside the next shape's compile

    monkeypatch.setattr(speed, "compiled_section", stopped)
    assert gc.main([*SMOKE, "--json", str(fake.json)]) == 0
    doc = fake.doc()
    compiled = doc["sections"]["b"]["compiled"]
    assert compiled["status"].startswith("not measured: out of time"), compiled
    assert "error" not in compiled and doc["failures"] == []
    assert compiled["128/full"]["status"] == "measured"  # the shape done before it stopped


def test_no_compile_starts_when_the_budget_is_spent(fake: SimpleNamespace,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    spent = {"yes": False}

    def section(key: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        fake.ran.append(key)
        spent["yes"] = key == "d"  # section d used the last of the budget
        return _measured(key)

    monkeypatch.setattr(gc, "_run_section", section)
    real_left = gc.Clock.left
    monkeypatch.setattr(gc.Clock, "left",
                        lambda self: -1.0 if spent["yes"] else real_left(self))
    assert gc.main([*SMOKE, "--json", str(fake.json)]) == 0
    assert fake.ran == ["a", "b", "c", "d"]  # the compiled shapes never started
    compiled = fake.doc()["sections"]["b"]["compiled"]
    assert compiled["status"].startswith("not measured: out of time"), compiled


# ------------------------------------------------------- 2. every failure in the exit status
def test_a_clean_run_exits_0_with_no_failures(fake: SimpleNamespace) -> None:
    assert gc.main([*SMOKE, "--json", str(fake.json)]) == 0
    assert fake.doc()["failures"] == []


def test_a_layout_that_raises_in_section_b_fails_the_run(fake: SimpleNamespace) -> None:
    fake.sections["b"]["layouts"]["q4_k_m"] = {"status": "error",
                                               "error": "RuntimeError: Expected all tensors"}
    assert gc.main([*SMOKE, "--json", str(fake.json)]) == 1
    assert fake.doc()["failures"] == [{"section": "b", "case": "layouts/q4_k_m",
                                       "error": "RuntimeError: Expected all tensors"}]


def test_every_failure_of_every_section_is_counted_and_recorded(fake: SimpleNamespace) -> None:
    a = fake.sections["a"]
    a["models"]["tiny"]["cases"].append({"case": "format/q4_k_m", "check": "error",
                                         "error": "RuntimeError: cpu and cuda"})
    a["models"]["tiny"]["cases"].append({"case": "text/nano", "check": "failed",
                                         "tokens_equal": False, "tokens_differ_share": 0.25})
    a["models"]["nano"] = {"status": "error", "check": "error", "error": "OSError: no file"}
    a["sampler_syncs"].append({"strategy": "halton", "batch": 2, "temperature": 0.0,
                               "syncs": 9, "sampler_reads": 6, "check": "failed"})
    a["gpu_tests"] = {"check": "failed", "returncode": 1, "counts": {"failed": 2}}
    fake.sections["b"]["vq_decode"] = {"status": "error", "error": "ValueError: config"}
    fake.sections["c"] = RuntimeError("CUDA out of memory")
    fake.compiled = {"status": "error", "error": "BackendCompilerFailed: inductor"}
    assert gc.main([*SMOKE, "--json", str(fake.json)]) == 1
    found = fake.doc()["failures"]
    where = [(f["section"], f["case"]) for f in found]
    assert where == [("a", "tiny/format/q4_k_m"), ("a", "tiny/text/nano"), ("a", "nano"),
                     ("a", "sampler_syncs/halton/batch 2/temperature 0.0"), ("a", "gpu_tests"),
                     ("b", "vq_decode"), ("b", "compiled"), ("c", None)]
    errors = dict(zip(where, (f["error"] for f in found), strict=True))
    assert errors[("a", "tiny/format/q4_k_m")] == "RuntimeError: cpu and cuda"
    assert "tokens_differ_share=0.25" in errors[("a", "tiny/text/nano")]
    assert errors[("c", None)] == "RuntimeError: CUDA out of memory"
    assert errors[("b", "compiled")] == "BackendCompilerFailed: inductor"
    assert all(isinstance(e, str) and e for e in errors.values())


def test_a_vq_decode_that_raises_is_a_failure_of_section_b_not_its_end(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any) -> dict[str, Any]:
        raise ValueError("not a VQModel config")

    monkeypatch.setattr(speed, "vq_decode", broken)
    b = speed.section_b(torch.device("cpu"), True, lambda: 0.0, 1.0, None)  # no layout fits
    assert set(b["layouts"]) == set(speed.LAYOUTS) and "previous" in b
    assert b["vq_decode"] == {"status": "error", "error": "ValueError: not a VQModel config"}
    assert failures({"sections": {"b": {"status": "measured", **b}}}) == [
        {"section": "b", "case": "vq_decode", "error": "ValueError: not a VQModel config"}]


# ------------------------------------------------------------- 3. section a's estimate
def _runs_per_case() -> dict[str, int]:
    """How many runs section a makes of one case on the CPU and on the device (run_case, with
    a fake case: no model)."""
    ref, dev = SimpleNamespace(name="cpu"), SimpleNamespace(name="device")
    runs = {"cpu": 0, "device": 0}

    def run(pipe: SimpleNamespace) -> SimpleNamespace:
        runs[pipe.name] += 1
        return SimpleNamespace(tokens=torch.zeros(1, 4, dtype=torch.long), item_nfe=[2],
                               steps=2)

    row = correctness.run_case(Case("text/fake", run, 2), ref, dev, torch.device("cpu"))
    assert row["check"] == "passed", row
    return runs


def _a_estimate(cpu_ms: float, device_ms: float) -> float:
    probe = {**PROBE, "step_ms": {"cpu": cpu_ms, "device": device_ms}}
    return budget.estimates(probe, "cpu", True)["a"]


def test_section_a_is_estimated_with_every_run_it_makes_on_each_side() -> None:
    runs = _runs_per_case()
    assert runs == {"cpu": 1, "device": 2}  # the reference; a warm-up and the counted run
    per_cpu_ms = _a_estimate(1000.0, 0.0) - _a_estimate(0.0, 0.0)
    per_device_ms = _a_estimate(0.0, 1000.0) - _a_estimate(0.0, 0.0)
    assert per_cpu_ms > 0
    assert per_device_ms / per_cpu_ms == pytest.approx(runs["device"] / runs["cpu"])


# ------------------------------------------------- 6. the packages, checked before any section
def _without(monkeypatch: pytest.MonkeyPatch, *missing: str) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in missing else real(name, *a))


def test_every_missing_package_is_named_in_one_message_before_any_section(
        fake: SimpleNamespace, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _without(monkeypatch, "numpy", "safetensors", "tokenizers")
    with pytest.raises(SystemExit) as exit_:
        gc.main([*SMOKE, "--json", str(fake.json)])
    lines = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code != 0 and len(lines) == 1, lines
    assert all(name in lines[0] for name in ("numpy", "safetensors", "tokenizers")), lines
    assert fake.ran == [] and not fake.json.exists()


def test_a_gpu_run_of_section_a_needs_pytest_for_the_gpu_tests(
        fake: SimpleNamespace, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    _without(monkeypatch, "pytest", "tokenizers")
    with emulated_cuda(), pytest.raises(SystemExit) as exit_:  # a CUDA device, emulated
        gc.main(["--device", "cuda", "--json", str(fake.json)])
    err = capsys.readouterr().err
    assert exit_.value.code != 0 and "pytest" in err and "tokenizers" in err, err
    assert fake.ran == [] and not fake.json.exists()

"""python -m ladr_core.calibrate end to end on the tiny fixture checkpoint: the report's JSON,
the recommendation rule, the file beside the checkpoint, resuming, and one clear error per bad
input. No speed is asserted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

import ladr_core
from ladr_core.calibrate import (
    CALIBRATION_FILE,
    CalibrationError,
    calibrate,
    calibrated_strategy,
    fingerprint,
    load_calibration,
)
from ladr_core.calibrate.candidates import default_candidates
from ladr_core.calibrate.cli import main
from ladr_core.calibrate.state import partial_path

ARGS = ["--steps", "4", "--size", "32", "--batch", "2"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.kit.tiny_checkpoint import write_tiny_checkpoint

    return write_tiny_checkpoint(tmp_path_factory.mktemp("cal") / "ckpt")


@pytest.fixture()
def prompts(tmp_path: Path) -> Path:
    p = tmp_path / "prompts.txt"
    p.write_text("a red circle\n\n  a blue square  \nthe circle left of the square\n")
    return p


@pytest.fixture(scope="module")
def finished(folder: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """One complete CLI calibration (the CI run of the whole command)."""
    tmp = tmp_path_factory.mktemp("run")
    (tmp / "p.txt").write_text("a red circle\na blue square\nthe circle left of the square\n")
    out = tmp / "report.json"
    assert main([str(folder), "--prompts", str(tmp / "p.txt"), "--json", str(out), *ARGS]) == 0
    return out, json.loads(out.read_text())


def test_cli_writes_the_report_the_plot_and_the_checkpoint_file(folder, finished) -> None:
    out, report = finished
    names = [c["name"] for c in report["candidates"]]
    assert names[0] == "baseline-4" and {"paper", "paper-gumbel", "adaptive", "nano",
                                         "tau0.5", "tau0.7", "tau0.9", "halton-ladr",
                                         "ladr-global"} <= set(names)
    for c in report["candidates"]:
        assert isinstance(c["name"], str) and c["nfe"] >= 1 and isinstance(c["self_score"], float)
        assert c["token_forwards"] > 0 and c["wall_s"] >= 0
        if c["role"] == "candidate":  # compared with the baseline at its own NFE
            assert c["vs_matched"]["name"] == f"baseline-{max(1, round(c['nfe']))}"
            assert c["vs_matched"]["name"] in names
    assert report["recommended"] in names
    assert report["conditions"]["prompt_texts"] == ["a red circle", "a blue square",
                                                    "the circle left of the square"]
    beside = json.loads((folder / CALIBRATION_FILE).read_text())
    assert beside["checkpoint"]["fingerprint"] == fingerprint(folder)
    assert beside["recommended"] == report["recommended"]
    assert Path(report["plot"]).is_file() and not partial_path(out).exists()
    from PIL import Image

    assert Image.open(report["plot"]).size == (900, 560)


def test_recommendation_follows_the_stated_rule(finished) -> None:
    """Non-inferiority: a setting qualifies only when its interval's lower end is above
    -margin; the cheapest qualifying one is recommended."""
    from ladr_core.calibrate.margin import DEFAULT_MARGIN

    _, report = finished
    margin = report["margin"]["value"]
    assert margin == DEFAULT_MARGIN and "calibration_margin.json" in report["margin"]["source"]
    for c in report["candidates"]:
        ci = c["vs_reference"]
        assert c["below_reference"] == (ci is not None and ci["hi"] < 0)
        low = None if ci is None else min(ci["lo"], c["vs_reference_t"]["lo"])
        assert c["noninferiority_lo"] == low
        assert c["qualifies"] == (ci is None or low > -margin)
    ok = [c for c in report["candidates"] if c["qualifies"]]
    best = min(ok, key=lambda c: (c["token_forwards"], -c["self_score"]))
    assert report["recommended"] == best["name"]
    assert "above -margin" in report["recommend_rule"]
    assert report["why"] and f"why: {report['why']}" in report["text"]


def test_calibrated_strategy_rebuilds_the_recommendation(folder, finished) -> None:
    strategy, steps, data = calibrated_strategy(folder)
    entry = next(c for c in data["candidates"] if c["name"] == data["recommended"])
    assert steps == entry["strategy"]["steps"]  # the T it was measured at (no strategy carries one)
    assert strategy.name == entry["strategy"]["kind"]


class Stop(BaseException):
    """Stands in for ComfyUI's InterruptProcessingException (a BaseException)."""


def test_an_interrupted_calibration_resumes_to_the_same_result(folder, tmp_path) -> None:
    pipe = ladr_core.load_dimoo(folder, dtype=torch.float32)
    items = ["a red circle", "a blue square", "the square"]
    kw = {"steps": 4, "size": 32, "batch": 2, "calibration_file": tmp_path / "c.json",
          "candidates": default_candidates(4)[:3]}
    calls = {"n": 0}

    def stop_later() -> None:  # called between chunks and at every sampler step
        calls["n"] += 1
        if calls["n"] == 14:
            raise Stop()

    out = tmp_path / "r.json"
    with pytest.raises(Stop):
        calibrate(pipe, folder, out, items, check=stop_later, **kw)
    state = partial_path(out)
    assert state.is_file() and not out.exists() and not (tmp_path / "c.json").exists()
    stored = json.loads(state.read_text())
    assert stored["runs"]  # the chunks finished before the stop
    resumed = calibrate(pipe, folder, out, items, **kw)
    fresh = calibrate(pipe, folder, tmp_path / "f.json", items, restart=True, **kw)
    assert resumed["resumed_chunks"] > 0 and fresh["resumed_chunks"] == 0
    for a, b in zip(resumed["candidates"], fresh["candidates"], strict=True):
        assert (a["name"], a["nfe"]) == (b["name"], b["nfe"])
        assert a["self_score"] == pytest.approx(b["self_score"], abs=1e-6)
    assert not state.exists()


def test_a_damaged_partial_state_is_not_trusted(folder, tmp_path) -> None:
    pipe = ladr_core.load_dimoo(folder, dtype=torch.float32)
    out = tmp_path / "r.json"
    partial_path(out).write_text('{"key": {"fingerprint": ')  # cut off mid-write
    report = calibrate(pipe, folder, out, ["a red circle", "a blue square"], steps=4, size=32,
                       calibration_file=tmp_path / "c.json", candidates=default_candidates(4)[:2])
    assert report["resumed_chunks"] == 0 and out.is_file()


def _run(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def test_folder_without_weights(tmp_path, prompts, capsys) -> None:
    empty = tmp_path / "no_weights"
    empty.mkdir()
    (empty / "config.json").write_text("{}")
    code, err = _run([str(empty), "--prompts", str(prompts), "--json", str(tmp_path / "o.json")],
                     capsys)
    assert code == 2 and "no *.safetensors weights" in err and str(empty) in err
    code, err = _run([str(tmp_path / "missing"), "--json", str(tmp_path / "o.json")], capsys)
    assert code == 2 and "not a folder" in err


def test_missing_or_empty_prompt_file(folder, tmp_path, capsys) -> None:
    code, err = _run([str(folder), "--prompts", str(tmp_path / "nope.txt")], capsys)
    assert code == 2 and "nope.txt: file not found" in err
    blank = tmp_path / "blank.txt"
    blank.write_text("\n   \n")
    code, err = _run([str(folder), "--prompts", str(blank)], capsys)
    assert code == 2 and "blank.txt: the file holds no prompt" in err


def test_budget_too_small_for_one_candidate(folder, prompts, tmp_path, capsys) -> None:
    code, err = _run([str(folder), "--prompts", str(prompts), "--json", str(tmp_path / "o.json"),
                      "--budget-minutes", "0.00001", *ARGS], capsys)
    assert code == 2 and "too short for the reference and one candidate" in err
    assert "--budget-minutes" in err and not (tmp_path / "o.json").exists()


def test_calibration_of_another_checkpoint(folder, finished, tmp_path) -> None:
    from tests.kit.tiny_checkpoint import write_tiny_checkpoint

    other = write_tiny_checkpoint(tmp_path / "other", seed=1)
    shutil.copy(folder / CALIBRATION_FILE, other / CALIBRATION_FILE)
    with pytest.raises(CalibrationError, match="checkpoint.fingerprint' belongs to another"):
        calibrated_strategy(other)


@pytest.mark.parametrize("text, match", [
    ('{"format": "ladr-calibration/1", "candidates": [', "damaged calibration file"),
    ('{"format": "something-else"}', "field 'format'"),
    ('{"format": "ladr-calibration/1", "candidates": []}', "field 'candidates'"),
    ('{"format": "ladr-calibration/1", "candidates": [{"name": "a", "nfe": 4, "self_score": 1}],'
     ' "recommended": "b"}', "field 'recommended'")])
def test_damaged_calibration_json(tmp_path, text, match) -> None:
    path = tmp_path / CALIBRATION_FILE
    path.write_text(text)
    with pytest.raises(CalibrationError, match=match) as err:
        load_calibration(path)
    assert str(path) in str(err.value) and "calibrate" in str(err.value)


def test_a_damaged_strategy_entry_names_its_field(folder, finished, tmp_path) -> None:
    data = json.loads((folder / CALIBRATION_FILE).read_text())
    rec = next(c for c in data["candidates"] if c["name"] == data["recommended"])
    rec["strategy"] = {"kind": "ladr", "steps": 64, "policy": {"tau": "high"}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(data))
    with pytest.raises(CalibrationError, match=r"strategy.policy: tau must be a tuple"):
        calibrated_strategy(folder, path)


def test_settings_that_would_overrun_the_budget_are_skipped(folder) -> None:
    """The clock jumps past the budget once the reference is done: every later setting is
    skipped (and said so), and the report still stands on what was measured."""
    from ladr_core.calibrate.report import build_report
    from ladr_core.calibrate.runner import Calibration, CalibrationConfig

    pipe = ladr_core.load_dimoo(folder, dtype=torch.float32)
    now = {"t": 0.0}

    def progress(fraction: float, message: str) -> None:
        if message.startswith("baseline-4") and message.endswith("step 4"):  # its last step
            now["t"] = 1e9

    config = CalibrationConfig(("a red circle", "a blue square"), steps=4, size=32,
                               budget_s=600.0)
    cal = Calibration(pipe, config, None, {}, progress, None, default_candidates(4)[:3],
                      clock=lambda: now["t"])
    runs = cal.run()
    assert list(runs) == ["baseline-4"]
    assert [s["name"] for s in cal.skipped] == ["paper", "paper-gumbel"]
    assert {s["reason"] for s in cal.skipped} == {"budget"}
    report = build_report(runs, config.groups, "baseline-4")
    assert report["recommended"] == "baseline-4"


def test_reports_are_written_with_the_users_permissions(tmp_path) -> None:
    """Written through a temporary file (mkstemp: 0600), the result gets the umask's mode."""
    from ladr_core.calibrate import state

    state.write_json_atomic(tmp_path / "r.json", {"a": 1})
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o666 & ~state._UMASK
    assert json.loads((tmp_path / "r.json").read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_the_command_names_each_built_in_checkpoint_by_a_word(tmp_path, monkeypatch) -> None:
    """`python -m ladr_core.calibrate nano` / `emoji`: the built-in folder, unless a folder of
    that name is in the working directory; any other name is a path as given."""
    from ladr_core.calibrate.cli import BUILT_IN_FOLDERS, model_folder

    monkeypatch.chdir(tmp_path)
    assert set(BUILT_IN_FOLDERS) == {"nano", "emoji"}
    for word, function in BUILT_IN_FOLDERS.items():
        assert model_folder(word) == str(getattr(ladr_core, function)())
    (tmp_path / "emoji").mkdir()
    assert model_folder("emoji") == "emoji" and model_folder("some/folder") == "some/folder"

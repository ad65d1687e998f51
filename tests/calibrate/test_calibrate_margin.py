"""Calibration by non-inferiority, its bad inputs and the A/B contact sheet: the rule on made-up
self-scores (where the answer is known), the margin and prompt-count messages, and the sheet of
a real run on the tiny checkpoint (its cells are the decoded images, enlarged)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from support.calibrate import made_up_run

import ladr_core
from ladr_core import Baseline
from ladr_core.calibrate import CalibrationError, calibrate
from ladr_core.calibrate.candidates import default_candidates
from ladr_core.calibrate.cli import main
from ladr_core.calibrate.margin import (
    DEFAULT_MARGIN,
    PRIOR_SPREAD,
    check_margin,
    prompts_needed,
    shortfall_message,
)
from ladr_core.calibrate.report import build_report
from ladr_core.calibrate.sheet import cell_size, sheet_columns


def _runs(n: int, shift: float, seed: int = 0) -> dict:
    """A reference and a half-cost setting whose per-prompt differences have sd 0.2 around
    ``shift``."""
    rng = np.random.default_rng(seed)
    ref = rng.normal(-0.5, 0.3, n)
    d = rng.normal(0.0, 0.2, n)
    d = (d - d.mean()) / d.std(ddof=1) * 0.2 + shift
    return {"baseline-64": made_up_run("baseline-64", 64, ref, "reference"),
            "baseline-32": made_up_run("baseline-32", 32, ref + d)}


def test_a_setting_qualifies_only_when_shown_within_the_margin() -> None:
    margin = 0.05
    need = prompts_needed(0.2, margin)
    assert need == math.ceil(((1.959964 + 0.841621) * 0.2 / margin) ** 2)
    few = build_report(_runs(12, 0.0), list(range(12)), "baseline-64", margin)
    assert few["recommended"] == "baseline-64"  # an interval reaching 0 is not equality
    cheap = next(c for c in few["candidates"] if c["name"] == "baseline-32")
    assert cheap["vs_reference"]["hi"] > 0 and cheap["vs_reference"]["lo"] < -margin
    assert cheap["spread"] == pytest.approx(0.2) and few["prompts_needed"] == need
    assert f"about {need} prompts" in few["why"] and "baseline-32" in few["why"]
    many = build_report(_runs(4 * need, 0.0), list(range(4 * need)), "baseline-64", margin)
    assert many["recommended"] == "baseline-32" and many["prompts_needed"] is None
    assert "above -0.05" in many["why"]
    # a real loss larger than the margin never qualifies, however many prompts
    worse = build_report(_runs(4 * need, -2 * margin), list(range(4 * need)), "baseline-64",
                         margin)
    assert worse["recommended"] == "baseline-64"
    assert "more than the margin" in worse["why"] and worse["prompts_needed"] is None


def test_why_tells_a_setting_shown_worse_from_one_the_prompts_cannot_judge() -> None:
    """Six prompts: a mean below -margin is not proof of a loss while the interval still
    reaches above -margin; only a setting whose whole interval lies below -margin is called
    shown worse, and more prompts are asked for the others."""
    margin = 0.05
    runs = _runs(6, -0.06)  # baseline-32: mean below -margin, interval wide
    ref = np.array(runs["baseline-64"]["self_score"])
    runs["baseline-16"] = made_up_run("baseline-16", 16, ref - 1.0 + 0.01 * np.arange(6))
    report = build_report(runs, list(range(6)), "baseline-64", margin)
    cheap = next(c for c in report["candidates"] if c["name"] == "baseline-32")
    assert cheap["vs_reference"]["diff"] < -margin < cheap["vs_reference"]["hi"]
    why = report["why"]
    assert report["recommended"] == "baseline-64" and "would not change" not in why
    assert "1 of the 2 cheaper settings are shown to lose more than the margin" in why
    assert "the other 1 (baseline-32)" in why
    assert f"about {report['prompts_needed']} prompts" in why
    del runs["baseline-32"]
    only_worse = build_report(runs, list(range(6)), "baseline-64", margin)
    assert "more prompts would not change that" in only_worse["why"]
    assert only_worse["prompts_needed"] is None


def test_a_few_prompts_that_all_favour_a_setting_do_not_show_it_within_the_margin() -> None:
    """Four prompts, every one a little better under the cheap setting: the bootstrap's
    lower end is 0, Student's t is honest about four prompts."""
    ref = np.array([-0.5, -0.2, -0.9, -0.4])
    runs = {"baseline-64": made_up_run("baseline-64", 64, ref, "reference"),
            "baseline-32": made_up_run("baseline-32", 32, ref + np.array([0.0, 0.3, 0.01, 0.2]))}
    report = build_report(runs, list(range(4)), "baseline-64", 0.05)
    cheap = report["candidates"][1]
    assert cheap["vs_reference"]["lo"] >= 0 > cheap["vs_reference_t"]["lo"] + 0.05
    assert not cheap["qualifies"] and report["recommended"] == "baseline-64"


def test_t_quantiles() -> None:
    from ladr_core.calibrate.stats import paired_t_interval, t_quantile_975

    known = {1: 12.7062, 4: 2.7764, 30: 2.0423, 40: 2.0211, 60: 2.0003, 120: 1.9799}
    for df, want in known.items():
        assert t_quantile_975(df) == pytest.approx(want, abs=2e-4), df
    assert t_quantile_975(10 ** 6) == pytest.approx(1.96, abs=1e-4)
    d = np.array([0.1, 0.3, -0.2, 0.4, 0.0])
    ci = paired_t_interval(d, np.zeros(5))
    half = 2.7764 * d.std(ddof=1) / np.sqrt(5)
    assert ci["lo"] == pytest.approx(d.mean() - half) and ci["hi"] == pytest.approx(
        d.mean() + half) and ci["n"] == 5


@pytest.mark.parametrize("value", [0, -0.01, float("nan"), float("inf"), "abc", True, None])
def test_a_margin_that_is_not_a_positive_number(value) -> None:
    with pytest.raises(CalibrationError, match=r"^margin must be a positive number .*, got .*; "
                       r"leave it out for the fitted default") as info:
        check_margin(value)
    assert isinstance(info.value, ladr_core.InputError) and info.value.name == "margin"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.kit.tiny_checkpoint import write_tiny_checkpoint

    return write_tiny_checkpoint(tmp_path_factory.mktemp("cal") / "ckpt")


@pytest.mark.parametrize("value", ["0", "-1", "nan", "abc"])
def test_cli_refuses_a_bad_margin_before_any_work(folder, tmp_path, capsys, value) -> None:
    out = tmp_path / "o.json"
    code = main([str(folder), "--margin", value, "--json", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --margin must be a positive number")
    assert not out.exists() and not list(tmp_path.iterdir())


def test_the_prompt_shortfall_names_the_prompts_needed() -> None:
    need = prompts_needed(PRIOR_SPREAD, DEFAULT_MARGIN)
    assert shortfall_message(need, 1, DEFAULT_MARGIN) is None
    msg = shortfall_message(need - 1, 1, DEFAULT_MARGIN)
    assert msg.startswith(f"prompts: {need - 1} prompts are too few for margin")
    assert f"about {need} prompts" in msg and "--prompts FILE" in msg


@pytest.fixture(scope="module")
def short_run(folder: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, str]:
    """Three prompts (far too few for the default margin): the CLI warns, runs, writes."""
    import contextlib
    import io

    tmp = tmp_path_factory.mktemp("short")
    (tmp / "p.txt").write_text("a red circle\na blue square\nthe circle left of the square\n")
    out = tmp / "report.json"
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main([str(folder), "--prompts", str(tmp / "p.txt"), "--json", str(out),
                     "--steps", "4", "--size", "32", "--batch", "2",
                     "--calibration-file", str(tmp / "c.json")]) == 0
    return out, json.loads(out.read_text()), err.getvalue()


def test_too_few_prompts_still_write_the_report_and_say_how_many(short_run) -> None:
    out, report, err = short_run
    need = prompts_needed(PRIOR_SPREAD, DEFAULT_MARGIN)
    assert f"warning: prompts: 3 prompts are too few for margin {DEFAULT_MARGIN:g}" in err
    assert f"about {need} prompts" in err
    assert report["warnings"] and report["warnings"][0] in report["text"]
    assert report["recommended"] == report["reference"] == "baseline-4"


def test_the_contact_sheet_shows_the_decoded_images(folder, short_run) -> None:
    from PIL import Image

    out, report, _ = short_run
    assert report["sheet"] == str(out.with_name("report.sheet.png"))
    cols = report["sheet_columns"]
    assert cols == sheet_columns(report) and cols[0] == "baseline-4"
    tf = {c["name"]: c["token_forwards"] for c in report["candidates"]}
    cheaper = sorted((n for n in tf if tf[n] < tf["baseline-4"]), key=lambda n: -tf[n])
    assert cheaper and cols[1:] == cheaper[:3]
    sheet = np.asarray(Image.open(report["sheet"]).convert("RGB"))
    # row 0, column 0: prompt 0, seed 0 under the reference, enlarged 8x (32 px -> 256 px)
    pipe = ladr_core.load_dimoo(folder, dtype=torch.float32)
    res = pipe.generate("a red circle", steps=4, width=32, height=32, seed=0, strategy=Baseline(),
                        cfg=None)
    want = (res.images[0].float().clamp(0, 1) * 255).round().to(torch.uint8).numpy()
    side = cell_size(32)
    assert side == 256
    big = want.repeat(side // 32, axis=0).repeat(side // 32, axis=1)
    from ladr_core.calibrate import sheet as sh

    y, x = sh._TITLE_H + sh._HEAD_H, sh._LABEL_W + sh._PAD
    assert np.array_equal(sheet[y:y + side, x:x + side], big)
    assert sheet.shape == (sh._TITLE_H + sh._HEAD_H + 3 * (side + sh._PAD) + sh._PAD,
                           sh._LABEL_W + len(cols) * (side + sh._PAD) + sh._PAD, 3)


def test_a_sheet_that_cannot_be_written_leaves_the_report(folder, tmp_path) -> None:
    pipe = ladr_core.load_dimoo(folder, dtype=torch.float32)
    out = tmp_path / "r.json"
    (tmp_path / "r.sheet.png").mkdir()  # a folder where the sheet should go
    report = calibrate(pipe, folder, out, ["a red circle", "a blue square"], steps=4, size=32,
                       calibration_file=tmp_path / "c.json",
                       candidates=default_candidates(4)[:2])
    saved = json.loads(out.read_text())
    assert saved["sheet"] is None and report["sheet"] is None
    assert saved["sheet_error"].startswith(f"could not write the contact sheet "
                                           f"{tmp_path / 'r.sheet.png'} (")
    assert "the report is complete" in saved["sheet_error"]
    assert f"warning: {saved['sheet_error']}" in saved["text"]
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name]


def test_the_builtin_list_is_as_long_as_the_margin_needs() -> None:
    from ladr_core.calibrate.api import default_prompts
    from ladr_core.calibrate.prompts import (
        BUILTIN_COUNT,
        BUILTIN_PROMPTS,
        HANDWRITTEN,
        builtin_prompts,
    )

    need = prompts_needed(PRIOR_SPREAD, DEFAULT_MARGIN)
    assert BUILTIN_COUNT == max(len(HANDWRITTEN), need) == len(BUILTIN_PROMPTS)
    assert len(set(BUILTIN_PROMPTS)) == len(BUILTIN_PROMPTS)
    assert BUILTIN_PROMPTS[:16] == HANDWRITTEN and builtin_prompts(40) == BUILTIN_PROMPTS[:40]
    assert shortfall_message(len(BUILTIN_PROMPTS), 1, DEFAULT_MARGIN) is None
    prompts, source = default_prompts(Path("/nonexistent-checkpoint"))
    assert prompts == list(BUILTIN_PROMPTS) and "built-in" in source

"""LADR Calibrate node: runs or loads the checkpoint's calibration, outputs the recommended
strategy, the plot, the text and the contact sheet; Cancel propagates and leaves only a
resumable partial state."""

from __future__ import annotations

import json

import pytest
import torch
from support.nodes import calibrate_outputs

import ladr_core
from ladr_core.calibrate import CALIBRATION_FILE, fingerprint
from ladr_core.calibrate.state import partial_path
from ladr_core.step import Strategy
from nodes import host
from nodes.calibrate import LADRCalibrate

ARGS = {"prompts": "a red circle\na blue square", "seeds": 1, "size": 32, "steps": 4,
        "budget_minutes": 0.0, "batch": 2}


pytestmark = pytest.mark.usefixtures("three_candidates")


def test_the_outputs_are_the_schemas() -> None:
    """Outputs are appended, never reordered: saved workflows keep their links."""
    outputs = LADRCalibrate.define_schema().outputs
    assert [o.id for o in outputs] == ["policy", "report_image", "report", "sheet"]


def test_runs_then_loads_the_saved_calibration(model, monkeypatch) -> None:
    out = calibrate_outputs(model=model, mode="load or run", **ARGS)
    strategy, image, text = out["policy"], out["report_image"], out["report"]
    folder = model.pipe.source_folder
    saved = json.loads((folder / CALIBRATION_FILE).read_text())
    assert isinstance(strategy, Strategy) and f"recommended: {saved['recommended']}" in text
    assert image.shape == (1, 560, 900, 3) and image.dtype == torch.float32
    assert saved["checkpoint"]["fingerprint"] == fingerprint(folder)

    import nodes.calibrate as node

    monkeypatch.setattr(node, "calibrate", lambda *a, **k: pytest.fail("ran again"))
    again = calibrate_outputs(model=model, mode="load or run", **ARGS)
    assert "loaded" in again["report"] and again["policy"] == strategy
    assert torch.equal(again["sheet"], out["sheet"])
    # "load" takes what is saved even when it was made with other inputs
    text = calibrate_outputs(model=model, mode="load", **{**ARGS, "seeds": 3})["report"]
    assert "loaded" in text


def test_other_inputs_run_again(model) -> None:
    LADRCalibrate.execute(model=model, mode="run", **ARGS)
    text = calibrate_outputs(model=model, mode="load or run",
                    **{**ARGS, "prompts": "the circle\nthe square"})["report"]
    assert "other prompts/size/steps: ran again" in text
    saved = json.loads((model.pipe.source_folder / CALIBRATION_FILE).read_text())
    assert saved["conditions"]["prompt_texts"] == ["the circle", "the square"]


def test_load_mode_names_the_missing_file(model) -> None:
    with pytest.raises(ValueError, match=r"^LADR Calibrate: mode is 'load', but no calibration "
                       r"of these weights can be loaded \(.*ladr_calibration.json: no "
                       r"calibration file.*\); set mode to 'load or run'"):
        LADRCalibrate.execute(model=model, mode="load", **ARGS)


@pytest.mark.parametrize(("kw", "needle"), [
    ({"size": 50}, r"^LADR Calibrate: size is 50 px, not a multiple of 4 px \(one token per 4 x "
                   r"4 px on this checkpoint\); use 48 or 52$"),
    ({"size": 2048}, r"^LADR Calibrate: size 2048 x 2048 px need \d+ tokens .*; use a smaller "
                     r"size \(0 = the checkpoint's default\)$"),
    ({"budget_minutes": 0.0001}, r"^LADR Calibrate: budget_minutes is 0.0001 min, too short "
                                 r"for the reference and one candidate .*; raise it to at least "
                                 r"\d+, or use fewer prompts or seeds or a smaller size$"),
])
def test_bad_widget_values_get_one_message_naming_the_widget(model, kw, needle) -> None:
    """Refused before (size) or as (budget) the run starts, one line naming the widget and
    the fix that applies there: no traceback from deep inside, no command-line flag."""
    with pytest.raises(ValueError, match=needle):
        LADRCalibrate.execute(model=model, mode="run", **{**ARGS, **kw})
    assert not (model.pipe.source_folder / CALIBRATION_FILE).exists()


def test_cancel_propagates_and_leaves_no_trusted_file(model, monkeypatch) -> None:
    real = host.check_interrupt
    count = {"n": 0}

    def cancel_later() -> None:
        count["n"] += 1
        if count["n"] == 9:
            host.request_interrupt()
        real()

    monkeypatch.setattr(host, "check_interrupt", cancel_later)
    with pytest.raises(host.FallbackInterrupt):
        LADRCalibrate.execute(model=model, mode="run", **ARGS)
    path = model.pipe.source_folder / CALIBRATION_FILE
    assert not path.exists() and partial_path(path).is_file()
    monkeypatch.setattr(host, "check_interrupt", real)
    text = calibrate_outputs(model=model, mode="load or run", **ARGS)["report"]
    assert path.is_file() and not partial_path(path).exists() and "recommended:" in text


@pytest.mark.parametrize(("kind", "says"), [
    ("ladr", "ran at 12 steps: set the sampler's steps to 12."),
    ("baseline", "the official sampler at 12 steps: set DiMOO Sampling Rule's strategy to "
                 "'baseline' and the sampler's steps to 12"),
    *[(name, f"strategy {name!r} at 12 steps: set DiMOO Sampling Rule's strategy to {name!r} "
             "and the sampler's steps to 12")
      for name in ladr_core.strategy_names() if name not in ("baseline", "ladr")]])
def test_the_text_says_which_sampler_strategy_runs_the_recommendation(monkeypatch, kind: str,
                                                                      says: str) -> None:
    """Every registered kind the calibration can recommend gets the sampler's settings: its
    strategy and the steps it ran at (no strategy brings its own)."""
    import ladr_core.calibrate as calibrate_package
    from nodes.calibrate import _text

    monkeypatch.setattr(calibrate_package, "report_text", lambda report: "table")
    report = {"recommended": "x", "candidates": [{"name": "x", "strategy": {"kind": kind,
                                                                          "steps": 12}}]}
    text = _text(report, "here")
    assert text.startswith("table") and text.endswith("\n(here)")
    assert says in text


def test_the_sheet_output_is_the_contact_sheet_beside_the_checkpoint(model) -> None:
    """The artist sees the sheet the run wrote (same pixels), and a card naming why when a
    saved calibration has none."""
    import numpy as np
    from PIL import Image

    out = calibrate_outputs(model=model, mode="run", **ARGS)
    folder = model.pipe.source_folder
    saved = json.loads((folder / CALIBRATION_FILE).read_text())
    png = folder / "ladr_calibration.sheet.png"
    assert saved["sheet"] == str(png) and png.is_file()
    want = np.asarray(Image.open(png).convert("RGB"), dtype=np.float32) / 255.0
    sheet = out["sheet"]
    assert sheet.dtype == torch.float32 and sheet.shape == (1, *want.shape)
    assert torch.equal(sheet[0], torch.from_numpy(want))
    assert sheet.shape[1] > 256 and sheet.shape[2] > 256  # 32 px images enlarged 8x
    png.unlink()
    card = calibrate_outputs(model=model, mode="load", **ARGS)["sheet"]
    assert card.shape[0] == 1 and card.shape[1:3] != sheet.shape[1:3] and card.min() < 0.5

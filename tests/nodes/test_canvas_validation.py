"""Issue 63: DiMOO Canvas refuses a size off the connected model's grid at /prompt, before
anything runs. ComfyUI calls ``validate_inputs`` without the prompt, so an on-prompt hook
(``note_prompt``) notes which models each canvas's sampler is connected to; without that note
(a prompt from elsewhere, two that disagreed) validation falls back to "on no model's grid"
and the canvas's execution checks the connected grid (tests/nodes/test_nodes_compose.py)."""

from __future__ import annotations

import math

import pytest

from nodes import canvas
from nodes.canvas import CanvasNode, note_prompt

NANO = "dimoo-nano (built-in)"
NANO_50 = ("DiMOO Canvas: width=50 is off the token grid of the connected model dimoo-nano "
           "(one token per 4 x 4 px); nearest valid width: 48 or 52")


def _prompt(model: str, width: object = 48, height: object = 48) -> dict:
    """Load DiMOO Model -> DiMOO Sampler <- DiMOO Canvas (id "2"), as /prompt receives it."""
    return {"prompt": {
        "1": {"class_type": "LADR_LoadDiMOOModel", "inputs": {"model_name": model}},
        "2": {"class_type": "LADR_Canvas", "inputs": {"width": width, "height": height,
                                                      "batch_size": 1}},
        "3": {"class_type": "LADR_DiMOOSampler2",
              "inputs": {"model": ["1", 0], "canvas": ["2", 0]}}}}


@pytest.fixture(autouse=True)
def canvas_id(monkeypatch):
    """ComfyUI hands validate_inputs the node's unique_id (V3 hidden inputs)."""
    monkeypatch.setattr(CanvasNode, "hidden", type("Hidden", (), {"unique_id": "2"}))
    monkeypatch.setattr(canvas, "_NOTED", {})


def test_an_off_grid_size_is_refused_at_validation_naming_the_connected_grid() -> None:
    request = _prompt(NANO, width=50)
    assert note_prompt(request) is request  # the request goes on unchanged
    assert CanvasNode.validate_inputs(width=50, height=48) == NANO_50
    note_prompt(_prompt(NANO, height=50))
    assert CanvasNode.validate_inputs(width=48, height=50) == NANO_50.replace("width", "height")
    note_prompt(_prompt(NANO, width=52, height=44))
    assert CanvasNode.validate_inputs(width=52, height=44) is True  # nano's 4 px grid


def test_the_models_grid_is_read_from_the_prompt_not_guessed(monkeypatch) -> None:
    """64 is on every grid; 52 is on nano's, not on a 16 px model's: refused only there."""
    monkeypatch.setattr(canvas, "model_grid", lambda name: {"big": 16, NANO: 4}.get(name))
    note_prompt(_prompt("big", width=52))
    message = CanvasNode.validate_inputs(width=52, height=48)
    assert message == ("DiMOO Canvas: width=52 is off the token grid of the connected model big "
                       "(one token per 16 x 16 px); nearest valid width: 48 or 64"), message
    note_prompt(_prompt(NANO, width=52))
    assert CanvasNode.validate_inputs(width=52, height=48) is True


def test_without_a_note_validation_refuses_only_what_no_model_draws(monkeypatch) -> None:
    """No hook (or its note already taken): 52 passes (nano draws it; execution checks the
    connected grid), 50 is on no model's grid. Two prompts for the same canvas and size with
    other models, noted before either is validated, leave no note to mislead either."""
    assert CanvasNode.validate_inputs(width=52, height=48) is True
    assert CanvasNode.validate_inputs(width=50, height=48).startswith(
        "DiMOO Canvas: width=50 is on no model's token grid (dimoo-nano draws one token per "
        "4 x 4 px, Lumina-DiMOO 8B one per 16 x 16 px)")
    note_prompt(_prompt(NANO, width=50))
    assert CanvasNode.validate_inputs(width=50, height=48) == NANO_50
    assert CanvasNode.validate_inputs(width=50, height=48) != NANO_50  # taken once
    monkeypatch.setattr(canvas, "model_grid", lambda name: {"big": 16, NANO: 4}.get(name))
    note_prompt(_prompt("big", width=52))
    note_prompt(_prompt(NANO, width=52))
    assert CanvasNode.validate_inputs(width=52, height=48) is True


@pytest.mark.parametrize(("sizes", "message"), [
    ({"width": 4096, "height": 48},
     "DiMOO Canvas: width=4096 is bigger than max of 2048; set width to at most 2048"),
    ({"width": 48, "height": -16},
     "DiMOO Canvas: height=-16 is smaller than min of 0; set height to a size in pixels, or 0 "
     "for the checkpoint's default size"),
])
def test_the_range_is_checked_here_as_comfyui_skips_it_for_named_inputs(sizes, message) -> None:
    note_prompt(_prompt(NANO, **sizes))
    assert CanvasNode.validate_inputs(**sizes) == message


def test_a_linked_or_missing_size_is_left_to_comfyui_and_execution() -> None:
    """A size fed by a link has no value at validation (None); a missing one ComfyUI reports."""
    note_prompt(_prompt(NANO, width=["9", 0]))
    assert CanvasNode.validate_inputs(width=None, height=48) is True
    assert CanvasNode.validate_inputs(height=48) is True
    assert note_prompt({"prompt": "not a prompt"}) == {"prompt": "not a prompt"}


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, "seven", None, 2**70 * 1.0])
def test_a_value_no_int_holds_is_left_to_comfyuis_own_message(value) -> None:
    """ComfyUI's int() conversion refuses it on that input alone, then still calls
    validate_inputs with the raw value: no exception from here (it became "Exception when
    validating inner node" on the sampler's canvas input, found by tests/host's fuzz)."""
    request = _prompt(NANO, width=value)
    assert note_prompt(request) is request
    result = CanvasNode.validate_inputs(width=value, height=48)
    assert result is True or result.startswith("DiMOO Canvas: width="), result
    assert note_prompt(None) is None

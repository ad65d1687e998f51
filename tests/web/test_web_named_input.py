"""web/ladr_named_input.js, in node: ComfyUI 0.33 puts the one message DiMOO Canvas's
validate_inputs returns on width AND height (execution.validate_inputs: one
"custom_validation_failed" per named input, details "<input> - <message>"); the extension keeps
it on the input the message names. Fed here the node's real messages in the host's shape (the
real host's answer: tests/host/test_comfyui_integration.py; drawn: test_web_artist_views.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from nodes.canvas import CanvasNode

ROOT = Path(__file__).resolve().parents[2]
RUN = """
const { onNamedInputs } = await import(process.argv[1]);
console.log(JSON.stringify(onNamedInputs(JSON.parse(process.argv[2]))));
"""


def _host_answer(class_type: str, message: str, inputs: list[str]) -> dict:
    """node_errors as ComfyUI builds them for a validate_inputs naming `inputs`."""
    return {"10": {"class_type": class_type, "dependent_outputs": ["5"], "errors": [
        {"type": "custom_validation_failed", "message": "Custom validation failed for node",
         "details": f"{x} - {message}", "extra_info": {"input_name": x}} for x in inputs]}}


def _kept(node_errors: dict) -> dict:
    if shutil.which("node") is None:
        pytest.skip("needs node")
    out = subprocess.run(["node", "--input-type=module", "-e", RUN,
                          str(ROOT / "web" / "ladr_named_input.js"), json.dumps(node_errors)],
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


@pytest.mark.parametrize("sizes", [{"width": 50, "height": 48}, {"width": 48, "height": 50},
                                   {"width": 4096, "height": 48}, {"width": 48, "height": -16}])
def test_the_canvas_message_stays_on_the_size_it_names(monkeypatch, sizes) -> None:
    monkeypatch.setattr(CanvasNode, "hidden", None)
    message = CanvasNode.validate_inputs(**sizes)
    wrong = next(name for name, v in sizes.items() if v != 48)
    kept = _kept(_host_answer("LADR_Canvas", message, ["width", "height"]))
    assert [e["extra_info"]["input_name"] for e in kept["10"]["errors"]] == [wrong], kept
    assert kept["10"]["errors"][0]["details"] == f"{wrong} - {message}"


def test_other_errors_are_left_as_comfyui_gave_them() -> None:
    foreign = _host_answer("KSampler", "KSampler: width=50 is odd", ["width", "height"])
    assert _kept(foreign) == foreign  # not the pack's node
    vague = _host_answer("LADR_Canvas", "DiMOO Canvas: the sizes disagree", ["width", "height"])
    assert _kept(vague) == vague  # names neither input: left on both
    one = _host_answer("LADR_DiMOOSampler2", "prompt is empty", ["prompt"])
    assert _kept(one) == one

"""DiMOO Edit's multi_view_<view> and multiturn edit types in a real ComfyUI 0.33 server (skipped
without COMFYUI_PATH).

The edit template (example_workflows/api/ladr_dimoo_edit_real_model.json) re-pointed at the tiny
fixture checkpoint (the built-in nano cannot edit; support/comfy_server.py puts the fixture in
the server's lumina_dimoo folder), its 512 px picture scaled by ComfyUI's Image Scale By to the
32 px the fixture's context holds, size "as is". Each new type runs and saves its picture; the
multi-turn stats count both turns; an unknown view is refused at validation on edit_type and
the server runs the next prompt.
"""

from __future__ import annotations

import json
import os

import pytest
from support import ROOT
from support.comfy_server import http, run_workflow

pytestmark = [pytest.mark.comfyui,
              pytest.mark.skipif(not os.environ.get("COMFYUI_PATH"),
                                 reason="set COMFYUI_PATH to a ComfyUI checkout")]


def _key(wf: dict, class_type: str) -> str:
    return next(k for k, n in wf.items() if n["class_type"] == class_type)


def _workflow(edit_type: str, instruction: str, seed: int) -> tuple[dict, str]:
    """The edit template on the fixture checkpoint at 32 px; (workflow, DiMOO Edit's id)."""
    wf = json.loads((ROOT / "example_workflows" / "api" / "ladr_dimoo_edit_real_model.json")
                    .read_text())
    wf[_key(wf, "LADR_LoadDiMOOModel")]["inputs"].update(model_name="tiny-fixture", dtype="fp32")
    scale = str(max(int(k) for k in wf) + 1)
    wf[scale] = {"class_type": "ImageScaleBy", "inputs": {
        "image": [_key(wf, "LoadImage"), 0], "upscale_method": "area", "scale_by": 0.0625}}
    edit = _key(wf, "LADR_DiMOOEdit")
    wf[edit]["inputs"].update(edit_type=edit_type, instruction=instruction, size="as is",
                              steps=6, seed=seed, image=[scale, 0])
    return wf, edit


@pytest.mark.parametrize(("edit_type", "instruction", "seed"), [
    ("multi_view_back", "", 9301),
    ("multiturn", "make the square yellow\nadd a red circle", 9302),
])
def test_new_edit_types_run_and_save_their_picture(server, edit_type, instruction,
                                                   seed) -> None:
    port, _ = server
    wf, edit = _workflow(edit_type, instruction, seed)
    pid, msgs = run_workflow(port, wf)
    assert not [m for m in msgs if m["type"] == "execution_error"], msgs[-1]
    final = [m["data"] for m in msgs if m["type"] == "ladr.step" and m["data"]["node"] == edit][-1]
    turns = instruction.count("\n") + 1 if edit_type == "multiturn" else 1
    assert final["done"] and final["stats"].get("turns", 1) == turns
    assert final["stats"]["steps_planned"] == 6 * turns
    assert final["stats"]["official_nfe_per_image"] == 6 * turns  # the same 6 steps, a run a turn
    _, hist = http(port, f"/history/{pid}")
    outputs = hist[pid]["outputs"]
    (image,) = outputs[_key(wf, "SaveImage")]["images"]
    assert image["filename"].endswith(".png")
    stats = outputs[_key(wf, "PreviewAny")]["text"][0]
    assert ("2 turns of 64 tokens" in stats) == (turns == 2), stats


def test_an_unknown_view_is_refused_on_edit_type_and_the_server_goes_on(server) -> None:
    port, _ = server
    wf, edit = _workflow("multi_view_top", "", 9303)
    status, body = http(port, "/prompt", {"prompt": wf})
    assert status == 400
    errors = body["node_errors"][edit]["errors"]
    assert [e["extra_info"]["input_name"] for e in errors] == ["edit_type"], errors
    assert "multi_view_top" in json.dumps(errors) and "multi_view_back" in json.dumps(errors)
    wf, _ = _workflow("multi_view_left", "", 9304)
    _, msgs = run_workflow(port, wf)
    assert not [m for m in msgs if m["type"] == "execution_error"], msgs[-1]

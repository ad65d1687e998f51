"""Image to image in a real ComfyUI 0.33 server (skipped without COMFYUI_PATH): the shipped
template *Image to image, 3 strengths (nano)* queued as it is (text to image -> its tokens ->
DiMOO Token Canvas -> three DiMOO Samplers at denoise 0.25 / 0.5 / 0.75), the same redraws from
a loaded picture (Load Image -> DiMOO Paint Canvas without a mask), a template saved without
the denoise widget running at 1.0, and a denoise below 1 on a text canvas refused with one
message naming denoise while nothing else runs.
"""

from __future__ import annotations

import json
import os

import pytest
from support import ROOT
from support.comfy_server import NANO_READY, http, run_workflow

from ladr_core import StepSchedule, official_passes

pytestmark = [pytest.mark.comfyui,
              pytest.mark.skipif(not os.environ.get("COMFYUI_PATH"),
                                 reason="set COMFYUI_PATH to a ComfyUI checkout"),
              pytest.mark.skipif(not NANO_READY, reason="needs the shipped dimoo-nano model")]
API = ROOT / "example_workflows" / "api"


def _workflow(name: str, seed: int) -> dict:
    wf = json.loads((API / f"{name}.json").read_text())
    for node in wf.values():  # a seed of its own: ComfyUI would serve cached outputs
        if node["class_type"] == "LADR_DiMOOSampler2":
            node["inputs"]["seed"] = seed
    return wf


def _finals(msgs: list[dict]) -> dict[str, dict]:
    return {m["data"]["node"]: m["data"]["stats"] for m in msgs
            if m["type"] == "ladr.step" and m["data"].get("done")}


def _redraws_run(port: int, wf: dict) -> None:
    """``wf`` runs without an error, saves its pictures, and each sampler with a denoise
    below 1 takes the last steps of its schedule, set against the official sampler at that
    strength."""
    pid, msgs = run_workflow(port, wf)
    assert not [m for m in msgs if m["type"] == "execution_error"], msgs[-1]
    _, hist = http(port, f"/history/{pid}")
    saves = [k for k, n in wf.items() if n["class_type"] == "SaveImage"]
    assert saves and all(hist[pid]["outputs"][k]["images"] for k in saves)
    finals = _finals(msgs)
    samplers = {k: n["inputs"] for k, n in wf.items() if n["class_type"] == "LADR_DiMOOSampler2"}
    assert set(finals) == set(samplers)
    redraws = {k: kw for k, kw in samplers.items() if kw.get("denoise", 1.0) < 1.0}
    assert len(redraws) == 3
    for key, kw in redraws.items():
        st, d = finals[key], kw["denoise"]
        t = st["schedule_steps"]
        assert st["denoise"] == d and st["steps_planned"] == t - StepSchedule(t, d).start
        assert st["official_nfe_per_image"] == official_passes(144, StepSchedule(t, d))


def test_the_three_strengths_template_runs_as_shipped(server) -> None:
    port, _ = server
    wf = _workflow("ladr_nano_img2img_strengths", 9301)
    canvas = {n["inputs"]["canvas"][0] for n in wf.values()
              if n["class_type"] == "LADR_DiMOOSampler2" and "denoise" in n["inputs"]}
    assert [wf[k]["class_type"] for k in canvas] == ["LADR_TokenCanvas"]
    _redraws_run(port, wf)


def test_the_redraws_run_from_a_loaded_picture(server) -> None:
    """The picture route (for photos with the real model): the token canvas swapped for Load
    Image -> DiMOO Paint Canvas without a mask."""
    port, _ = server
    wf = _workflow("ladr_nano_img2img_strengths", 9304)
    key = next(k for k, n in wf.items() if n["class_type"] == "LADR_TokenCanvas")
    wf["90"] = {"class_type": "LoadImage", "inputs": {"image": "ladr_inpaint_circle_square.png"}}
    wf[key] = {"class_type": "LADR_PaintCanvas", "inputs": {
        "image": ["90", 0], "batch_size": 1, "mask_threshold": 0.5, "mask_grow": 0,
        "paste_back": True, "feather": -1, "fit": "exact"}}
    _redraws_run(port, wf)


def test_a_sampler_saved_without_denoise_runs_at_1(server) -> None:
    port, _ = server
    wf = _workflow("ladr_nano_text_to_image", 9302)
    assert all("denoise" not in n["inputs"] for n in wf.values())
    _, msgs = run_workflow(port, wf)
    assert not [m for m in msgs if m["type"] == "execution_error"], msgs[-1]
    assert all("denoise" not in st for st in _finals(msgs).values())


def test_a_text_canvas_below_denoise_1_is_refused_naming_denoise(server) -> None:
    port, _ = server
    wf = _workflow("ladr_nano_text_to_image", 9303)
    sampler = next(n for n in wf.values() if n["class_type"] == "LADR_DiMOOSampler2")
    sampler["inputs"]["denoise"] = 0.5
    _, msgs = run_workflow(port, wf)
    errors = [m["data"] for m in msgs if m["type"] == "execution_error"]
    assert len(errors) == 1 and errors[0]["node_type"] == "LADR_DiMOOSampler2"
    message = errors[0]["exception_message"]
    assert message.startswith("DiMOO Sampler: denoise is 0.5 but the canvas has no picture")
    assert "DiMOO Paint Canvas (no mask)" in message
    assert not [m for m in msgs if m["type"] == "ladr.step"]  # nothing ran
    for bad in (1.5, 0.0):  # out of the widget's range (0, 1]: the host's own check, on denoise
        sampler["inputs"]["denoise"] = bad
        status, body = http(port, "/prompt", {"prompt": wf})
        errors = [e for n in body.get("node_errors", {}).values() for e in n["errors"]]
        assert status == 400 and [e["extra_info"]["input_name"] for e in errors] == ["denoise"]

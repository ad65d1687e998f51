"""Workflows saved by earlier versions of the pack (tests/saved_workflows/<version>/api/: the
API examples as each version shipped them) queued as they are in a real ComfyUI
0.33 server (skipped without COMFYUI_PATH): the nano ones run and save their images, the
real-model ones ask for the checkpoint by name. The UI ones are checked against today's schemas
in tests/nodes/test_saved_workflows.py and loaded and run in the real frontend by
tests/web/test_web_frontend_views.py."""

from __future__ import annotations

import json
import os

import pytest
from support import ROOT
from support.comfy_server import NANO_READY, http, run_workflow

SAVED = ROOT / "tests" / "saved_workflows"
VERSIONS = sorted(p.name for p in SAVED.iterdir() if p.is_dir())
NANO = ["ladr_nano_text_to_image", "ladr_vs_baseline_side_by_side", "ladr_batch_of_prompts",
        "ladr_nano_inpaint_mask_editor", "ladr_nano_outpaint_pad_image"]
pytestmark = [pytest.mark.comfyui,
              pytest.mark.skipif(not os.environ.get("COMFYUI_PATH"),
                                 reason="set COMFYUI_PATH to a ComfyUI checkout"),
              pytest.mark.skipif(not NANO_READY, reason="needs the shipped dimoo-nano model")]


def _saved(version: str, name: str, seed: int) -> dict:
    wf = json.loads((SAVED / version / "api" / f"{name}.json").read_text())
    for node in wf.values():  # a seed of its own: ComfyUI would serve cached outputs
        if node["class_type"] in ("LADR_DiMOOSampler", "LADR_DiMOOEdit"):
            node["inputs"]["seed"] = seed
    return wf


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", NANO)
def test_saved_nano_workflow_runs_as_saved(server, version, name) -> None:
    port, _ = server
    wf = _saved(version, name, 5100 + 10 * VERSIONS.index(version) + NANO.index(name))
    pid, msgs = run_workflow(port, wf)
    assert not [m for m in msgs if m["type"] == "execution_error"], msgs[-1]
    _, hist = http(port, f"/history/{pid}")
    saves = [k for k, n in wf.items() if n["class_type"] == "SaveImage"]
    assert saves and all(hist[pid]["outputs"][k]["images"] for k in saves)
    finals = [m["data"] for m in msgs if m["type"] == "ladr.step" and m["data"]["done"]]
    assert finals and all("official_nfe_per_image" in f["stats"] for f in finals)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", ["ladr_dimoo_1024_real_model", "ladr_dimoo_edit_real_model"])
def test_saved_real_model_workflow_asks_for_the_checkpoint(server, version, name) -> None:
    port, _ = server
    status, body = http(port, "/prompt", {"prompt": _saved(version, name, 5200)})
    assert status == 400
    assert "models/lumina_dimoo/Lumina-DiMOO" in json.dumps(body["node_errors"])

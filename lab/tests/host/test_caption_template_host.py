"""The caption template queued as shipped in a real ComfyUI (tests/host/test_comfyui_understand.py
has its server and helpers), its picture judged by the nano evaluator (lab.nano, through
lab/workflows/graph.py)."""

from __future__ import annotations

import json
import os
import urllib.request
from io import BytesIO

import numpy as np
import pytest
from support.comfy_server import http, run_workflow

from tests.host.test_comfyui_understand import TEMPLATE, _errors, _text, needs_mmu

pytestmark = [pytest.mark.comfyui,
              pytest.mark.skipif(not os.environ.get("COMFYUI_PATH"),
                                 reason="set COMFYUI_PATH to a ComfyUI checkout")]


@needs_mmu
def test_the_caption_template_draws_what_its_caption_says(server) -> None:
    """Queued as shipped: the caption (Preview Any) is the sampler's prompt, so the saved
    picture passes the nano evaluator for it."""
    from PIL import Image

    from lab.workflows.graph import verdict

    port, _ = server
    wf = json.loads(TEMPLATE.read_text())
    pid, msgs = run_workflow(port, wf)
    assert not _errors(msgs), msgs[-1]
    caption = _text(port, pid, next(k for k, n in wf.items() if n["class_type"] == "PreviewAny"
                                    and n["inputs"]["source"][1] == 0
                                    and wf[n["inputs"]["source"][0]]["class_type"]
                                    == "LADR_DiMOOCaption"))
    _, hist = http(port, f"/history/{pid}")
    save = next(k for k, n in wf.items() if n["class_type"] == "SaveImage")
    img = hist[pid]["outputs"][save]["images"][0]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/view?filename={img['filename']}"
                                f"&subfolder={img['subfolder']}&type=output") as r:
        saved = np.asarray(Image.open(BytesIO(r.read())).convert("RGB"))
    assert verdict(caption, saved)["passed"], caption

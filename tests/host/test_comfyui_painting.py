"""Inpainting, outpainting and editing examples in a real ComfyUI 0.33 server (skipped without
COMFYUI_PATH).

The shipped example workflows are queued as they are. Their input images reach the server's
input/ folder the way they reach a user's: the pack copies them there when it loads. Load
Image's own mask (from the PNG's alpha, as the mask editor saves it) and ComfyUI's own Pad Image
for Outpainting feed the sampler. The saved PNGs keep the known pixels (away from the feathered
seam), the step events never show a known token as masked, an image without a painted mask gets
one error naming the sampler's mask input, and the edit example asks for the real checkpoint
(on nano: one error naming the model input, nothing run).
"""

from __future__ import annotations

import json
import os
import urllib.request
from io import BytesIO

import numpy as np
import pytest
from support import ROOT
from support.comfy_server import NANO_READY, http, run_workflow

INPUTS = ROOT / "example_workflows" / "inputs"
pytestmark = [pytest.mark.comfyui,
              pytest.mark.skipif(not os.environ.get("COMFYUI_PATH"),
                                 reason="set COMFYUI_PATH to a ComfyUI checkout"),
              pytest.mark.skipif(not NANO_READY, reason="needs the shipped dimoo-nano model")]


@pytest.fixture(scope="module")
def port(server) -> int:
    port, base = server
    for png in INPUTS.glob("*.png"):  # copied by the pack's on_load, byte for byte
        assert (base / "input" / png.name).read_bytes() == png.read_bytes(), png.name
    return port


def _workflow(name: str, seed: int) -> dict:
    wf = json.loads((ROOT / "example_workflows" / "api" / f"{name}.json").read_text())
    for node in wf.values():  # a seed of its own: ComfyUI would serve cached outputs
        if node["class_type"] in ("LADR_DiMOOSampler2", "LADR_DiMOOEdit"):
            node["inputs"]["seed"] = seed
    return wf


def _saved(port: int, pid: str, wf: dict) -> np.ndarray:
    """The SaveImage node's first PNG as uint8 [H, W, 3]."""
    from PIL import Image

    _, hist = http(port, f"/history/{pid}")
    save = next(k for k, n in wf.items() if n["class_type"] == "SaveImage")
    img = hist[pid]["outputs"][save]["images"][0]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/view?filename={img['filename']}"
                                f"&subfolder={img['subfolder']}&type=output") as r:
        return np.asarray(Image.open(BytesIO(r.read())).convert("RGB"))


def _input(name: str) -> np.ndarray:
    from PIL import Image

    with Image.open(INPUTS / name) as im:
        return np.asarray(im.convert("RGBA"))


def _steps(msgs: list[dict]) -> list[dict]:
    return [m["data"] for m in msgs if m["type"] == "ladr.step"]


def _unmasked_known(steps: list[dict], known: np.ndarray) -> None:
    """No step event shows a known token masked; the progress bar fills once, monotonically."""
    import base64

    assert len(steps) > 1
    for s in steps[:-1]:
        bits = np.unpackbits(np.frombuffer(base64.b64decode(s["masked_bits"]), np.uint8))
        assert not bits[:known.size][known.reshape(-1)].any(), s["step"]
    progress = [s["progress"] for s in steps[:-1]]
    assert progress == sorted(progress) and progress[-1] == 1.0 and progress[0] < 1.0


def test_inpaint_example_keeps_the_known_pixels(port) -> None:
    wf = _workflow("ladr_nano_inpaint_mask_editor", 9101)
    pid, msgs = run_workflow(port, wf)
    assert not [m for m in msgs if m["type"] == "execution_error"], msgs[-1]
    load = next(n for n in wf.values() if n["class_type"] == "LoadImage")
    rgba = _input(load["inputs"]["image"])
    hole = rgba[..., 3] == 0  # Load Image's MASK = 1 - alpha
    known_tokens = ~hole.reshape(12, 4, 12, 4).any(axis=(1, 3))
    assert 0 < known_tokens.sum() < known_tokens.size
    _unmasked_known(_steps(msgs), known_tokens)
    out = _saved(port, pid, wf)
    far = np.ones_like(hole)  # > 2 px (nano's default feather) from the hole
    ys, xs = np.nonzero(hole)
    far[max(0, ys.min() - 2):ys.max() + 3, max(0, xs.min() - 2):xs.max() + 3] = False
    # SaveImage truncates 255 * x to uint8: at most one level off the input
    diff = np.abs(out.astype(int) - rgba[..., :3].astype(int))
    assert diff[far].max() <= 1
    assert diff[hole].max() > 8  # the hole was regenerated, not copied


def test_outpaint_example_keeps_the_top_half(port) -> None:
    wf = _workflow("ladr_nano_outpaint_pad_image", 9102)
    pid, msgs = run_workflow(port, wf)
    assert not [m for m in msgs if m["type"] == "execution_error"], msgs[-1]
    load = next(n for n in wf.values() if n["class_type"] == "LoadImage")
    pad = next(n for n in wf.values() if n["class_type"] == "ImagePadForOutpaint")
    top = _input(load["inputs"]["image"])[..., :3]  # 48 x 24, padded by 24 at the bottom
    assert pad["inputs"]["bottom"] == 24 and top.shape[:2] == (24, 48)
    known_tokens = np.zeros((12, 12), bool)
    known_tokens[:6] = True
    _unmasked_known(_steps(msgs), known_tokens)
    out = _saved(port, pid, wf)
    assert out.shape == (48, 48, 3)
    assert np.abs(out[:22].astype(int) - top[:22].astype(int)).max() <= 1
    grey = np.abs(out[24:].astype(int) - 128).max(axis=-1) <= 2
    assert grey.mean() < 0.5  # the padding's grey was replaced


def test_an_image_without_a_painted_mask_is_refused_on_the_mask(port) -> None:
    wf = _workflow("ladr_nano_inpaint_mask_editor", 9103)
    load = next(n for n in wf.values() if n["class_type"] == "LoadImage")
    load["inputs"]["image"] = "ladr_outpaint_triangle_top.png"  # RGB: no alpha, no mask
    _, msgs = run_workflow(port, wf)
    errors = [m["data"] for m in msgs if m["type"] == "execution_error"]
    assert len(errors) == 1 and errors[0]["node_type"] == "LADR_PaintCanvas"
    message = errors[0]["exception_message"]
    assert message.startswith("DiMOO Paint Canvas: mask is empty") and "mask editor" in message
    assert not _steps(msgs)  # nothing ran


def test_edit_example_asks_for_the_real_checkpoint(port) -> None:
    wf = _workflow("ladr_dimoo_edit_real_model", 9104)
    status, body = http(port, "/prompt", {"prompt": wf})
    assert status == 400
    errors = json.dumps(body["node_errors"])
    assert "Lumina-DiMOO" in errors and "models/lumina_dimoo/Lumina-DiMOO" in errors


def test_edit_example_on_nano_is_refused_on_the_model_input(port) -> None:
    wf = _workflow("ladr_dimoo_edit_real_model", 9105)
    loader = next(n for n in wf.values() if n["class_type"] == "LADR_LoadDiMOOModel")
    loader["inputs"].update(model_name="dimoo-nano (built-in)", dtype="auto")
    _, msgs = run_workflow(port, wf)
    errors = [m["data"] for m in msgs if m["type"] == "execution_error"]
    assert len(errors) == 1 and errors[0]["node_type"] == "LADR_DiMOOEdit"
    assert "model" in errors[0]["exception_message"]
    assert "cannot edit" in errors[0]["exception_message"]
    assert not _steps(msgs)  # nothing ran

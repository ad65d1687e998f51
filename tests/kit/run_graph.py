"""An API-format workflow run in this process, without a ComfyUI server: the pack's nodes by their
`node_id` (their own `execute`, against ComfyUI's V3 API or the tests' stand-in of it), the
ComfyUI nodes that feed them modelled as ComfyUI 0.33 computes them (Load Image, Pad Image for
Outpainting without feathering, ComfyUI-Distributed's Distributed Seed on the master). Only what
the asked-for nodes depend on runs. The thumbnails (lab/workflows/thumbnails.py) and the saved
workflows' token tests (tests/nodes/test_saved_workflows.py) use it; queuing a workflow in a real ComfyUI
is tests/host/."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[2]
INPUTS_DIR = ROOT / "example_workflows" / "inputs"
SAMPLERS = ("LADR_DiMOOSampler", "LADR_DiMOOSampler2", "LADR_DiMOOEdit")


def load_image(name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A example_workflows/inputs file as ComfyUI's Load Image gives it: IMAGE [1, H, W, 3] and MASK
    [1, H, W] = 1 - alpha (an image without alpha: an empty mask of its size)."""
    import numpy as np
    from PIL import Image

    with Image.open(INPUTS_DIR / name) as im:
        rgba = np.asarray(im.convert("RGBA"), dtype=np.float32) / 255.0
    t = torch.from_numpy(rgba)[None]
    return t[..., :3].contiguous(), 1.0 - t[..., 3]


def pad_for_outpainting(image: torch.Tensor, left: int, top: int, right: int, bottom: int,
                        feathering: int) -> tuple[torch.Tensor, torch.Tensor]:
    """What ComfyUI's Pad Image for Outpainting gives without feathering: the image on grey 0.5,
    mask 1 on the padding and 0 on the image."""
    if feathering:
        raise ValueError("Pad Image for Outpainting is modelled with feathering 0 only")
    b, h, w, c = image.shape
    out = torch.full((b, h + top + bottom, w + left + right, c), 0.5)
    out[:, top:top + h, left:left + w] = image
    mask = torch.ones(b, h + top + bottom, w + left + right)
    mask[:, top:top + h, left:left + w] = 0.0
    return out, mask


def _core(class_type: str, kw: dict) -> tuple:
    if class_type == "LoadImage":
        return load_image(kw["image"])
    if class_type == "ImagePadForOutpaint":
        return pad_for_outpainting(kw["image"], kw["left"], kw["top"], kw["right"],
                                   kw["bottom"], kw["feathering"])
    if class_type == "DistributedSeed":  # the master (participant 0): its seed unchanged
        return (int(kw["seed"]),)
    raise ValueError(f"{class_type}: not modelled in this process")


def run_node(wf: dict, key: str, model: Any, done: dict[str, tuple]) -> tuple:
    """Node `key`'s outputs, its links run first (once each, kept in `done`); Load DiMOO Model
    gives `model` (a nodes.handles.DiMOOModel)."""
    from nodes import node_classes

    if key in done:
        return done[key]
    node = wf[key]
    kw = {name: run_node(wf, str(v[0]), model, done)[v[1]] if isinstance(v, list) else v
          for name, v in node["inputs"].items()}
    classes = {c.define_schema().node_id: c for c in node_classes()}
    if node["class_type"] == "LADR_LoadDiMOOModel":
        done[key] = (model,)
    elif node["class_type"] in classes:
        out = classes[node["class_type"]].execute(**kw)
        if inspect.isawaitable(out):  # an async execute (DiMOO Canvas), as ComfyUI awaits it
            out = asyncio.run(out)
        done[key] = tuple(out.args)
    else:
        done[key] = _core(node["class_type"], kw)
    return done[key]


def run_samplers(wf: dict, model: Any, kinds: tuple[str, ...] = SAMPLERS) -> dict[str, tuple]:
    """Every sampler node of `wf` (of `kinds`: DiMOO Sampler, its legacy twin, DiMOO Edit) run
    in this process: node id -> (tokens, stats line)."""
    done: dict[str, tuple] = {}
    return {key: run_node(wf, key, model, done) for key, node in wf.items()
            if node["class_type"] in kinds}

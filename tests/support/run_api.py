"""An API-format workflow executed in this process, without a ComfyUI server: the pack's nodes by
their `node_id` (their own `execute`), the ComfyUI nodes that feed them modelled as ComfyUI 0.33
computes them (Load Image, Pad Image for Outpainting without feathering, ComfyUI-Distributed's
Distributed Seed on the master). Only the nodes a DiMOO Sampler or Edit depends on run; what
their outputs feed (decode, previews, saves) does not.

`sampled_tokens(wf, model)` -> {sampler node id: its tokens [B, N] as lists}: what the saved
workflows' token tests compare (tests/nodes/test_saved_workflows.py)."""

from __future__ import annotations

from typing import Any

import torch

from nodes import node_classes

SAMPLERS = ("LADR_DiMOOSampler", "LADR_DiMOOSampler2", "LADR_DiMOOEdit")


def _core(class_type: str, kw: dict) -> tuple:
    from workflows.thumbnails import load_image, pad_for_outpainting

    if class_type == "LoadImage":
        return load_image(kw["image"])
    if class_type == "ImagePadForOutpaint":
        return pad_for_outpainting(kw["image"], kw["left"], kw["top"], kw["right"],
                                   kw["bottom"], kw["feathering"])
    if class_type == "DistributedSeed":
        return (int(kw["seed"]),)
    raise ValueError(f"{class_type}: not modelled in this process")


def run_node(wf: dict, key: str, model: Any, done: dict[str, tuple]) -> tuple:
    """Node `key`'s outputs (its links run first; Load DiMOO Model gives `model`)."""
    if key in done:
        return done[key]
    node = wf[key]
    kw = {name: run_node(wf, str(v[0]), model, done)[v[1]] if isinstance(v, list) else v
          for name, v in node["inputs"].items()}
    classes = {c.define_schema().node_id: c for c in node_classes()}
    if node["class_type"] == "LADR_LoadDiMOOModel":
        done[key] = (model,)
    elif node["class_type"] in classes:
        done[key] = tuple(classes[node["class_type"]].execute(**kw).args)
    else:
        done[key] = _core(node["class_type"], kw)
    return done[key]


def sampled_tokens(wf: dict, model: Any) -> dict[str, list]:
    """Every sampler node of `wf` run in this process: node id -> tokens [B, N] (lists)."""
    done: dict[str, tuple] = {}
    out = {}
    for key, node in wf.items():
        if node["class_type"] in SAMPLERS:
            tokens = run_node(wf, key, model, done)[0].tokens
            out[key] = torch.as_tensor(tokens).tolist()
    return out

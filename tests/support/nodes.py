"""What the node tests share: the sampler's default widget values, the nano pipeline loaded once
per session, and the packed bitmaps of the step events."""

from __future__ import annotations

import base64

import numpy as np
import torch

import ladr_core

SAMPLER_DEFAULTS = dict(prompt="a red circle", negative_prompt="", width=48, height=48, steps=12,
                        cfg=0.75, temperature=1.0, seed=3, batch_size=1, strategy="ladr",
                        one_prompt_per_line=False)
_NANO: list = []


def nano_pipe():  # noqa: ANN201 - the real DiMOOPipeline, loaded once per session
    if not _NANO:
        _NANO.append(ladr_core.load_dimoo(ladr_core.nano_model_path(), dtype=torch.float32))
    return _NANO[0]


def bits(b64: str, n: int) -> np.ndarray:
    """A step event's packed bitmap (nodes/events.pack_bits) -> bool [n]."""
    return np.unpackbits(np.frombuffer(base64.b64decode(b64), np.uint8))[:n].astype(bool)


def policy_fields(**kw) -> dict:
    """LADR Policy's widget defaults (every input but the preset), with ``kw`` over them."""
    from nodes.policy import LADRPolicyNode

    d = {i.id: i.default for i in LADRPolicyNode.define_schema().inputs if i.id != "preset"}
    return {**d, **kw}


def calibrate_outputs(**kw) -> dict:
    """LADR Calibrate's outputs by the names its schema gives them (one value per output)."""
    from nodes.calibrate import LADRCalibrate

    names = [o.id for o in LADRCalibrate.define_schema().outputs]
    values = LADRCalibrate.execute(**kw).args
    assert len(values) == len(names)
    return dict(zip(names, values, strict=True))

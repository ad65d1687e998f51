"""The loader's ComfyUI wiring against the REAL comfy package (skipped unless COMFYUI_PATH is set).

    COMFYUI_PATH=/work/comfyui COMFYUI_PYTHON=/work/comfy-venv/bin/python \
        .venv/bin/python -m pytest -q tests/host/test_comfy_memory.py

A child interpreter imports ComfyUI's `comfy` (CPU mode), then the pack's loader node: the
transformer must be built from `comfy.ops` classes and wrapped in its own ModelPatcher; a
partial load (ModelPatcher.load with a few hundred KB of "VRAM") must leave layers offloaded and
cast at use, with logits identical to ladr_core's own model, for bf16-style and fp8 weights; and
`host.load_to_device` must load without forcing a full load. A folder saved in fp8 loads as
stored with the default weight_dtype (ComfyUI's plain classes) and gives the same logits.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.comfy_child import run_child

ROOT = Path(__file__).resolve().parents[2]
COMFY = os.environ.get("COMFYUI_PATH")
pytestmark = [pytest.mark.comfyui,
              pytest.mark.skipif(not COMFY, reason="set COMFYUI_PATH to a ComfyUI checkout")]

CHILD = r"""
import json, sys
sys.path[:0] = [ROOT, COMFY]  # our `nodes` package before ComfyUI's nodes.py
from comfy.cli_args import args
args.cpu = True
import torch, comfy.ops, comfy.model_management as mm, comfy.model_patcher as mp
import ladr_core
from nodes import host, loader

ids = torch.tensor([[3, 7, 14, 20, 2, 2, 33, 40, 41, 9, 5, 1, 100, 200, 17]])
calls = []
real_load = mm.load_models_gpu
def spy(models, *a, **kw):
    calls.append({"n": len(models), "full": bool(kw.get("force_full_load", False))})
    return real_load(models, *a, **kw)
mm.load_models_gpu = spy
out = {}
for wd in ("default", "fp8_e4m3fn"):
    handle = loader.load_model(loader.NANO, "fp32", wd)
    t = handle.pipe.transformer
    q = t.blocks[0].q_proj
    ref = ladr_core.load_dimoo(ladr_core.nano_model_path(), dtype=torch.float32,
                               weight_dtype=None if wd == "default" else wd)
    with torch.no_grad():
        want = ref.transformer(ids)
        patcher = handle.patcher.transformer
        patcher.load(torch.device("cpu"), lowvram_model_memory=300_000)
        casting = sum(bool(getattr(m, "comfy_cast_weights", False)) for m in t.modules())
        lowvram = bool(t.model_lowvram)
        got = t(ids)
        calls.clear()
        host.load_to_device(handle.patcher)
        host.load_to_device(handle.patcher, vq_only=True)
        full = t(ids)
    out[wd] = {
        "patcher": type(patcher).__name__, "is_model_patcher": isinstance(patcher, mp.ModelPatcher),
        "vq_patcher": handle.patcher.vq is not None,
        "linear_is_comfy": isinstance(q, comfy.ops.disable_weight_init.Linear),
        "linear_is_manual_cast": isinstance(q, comfy.ops.manual_cast.Linear),
        "wte_is_comfy": isinstance(t.model.transformer.wte, comfy.ops.disable_weight_init.Embedding),
        "weight_dtype": str(q.weight.dtype), "lowvram": lowvram, "casting": casting,
        "max_diff_partial": float((got - want).abs().max()),
        "max_diff_full": float((full - want).abs().max()),
        "device": str(t.device), "load_calls": calls[:],
    }
import tempfile
pipe8 = ladr_core.load_dimoo(ladr_core.nano_model_path(), dtype=torch.float32,
                             weight_dtype="fp8_e4m3fn")
folder = ladr_core.save_dimoo(pipe8, tempfile.mkdtemp() + "/nano-fp8")
loader.resolve_model_path = lambda name: str(folder)
handle = loader.load_model("nano-fp8", "fp32")  # weight_dtype "default": loads as stored
t = handle.pipe.transformer
with torch.no_grad():
    want = pipe8.transformer(ids)
    resident = t(ids)
    handle.patcher.transformer.load(torch.device("cpu"), lowvram_model_memory=300_000)
    partial = t(ids)
q = t.blocks[0].q_proj
out["saved_fp8_default"] = {
    "weight_dtype": str(q.weight.dtype), "lowvram": bool(t.model_lowvram),
    "linear_is_comfy": isinstance(q, comfy.ops.disable_weight_init.Linear),
    "max_diff_resident": float((resident - want).abs().max()),
    "max_diff_partial": float((partial - want).abs().max())}
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def result() -> dict:
    return run_child(CHILD)


@pytest.mark.parametrize("weight_dtype", ["default", "fp8_e4m3fn"])
def test_transformer_is_built_from_comfy_ops_and_loads_partially(result: dict,
                                                                 weight_dtype: str) -> None:
    r = result[weight_dtype]
    assert r["is_model_patcher"] and r["vq_patcher"]
    assert r["linear_is_comfy"] and r["wte_is_comfy"]
    assert r["linear_is_manual_cast"] == (weight_dtype != "default")
    assert r["weight_dtype"] == ("torch.float32" if weight_dtype == "default"
                                 else "torch.float8_e4m3fn")
    assert r["lowvram"] and r["casting"] > 0  # layers left offloaded, cast at use
    assert r["max_diff_partial"] <= 1e-5 and r["max_diff_full"] <= 1e-5
    assert r["device"] == "cpu"


def test_load_to_device_does_not_force_a_full_transformer_load(result: dict) -> None:
    calls = result["default"]["load_calls"]
    # VQ whole, then transformer (+ VQ kept) without force_full_load; then VQ alone to decode
    assert calls == [{"n": 1, "full": True}, {"n": 2, "full": False}, {"n": 1, "full": True}]


def test_a_saved_fp8_folder_loads_as_stored_with_default_weight_dtype(result: dict) -> None:
    r = result["saved_fp8_default"]
    assert r["weight_dtype"] == "torch.float8_e4m3fn" and r["linear_is_comfy"] and r["lowvram"]
    assert r["max_diff_resident"] <= 1e-5 and r["max_diff_partial"] <= 1e-5

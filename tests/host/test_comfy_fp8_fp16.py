"""fp8 in float16 inside the REAL ComfyUI (skipped unless COMFYUI_PATH is set): the layers
ComfyUI runs keep a real 8B layer's output finite (magnitudes: tests/kit/magnitudes.py).

    COMFYUI_PATH=... COMFYUI_PYTHON=... .venv/bin/python -m pytest -q tests/host/test_comfy_fp8_fp16.py

A child interpreter imports ComfyUI (CPU mode) and runs, in float16:

* the pack's fp8 over ``comfy.ops.manual_cast.Linear`` (what Load DiMOO Model builds in ComfyUI),
  resident, and through ComfyUI's own cast at use (``cast_bias_weight`` with its
  ``weight_function`` list, the path of a layer a low-VRAM load leaves in RAM: on a CPU no layer
  is on another device, so the child calls that path directly);
* ComfyUI's fp8 format in ``comfy.ops.mixed_precision_ops`` (fp8 emulated on a CPU, as on a
  card without fp8 matmuls).
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
sys.path[:0] = [ROOT, COMFY]
from comfy.cli_args import args
args.cpu = True
import torch, comfy.ops
from ladr_core.dimoo.weights import fp8, quant
from tests.kit.magnitudes import K, ROWS, layer_data, reference

w, x = layer_data()
h = x.half()
def report(y, want):
    return {"finite": bool(torch.isfinite(y).all()), "dtype": str(y.dtype),
            "rel": float((y.float() - want).norm() / want.norm())}
out = {}
base = comfy.ops.manual_cast.Linear
q, s = fp8.quantize(w, torch.float8_e4m3fn)
layer = fp8.scaled_linear_class(base)(K, ROWS)
layer.load_state_dict({"weight": q, "weight_scale": s}, assign=True)
layer.requires_grad_(False)
want = reference(fp8.dequantize(q, s), x)
out["pack_resident"] = report(layer(h), want)
layer.comfy_cast_weights = True
out["pack_host_cast"] = report(fp8._host_cast_forward(layer, base, h), want)
out["host_list_back"] = len(layer.weight_function) == 0
stored = quant.quantize_layer(w, "float8_e4m3fn")
ops = comfy.ops.mixed_precision_ops({"mixed_ops": True}, torch.float16,
                                    disabled={"float8_e4m3fn", "float8_e5m2"})
mixed = ops.Linear(K, ROWS, bias=False)
mixed.load_state_dict({"weight": stored["weight"], "weight_scale": stored["weight_scale"],
                       "comfy_quant": quant.quant_conf_tensor("float8_e4m3fn")}, strict=False)
out["comfy_format"] = report(mixed(h), reference(stored["weight"].float() *
                                                  stored["weight_scale"], x))
out["comfy_format_quantized"] = type(mixed.weight).__name__
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def result() -> dict:
    return run_child(CHILD)


@pytest.mark.parametrize("path", ["pack_resident", "pack_host_cast", "comfy_format"])
def test_fp8_in_float16_keeps_a_real_layers_output_finite_in_comfyui(result: dict,
                                                                       path: str) -> None:
    r = result[path]
    assert r["dtype"] == "torch.float16" and r["finite"], r
    assert r["rel"] < 0.05, r


def test_comfyui_loads_its_fp8_format_as_quantized_and_gets_its_weight_functions_back(
        result: dict) -> None:
    assert result["comfy_format_quantized"] == "QuantizedTensor"
    assert result["host_list_back"]

"""Quantized DiMOO inside the REAL ComfyUI (skipped unless COMFYUI_PATH is set).

    COMFYUI_PATH=/work/host/ComfyUI COMFYUI_PYTHON=/work/host/venv/bin/python \
        .venv/bin/python -m pytest -q tests/host/test_comfy_quant.py

A child interpreter imports ComfyUI (CPU mode) and converts the shipped nano model with the
pack's converter into ComfyUI's quantized format (fp8 with calibrated input scales, int8) and
into GGUF Q4_K_M. Then:

* ComfyUI's own ``comfy.utils.convert_old_quants`` reads our shards' ``_quantization_metadata``
  into the same per-layer ``comfy_quant`` entries the pack builds;
* the loader node builds the transformer from ``comfy.ops.pick_operations`` (ComfyUI's
  ``mixed_precision_ops``: ``QuantizedTensor`` weights in comfy-kitchen layouts) and its
  logits equal the pack's own loader, resident and partially loaded;
* ComfyUI's fast paths (fp8 input quantization + ``scaled_mm``, int8 ``int8_linear``; on a CPU
  when no format is marked emulated) equal the pack's ``QuantLinear`` arithmetic;
* a GGUF file loads through the node with ``comfy.ops.manual_cast``-derived layers that a
  partial load leaves in RAM, with the pack's logits.
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
import json, sys, tempfile
from pathlib import Path
sys.path[:0] = [ROOT, COMFY]  # our `nodes` package before ComfyUI's nodes.py
from comfy.cli_args import args
args.cpu = True
import torch, comfy.ops, comfy.utils, comfy.quant_ops
import ladr_core
from ladr_core.dimoo.input_ranges import measure_input_ranges
from ladr_core.dimoo.weights.convert import Conversion, convert_folder
from ladr_core.dimoo.weights.files import read_config
from ladr_core.dimoo.weights.gguf_write import write_gguf
from ladr_core.dimoo.weights.quant_load import load_quantized_transformer
from nodes import loader

ids = torch.tensor([[3, 7, 14, 20, 2, 2, 33, 40, 41, 9, 5, 1, 100, 200, 17]])
tmp = Path(tempfile.mkdtemp())
nano = ladr_core.nano_model_path()
amax = measure_input_ranges(nano, ["a red circle", "two blue squares left of a green triangle"])
folders = {
    "fp8": convert_folder(nano, tmp / "fp8", Conversion(
        "comfy_fp8_e4m3fn", torch.float32, input_amax={k: 2 * v for k, v in amax.items()})),
    "int8": convert_folder(nano, tmp / "int8", Conversion("comfy_int8", torch.float32)),
    "gguf": write_gguf(nano, tmp / "nano-Q4_K_M.gguf", "Q4_K_M"),
}
config, _, _ = read_config(nano)
out = {}

def rel(a, b):
    return float((a - b).norm() / b.norm())

for name in ("fp8", "int8"):
    shard = folders[name] / "model-00001-of-00001.safetensors"
    sd, meta = comfy.utils.load_torch_file(str(shard), return_metadata=True)
    sd, _ = comfy.utils.convert_old_quants(sd, "", metadata=meta)
    theirs = {k: json.loads(bytes(v.tolist())) for k, v in sd.items() if k.endswith("comfy_quant")}
    own = ladr_core.load_dimoo(folders[name], dtype=torch.float32)
    loader.resolve_model_path = lambda n, p=folders[name]: str(p)
    handle = loader.load_model(name, "fp32")
    t = handle.pipe.transformer
    q = t.blocks[0].q_proj
    with torch.no_grad():
        want = own.transformer(ids)
        resident = t(ids)
        handle.patcher.transformer.load(torch.device("cpu"), lowvram_model_memory=300_000)
        partial = t(ids)
        casting = sum(bool(getattr(m, "comfy_cast_weights", False)) for m in t.modules())
        fast_ops = comfy.ops.mixed_precision_ops({"mixed_ops": True}, torch.float32, disabled=[])
        fast = load_quantized_transformer(folders[name], config, torch.float32,
                                          torch.device("cpu"), operations=fast_ops)
        for m in own.transformer.modules():
            if hasattr(m, "quantize_input"):
                m.quantize_input = True
        w8a8_own, w8a8_comfy = own.transformer(ids), fast(ids)
    out[name] = {
        "comfy_quant_layers": len(theirs),
        "comfy_quant_formats": sorted({v["format"] for v in theirs.values()}),
        "ops": type(q).__qualname__, "is_quantized_tensor": isinstance(
            q.weight, comfy.quant_ops.QuantizedTensor),
        "layout": getattr(q, "layout_type", None), "emulated": bool(q._full_precision_mm),
        "head_is_plain": not isinstance(t.model.transformer.ff_out.weight,
                                        comfy.quant_ops.QuantizedTensor),
        "lowvram": bool(t.model_lowvram), "casting": casting,
        "rel_resident": rel(resident, want), "rel_partial": rel(partial, want),
        "rel_fast": rel(w8a8_comfy, w8a8_own), "fast_emulated": bool(
            fast.blocks[0].q_proj._full_precision_mm)}

own = ladr_core.load_dimoo(folders["gguf"], dtype=torch.float32)
loader.resolve_model_path = lambda n: str(folders["gguf"])
handle = loader.load_model("nano-Q4_K_M.gguf", "fp32")
t = handle.pipe.transformer
with torch.no_grad():
    want = own.transformer(ids)
    resident = t(ids)
    handle.patcher.transformer.load(torch.device("cpu"), lowvram_model_memory=300_000)
    partial = t(ids)
out["gguf"] = {
    "linear_is_manual_cast": isinstance(t.blocks[0].q_proj, comfy.ops.manual_cast.Linear),
    "wte_is_manual_cast": isinstance(t.model.transformer.wte, comfy.ops.manual_cast.Embedding),
    "weight_dtype": str(t.blocks[0].q_proj.weight.dtype), "lowvram": bool(t.model_lowvram),
    "casting": sum(bool(getattr(m, "comfy_cast_weights", False)) for m in t.modules()),
    "rel_resident": rel(resident, want), "rel_partial": rel(partial, want)}
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def result() -> dict:
    return run_child(CHILD, timeout=900)


@pytest.mark.parametrize(("name", "fmt", "layout"), [
    ("fp8", "float8_e4m3fn", "TensorCoreFP8E4M3Layout"),
    ("int8", "int8_tensorwise", "TensorWiseINT8Layout")])
def test_comfyui_reads_our_metadata_and_loads_through_mixed_precision_ops(
        result: dict, name: str, fmt: str, layout: str) -> None:
    r = result[name]
    assert r["comfy_quant_layers"] == 6 * 7 and r["comfy_quant_formats"] == [fmt]
    assert "MixedPrecisionOps" in r["ops"] and r["is_quantized_tensor"] and r["layout"] == layout
    assert r["emulated"] == (name == "fp8")  # a CPU has no fp8 matmul: ComfyUI emulates it
    assert r["head_is_plain"]


@pytest.mark.parametrize("name", ["fp8", "int8"])
def test_comfyui_logits_equal_the_packs_own_loader_resident_and_partial(result: dict,
                                                                        name: str) -> None:
    r = result[name]
    assert r["lowvram"] and r["casting"] > 0
    assert r["rel_resident"] <= 1e-5 and r["rel_partial"] <= 1e-5


@pytest.mark.parametrize("name", ["fp8", "int8"])
def test_comfyui_fast_path_computes_what_quantlinear_computes(result: dict, name: str) -> None:
    """fp8: kitchen's input quantization with our input_scale + scaled_mm; int8: int8_linear."""
    r = result[name]
    assert not r["fast_emulated"]
    assert r["rel_fast"] <= 1e-5


def test_gguf_loads_through_manual_cast_layers_and_partial_loading(result: dict) -> None:
    r = result["gguf"]
    assert r["linear_is_manual_cast"] and r["wte_is_manual_cast"]
    assert r["weight_dtype"] == "torch.uint8" and r["lowvram"] and r["casting"] > 0
    assert r["rel_resident"] <= 1e-6 and r["rel_partial"] <= 1e-6

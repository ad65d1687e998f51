"""fp8 weights computed in float16 at the magnitudes of a real 8B layer: the output stays finite.

The fp8 weight is ``W / scale``: with a real checkpoint's scales (about 2e-4) it is 10**3 to
10**4 times ``W``, so ``x @ weight.T`` taken before the scale is applied passes float16's 65504
on real activations although the layer's output does not. The layer and where its magnitudes
come from: tests/kit/magnitudes.py (LLaDA-8B's ff_out, init_std 0.02, a massive activation of
2500). Both preconditions are asserted: the real output fits float16 with room to spare, the
unscaled product does not. Checked for the pack's fp8 (``CastLinear``, and a weight a host
leaves on another device: through a ComfyUI-style cast-at-use class on the emulated CUDA
device) and for ComfyUI's fp8 format (``QuantLinear``: its dequantize path and its W8A8 path);
ComfyUI's int8 and GGUF Q8_0 / Q4_K are checked at the same magnitudes (they were never unscaled).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from ladr_core.dimoo.weights import fp8, quant
from tests.kit.cuda_emu import emulated_cuda
from tests.kit.magnitudes import MASSIVE, ROWS, K, layer_data, reference

FP16_MAX = torch.finfo(torch.float16).max


def _assert_close_and_finite(y: torch.Tensor, want: torch.Tensor) -> None:
    assert y.dtype == torch.float16
    assert bool(torch.isfinite(y).all()), "float16 output overflowed"
    err = float((y.float() - want).norm() / want.norm())
    assert err < 0.05, err  # fp8's own rounding (3 mantissa bits) and float16's


def _pack_layer(base: type, w: torch.Tensor) -> nn.Module:
    q, s = fp8.quantize(w, torch.float8_e4m3fn)
    layer = fp8.scaled_linear_class(base)(w.shape[1], w.shape[0])
    layer.load_state_dict({"weight": q, "weight_scale": s}, assign=True)  # as the loader does
    return layer.requires_grad_(False)


def test_the_magnitudes_are_a_real_layers_and_the_unscaled_product_overflows() -> None:
    w, x = layer_data()
    q, s = fp8.quantize(w, torch.float8_e4m3fn)
    assert float(s.min()) > 1e-4 and float(s.max()) < 3e-4
    real = reference(w, x)
    assert abs(float(real[2, 0]) - MASSIVE) < 1.0 and float(real.abs().max()) < FP16_MAX / 16
    unscaled = x.double() @ q.double().t()
    assert float(unscaled.abs().max()) > FP16_MAX  # what a product before the scale holds


def test_pack_fp8_in_float16_keeps_a_real_layers_output_finite() -> None:
    w, x = layer_data()
    layer = _pack_layer(nn.Linear, w)  # CastLinear: the core's own
    want = reference(fp8.dequantize(layer.weight, layer.weight_scale), x)
    _assert_close_and_finite(layer(x.half()), want)
    assert layer.weight.dtype == torch.float8_e4m3fn  # the stored weight is untouched
    bf16 = layer(x.bfloat16())  # bf16 holds the unscaled product: scaled after, as before
    assert bool(torch.isfinite(bf16).all())


class HostCastLinear(nn.Linear):
    """A host's cast-at-use ``Linear`` as ComfyUI's ``CastWeightBiasOp`` behaves (its real class:
    tests/host/test_comfy_quant.py): the weight brought to the input's device and dtype, then
    each of ``weight_function`` applied (LoRA patches) before the product."""

    weight_function: list[Any] = []  # the class's shared, empty list, as in comfy.ops

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.weight.to(x.device).to(x.dtype)
        for f in self.weight_function:
            weight = f(weight)
        return F.linear(x, weight)


def test_pack_fp8_in_float16_through_a_hosts_cast_of_an_offloaded_weight() -> None:
    """The weight stays on the CPU (a host's low-VRAM layer), the input is on the device: the
    host's class casts the weight and the layer folds its scale in right after."""
    w, x = layer_data()
    layer = _pack_layer(HostCastLinear, w)
    seen: list[float] = []
    layer.weight_function = [lambda t: seen.append(float(t.abs().max().cpu())) or t]  # a "LoRA"
    want = reference(fp8.dequantize(layer.weight, layer.weight_scale), x)
    with emulated_cuda() as emu:
        y = layer(x.half().to("cuda"))
        assert y.device.type == "cuda" and not emu.violations
        y = y.cpu()
    _assert_close_and_finite(y, want)
    assert seen and seen[0] < 1.0  # the patch saw the real weight (|W| < 1), not W / scale
    assert len(layer.weight_function) == 1  # the host's own list back after the call
    assert HostCastLinear.weight_function == []


@pytest.mark.parametrize("quantize_input", [False, True])
def test_comfyui_fp8_format_in_float16_keeps_a_real_layers_output_finite(
        quantize_input: bool) -> None:
    """ComfyUI's format (one scale per tensor): the dequantize path multiplies the scale into
    the weight first, the W8A8 path sums the fp8 products in float32."""
    w, x = layer_data()
    stored = quant.quantize_layer(w, "float8_e4m3fn")
    layer = quant.QuantLinear(K, ROWS, bias=False)
    layer.load_state_dict({"weight": stored["weight"], "weight_scale": stored["weight_scale"],
                           "comfy_quant": quant.quant_conf_tensor("float8_e4m3fn")})
    layer.quantize_input = quantize_input
    want = reference(layer.weight.float() * layer.weight_scale, x)
    _assert_close_and_finite(layer(x.half()), want)


def test_the_float16_fold_traces_as_one_graph_under_torch_compile() -> None:
    """``pipe.compile()`` traces the block linears: the fold must not break the graph."""
    w, x = layer_data()
    layer = _pack_layer(nn.Linear, w[:8, :256])
    compiled = torch.compile(layer, backend="eager", fullgraph=True)
    assert torch.equal(compiled(x[:, :256].half()), layer(x[:, :256].half()))


@pytest.mark.parametrize("kind", ["comfy_int8", "Q8_0", "Q4_K"])
def test_the_other_8_and_4_bit_products_in_float16_are_scaled_before_float16(kind: str) -> None:
    """ComfyUI's int8 (int32 sums scaled in float32) and GGUF (dequantized to real values
    before the product) at the same magnitudes: no unscaled product in float16 either."""
    from ladr_core.dimoo.weights import ggml, gguf

    w, x = layer_data()
    if kind == "comfy_int8":
        stored = quant.quantize_layer(w, "int8_tensorwise")
        layer = quant.QuantLinear(K, ROWS, bias=False)
        layer.load_state_dict({**stored, "comfy_quant": quant.quant_conf_tensor("int8_tensorwise")})
        deq = stored["weight"].float() * stored["weight_scale"]
    else:
        layer = gguf.gguf_ops(None, torch.float16).Linear(K, ROWS, bias=False)
        raw = ggml.quantize(w, kind)
        layer.load_state_dict({"weight": raw, "ggml_type": torch.tensor(ggml.BLOCK[kind][0])})
        deq = ggml.dequantize(raw, kind, K)
    _assert_close_and_finite(layer(x.half()), reference(deq, x))

"""ComfyUI's quantized checkpoint format (comfy/quant_ops.py, QUANTIZATION.md of ComfyUI 0.33).

A quantized layer `L` (one of the seven block linears) is stored as `L.weight`
(`float8_e4m3fn` / `float8_e5m2` / `int8` [out, in]); `L.weight_scale` (float32,
`W ~= weight * weight_scale`: a scalar for fp8, as `TensorCoreFP8Layout` and `torch._scaled_mm`
take; `[out, 1]` or a scalar for int8, as comfy-kitchen's `int8_linear` takes); and for fp8
an optional `L.input_scale` (float32 scalar; absent: 1, clipping at 448). Every shard's
metadata holds `_quantization_metadata` = JSON `{"format_version": "1.0", "layers": {L:
{"format": F}}}`, which ComfyUI turns into per-layer `L.comfy_quant` tensors
(`comfy.utils.convert_old_quants`) for `comfy.ops.mixed_precision_ops`; this loader builds the
same state dict, so ComfyUI's classes load it and `QuantLinear` runs it without ComfyUI.

`QuantLinear` computes what ComfyUI computes on the same device:

* fp8 with fp8 matmuls (CUDA capability >= 8.9, ComfyUI's `supports_fp8_compute`):
  `y = e4m3(x / s_x) @ weight.T * s_x * s_w` through `torch._scaled_mm` (W8A8); elsewhere
  W8A16 as ComfyUI's emulated fp8, `weight.to(x.dtype) * weight_scale` with the float32 scale
  (torch applies a 0-dim scale at float32 on the CPU; a CUDA kernel casts it to `x`'s dtype
  first, in ComfyUI too). `quantize_input` (True / False / None = by device) overrides; True
  without fp8 matmuls computes the W8A8 product exactly in float32. Activations are e4m3 for
  both weight formats (`_scaled_mm` refuses e5m2 x e5m2; e4m3 keeps one more mantissa bit), so
  an e5m2 layer's `s_x` is its stored `input_scale` (amax / 57344) times 128 = amax / 448, and
  absent, `max|x| / 448` per call (on the device, no sync): it clips nothing, as before.
* int8: each row of `x` is quantized on the fly (`s_x = max|x_row| / 127`),
  `y = (x8 @ weight.T) * s_x * s_w` with `torch._int_mm` (W8A8, comfy-kitchen's `int8_linear`);
  fewer than 17 rows (CUDA's `_int_mm` refuses them) are padded with zeros, and where the
  kernel refuses the shapes or device the int32 sums are computed exactly through float32
  matmuls over chunks of `K` (`_int8_matmul`).
"""

from __future__ import annotations

import json
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["COMFY_FORMATS", "WEIGHT_DTYPES", "METADATA_KEY", "quant_conf_tensor",
           "quantize_layer", "QuantLinear", "QuantOps", "fp8_matmul_available",
           "parse_metadata", "SCALE_KINDS", "fp8_input_scale"]

METADATA_KEY = "_quantization_metadata"
#: format name (ComfyUI QUANT_ALGOS key) -> storage dtype attribute of torch
COMFY_FORMATS = {"float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
                 "int8_tensorwise": "int8"}
#: converter / loader names -> ComfyUI format
WEIGHT_DTYPES = {"comfy_fp8_e4m3fn": "float8_e4m3fn", "comfy_fp8_e5m2": "float8_e5m2",
                 "comfy_int8": "int8_tensorwise"}
SCALE_KINDS = ("channel", "tensor")  # int8 weight scales; fp8 is always per tensor
INT8_MAX = 127.0


def storage_dtype(fmt: str) -> torch.dtype:
    """torch dtype of a format's weights; RuntimeError naming what this torch lacks."""
    attr = COMFY_FORMATS[fmt]
    dtype = getattr(torch, attr, None)
    if dtype is None:
        raise RuntimeError(f"format {fmt!r} needs torch.{attr}, which torch {torch.__version__} "
                           "lacks; install torch >= 2.1, or use a GGUF Q8_0 file (any torch)")
    return dtype


def quant_conf_tensor(fmt: str) -> torch.Tensor:
    """ComfyUI's per-layer ``comfy_quant`` entry: the JSON ``{"format": fmt}`` as uint8 bytes."""
    return torch.tensor(list(json.dumps({"format": fmt}).encode("utf-8")), dtype=torch.uint8)


def _fp8_quantize(x: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """comfy-kitchen's ``quantize_per_tensor_fp8``: ``clamp(x * (1 / scale), +-max)`` to fp8."""
    fmax = torch.finfo(dtype).max
    return (x * (1.0 / scale).to(x.dtype)).clamp(-fmax, fmax).to(dtype)


def quantize_layer(weight: torch.Tensor, fmt: str, input_amax: float | None = None,
                   scale: str = "channel", weight_amax: float | None = None
                   ) -> dict[str, torch.Tensor]:
    """A float weight [out, in] -> {"weight", "weight_scale"[, "input_scale"]} in ``fmt``.

    fp8: ``weight_scale = max|W| / fp8_max``, ``input_scale = input_amax / fp8_max`` (the
    calibrated amax, margin included). int8: ``max|W_row| / 127`` as [out, 1] ("channel") or
    ``max|W| / 127`` ("tensor"), rounded to nearest. Zero scales become 1. ``weight_amax``:
    the whole matrix's max|W| when ``weight`` is a chunk of its rows.
    """
    dtype = storage_dtype(fmt)
    w = weight.float()
    whole = (torch.tensor(float(weight_amax), device=w.device) if weight_amax is not None
             else None)
    if fmt == "int8_tensorwise":
        if scale not in SCALE_KINDS:
            raise ValueError(f"int8 scale {scale!r} is not one of {list(SCALE_KINDS)}")
        amax = (w.abs().amax(dim=1, keepdim=True) if scale == "channel"
                else whole if whole is not None else w.abs().amax())
        s = torch.where(amax > 0, amax / INT8_MAX, torch.ones_like(amax))
        q = (w / s).round().clamp(-INT8_MAX, INT8_MAX).to(torch.int8)
        return {"weight": q, "weight_scale": s.float().contiguous()}
    fmax = torch.finfo(dtype).max
    amax = whole if whole is not None else w.abs().amax()
    s = torch.where(amax > 0, amax / fmax, torch.ones_like(amax)).float()
    out = {"weight": _fp8_quantize(w, s, dtype), "weight_scale": s}
    if input_amax is not None:
        if not (input_amax > 0 and input_amax < float("inf")):
            raise ValueError(f"input_amax must be finite and > 0, got {input_amax}")
        out["input_scale"] = torch.tensor(input_amax / fmax, dtype=torch.float32,
                                          device=w.device)
    return out


def fp8_matmul_available(device: torch.device) -> bool:
    """ComfyUI's ``supports_fp8_compute`` rule: an NVIDIA GPU of capability >= 8.9."""
    if device.type != "cuda" or not torch.cuda.is_available() or torch.version.hip:
        return False
    return torch.cuda.get_device_capability(device) >= (8, 9)


#: CUDA's ``_int_mm`` needs more than 16 rows; fewer are padded with zero rows (exact)
INT_MM_MIN_ROWS = 17
#: K chunk of the float32 fallback: |x8| <= 128 and |w8| <= 127, so a product is <= 16256 and
#: 1024 of them sum to <= 16_646_144 < 2**24: every partial sum is an integer float32 holds
#: exactly, in any summation order (int8 inputs are exact in TF32 and bf16 too)
EXACT_K = 1024


def _int8_matmul(xq: torch.Tensor, wq: torch.Tensor) -> torch.Tensor:
    """``xq @ wq.T`` (int8 [M, K] and [N, K]) summed exactly in int32 by ``torch._int_mm``;
    where that kernel refuses the shapes or the device, exactly through float32 chunks."""
    m = xq.shape[0]
    padded = (torch.cat([xq, xq.new_zeros(INT_MM_MIN_ROWS - m, xq.shape[1])])
              if m < INT_MM_MIN_ROWS else xq)
    try:
        return torch._int_mm(padded, wq.t())[:m]
    except (RuntimeError, NotImplementedError, ValueError):
        return _int8_matmul_float32(xq, wq)


def _int8_matmul_float32(xq: torch.Tensor, wq: torch.Tensor) -> torch.Tensor:
    """The int32 sums of ``_int8_matmul`` as float32 matmuls over ``EXACT_K`` columns at a
    time (each exact, see EXACT_K), added in int32 (exact while K * 16256 < 2**31)."""
    acc = None
    for k in range(0, xq.shape[1], EXACT_K):
        part = xq[:, k:k + EXACT_K].float() @ wq[:, k:k + EXACT_K].float().t()
        acc = part.to(torch.int32) if acc is None else acc.add_(part.to(torch.int32))
    assert acc is not None, "int8 matmul of an empty K"
    return acc


def fp8_input_scale(weight_dtype: torch.dtype, input_scale: torch.Tensor | None,
                    x: torch.Tensor) -> torch.Tensor:
    """float32 scale ``s_x`` of a layer's ``float8_e4m3fn`` activations (module
    docstring): ``input_scale`` rescaled from the weight format's range to e4m3's (x128 for
    e5m2, exact), 1 for an e4m3 layer without one, ``max|x| / 448`` for an e5m2 layer without
    one."""
    e4m3 = torch.float8_e4m3fn
    ratio = torch.finfo(weight_dtype).max / torch.finfo(e4m3).max
    if input_scale is not None:
        return input_scale.to(x.device).float() * ratio
    if weight_dtype == e4m3:
        return torch.ones((), device=x.device)
    amax = x.abs().amax().float() / torch.finfo(e4m3).max
    return amax.clamp(min=torch.finfo(torch.float32).tiny)


def _scaled_mm(xq: torch.Tensor, w: torch.Tensor, s_x: torch.Tensor, s_w: torch.Tensor,
               out_dtype: torch.dtype) -> torch.Tensor | None:
    """``torch._scaled_mm`` of e4m3 activations [M, K] and the fp8 weight [N, K]; None where the
    kernel refuses the shapes (not multiples of 16) or the device."""
    try:
        return torch._scaled_mm(xq, w.t(), scale_a=s_x, scale_b=s_w.float(), out_dtype=out_dtype)
    except (RuntimeError, ValueError):
        return None


class QuantLinear(nn.Module):
    """Linear layer of a ComfyUI-format folder outside ComfyUI (module docstring). Like
    ``MixedPrecisionOps.Linear`` it learns its format from the state dict's ``comfy_quant``;
    without one, a plain linear cast to the input's dtype at use."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.quant_format: str | None = None
        self.quantize_input: bool | None = None
        self.weight: nn.Parameter | None = None
        self.bias = (nn.Parameter(torch.empty(out_features, device=device, dtype=dtype),
                                  requires_grad=False) if bias else None)
        self.register_buffer("weight_scale", None)
        self.register_buffer("input_scale", None)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, local_metadata: dict,
                              strict: bool, missing_keys: list, unexpected_keys: list,
                              error_msgs: list) -> None:
        known = {"weight", "bias", "weight_scale", "input_scale", "comfy_quant"}
        for key in state_dict:
            rest = key[len(prefix):]
            if key.startswith(prefix) and "." not in rest and rest not in known:
                unexpected_keys.append(key)
        conf = state_dict.get(prefix + "comfy_quant")
        weight = state_dict.get(prefix + "weight")
        if weight is None:
            missing_keys.append(prefix + "weight")
            return
        if conf is not None:
            self.quant_format = json.loads(bytes(conf.tolist()).decode("utf-8"))["format"]
            for name in ("weight_scale", "input_scale"):
                value = state_dict.get(prefix + name)
                setattr(self, name, None if value is None else value.float())
        self.weight = nn.Parameter(weight, requires_grad=False)
        if self.bias is not None:
            if prefix + "bias" not in state_dict:
                missing_keys.append(prefix + "bias")
            else:
                self.bias = nn.Parameter(state_dict[prefix + "bias"], requires_grad=False)

    def extra_repr(self) -> str:
        return f"{self.in_features}, {self.out_features}, format={self.quant_format}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        assert self.weight is not None, "QuantLinear used before its weights were loaded"
        w = self.weight.to(x.device)
        bias = self.bias.to(x.device, x.dtype) if self.bias is not None else None
        if self.quant_format is None:
            return F.linear(x, w.to(x.dtype), bias)
        s_w = self.weight_scale.to(x.device)  # type: ignore[union-attr]
        if self.quant_format == "int8_tensorwise":
            y = self._int8(x, w, s_w)
        else:
            y = self._fp8(x, w, s_w)
        return y + bias if bias is not None else y

    def _int8(self, x: torch.Tensor, w: torch.Tensor, s_w: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1]).float()
        s_x = (x2.abs().amax(dim=1, keepdim=True) / INT8_MAX).clamp(min=1e-30)
        xq = (x2 / s_x).round().clamp(-128, 127).to(torch.int8)
        acc = _int8_matmul(xq, w)
        y = acc.float() * (s_x * s_w.reshape(1, -1))
        return y.to(x.dtype).reshape(*x.shape[:-1], w.shape[0])

    def _fp8(self, x: torch.Tensor, w: torch.Tensor, s_w: torch.Tensor) -> torch.Tensor:
        fast = fp8_matmul_available(x.device)
        quantized = fast if self.quantize_input is None else self.quantize_input
        if not quantized:  # W8A16: ComfyUI's dequantize fallback, its expression
            return F.linear(x, w.to(x.dtype) * s_w)
        x2 = x.reshape(-1, x.shape[-1])
        s_x = fp8_input_scale(w.dtype, self.input_scale, x2)
        xq = _fp8_quantize(x2, s_x, torch.float8_e4m3fn)
        y = _scaled_mm(xq, w, s_x, s_w, x.dtype) if fast else None
        if y is None:  # the same fp8 values; exact products, float32 sums
            y = (xq.float() @ w.float().t()) * (s_x * s_w.float())
        return y.to(x.dtype).reshape(*x.shape[:-1], w.shape[0])


class QuantOps:
    """``operations`` namespace for ``LLaDAModel`` outside ComfyUI: ``QuantLinear`` and
    ``torch.nn.Embedding`` (the embedding and the norms are never quantized)."""

    Linear = QuantLinear
    Embedding = nn.Embedding


def parse_metadata(text: str | None, source: str) -> dict[str, str]:
    """``_quantization_metadata`` JSON -> {layer: format}; ValueError naming ``source`` when the
    JSON or a layer entry is malformed (an unknown format name is checked by the loader)."""
    if text is None:
        return {}
    try:
        data = json.loads(text)
        layers = data["layers"]
        return {str(k): str(v["format"]) for k, v in layers.items()}
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{source}: {METADATA_KEY} is not valid ({exc!r}); it must be JSON "
                         '{"layers": {"<layer>": {"format": "<name>"}}}') from None

"""ComfyUI's quantized checkpoint format (comfy/quant_ops.py, QUANTIZATION.md of ComfyUI 0.33).

A quantized layer ``L`` (one of the seven block linears) is stored as

* ``L.weight``: ``float8_e4m3fn`` / ``float8_e5m2`` / ``int8`` [out, in];
* ``L.weight_scale``: float32, ``W ~= weight * weight_scale``: a scalar for fp8 (the per-tensor
  scale ComfyUI's ``TensorCoreFP8Layout`` and ``torch._scaled_mm`` take); for int8 ``[out, 1]``
  (one scale per output channel, which comfy-kitchen's ``TensorWiseINT8Layout`` and its
  ``int8_linear`` accept) or a scalar;
* ``L.input_scale`` (fp8 only, optional): float32 scalar; the fast path quantizes the layer's
  input as ``clamp(x / input_scale, -max, max)`` to fp8 (absent: scale 1, clipping at 448);

and every shard's safetensors metadata holds ``_quantization_metadata`` = JSON ``{"format_version":
"1.0", "layers": {L: {"format": F}}}``. ComfyUI turns that into per-layer ``L.comfy_quant``
tensors (uint8 JSON, ``comfy.utils.convert_old_quants``) that ``comfy.ops.mixed_precision_ops``
consumes; this loader builds the same state dict, so ComfyUI's classes load it directly and
``QuantLinear`` (below) runs it without ComfyUI.

Arithmetic of ``QuantLinear`` (what ComfyUI computes on the same device):

* fp8 on a GPU with fp8 matmuls (CUDA capability >= 8.9, ComfyUI's ``supports_fp8_compute``):
  ``y = fp8(x / s_in) @ weight.T * s_in * s_w`` through ``torch._scaled_mm`` (W8A8); elsewhere
  the weight is dequantized and the input stays as is (W8A16), as ComfyUI's emulated fp8 does.
  ``quantize_input`` (True / False / None = by device) overrides the choice; with True and no
  fp8 matmul the W8A8 product is computed exactly from the same fp8 values in the input dtype.
* int8: every row of ``x`` is quantized on the fly (``s_x = max|x_row| / 127``) and
  ``y = (x8 @ weight.T) * s_x * s_w`` with ``torch._int_mm`` (W8A8, comfy-kitchen's
  ``int8_linear``), on every device.
"""

from __future__ import annotations

import json
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["COMFY_FORMATS", "WEIGHT_DTYPES", "METADATA_KEY", "quant_conf_tensor",
           "quantize_layer", "QuantLinear", "QuantOps", "fp8_matmul_available",
           "parse_metadata", "SCALE_KINDS"]

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

    fp8: ``weight_scale = max|W| / fp8_max`` (scalar); ``input_amax`` (the largest input seen
    in calibration, already including any margin) gives ``input_scale = input_amax / fp8_max``.
    int8: ``weight_scale = max|W_row| / 127`` as ``[out, 1]`` (``scale="channel"``) or
    ``max|W| / 127`` (``"tensor"``), weights rounded to nearest. Zero scales become 1.
    ``weight_amax``: max|W| of the whole matrix when ``weight`` holds only some of its rows (a
    converter working in row chunks), for the per-tensor scales.
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
        out["input_scale"] = torch.tensor(input_amax / fmax, dtype=torch.float32)
    return out


def fp8_matmul_available(device: torch.device) -> bool:
    """ComfyUI's ``supports_fp8_compute`` rule: an NVIDIA GPU of capability >= 8.9."""
    if device.type != "cuda" or not torch.cuda.is_available() or torch.version.hip:
        return False
    return torch.cuda.get_device_capability(device) >= (8, 9)


def _int8_matmul(xq: torch.Tensor, wq: torch.Tensor) -> torch.Tensor:
    """``xq @ wq.T`` summed exactly in int32 by ``torch._int_mm``; where that kernel refuses the
    shapes or the device, in float64 (exact: |sum| < 2**53), or float32 on devices without
    float64 (MPS; relative error < 1e-7)."""
    try:
        return torch._int_mm(xq, wq.t())
    except (RuntimeError, NotImplementedError):
        dt = torch.float32 if xq.device.type == "mps" else torch.float64
        return xq.to(dt) @ wq.to(dt).t()


class QuantLinear(nn.Module):
    """Linear layer of a ComfyUI-format folder outside ComfyUI (format in the module docstring).

    Like ComfyUI's ``MixedPrecisionOps.Linear``, it learns its format from the ``comfy_quant``
    entry of the state dict; without one it is a plain linear in the stored dtype, cast to the
    input's dtype at use. Weights left on another device are moved at use.
    """

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
        if not quantized:  # W8A16: ComfyUI's dequantize fallback
            return F.linear(x, w.to(x.dtype) * s_w.to(x.dtype))
        s_in = (self.input_scale.to(x.device) if self.input_scale is not None
                else torch.ones((), device=x.device))
        x2 = x.reshape(-1, x.shape[-1])
        xq = _fp8_quantize(x2, s_in, w.dtype)
        y = None
        if fast:
            try:
                y = torch._scaled_mm(xq, w.t(), scale_a=s_in.float(), scale_b=s_w.float(),
                                     out_dtype=x.dtype)
            except RuntimeError:  # shapes the kernel refuses (not multiples of 16)
                y = None
        if y is None:  # the same fp8 values; exact products, float32 sums
            y = (xq.float() @ w.float().t()) * (s_in.float() * s_w.float())
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

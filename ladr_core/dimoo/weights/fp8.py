"""fp8 weight storage for the transformer blocks: scaled float8 linears computed in bf16/fp16/fp32.

A block linear ``W [out, in]`` (the seven bias-less linears of every block, as in
Lumina-DiMOO) is stored as ``weight`` = ``W / scale[:, None]`` rounded to float8 and a float32
buffer ``weight_scale [out]``: `scale="channel"` (default) `scale[o] = max|W[o, :]| / fp8_max`,
`scale="tensor"` one `max|W| / fp8_max` repeated over the rows.

At use the weight is cast to the input's dtype (the host's `Linear`: ComfyUI's `manual_cast`,
or `CastLinear` here). In bf16 and fp32 the output is multiplied by `weight_scale`
(`x @ (W8 * s[:, None]).T == (x @ W8.T) * s`) in float32, rounded once to `y`'s dtype in
place: relative error <= u (2**-8 in bf16), where rounding the scale first gave up to 2u + u**2.
In fp16 the scale is folded into the cast weight first (in float32, rounded once): `W8 = W / s`
is 10**3 to 10**4 times `W` at real scales, so `x @ W8.T` passes fp16's 65504 on real
activations (tests/kit/magnitudes.py) where the layer's output does not. A weight the host left
on another device goes through the host's cast with the fold as its first `weight_function`
(ComfyUI's `cast_bias_weight`: its streams, and LoRA patches see the real weight), and the scale
is copied to the compute device once and kept until the buffer changes (no blocking copy per
call). The embedding, norms, output head and any linear with a bias stay in the compute dtype.
Measured quality on the nano model: docs/reports/FP8.md.

Loading (``load_dimoo(..., weight_dtype="fp8_e4m3fn" | "fp8_e5m2", fp8_scale=...)``) converts
per tensor while reading; a folder saved in fp8 (``save_dimoo``; config.json gains
``ladr_weight_dtype``) loads as stored. Errors, before anything is assigned: an unknown weight
dtype or scale kind (ValueError listing the choices); fp8 the torch or device cannot hold
(RuntimeError naming dtype, torch version and device); a missing, mis-shaped, non-positive or
orphan scale (CheckpointError naming the shard); a folder in one fp8 format asked for the
other (ValueError).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["FP8_FORMATS", "SCALE_KINDS", "CastLinear",
           "check_fp8_support", "round_trip_problem", "quantize", "dequantize", "scaled_linear_class",
           "use_fp8_linears", "is_block_linear_weight", "SCALE_SUFFIX", "scale_problem"]

FP8_FORMATS = {"fp8_e4m3fn": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2"}
SCALE_KINDS = ("channel", "tensor")
SCALE_SUFFIX = "weight_scale"
BLOCK_LINEARS = ("q_proj", "k_proj", "v_proj", "attn_out", "ff_proj", "up_proj", "ff_out")


def fp8_torch_dtype(name: str) -> torch.dtype:
    """torch dtype of an fp8 format name; RuntimeError naming the missing dtype on old torch."""
    attr = FP8_FORMATS[name]
    dtype = getattr(torch, attr, None)
    if dtype is None:
        raise RuntimeError(f"weight_dtype {name!r} needs torch.{attr}, which torch "
                           f"{torch.__version__} lacks; install torch >= 2.1 or use "
                           "weight_dtype='default'")
    return dtype


def round_trip_problem(storage: torch.dtype, device: torch.device, compute: torch.dtype
                       ) -> Exception | bool | None:
    """The one device probe of every 8-bit storage format: None when ``device`` holds
    ``storage`` computed in ``compute``, else the store-and-cast probe's exception, or False
    for wrong values."""
    try:
        probe = torch.ones(2, device=device, dtype=compute).to(storage)
        ok = bool(torch.equal(probe.to(compute).cpu(), torch.ones(2, dtype=compute)))
    except Exception as exc:  # backends raise TypeError / RuntimeError / NotImplementedError
        return exc
    return None if ok else False


def check_fp8_support(name: str, device: torch.device, compute: torch.dtype) -> torch.dtype:
    """The fp8 torch dtype if ``device`` can store it and cast it to ``compute``; else a
    RuntimeError naming the torch version, the device and what failed."""
    dtype = fp8_torch_dtype(name)
    problem = round_trip_problem(dtype, device, compute)
    if isinstance(problem, Exception):
        raise RuntimeError(f"weight_dtype {name!r}: device {device} cannot store or cast "
                           f"torch.{FP8_FORMATS[name]} with torch {torch.__version__} ({problem}); "
                           "use weight_dtype='default' or a CUDA/CPU device")
    if problem is False:
        raise RuntimeError(f"weight_dtype {name!r}: torch.{FP8_FORMATS[name]} round trip is wrong "
                           f"on {device} (torch {torch.__version__}); use weight_dtype='default'")
    return dtype


def quantize(weight: torch.Tensor, dtype: torch.dtype, scale: str = "channel"
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """W [out, in] -> (fp8 W / s[:, None], float32 s [out]); zero rows get s = 1."""
    if scale not in SCALE_KINDS:
        raise ValueError(f"fp8 scale {scale!r} is not one of {list(SCALE_KINDS)}")
    w = weight.float()
    amax = w.abs().amax(dim=1) if scale == "channel" else w.abs().amax().expand(w.shape[0])
    s = amax / torch.finfo(dtype).max
    s = torch.where(s > 0, s, torch.ones_like(s)).contiguous()
    fmax = torch.finfo(dtype).max
    q = (w / s[:, None]).clamp_(-fmax, fmax).to(dtype)
    return q, s


def dequantize(q: torch.Tensor, s: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """fp8 [out, in] and scales [out] -> W [out, in] in ``dtype``."""
    return (q.float() * s.float()[:, None]).to(dtype)


class CastLinear(nn.Linear):
    """``torch.nn.Linear`` that casts its weight (and bias) to the input's dtype and device at use
    (the core's twin of ComfyUI's ``manual_cast.Linear``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = self.bias.to(x.device, x.dtype) if self.bias is not None else None
        return F.linear(x, self.weight.to(x.device, x.dtype), bias)


_SCALED: dict[type, type] = {}


def _scale_on(layer: nn.Module, device: torch.device) -> torch.Tensor:
    """``layer.weight_scale`` (float32) on ``device``: the buffer itself where it is, else a
    copy kept on the layer until the buffer is replaced (``module.to``) or written in place
    (``load_state_dict``: its version counter moves)."""
    scale = layer.weight_scale
    if scale.device == device:
        return scale
    kept = layer.__dict__.get("_scale_copy")
    if kept is None or kept[0] is not scale or kept[1] != scale._version \
            or kept[2].device != device:
        kept = (scale, scale._version, scale.to(device))
        layer.__dict__["_scale_copy"] = kept
    return kept[2]


def _fold(layer: nn.Module, weight: torch.Tensor) -> torch.Tensor:
    """The cast fp8 ``weight`` times the float32 ``weight_scale [out]``, each product in
    float32 rounded once, in place on the cast copy (copied first where the cast may have
    returned the stored tensor; decided without ``data_ptr``, which torch.compile cannot
    trace)."""
    if weight.dtype == layer.weight.dtype and weight.device == layer.weight.device:
        weight = weight.clone()
    return weight.mul_(_scale_on(layer, weight.device)[:, None])


def _folded_forward(layer: Any, base: type, x: torch.Tensor) -> torch.Tensor:
    """``x @ (weight * scale[:, None]).T``, the scale folded in first (fp16: module docstring)."""
    if layer.weight.device == x.device:
        return F.linear(x, _fold(layer, layer.weight.to(x.dtype)))
    return _host_cast_forward(layer, base, x)


def _host_cast_forward(layer: Any, base: type, x: torch.Tensor) -> torch.Tensor:
    """``_folded_forward`` of a weight a host left on another device: through the host's cast
    with the fold as first ``weight_function`` (ComfyUI's ``CastWeightBiasOp``; module
    docstring), else the weight copied over here."""
    functions = layer.__dict__.get("weight_function")
    hooks = functions if functions is not None else getattr(layer, "weight_function", None)
    if not isinstance(hooks, list):
        return F.linear(x, _fold(layer, layer.weight.to(x.device, x.dtype)))
    layer.weight_function = [lambda w: _fold(layer, w), *hooks]
    try:
        return base.forward(layer, x)
    finally:  # the host's own list back (an instance list, or the class's shared one)
        if functions is None:
            del layer.weight_function
        else:
            layer.weight_function = functions


def scaled_linear_class(base: type) -> type:
    """Subclass of a cast-at-use ``Linear`` class (``torch.nn.Linear``, which cannot multiply
    an fp8 weight, becomes ``CastLinear``) adding ``weight_scale`` and the scaling (module
    docstring); a weight left on another device goes through ``_host_cast_forward``."""
    base = CastLinear if base is nn.Linear else base
    if base not in _SCALED:
        def __init__(self: Any, in_features: int, out_features: int, bias: bool = False,
                     device: Any = None, dtype: Any = None) -> None:
            if bias:
                raise ValueError("fp8 scaled linears are bias-less; keep biased linears in "
                                 "the compute dtype")
            base.__init__(self, in_features, out_features, bias=False, device=device, dtype=dtype)
            self.register_buffer(SCALE_SUFFIX, torch.ones(out_features, device=device,
                                                          dtype=torch.float32))

        def forward(self: Any, x: torch.Tensor) -> torch.Tensor:
            if x.dtype == torch.float16:  # the unscaled product can pass 65504: fold first
                return _folded_forward(self, base, x)
            if self.weight.device == x.device:  # resident: cast here, whatever the base does
                y = F.linear(x, self.weight.to(x.dtype))
            else:  # left elsewhere by a host: its class brings the weight over and casts it
                y = base.forward(self, x)
            return y.mul_(_scale_on(self, y.device))  # float32 product, rounded once

        def _load_from_state_dict(self: Any, *args: Any, **kwargs: Any) -> None:
            # a subclass with its own loader: ComfyUI then uses the plain torch loading path
            nn.Module._load_from_state_dict(self, *args, **kwargs)

        _SCALED[base] = type(f"ScaledFP8{base.__name__}", (base,), {
            "__init__": __init__, "forward": forward,
            "_load_from_state_dict": _load_from_state_dict,
            "__doc__": f"fp8 ``weight`` x float32 ``weight_scale [out]`` over {base.__name__}."})
    return _SCALED[base]


def is_block_linear_weight(key: str) -> bool:
    """True for ``model.transformer.blocks.{i}.<linear>.weight`` (the fp8-stored tensors)."""
    parts = key.split(".")
    return (len(parts) == 6 and parts[:3] == ["model", "transformer", "blocks"]
            and parts[4] in BLOCK_LINEARS and parts[5] == "weight")


def use_fp8_linears(model: nn.Module) -> list[str]:
    """Swap every bias-less block linear for its scaled class (same type family, same device,
    e.g. ``meta``); returns the swapped module names. Call before loading the state dict."""
    swapped: list[str] = []
    for name, block in model.model.transformer.blocks.named_children():
        for attr in BLOCK_LINEARS:
            old = getattr(block, attr)
            if old.bias is not None or type(old) in _SCALED.values():
                continue
            cls = scaled_linear_class(type(old))
            device = old.weight.device if old.weight is not None else torch.device("meta")
            new = cls(old.in_features, old.out_features, bias=False, device=device)
            setattr(block, attr, new)
            swapped.append(f"model.transformer.blocks.{name}.{attr}")
    return swapped


def scale_problem(state: dict[str, torch.Tensor], fp8_keys: set[str],
                  model_state: dict[str, torch.Tensor]) -> tuple[str, str] | None:
    """First (key, reason) making the fp8 weights and their scales disagree, else None: every
    fp8 weight of a bias-less block linear has a finite positive ``<key>_scale`` float [out],
    and every scale an fp8 weight."""
    for key in sorted(fp8_keys):
        skey = key + "_scale"
        if skey not in model_state:
            return key, f"{key} is fp8 but its layer cannot hold fp8 weights (it has a bias)"
        if skey not in state:
            return key, f"{key} is {state[key].dtype} but its scale {skey} is missing"
        s = state[skey]
        if tuple(s.shape) != (state[key].shape[0],) or not s.is_floating_point():
            return skey, (f"{skey} has shape {tuple(s.shape)} / {s.dtype}, expected float "
                          f"[{state[key].shape[0]}] (one scale per output row of {key})")
        if not bool(torch.isfinite(s).all() and (s > 0).all()):
            return skey, f"{skey} holds non-finite or non-positive scales"
    for skey in sorted(k for k in state if k.endswith("." + SCALE_SUFFIX)):
        if skey.removesuffix("_scale") not in fp8_keys:
            return skey, (f"{skey} is a scale but {skey.removesuffix('_scale')} is not stored "
                          "in fp8 (a scale without its fp8 weight)")
    return None

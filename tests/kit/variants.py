"""LLaDA models in the memory layouts a user can pick, for lab/benchmarks/gpu_check.

The loader builds these layouts from a checkpoint (``load_dimoo(weight_dtype=...,
offload_blocks=...)``, a converted folder or a GGUF file); a benchmark of an 8B-shaped model has
no checkpoint, so this module builds the same layouts from random N(0, 0.02) weights, one
matrix at a time (quantized in row chunks), never holding a bf16 copy of the model. Given a
``source`` (a float model's state dict, e.g. DiMOO-nano's), every weight comes from it instead,
quantized from its float32 values, so the quantized bytes do not depend on the compute dtype:

* ``"fp8"``: the seven block linears stored in ``float8_e4m3fn`` with float32 per-output-channel
  scales (fp8.py), everything else in ``dtype``, all on ``device``;
* ``"low_vram"``: every weight in ``dtype``; the blocks rest on the CPU and are streamed to
  ``device`` one block ahead (offload.py), the rest lives on ``device``;
* ``"comfy_fp8"`` / ``"int8"``: ComfyUI's quantized format run by ``quant.QuantLinear`` (fp8:
  per-tensor scales, input scale 1, ``torch._scaled_mm`` on GPUs of capability >= 8.9 as
  ComfyUI's fast path; int8: per-channel scales, rows quantized on the fly, ``torch._int_mm``);
* ``"q8_0"`` / ``"q4_k_m"``: GGUF layers (gguf.py) with gguf_write.py's recipes: GGML bytes on
  ``device``, dequantized per layer at use; norms float32.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ladr_core.dimoo.model.config import LLaDAConfig
from ladr_core.dimoo.model.offload import stream_blocks
from ladr_core.dimoo.model.transformer import LLaDAModel
from ladr_core.dimoo.weights import fp8 as fp8_weights
from ladr_core.dimoo.weights import quant

__all__ = ["VARIANTS", "build_variant"]

VARIANTS = ("fp8", "low_vram", "comfy_fp8", "int8", "q8_0", "q4_k_m")
CHUNK = 1 << 26  # weights quantized per chunk of rows


def _meta_model(config: LLaDAConfig, dtype: torch.dtype, operations: Any = None) -> LLaDAModel:
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device("meta"):
            return LLaDAModel(config, init_std=None, operations=operations)
    finally:
        torch.set_default_dtype(previous)


Source = Mapping[str, torch.Tensor] | None  # parameter name -> float weight (None = random)


def _fill(model: LLaDAModel, generator: torch.Generator, source: Source = None) -> None:
    """Norms to 1, every other floating parameter N(0, 0.02) (or ``source``'s values); fp8
    weights are left alone."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not p.dtype.is_floating_point or p.dtype.itemsize == 1:
                continue
            if source is not None:
                p.copy_(source[name])
            elif "norm" in name or "ln_f" in name:
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02, generator=generator)


def _quantize_blocks(model: LLaDAModel, fp8: torch.dtype, dtype: torch.dtype,
                     generator: torch.Generator, source: Source = None) -> None:
    """Each scaled block linear gets a random (or ``source``) weight, made and quantized one
    matrix at a time."""
    with torch.no_grad():
        for name, module in model.named_modules():
            if not hasattr(module, "weight_scale"):
                continue
            shape = tuple(module.weight.shape)
            w = _weight(source, name + ".weight", shape, dtype, module.weight_scale.device,
                        generator, slice(0, shape[0]))
            q, scale = fp8_weights.quantize(w, fp8)
            del w
            module.weight = torch.nn.Parameter(q, requires_grad=False)
            module.weight_scale.copy_(scale)


def _random_rows(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device,
                 generator: torch.Generator, rows: slice) -> torch.Tensor:
    n = rows.stop - rows.start
    return torch.empty((n, *shape[1:]), dtype=dtype, device=device).normal_(
        0.0, 0.02, generator=generator)


def _weight(source: Source, name: str, shape: tuple[int, ...], dtype: torch.dtype,
            device: torch.device, generator: torch.Generator, rows: slice) -> torch.Tensor:
    """Rows ``rows`` of weight ``name``: random in ``dtype``, or ``source``'s in float32."""
    if source is None:
        return _random_rows(shape, dtype, device, generator, rows)
    return source[name][rows].to(device=device, dtype=torch.float32)


def _chunks(shape: tuple[int, ...]) -> list[slice]:
    step = max(1, CHUNK // max(1, shape[1]))
    return [slice(i, min(i + step, shape[0])) for i in range(0, shape[0], step)]


def _comfy_blocks(model: LLaDAModel, fmt: str, dtype: torch.dtype, device: torch.device,
                  generator: torch.Generator, source: Source = None) -> None:
    """Each block linear quantized to ``fmt`` (quant.quantize_layer), one matrix at a time."""

    with torch.no_grad():
        for i, block in enumerate(model.model.transformer.blocks):
            for attr in fp8_weights.BLOCK_LINEARS:
                module = getattr(block, attr)
                shape = (module.out_features, module.in_features)
                w = _weight(source, f"model.transformer.blocks.{i}.{attr}.weight", shape, dtype,
                            device, generator, slice(0, shape[0]))
                parts = quant.quantize_layer(w, fmt)
                del w
                module.quant_format = fmt
                module.weight = torch.nn.Parameter(parts["weight"], requires_grad=False)
                module.weight_scale = parts["weight_scale"]


def _gguf_layers(model: LLaDAModel, recipe: str, dtype: torch.dtype, device: torch.device,
                 generator: torch.Generator, source: Source = None) -> None:
    """Every linear / embedding quantized by ``recipe``'s type for its name, in row chunks."""
    from ladr_core.dimoo.weights import ggml
    from ladr_core.dimoo.weights.gguf_write import tensor_type

    n_layers = model.config.n_layers
    with torch.no_grad():
        for name, module in model.model.transformer.named_modules():
            if not hasattr(module, "ggml_type"):
                continue
            shape = tuple(module.weight.shape)
            kind, flat = tensor_type(recipe, name + ".weight", list(shape), n_layers)
            key = f"model.transformer.{name}.weight"
            if flat:  # rows narrower than a super-block (tiny shapes): blocks laid flat
                w = _weight(source, key, shape, dtype, device, generator, slice(0, shape[0]))
                raw = ggml.quantize(w.reshape(-1, ggml.QK), kind)
            else:
                raw = torch.empty((shape[0], ggml.row_bytes(kind, shape[1])),
                                  dtype=torch.uint8, device=device)
                for rows in _chunks(shape):
                    w = _weight(source, key, shape, dtype, device, generator, rows)
                    raw[rows] = ggml.quantize(w, kind)
            del w
            module.weight = torch.nn.Parameter(raw, requires_grad=False)
            module.ggml_type = kind


def _build_quantized(config: LLaDAConfig, device: torch.device, mode: str, dtype: torch.dtype,
                     seed: int, source: Source = None) -> LLaDAModel:
    """The comfy / GGUF modes: meta model of the right classes, then each weight made once."""
    generator = torch.Generator(device=device).manual_seed(seed)
    if mode in ("comfy_fp8", "int8"):
        model = _meta_model(config, dtype, quant.QuantOps)
        for name, p in list(model.named_parameters()):  # QuantLinear has no weight yet
            owner = model.get_submodule(name.rsplit(".", 1)[0])
            setattr(owner, name.rsplit(".", 1)[1], torch.nn.Parameter(
                torch.empty(p.shape, dtype=dtype, device=device), requires_grad=False))
        _fill(model, generator, source)
        fmt = "float8_e4m3fn" if mode == "comfy_fp8" else "int8_tensorwise"
        if fmt.startswith("float8"):
            fp8_weights.check_fp8_support("fp8_e4m3fn", device, dtype)
        _comfy_blocks(model, fmt, dtype, device, generator, source)
        head = model.model.transformer.ff_out
        if head.weight is None:  # the head is a plain QuantLinear: random (source) rows
            shape = (head.out_features, head.in_features)
            head.weight = torch.nn.Parameter(_weight(
                source, "model.transformer.ff_out.weight", shape, dtype, device, generator,
                slice(0, shape[0])).to(dtype), requires_grad=False)
    else:
        from ladr_core.dimoo.weights.gguf import gguf_ops

        model = _meta_model(config, dtype, gguf_ops(None, dtype))
        for name, p in list(model.named_parameters()):
            if "norm" in name or "ln_f" in name:
                owner = model.get_submodule(name.rsplit(".", 1)[0])
                norm = (torch.ones(p.shape, dtype=dtype, device=device) if source is None
                        else source[name].to(device=device, dtype=dtype))
                owner.weight = torch.nn.Parameter(norm, requires_grad=False)
        _gguf_layers(model, "Q8_0" if mode == "q8_0" else "Q4_K_M", dtype, device, generator,
                     source)
    model.device = device
    return model.eval().requires_grad_(False)


def build_variant(config: LLaDAConfig, device: torch.device | str, mode: str,
                  dtype: torch.dtype = torch.bfloat16, seed: int = 0,
                  source: Source = None) -> LLaDAModel:
    """A random-weight ``LLaDAModel`` in layout ``mode`` (VARIANTS), in eval mode.

    dtype: the compute dtype (and storage dtype of what is not quantized). source: a float
    model's state dict (official names) whose values replace the random ones. Raises ValueError
    for an unknown mode and RuntimeError when the device cannot hold fp8 (fp8.check_fp8_support).
    """
    if mode not in VARIANTS:
        raise ValueError(f"mode must be one of {list(VARIANTS)}; got {mode!r}")
    device = torch.device(device)
    if mode not in ("fp8", "low_vram"):
        return _build_quantized(config, device, mode, dtype, seed, source)
    model = _meta_model(config, dtype)
    home = torch.device("cpu") if mode == "low_vram" else device
    fp8 = None
    if mode == "fp8":
        fp8 = fp8_weights.check_fp8_support("fp8_e4m3fn", device, dtype)
        fp8_weights.use_fp8_linears(model)
        for module in model.modules():  # allocate fp8, never a bf16 copy of the blocks
            if hasattr(module, "weight_scale"):
                module.weight = torch.nn.Parameter(
                    torch.empty(module.weight.shape, dtype=fp8, device="meta"),
                    requires_grad=False)
    model.to_empty(device=home)
    generator = torch.Generator(device=home).manual_seed(seed)
    _fill(model, generator, source)
    if fp8 is not None:
        _quantize_blocks(model, fp8, dtype, generator, source)
    if mode == "low_vram":
        stream_blocks(model, device)
    return model.eval().requires_grad_(False)

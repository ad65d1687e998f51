"""Random-weight LLaDA models in the memory layouts a user can pick, for benchmarks/gpu.py.

The loader builds these layouts from a checkpoint (``load_dimoo(weight_dtype=...,
offload_blocks=...)``); a benchmark of an 8B-shaped model has no checkpoint, so this module
builds the same layouts from random N(0, 0.02) weights, one tensor at a time, so that building
never holds more than one block matrix beyond the final model:

* ``"fp8"``: the seven block linears stored in ``float8_e4m3fn`` with float32 per-output-channel
  scales (fp8.py), everything else in ``dtype``, all on ``device``;
* ``"low_vram"``: every weight in ``dtype``; the blocks rest on the CPU and are streamed to
  ``device`` one block ahead (offload.py), the rest lives on ``device``.
"""

from __future__ import annotations

import torch

from .config import LLaDAConfig
from .fp8 import check_fp8_support, quantize, use_fp8_linears
from .model import LLaDAModel
from .offload import stream_blocks

__all__ = ["VARIANTS", "build_variant"]

VARIANTS = ("fp8", "low_vram")


def _meta_model(config: LLaDAConfig, dtype: torch.dtype) -> LLaDAModel:
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device("meta"):
            return LLaDAModel(config, init_std=None)
    finally:
        torch.set_default_dtype(previous)


def _fill(model: LLaDAModel, generator: torch.Generator) -> None:
    """Norms to 1, every other floating parameter N(0, 0.02); fp8 weights are left alone."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not p.dtype.is_floating_point or p.dtype.itemsize == 1:
                continue
            if "norm" in name or "ln_f" in name:
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02, generator=generator)


def _quantize_blocks(model: LLaDAModel, fp8: torch.dtype, dtype: torch.dtype,
                     generator: torch.Generator) -> None:
    """Each scaled block linear gets a random weight, made and quantized one matrix at a time."""
    with torch.no_grad():
        for block in model.model.transformer.blocks:
            for module in block.children():
                if not hasattr(module, "weight_scale"):
                    continue
                w = torch.empty(module.weight.shape, dtype=dtype, device=module.weight_scale.device)
                q, scale = quantize(w.normal_(0.0, 0.02, generator=generator), fp8)
                del w
                module.weight = torch.nn.Parameter(q, requires_grad=False)
                module.weight_scale.copy_(scale)


def build_variant(config: LLaDAConfig, device: torch.device | str, mode: str,
                  dtype: torch.dtype = torch.bfloat16, seed: int = 0) -> LLaDAModel:
    """A random-weight ``LLaDAModel`` in layout ``mode`` ("fp8" or "low_vram"), in eval mode.

    dtype: the compute dtype (and storage dtype of what is not fp8). Raises ValueError for an
    unknown mode and RuntimeError when the device cannot hold fp8 (fp8.check_fp8_support).
    """
    if mode not in VARIANTS:
        raise ValueError(f"mode must be one of {list(VARIANTS)}; got {mode!r}")
    device = torch.device(device)
    model = _meta_model(config, dtype)
    home = torch.device("cpu") if mode == "low_vram" else device
    fp8 = None
    if mode == "fp8":
        fp8 = check_fp8_support("fp8_e4m3fn", device, dtype)
        use_fp8_linears(model)
        for module in model.modules():  # allocate fp8, never a bf16 copy of the blocks
            if hasattr(module, "weight_scale"):
                module.weight = torch.nn.Parameter(
                    torch.empty(module.weight.shape, dtype=fp8, device="meta"),
                    requires_grad=False)
    model.to_empty(device=home)
    generator = torch.Generator(device=home).manual_seed(seed)
    _fill(model, generator)
    if fp8 is not None:
        _quantize_blocks(model, fp8, dtype, generator)
    if mode == "low_vram":
        stream_blocks(model, device)
    return model.eval().requires_grad_(False)

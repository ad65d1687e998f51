"""The pack's fp8: the block linears stored in fp8 (e4m3fn or e5m2) with a float32 scale per
output channel (``<key>_scale``), computed in the compute dtype after a cast (weights/fp8.py).

Loaded two ways through the official folder reader: a bf16 / fp32 folder converted while
reading (the loader's ``weight_dtype`` fp8_e4m3fn / fp8_e5m2), or a folder saved in fp8 (its
config.json's ``ladr_weight_dtype``), as stored. Saved by ``convert_folder``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import torch

from ...model.config import LLaDAConfig
from .. import fp8
from ..convert import Conversion, convert_folder
from . import LoadRequest, SaveOptions, register_format
from .official import FolderFormat, block_linears, float_bytes

CHOICES = tuple(fp8.FP8_FORMATS)


@register_format
class PackFP8(FolderFormat):
    """fp8 block linears with per-output-channel float32 scales."""

    name: ClassVar[str] = "fp8"
    rank: ClassVar[int] = 10
    load_choices: ClassVar[tuple[str, ...]] = CHOICES
    save_choices: ClassVar[tuple[str, ...]] = CHOICES

    def recognises(self, path: Path) -> bool:
        try:
            config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return isinstance(config, dict) and config.get("ladr_weight_dtype") in CHOICES

    def check_device(self, request: LoadRequest) -> None:
        """The fp8 dtype on the weights' and the compute device, before anything is read."""
        for device in (request.weights_at, request.device):
            fp8.check_fp8_support(request.weight_dtype, device, request.dtype)  # type: ignore[arg-type]

    def save(self, source: str | Path, out: str | Path, choice: str,
             options: SaveOptions) -> Path:
        return convert_folder(source, out, Conversion(choice, options.dtype, options.fp8_scale),
                              options.device)

    def weight_bytes(self, config: LLaDAConfig, choice: str, dtype: torch.dtype) -> int:
        """One byte per block linear weight and a float32 scale per output row; the rest in
        ``dtype``."""
        linears = block_linears(config)
        quantized = sum(s.numel() + 4 * s[0] for s in linears.values())
        return float_bytes(config, dtype, frozenset(linears)) + quantized

    def operations(self, weight_dtype: str) -> str | None:
        return "fp8" if weight_dtype in CHOICES else None

    def describe(self) -> str:
        return ("fp8_e4m3fn / fp8_e5m2: convert a bf16 folder to 8-bit while loading, a scale "
                "per output channel, computed in `dtype` (about half the memory of bf16; e4m3fn "
                "is the more accurate).")

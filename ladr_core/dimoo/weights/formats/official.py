"""The official Lumina-DiMOO folder as stored (bf16 / fp16 / fp32 safetensors, config.json,
tokenizer, vqvae/), loaded in the compute dtype; and ``FolderFormat``, what every folder format
shares (the checks, tokenizer and VQ of ``checkpoint.load_parts``; its own transformer reader).

The fallback reader: a folder no other format recognises is read here, and a path that is no
checkpoint at all gets the folder checks' message.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import torch

from ...model.config import LLaDAConfig
from ...model.transformer import LLaDAModel
from .. import fp8
from ..checkpoint import load_parts, read_safetensors
from . import DEFAULT, LoadRequest, WeightFormat, load_format, parameter_shapes, register_format


class FolderFormat(WeightFormat):
    """A format stored as a checkpoint folder in the official layout: ``load`` is the folder's
    checks, tokenizer and VQ, and a transformer reader (``reader``)."""

    converts: ClassVar[bool] = True  # its folders may be converted while loading

    def load(self, path: Path, request: LoadRequest) -> Any:
        conversion = load_format(request.weight_dtype)
        if conversion is not None:  # before anything is read
            conversion.check_device(request)
        return load_parts(path, request, self.reader(request))

    def reader(self, request: LoadRequest) -> Callable[[Path, LLaDAConfig, LoadRequest],
                                                       LLaDAModel]:
        """The transformer reader of a folder in this format under ``request``: its own as
        stored, else the conversion's (the format whose load choice ``weight_dtype`` is), after
        ``refuse_conversion`` for a format whose files are final."""
        conversion = load_format(request.weight_dtype)
        if conversion is None or conversion is self:
            return self.load_transformer
        if self.converts:
            return conversion.load_transformer  # type: ignore[attr-defined]

        def refused(folder: Path, config: LLaDAConfig, asked: LoadRequest) -> LLaDAModel:
            raise self.refuse_conversion(folder, asked)

        return refused

    def refuse_conversion(self, folder: Path, request: LoadRequest) -> ValueError:
        """The message refusing a conversion of a folder whose files are final."""
        return ValueError(f"weight_dtype {request.weight_dtype!r}: {folder} is already "
                          f"converted ({self.name}); load it with weight_dtype='default'")

    def load_transformer(self, folder: Path, config: LLaDAConfig,
                         request: LoadRequest) -> LLaDAModel:
        """The transformer from the folder's weight files (safetensors, the official names)."""
        return read_safetensors(folder, config, request.dtype, request.weights_at,
                                request.weight_dtype, request.fp8_scale, request.operations)

    def operations(self, weight_dtype: str) -> str | None:
        conversion = load_format(weight_dtype)
        return None if conversion in (None, self) or not self.converts else \
            conversion.operations(weight_dtype)


def float_bytes(config: LLaDAConfig, dtype: torch.dtype, skip: frozenset[str] = frozenset()
                ) -> int:
    """Bytes of every transformer parameter not in ``skip``, held in ``dtype``."""
    size = torch.empty(0, dtype=dtype).element_size()
    return sum(shape.numel() * size for key, shape in parameter_shapes(config).items()
               if key not in skip)


def block_linears(config: LLaDAConfig) -> dict[str, torch.Size]:
    """The block linear weights a format quantizes (bias-less, fp8.is_block_linear_weight)."""
    shapes = parameter_shapes(config)
    return {k: v for k, v in shapes.items() if fp8.is_block_linear_weight(k)
            and k.removesuffix("weight") + "bias" not in shapes}


@register_format
class OfficialFolder(FolderFormat):
    """The official folder as stored, every tensor in the compute dtype."""

    name: ClassVar[str] = "official"
    rank: ClassVar[int] = 0
    load_choices: ClassVar[tuple[str, ...]] = (DEFAULT,)
    fallback: ClassVar[bool] = True

    def recognises(self, path: Path) -> bool:
        return (path / "config.json").is_file()

    def weight_bytes(self, config: LLaDAConfig, choice: str, dtype: torch.dtype) -> int:
        return float_bytes(config, dtype)

    def describe(self) -> str:
        return ("default: as the folder or file stores them (always use default for GGUF "
                "files and converted folders).")

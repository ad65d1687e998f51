"""GGUF: the whole checkpoint (transformer in GGML blocks, config, tokenizer, VQ) as one
``.gguf`` file (weights/gguf.py reads it, gguf_write.py writes it with llama.cpp's Q8_0 /
Q5_K_M / Q4_K_M recipes). Loaded as stored, its blocks dequantized at use; never converted
further while loading.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import torch

from ...model.config import LLaDAConfig
from .. import ggml
from ..gguf import TRANSFORMER_PREFIX, load_gguf_checkpoint
from ..gguf_write import RECIPES, tensor_type, write_gguf
from . import (
    LoadRequest,
    SaveOptions,
    WeightFormat,
    check_load_choice,
    parameter_shapes,
    register_format,
)


@register_format
class GGUFFile(WeightFormat):
    """One self-contained GGUF file."""

    name: ClassVar[str] = "gguf"
    rank: ClassVar[int] = 30
    suffix: ClassVar[str | None] = ".gguf"
    label: ClassVar[str] = "GGUF file"
    save_choices: ClassVar[tuple[str, ...]] = tuple(RECIPES)

    def load(self, path: Path, request: LoadRequest) -> Any:
        if check_load_choice(request.weight_dtype) is not None:
            raise ValueError(f"weight_dtype {request.weight_dtype!r}: {path} is a GGUF file, "
                             "already quantized; load it with weight_dtype='default'")
        return load_gguf_checkpoint(path, request.device, request.dtype, request.operations,
                                    request.weights_at)

    def save(self, source: str | Path, out: str | Path, choice: str,
             options: SaveOptions) -> Path:
        return write_gguf(source, out, choice, device=options.device)

    def weight_bytes(self, config: LLaDAConfig, choice: str, dtype: torch.dtype) -> int:
        """The recipe's GGML bytes of each matrix (gguf_write.tensor_type), the norms in
        ``dtype``; ``choice`` DEFAULT (a file as stored) counts as its smallest recipe."""
        recipe = choice if choice in RECIPES else "Q4_K_M"
        size = torch.empty(0, dtype=dtype).element_size()
        total = 0
        for key, shape in parameter_shapes(config).items():
            if len(shape) == 1:
                total += shape.numel() * size
                continue
            kind, _ = tensor_type(recipe, key.removeprefix(TRANSFORMER_PREFIX), list(shape),
                                  config.n_layers)
            per, block = ggml.block_bytes(kind)
            total += shape.numel() // per * block
        return total

    def operations(self, weight_dtype: str) -> str | None:
        return "gguf"

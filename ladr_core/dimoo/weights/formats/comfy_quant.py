"""ComfyUI's quantized checkpoint format (weights/quant.py): a folder whose shards carry
``_quantization_metadata``, block linears in fp8 (a per-tensor scale and a calibrated
``input_scale``) or int8 (a scale per output channel), so ComfyUI's fast fp8 / int8 matmuls
apply. Loaded as stored (quant_load.py), never converted further; saved by ``convert_folder``
(fp8: the input ranges measured first when the caller gives a way to, ``SaveOptions``).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import torch

from ...model.config import LLaDAConfig
from ...model.transformer import LLaDAModel
from .. import quant
from ..convert import Conversion, convert_folder
from ..quant_load import is_quantized_folder, load_quantized_transformer, quantized_layers
from . import LoadRequest, SaveOptions, register_format
from .official import FolderFormat, block_linears, float_bytes

CHOICES = tuple(quant.WEIGHT_DTYPES)


@register_format
class ComfyQuant(FolderFormat):
    """fp8 / int8 block linears in ComfyUI's own layout and metadata."""

    name: ClassVar[str] = "comfy"
    rank: ClassVar[int] = 20
    save_choices: ClassVar[tuple[str, ...]] = CHOICES

    def recognises(self, path: Path) -> bool:
        return path.is_dir() and is_quantized_folder(path)

    converts: ClassVar[bool] = False

    def refuse_conversion(self, folder: Path, request: LoadRequest) -> ValueError:
        formats = ", ".join(sorted({f for f, _ in quantized_layers(folder).values()}))
        return ValueError(f"weight_dtype {request.weight_dtype!r}: {folder} is already "
                          f"quantized ({formats}, ComfyUI format); load it with "
                          "weight_dtype='default'")

    def load_transformer(self, folder: Path, config: LLaDAConfig,
                         request: LoadRequest) -> LLaDAModel:
        return load_quantized_transformer(folder, config, request.dtype, request.weights_at,
                                          request.operations)

    def save(self, source: str | Path, out: str | Path, choice: str,
             options: SaveOptions) -> Path:
        conversion = Conversion(choice, options.dtype, int8_scale=options.int8_scale)
        if quant.WEIGHT_DTYPES[choice].startswith("float8") and options.input_amax:
            conversion.input_amax = options.input_amax()
        return convert_folder(source, out, conversion, options.device)

    def weight_bytes(self, config: LLaDAConfig, choice: str, dtype: torch.dtype) -> int:
        """One byte per block linear weight; fp8: a float32 weight scale and input scale per
        layer (as calibrated by the save command); int8: a float32 scale per output row."""
        linears = block_linears(config)
        if quant.WEIGHT_DTYPES.get(choice) == "int8_tensorwise":
            quantized = sum(s.numel() + 4 * s[0] for s in linears.values())
        else:
            quantized = sum(s.numel() + 8 for s in linears.values())
        return float_bytes(config, dtype, frozenset(linears)) + quantized

    def operations(self, weight_dtype: str) -> str | None:
        return "comfy_quant"

"""``load_dimoo``: an official Lumina-DiMOO folder (or one ``save_dimoo`` wrote) -> a
``DiMOOPipeline`` (pipeline.py): the checkpoint (weights/checkpoint.py), the blocks streamed
from the CPU when asked (model/offload.py) and the fitted preview table when the folder has
one (model/vq.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from .model.vq import PREVIEW_TABLE_FILE
from .pipeline import DiMOOPipeline
from .weights.checkpoint import load_checkpoint
from .weights.files import resolve_device, resolve_dtype
from .weights.vqfiles import vq_folder

__all__ = ["load_dimoo"]


def load_dimoo(path: str | Path, device: str | torch.device = "cpu",
               dtype: torch.dtype | str = torch.bfloat16, weight_dtype: str | None = None,
               fp8_scale: str = "channel", offload_blocks: bool = False,
               operations: Any = None) -> DiMOOPipeline:
    """Load a Lumina-DiMOO checkpoint in any weight format (weights/checkpoint.py) into a
    ``DiMOOPipeline``. ``weight_dtype``: a load choice (weights/formats/; None: as stored);
    ``fp8_scale``: "channel" or "tensor" for the pack's fp8 (fp8.py). ``offload_blocks``: keep the blocks on the CPU and stream each to ``device`` one block
    ahead (offload.py). A shipped ``vqvae/preview_table.safetensors`` is the preview table.
    """
    if not isinstance(offload_blocks, bool):
        raise ValueError(f"offload_blocks must be True or False (got {offload_blocks!r})")
    checkpoint = load_checkpoint(path, device=device, dtype=dtype, weight_dtype=weight_dtype,
                                 fp8_scale=fp8_scale, operations=operations,
                                 weights_device="cpu" if offload_blocks else None)
    if offload_blocks:
        from .model.offload import stream_blocks

        stream_blocks(checkpoint.transformer, resolve_device(device))
    pipe = DiMOOPipeline(checkpoint)
    pipe.compute_dtype = resolve_dtype(dtype)  # the load setting, whatever the weights store
    table = vq_folder(Path(path)) / PREVIEW_TABLE_FILE
    if table.is_file():
        pipe.use_preview_table(table)
    return pipe

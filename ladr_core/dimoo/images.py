"""What a pipeline does with images apart from generating them: the VQ decode's memory and the
codebook -> RGB preview table (model/vq.py), as functions of the VQ (``DiMOOPipeline``'s
``decode_bytes``, ``preview_bytes``, ``use_preview_table`` and ``preview_table``).

The table is the VQ's non-persistent buffer, so it moves with the VQ and stays out of its state
dict. When the VQ was left on another device than the tokens, a copy on the tokens' device is
made once, without waiting for the host, and kept in ``copies`` (one dict per pipeline).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..devices import to_device
from .model.memory import decode_memory
from .model.vq import PREVIEW_CHUNK, PREVIEW_CONTEXT, build_preview_table, load_preview_table
from .weights.files import CheckpointError

__all__ = ["PREVIEW_BUFFER", "decode_bytes", "preview_bytes", "preview_table", "read_preview_table"]

PREVIEW_BUFFER = "ladr_preview_table"  # the table's buffer name on the VQ module

Copies = dict[torch.device, torch.Tensor]  # the table on devices the VQ is not on


def decode_bytes(vq: Any, width: int, height: int, images: int = 1) -> int:
    """Device memory the VQ decoder needs beyond its weights for ``images`` images: one
    image's ``decode_memory`` beside the batch's output, which stays on the device."""
    one = decode_memory(vq.config, height, width, next(vq.parameters()).dtype)
    return one + (images if images > 1 else 0) * height * width * 3 * 4


def preview_bytes(vq: Any, vq_factor: int) -> int:
    """Device memory building the preview table takes beyond the VQ's weights (0 once built):
    PREVIEW_CHUNK grids of PREVIEW_CONTEXT^2 tokens decoded at a time. ``run_memory`` counts
    it (a run with a callback builds it first), so a card that fits a run fits its preview."""
    if vq is None or getattr(vq, PREVIEW_BUFFER, None) is not None:
        return 0
    side = PREVIEW_CONTEXT * vq_factor
    return PREVIEW_CHUNK * decode_memory(vq.config, side, side, next(vq.parameters()).dtype)


def read_preview_table(vq: Any, path: str | Path, size: int, copies: Copies) -> None:
    """Use a fitted table file of ``size`` px a token (vq.py ``load_preview_table``);
    CheckpointError if it does not fit this codebook."""
    try:
        table = load_preview_table(path, vq.config.num_vq_embeddings, size)
    except ValueError as exc:
        raise CheckpointError(str(exc)) from exc
    _keep(vq, table, copies)


def _keep(vq: Any, table: torch.Tensor, copies: Copies) -> None:
    """The table as the VQ's buffer, on the VQ's device (module docstring)."""
    vq.register_buffer(PREVIEW_BUFFER, table.to(next(vq.parameters()).device), persistent=False)
    copies.clear()


def preview_table(vq: Any, vq_factor: int, size: int, copies: Copies,
                  device: torch.device | None = None) -> torch.Tensor:
    """Codebook -> RGB table [K, p, p, 3] (vq.py), on ``device`` (module docstring)."""
    table = getattr(vq, PREVIEW_BUFFER, None)
    if table is None:
        _keep(vq, build_preview_table(vq, vq_factor, size), copies)
        table = getattr(vq, PREVIEW_BUFFER)
    if device is None or table.device == device:
        return table
    if device not in copies:
        copies[device] = to_device(table, device)
    return copies[device]

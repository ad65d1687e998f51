"""What a pipeline does with images apart from generating them: the official VQ encoding, the
full decode and the cheap codebook -> RGB preview (model/vq.py), as a mixin of DiMOOPipeline.

Uses the pipeline's ``vq``, ``vq_factor``, ``preview_size`` and ``_preview_copies``.

The preview table lives with the VQ, as its non-persistent buffer ``ladr_preview_table``: it
moves when the VQ moves (``vq.to(...)``, a host's full load of the VQ onto the GPU) and stays out
of its state dict. The per-step gather runs on the tokens' device: when the VQ (and so the
table) was left elsewhere, a copy on the tokens' device is made once, without waiting for the
host, and kept; the tokens never travel to the table.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..devices import to_device
from .model.memory import decode_memory
from .model.vq import (
    PREVIEW_CHUNK,
    PREVIEW_CONTEXT,
    build_preview_table,
    decode_codes,
    encode_images,
    load_preview_table,
    preview_from_table,
)
from .tasks.painting import check_image
from .weights.files import CheckpointError

__all__ = ["PREVIEW_BUFFER", "PipelineImages"]

PREVIEW_BUFFER = "ladr_preview_table"  # the table's buffer name on the VQ module


class PipelineImages:
    """Encode, decode and preview (module docstring)."""

    vq: Any
    vq_factor: int
    preview_size: int
    _preview_copies: dict[torch.device, torch.Tensor]  # the table on devices the VQ is not on

    def encode_image(self, image: torch.Tensor) -> torch.Tensor:
        """IMAGE float [B, H, W, 3] in [0, 1] -> codes LongTensor [B, h*w] (CPU), the official
        encoding (vq.encode_images); H and W multiples of ``vq_factor`` (ValueError naming the
        nearest valid sizes otherwise; ``painting.fit_image`` crops or resizes)."""
        return encode_images(self.vq, check_image(image, self.vq_factor, "image"),
                             self.vq_factor)

    def decode(self, tokens: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
        """Codes [B, h*w] -> images float [B, h*f, w*f, 3] in [0, 1] (full VQ decoder, one
        image at a time)."""
        return decode_codes(self.vq, tokens, grid)

    def decode_bytes(self, width: int, height: int, images: int = 1) -> int:
        """Device memory the VQ decoder needs beyond its weights for ``images`` images of
        ``width`` x ``height`` (model/memory.py ``decode_memory`` of one, decoded one at a
        time, beside the batch's output, which stays on the device): what a host keeps free
        to decode."""
        one = decode_memory(self.vq.config, height, width, next(self.vq.parameters()).dtype)
        return one + (images if images > 1 else 0) * height * width * 3 * 4

    def preview_bytes(self) -> int:
        """Device memory building the preview table takes beyond the VQ's weights (0 once
        there is a table): ``build_preview_table`` decodes PREVIEW_CHUNK codes at a time, each
        a grid of PREVIEW_CONTEXT x PREVIEW_CONTEXT tokens (model/memory.py ``decode_memory``
        of each). A run with a callback builds it before its first step (``DiMOOPipeline.run``)
        and ``run_memory`` counts it, so a card that fits a run also fits its first preview."""
        if self.vq is None or getattr(self.vq, PREVIEW_BUFFER, None) is not None:
            return 0
        side = PREVIEW_CONTEXT * self.vq_factor
        one = decode_memory(self.vq.config, side, side, next(self.vq.parameters()).dtype)
        return PREVIEW_CHUNK * one

    def use_preview_table(self, path: str | Path) -> None:
        """Use a fitted table file (vq.py ``load_preview_table``); CheckpointError if it does
        not fit this codebook."""
        p = min(self.preview_size, self.vq_factor)
        try:
            table = load_preview_table(path, self.vq.config.num_vq_embeddings, p)
        except ValueError as exc:
            raise CheckpointError(str(exc)) from exc
        self._keep_preview_table(table)

    def _keep_preview_table(self, table: torch.Tensor) -> None:
        """The table as the VQ's buffer, on the VQ's device (module docstring)."""
        device = next(self.vq.parameters()).device
        self.vq.register_buffer(PREVIEW_BUFFER, table.to(device), persistent=False)
        self._preview_copies.clear()

    def preview_table(self, device: torch.device | None = None) -> torch.Tensor:
        """Codebook -> RGB table [K, p, p, 3]: the checkpoint's fitted table, else built once
        on first use by probing the decoder (vq.py). On the VQ's device, or on ``device``
        (a copy made once per device, without waiting for the host, when the VQ is elsewhere)."""
        table = getattr(self.vq, PREVIEW_BUFFER, None)
        if table is None:
            self._keep_preview_table(build_preview_table(self.vq, self.vq_factor,
                                                         self.preview_size))
            table = getattr(self.vq, PREVIEW_BUFFER)
        if device is None or table.device == device:
            return table
        if device not in self._preview_copies:
            self._preview_copies[device] = to_device(table, device)
        return self._preview_copies[device]

    def preview(self, tokens: torch.Tensor, masked: torch.Tensor | None,
                grid: tuple[int, int]) -> torch.Tensor:
        """Cheap preview [B, h*p, w*p, 3] on the tokens' device: table gather, masked tokens
        grey; no decoder call, no host copy of the tokens."""
        return preview_from_table(self.preview_table(tokens.device), tokens, masked, grid)

"""What a pipeline does with images apart from generating them: the official VQ encoding, the
full decode and the cheap codebook -> RGB preview (model/vq.py), as a mixin of DiMOOPipeline.

Uses the pipeline's ``vq``, ``vq_factor``, ``preview_size`` and its cached ``_preview_table``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from .model.vq import (
    build_preview_table,
    decode_codes,
    encode_images,
    load_preview_table,
    preview_from_table,
)
from .tasks.painting import check_image
from .weights.files import CheckpointError

__all__ = ["PipelineImages"]


class PipelineImages:
    """Encode, decode and preview (module docstring)."""

    vq: Any
    vq_factor: int
    preview_size: int
    _preview_table: torch.Tensor | None

    def encode_image(self, image: torch.Tensor) -> torch.Tensor:
        """IMAGE float [B, H, W, 3] in [0, 1] -> codes LongTensor [B, h*w] (CPU), the official
        encoding (vq.encode_images); H and W multiples of ``vq_factor`` (ValueError naming the
        nearest valid sizes otherwise; ``painting.fit_image`` crops or resizes)."""
        return encode_images(self.vq, check_image(image, self.vq_factor, "image"),
                             self.vq_factor)

    def decode(self, tokens: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
        """Codes [B, h*w] -> images float [B, h*f, w*f, 3] in [0, 1] (full VQ decoder)."""
        return decode_codes(self.vq, tokens, grid)

    def use_preview_table(self, path: str | Path) -> None:
        """Use a fitted table file (vq.py ``load_preview_table``); CheckpointError if it does
        not fit this codebook."""
        p = min(self.preview_size, self.vq_factor)
        try:
            table = load_preview_table(path, self.vq.config.num_vq_embeddings, p)
        except ValueError as exc:
            raise CheckpointError(str(exc)) from exc
        self._preview_table = table.to(next(self.vq.parameters()).device)

    def preview_table(self) -> torch.Tensor:
        """Codebook -> RGB table [K, p, p, 3]: the checkpoint's fitted table, else built once
        on first use by probing the decoder (vq.py)."""
        if self._preview_table is None:
            self._preview_table = build_preview_table(self.vq, self.vq_factor, self.preview_size)
        return self._preview_table

    def preview(self, tokens: torch.Tensor, masked: torch.Tensor | None,
                grid: tuple[int, int]) -> torch.Tensor:
        """Cheap preview [B, h*p, w*p, 3]: table gather, masked tokens grey; no decoder call."""
        return preview_from_table(self.preview_table(), tokens, masked, grid)

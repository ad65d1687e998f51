"""The live preview true where the picture is known: a base under the colour-table preview
(docs/ARCHITECTURE.md section 7), whose cheap colours ignore a token's neighbours:
inpainting / outpainting (``painting_base``) draws the tokens not regenerated with the input's
own pixels (area-pooled per token: the pixels the decode pastes back); editing (``edit_base``)
shows the reference faded half-way to grey under the tokens still masked.
``PreviewBase.apply`` runs per step on the preview's device: a ``torch.where`` over [H, W, 3].
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from ...devices import to_device
from ..model.vq import MASK_GREY
from .painting import PaintPlan

FADE = 0.5
"""Editing: weight of the reference in a masked token's preview (the rest is MASK_GREY)."""

__all__ = ["FADE", "PreviewBase", "edit_base", "painting_base", "pool_to_preview"]


def pool_to_preview(images: torch.Tensor, grid: tuple[int, int], p: int) -> torch.Tensor:
    """Images float [B, h*f, w*f, 3] -> [B, h*p, w*p, 3], each token's f x f patch area-pooled
    to p x p (p = f: unchanged)."""
    h, w = grid
    if tuple(images.shape[1:3]) == (h * p, w * p):
        return images.float()
    pooled = F.adaptive_avg_pool2d(images.permute(0, 3, 1, 2).float(), (h * p, w * p))
    return pooled.permute(0, 2, 3, 1).contiguous()


def _cells(bits: torch.Tensor, grid: tuple[int, int], p: int) -> torch.Tensor:
    """Token bits [N] -> pixel mask [h*p, w*p, 1] of the preview."""
    h, w = grid
    cells = bits.reshape(h, w).repeat_interleave(p, 0).repeat_interleave(p, 1)
    return cells[..., None]


@dataclass
class PreviewBase:
    """Pictures under the preview of a run's images: pixels [P, h*f, w*f, 3] (pooled once, on
    the preview's device), ``known`` [Q, h*w] the tokens drawn with them, ``faded``: masked
    tokens show them faded (editing) instead of flat grey; image i shows picture i // per_item.
    """

    pixels: torch.Tensor
    grid: tuple[int, int]
    known: torch.Tensor | None = None
    faded: bool = False
    per_item: int = 1
    _pooled: dict = field(default_factory=dict, repr=False)

    def _pick(self, table: torch.Tensor, item: int) -> torch.Tensor:
        pair = item // max(1, self.per_item)
        return table[min(pair, table.shape[0] - 1)] if table.shape[0] > 1 else table[0]

    def apply(self, preview: torch.Tensor, masked: torch.Tensor, item: int) -> torch.Tensor:
        """preview float [h*p, w*p, 3] of image ``item`` (0-based), masked bool [h*w] its
        still-masked tokens -> the preview with the known pixels (or the faded picture) in
        place, on the preview's device."""
        p = preview.shape[0] // self.grid[0]
        key = (p, preview.device, preview.dtype)
        if key not in self._pooled:  # once per run: copies that do not wait for the host
            pooled = pool_to_preview(self.pixels, self.grid, p)
            known = None if self.known is None else to_device(self.known, preview.device)
            self._pooled[key] = (to_device(pooled, preview.device).to(preview.dtype), known)
        table, known = self._pooled[key]
        pixels = self._pick(table, item)
        out = preview
        if self.faded:
            under = pixels * FADE + MASK_GREY * (1.0 - FADE)
            out = torch.where(_cells(masked.to(preview.device), self.grid, p), under, out)
        if known is not None:
            out = torch.where(_cells(self._pick(known, item), self.grid, p), pixels, out)
        return out


def painting_base(plan: PaintPlan) -> PreviewBase:
    """The base of an inpaint / outpaint run: each item's own pixels under its known tokens
    (the plan's images and regenerated tokens, one per item)."""
    return PreviewBase(plan.images, plan.grid, known=~plan.region)


def edit_base(reference: torch.Tensor, grid: tuple[int, int], vq_factor: int,
              batch_size: int = 1) -> PreviewBase | None:
    """The base of an edit: the reference faded under the masked tokens, when the reference
    has the output's grid (a style transfer's output takes the style image's size: then None,
    flat grey)."""
    ref = reference if reference.dim() == 4 else reference[None]
    if tuple(ref.shape[1:3]) != (grid[0] * vq_factor, grid[1] * vq_factor):
        return None
    return PreviewBase(ref.float(), grid, faded=True, per_item=batch_size)

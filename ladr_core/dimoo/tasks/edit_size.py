"""The official size of an image to edit: a 512 px-area bucket (Lumina-DiMOO image-to-image).

The official `inference/inference_i2i.py` lists the crop sizes of at most (512 / 32)^2 patches
of 32 px with a side ratio of at most 4 (`generate_crop_size_list`), picks the one closest to
the image's aspect ratio (`var_center_crop`), scales the image to cover it and crops it. The
model was trained on such images, so a 1024 px photo edited as it is runs four times the
tokens at a size it has not seen. Here: the same buckets and choice; torch resampling (area
halving, antialiased bicubic) close to, not bit-equal with, PIL's; a centred crop (the
official one is random).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

EDIT_AREA_SIDE = 512  # px: the official buckets hold (512 / 32)^2 patches
PATCH = 32  # px per bucket step
MAX_RATIO = 4.0


def buckets(area_side: int = EDIT_AREA_SIDE, patch: int = PATCH,
            max_ratio: float = MAX_RATIO) -> list[tuple[int, int]]:
    """(width, height) crop sizes, in the official order: widest first."""
    patches = (area_side // patch) ** 2
    out, wp, hp = [], patches, 1
    while wp > 0:
        if max(wp, hp) / min(wp, hp) <= max_ratio:
            out.append((wp * patch, hp * patch))
        if (hp + 1) * wp <= patches:
            hp += 1
        else:
            wp -= 1
    return out


def pick_bucket(width: int, height: int, sizes: list[tuple[int, int]] | None = None
                ) -> tuple[int, int]:
    """The bucket whose aspect ratio is closest to width x height (the official top-1: the
    largest (match, size) pair, so among equal matches the larger size)."""
    sizes = buckets() if sizes is None else sizes

    def match(size: tuple[int, int]) -> float:
        a, b = size[0] / width, size[1] / height
        return min(a, b) / max(a, b)

    return max(sizes, key=lambda s: (match(s), s))


def official_edit_size(image: torch.Tensor, sizes: list[tuple[int, int]] | None = None
                       ) -> torch.Tensor:
    """IMAGE [B, H, W, 3] -> [B, h, w, 3] at its official bucket (module docstring; ``sizes``:
    other buckets, e.g. understanding's 1024 px area), as it is when already there."""
    _, h, w, _ = image.shape
    cw, ch = pick_bucket(w, h, sizes)
    if (w, h) == (cw, ch):
        return image
    x = image.permute(0, 3, 1, 2).float()
    while x.shape[3] >= 2 * cw and x.shape[2] >= 2 * ch:  # the official BOX halving
        x = F.avg_pool2d(x[..., : x.shape[2] // 2 * 2, : x.shape[3] // 2 * 2], 2)
    scale = max(cw / x.shape[3], ch / x.shape[2])
    size = (max(ch, round(x.shape[2] * scale)), max(cw, round(x.shape[3] * scale)))
    x = F.interpolate(x, size=size, mode="bicubic", antialias=True, align_corners=False)
    top, left = (size[0] - ch) // 2, (size[1] - cw) // 2
    x = x[..., top:top + ch, left:left + cw].clamp(0.0, 1.0)
    return x.permute(0, 2, 3, 1).contiguous()


EDIT_SIZES = ("official", "as is")
"""``DiMOOPipeline.edit``'s ``size``: the official 512 px-area bucket, or the image as it is."""


def sized_for_edit(image: torch.Tensor, name: str, size: str) -> tuple[torch.Tensor, str]:
    """An IMAGE at its editing ``size`` (EDIT_SIZES) and a note when that changed it."""
    if size == "as is":
        return image, ""
    sized = official_edit_size(image)
    if sized is image:
        return image, ""
    (h, w), (nh, nw) = image.shape[1:3], sized.shape[1:3]
    return sized, f"; {name} {w}x{h} -> {nw}x{nh} (official 512 px area)"

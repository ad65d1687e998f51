"""Pictures, masks and image tokens handed in by a user or a host, checked once and fitted to
the VQ grid, here for every task, so an image gets the same message wherever it goes in.

An IMAGE is float [B, H, W, 3] in [0, 1] (ComfyUI's), a MASK float [B, H, W] in [0, 1]
(1 = regenerate), image tokens an integer tensor [B, h*w] of codes in [0, K). H and W must be
multiples of the VQ factor (the pack's one size rule), else a message naming the nearest
sizes, or ``fit_image``'s crop / resize.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ...errors import InputError
from ..denoise.prompt import size_error

__all__ = ["FIT_FIX", "FIT_MODES", "check_image", "check_mask", "check_tokens", "fit_image",
           "fit_painting", "token_size"]

FIT_MODES = ("exact", "crop", "resize")
FIT_FIX = "crop or resize it, or pass options=PaintOptions(fit='crop' or 'resize')"
ALPHA_FIX = "drop the alpha channel (ComfyUI: Split Image with Alpha)"
MASK_RANGE_FIX = ("clamp or threshold it to [0, 1] (ComfyUI: Threshold Mask; a bicubic resize "
                  "overshoots)")


def check_image(image: object, vq_factor: int, name: str = "image",
                on_grid: bool = True, fix: str = "crop or resize the image to a valid size"
                ) -> torch.Tensor:
    """A ComfyUI IMAGE (module docstring; [H, W, 3] accepted) as float32 [B, H, W, 3], else an
    InputError naming ``name``. ``on_grid=False``: any size, for an image to be fitted."""
    if not isinstance(image, torch.Tensor) or not image.is_floating_point():
        raise InputError(name, f"is a {type(image).__name__}, not an image",
                         "give a float tensor [B, H, W, 3] in [0, 1] (a ComfyUI IMAGE)")
    image = image.unsqueeze(0) if image.dim() == 3 else image
    if image.dim() == 4 and image.shape[-1] == 4 and image.shape[0] >= 1:
        raise InputError(name, "has 4 channels (RGBA); the model draws RGB", ALPHA_FIX)
    if image.dim() != 4 or image.shape[-1] != 3 or image.shape[0] < 1:
        raise InputError(name, f"has shape {tuple(image.shape)}, not [B, H, W, 3] (RGB)",
                         "give an RGB image batch")
    for side, value in (("width", int(image.shape[2])), ("height", int(image.shape[1]))):
        err = size_error(side, value, vq_factor) if on_grid else None
        if err is not None:
            raise InputError(name, f"{side} is {value} px, not a multiple of {vq_factor} px "
                             f"(one token per {vq_factor} x {vq_factor} px)", f"{fix} "
                             f"({err.fix})")
    lo, hi = torch.aminmax(image.detach())
    if not (math.isfinite(lo) and math.isfinite(hi) and lo >= 0.0 and hi <= 1.0):
        raise InputError(name, f"has values outside [0, 1] (min {float(lo):.3g}, max "
                         f"{float(hi):.3g})", "clamp it to [0, 1] (an IMAGE is 0..1)")
    return image.float()


def check_mask(mask: object, image: torch.Tensor, name: str = "mask") -> torch.Tensor:
    """A ComfyUI MASK for ``image`` as float32 [B', H, W] (B' = B or 1, or several masks for
    one image), else an InputError naming ``name``."""
    if not isinstance(mask, torch.Tensor) or mask.is_complex():
        raise InputError(name, f"is a {type(mask).__name__}, not a mask",
                         "give a tensor [B, H, W] in [0, 1] (a ComfyUI MASK, 1 = regenerate)")
    mask = mask.unsqueeze(0) if mask.dim() == 2 else mask
    if mask.dim() != 3:
        raise InputError(name, f"has shape {tuple(mask.shape)}, not [B, H, W]",
                         "give one mask per image (a ComfyUI MASK)")
    size, img = tuple(mask.shape[1:]), tuple(image.shape[1:3])
    if size != img:
        raise InputError(name, f"is {size[1]}x{size[0]} px but the image is {img[1]}x{img[0]} "
                         "px", "give a mask of the image's size (Pad Image for Outpainting pads "
                         "both together)")
    b, bm = image.shape[0], mask.shape[0]
    if bm != b and 1 not in (b, bm):
        raise InputError(name, f"is a batch of {bm} masks for a batch of {b} images",
                         "give one mask for all images, or one per image")
    mask = mask.float()
    lo, hi = torch.aminmax(mask.detach())
    if not (math.isfinite(lo) and math.isfinite(hi) and lo >= 0.0 and hi <= 1.0):
        raise InputError(name, f"has values outside [0, 1] (min {float(lo):.3g}, max "
                         f"{float(hi):.3g}; 1 = regenerate)", MASK_RANGE_FIX)
    return mask


def fit_image(image: torch.Tensor, vq_factor: int, mode: str = "exact") -> torch.Tensor:
    """A size the VQ accepts: "exact" (refuse, naming the nearest sizes), "crop" (centre crop to
    the largest multiples of the VQ factor) or "resize" (bicubic, antialiased, to the nearest
    multiples). image: float [B, H, W, 3] -> [B, H', W', 3]."""
    if mode not in FIT_MODES:
        raise ValueError(f"fit must be one of {list(FIT_MODES)}; got {mode!r}")
    _, hh, ww, _ = image.shape
    if mode == "exact" or (hh % vq_factor == 0 and ww % vq_factor == 0):
        return image
    if mode == "crop":
        h, w = max(vq_factor, hh // vq_factor * vq_factor), max(vq_factor, ww // vq_factor * vq_factor)
        if h > hh or w > ww:
            raise ValueError(f"image: {ww}x{hh} px is smaller than one {vq_factor} px token; "
                             "use fit='resize'")
        top, left = (hh - h) // 2, (ww - w) // 2
        return image[:, top:top + h, left:left + w]
    h = max(vq_factor, round(hh / vq_factor) * vq_factor)
    w = max(vq_factor, round(ww / vq_factor) * vq_factor)
    out = F.interpolate(image.permute(0, 3, 1, 2).float(), size=(h, w), mode="bicubic",
                        antialias=True, align_corners=False)
    return out.clamp(0.0, 1.0).permute(0, 2, 3, 1).contiguous()


def fit_painting(image: object, mask: object, vq_factor: int, fit: str = "exact",
                 image_name: str = "image", fix: str = FIT_FIX
                 ) -> tuple[torch.Tensor, torch.Tensor, str]:
    """Check an image and its mask as given (a message names the sizes the user sees) and fit
    both the same way (``fit_image``): (image, masks, a note saying what was fitted, or "")."""
    image = check_image(image, vq_factor, image_name, on_grid=fit == "exact", fix=fix)
    masks = check_mask(mask, image)
    h, w = image.shape[1:3]
    if h % vq_factor == 0 and w % vq_factor == 0:
        return image, masks, ""
    image = fit_image(image, vq_factor, fit)
    masks = fit_image(masks[..., None].expand(*masks.shape, 3), vq_factor, fit)[..., 0]
    done = "cropped" if fit == "crop" else "resized"
    return (image, masks.clamp(0.0, 1.0).contiguous(),
            f"image {w}x{h} px {done} to {image.shape[2]}x{image.shape[1]} (fit={fit})")


TOKENS_FIX = "give the codes LongTensor [B, h*w] a sampler or the VQ encoder of this model made"


def check_tokens(tokens: object, grid: tuple[int, int], codebook: int,
                 name: str = "tokens") -> torch.Tensor:
    """Image tokens for a (h, w) ``grid``: an integer tensor [B, h*w] (or [h*w]) of codes in
    [0, ``codebook``), returned as a CPU LongTensor; one InputError naming ``name`` otherwise."""
    if not isinstance(tokens, torch.Tensor) or tokens.is_floating_point() \
            or tokens.is_complex() or tokens.dtype == torch.bool:
        what = tokens.dtype if isinstance(tokens, torch.Tensor) else type(tokens).__name__
        raise InputError(name, f"is a {what}, not image codes", TOKENS_FIX)
    tokens = tokens[None] if tokens.dim() == 1 else tokens
    n = grid[0] * grid[1]
    if tokens.dim() != 2 or tokens.shape[0] < 1 or tokens.shape[1] != n:
        raise InputError(name, f"has shape {tuple(tokens.shape)}, but a {grid[0]} x {grid[1]} "
                         f"token grid has [B, {n}]", "give the width and height of the picture "
                         "the tokens came from")
    lo, hi = (int(v) for v in torch.aminmax(tokens))
    if lo < 0 or hi >= codebook:
        raise InputError(name, f"holds codes {lo} to {hi}, outside this model's codebook [0, "
                         f"{codebook})", "give tokens this model made (its sampler or its VQ "
                         "encoder)")
    return tokens.long().cpu()


def token_size(tokens: object, width: int | None, height: int | None, default_size: int,
               vq_factor: int) -> tuple[int, int]:
    """The picture size of ``tokens``: width and height as given (None = ``default_size``), or
    (both None) the square grid their count makes; InputError naming ``tokens`` when it makes
    none."""
    if width is not None or height is not None:
        return (default_size if width is None else width,
                default_size if height is None else height)
    n = int(tokens.shape[-1]) if isinstance(tokens, torch.Tensor) and tokens.dim() else 0
    side = math.isqrt(n)
    if n < 1 or side * side != n:
        raise InputError("tokens", f"has {n} codes per picture, not a square grid",
                         "give the width and height of the picture they came from")
    return side * vq_factor, side * vq_factor

"""Inpainting and outpainting: image + mask -> known tokens for the sampler, and paste-back.

Official behaviour (Lumina-DiMOO ``inference/inference_t2i.py --painting_mode``,
``utils/image_utils.encode_img_with_paint``), here for any mask and a batch of images: the whole
image is VQ-encoded ([0, 1] pixels); the pixel mask (1 = regenerate) is averaged over each
token's patch (``F.interpolate(mode="area")``), a token is regenerated when its coverage is
strictly above ``PaintOptions.threshold`` (0.5), then optionally dilated by ``grow`` tokens
(the official ``dilate_latent_k``, default 0); the prompt holds the known codes with MASK on
the region, and the schedule runs over that MASK count (``ladr_core.sampling``'s ``known``).
The official script builds only a centred rectangle. The decode can take the original pixels
back (``paste_original``; options: web/docs/LADR_PaintCanvas/en.md).

Image to image (``denoise`` < 1, ladr_core.strength): without a mask the whole picture is the
region, paste-back off; the share of the region the official schedule still has masked at
the start step is re-masked at random (``PaintPlan.from_step``), the rest starts as the
picture's own codes. ``plan_tokens`` starts from a sampler's own codes instead (no VQ
encoding, no paste-back, so equal codes give equal runs).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from ...errors import InputError
from ...strength import remask_count, remask_positions
from ...validation import KnownTokens
from .pictures import FIT_FIX, FIT_MODES, check_image, check_tokens, fit_painting

__all__ = ["PaintOptions", "PaintPlan", "paste_original", "plan_painting", "plan_tokens",
           "token_mask"]


def _real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class PaintOptions:
    """How a pixel mask becomes tokens and how the result is finished.

    threshold and grow: module docstring. paste: take the original pixels back outside the
    region, blended over ``feather`` px (None: half a token). fit: an off-grid image is refused
    ("exact"), centre cropped or resized with its mask (``pictures.fit_image``)."""

    threshold: float = 0.5
    grow: int = 0
    paste: bool = True
    feather: int | None = None
    fit: str = "exact"

    def __post_init__(self) -> None:
        if not _real(self.threshold) or not 0.0 <= float(self.threshold) < 1.0:
            raise ValueError(f"mask_threshold must be in [0, 1) (share of a token's patch the "
                             f"mask must exceed; official 0.5); got {self.threshold!r}")
        for name, value in (("mask_grow", self.grow), ("feather", self.feather)):
            if value is None and name == "feather":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0{' or None' * (name == 'feather')}"
                                 f"; got {value!r}")
        if not isinstance(self.paste, bool):
            raise ValueError(f"paste must be True or False; got {self.paste!r}")
        if self.fit not in FIT_MODES:
            raise ValueError(f"fit must be one of {list(FIT_MODES)}; got {self.fit!r}")


def token_mask(mask: torch.Tensor, vq_factor: int, threshold: float = 0.5, grow: int = 0
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Pixel mask [B, H, W] -> (tokens to regenerate BoolTensor [B, h*w], coverage [B, h*w]),
    the official rule (module docstring)."""
    b, hh, ww = mask.shape
    h, w = hh // vq_factor, ww // vq_factor
    coverage = F.interpolate(mask[:, None], size=(h, w), mode="area")
    chosen = coverage > threshold
    if grow > 0:
        chosen = F.max_pool2d(chosen.float(), 2 * grow + 1, stride=1, padding=grow) > 0.5
    return chosen.reshape(b, h * w), coverage.reshape(b, h * w)


def paste_original(generated: torch.Tensor, original: torch.Tensor, region: torch.Tensor,
                   grid: tuple[int, int], feather: int) -> torch.Tensor:
    """The generated pixels on the regenerated tokens, the original pixels elsewhere, blended
    over ``feather`` px OUTSIDE the regenerated region.

    The generated pixel's weight is 1 on the region, (feather + 1 - k) / (feather + 1) at k px
    (chessboard) outside it. The ramp lies on the known side, where the decode shows the known
    tokens' content, so what lies under the mask (Pad Image for Outpainting's grey) never
    bleeds in."""
    b, hh, ww, _ = generated.shape
    f = hh // grid[0]
    m = region.view(b, 1, *grid).to(generated.device, torch.float32)
    m = m.repeat_interleave(f, dim=2).repeat_interleave(f, dim=3)  # [B, 1, H, W]
    weight = m
    if feather > 0:
        ramp, grown = m.clone(), m
        for _ in range(feather):  # each 3x3 max-pool grows the region by one px
            grown = F.max_pool2d(grown, 3, stride=1, padding=1)
            ramp += grown
        weight = ramp / (feather + 1)
    weight = weight.permute(0, 2, 3, 1)
    return generated * weight + original.to(generated.device, generated.dtype) * (1 - weight)


@dataclass(frozen=True)
class PaintPlan:
    """One painting run, checked, per item (each image + mask pair repeated ``batch_size``
    times): pixels ``images`` [B, H, W, 3], ``region`` [B, N] and the prompt; ``source``
    [P, H, W, 3] the distinct images to encode (None from tokens: ``images`` then only sets the
    size); ``codes`` [B, N] set by ``with_codes``; ``generate`` [B, N] the tokens masked at the
    start, set by ``from_step`` (None: the whole region)."""

    images: torch.Tensor
    region: torch.Tensor
    prompts: list[str]
    grid: tuple[int, int]
    options: PaintOptions
    source: torch.Tensor | None
    batch_size: int
    note: str = ""
    codes: torch.Tensor | None = None
    denoise: float = 1.0
    generate: torch.Tensor | None = None

    @property
    def width(self) -> int:
        return self.images.shape[2]

    @property
    def height(self) -> int:
        return self.images.shape[1]

    def per_item(self, t: torch.Tensor) -> torch.Tensor:
        """[1 or P, ...] (one per distinct image) -> [B, ...] (one per item)."""
        return _spread(t, self.images.shape[0] // self.batch_size, self.batch_size)

    def with_codes(self, codes: torch.Tensor) -> PaintPlan:
        """The plan with ``source``'s codes [P, N] (the VQ encoding) spread over the items."""
        return replace(self, codes=self.per_item(codes))

    def encoded(self, encode_image: Callable[[torch.Tensor], torch.Tensor]) -> PaintPlan:
        """The plan with its codes: ``source`` VQ-encoded, or as given (from tokens)."""
        return self if self.source is None else self.with_codes(encode_image(self.source))

    def from_step(self, start: int, steps: int, generators: list[torch.Generator]) -> PaintPlan:
        """The plan started at step ``start`` of T = ``steps`` (ladr_core.strength)."""
        counts = [remask_count(int(c), start, steps) for c in self.region.sum(dim=1).tolist()]
        return replace(self, generate=remask_positions(self.region, counts, generators))

    @property
    def masked_at_start(self) -> torch.Tensor:
        """BoolTensor [B, N]: the tokens the sampler starts masked (the region, or what
        ``from_step`` re-masked of it)."""
        return self.region if self.generate is None else self.generate

    @property
    def known(self) -> KnownTokens | None:
        """The sampler's starting state; None when every token is regenerated (text-to-image)."""
        masked = self.masked_at_start
        if bool(masked.all()):
            return None
        if self.codes is None:
            raise RuntimeError("PaintPlan.known needs the images' codes: call with_codes first")
        region = None if self.generate is None else self.region  # a late start counts it all
        return KnownTokens(self.codes, masked, region)

    @property
    def nothing_to_do(self) -> bool:
        return not bool(self.region.any())

    def n_generate(self) -> list[int]:
        """Each item's count of tokens masked at the start: its ML-Cache schedule runs over
        it."""
        return [max(1, int(c)) for c in self.masked_at_start.sum(dim=1).tolist()]

    def finish(self, images: torch.Tensor) -> torch.Tensor:
        """Decoded images [B, H, W, 3] -> with the original pixels pasted back (if asked);
        the originals themselves when nothing was regenerated (no VQ round trip)."""
        if self.nothing_to_do:
            return self.images
        if not self.options.paste:
            return images
        feather = self.options.feather
        if feather is None:
            feather = self.images.shape[1] // self.grid[0] // 2
        return paste_original(images, self.images, self.region, self.grid, feather)


def _spread(t: torch.Tensor, pairs: int, batch_size: int) -> torch.Tensor:
    """[1 or pairs, ...] -> [pairs * batch_size, ...]: each pair's row repeated per image."""
    t = t.expand(pairs, *t.shape[1:])
    return t.repeat_interleave(batch_size, dim=0).contiguous()


def _pairs(images: int, masks: int, prompts: list[str]) -> int:
    """How many image + mask pairs run: one per image (or mask); one image and one mask serve
    every prompt. ValueError when the prompts fit neither."""
    pairs = max(images, masks)
    if pairs == 1:
        return len(prompts)
    if len(prompts) not in (1, pairs):
        raise InputError("prompt", f"has {len(prompts)} prompts for a batch of {pairs} images",
                         "give one prompt for all images, or one per image")
    return pairs


def _empty_note(region: torch.Tensor, coverage: torch.Tensor, mask: torch.Tensor,
                options: PaintOptions) -> str:
    """Which items regenerate nothing, and why (an empty mask, or below the threshold)."""
    idle = [i for i in range(region.shape[0]) if not bool(region[i].any())]
    if not idle:
        return ""
    if not bool(mask.any()):
        why = "the mask is empty"
    else:
        why = (f"the mask covers no token beyond mask_threshold={options.threshold:g} (largest "
               f"token coverage {float(coverage.max()):.2f}; lower it or grow the mask)")
    which = "every item" if len(idle) == region.shape[0] else f"items {idle}"
    return f"{why}: nothing regenerated for {which}, returned unchanged"


WHOLE_NOTE = ("denoise 1.0 redraws the whole picture: the image only sets the size (lower "
              "denoise, e.g. 0.6, to keep some of it)")


def plan_painting(prompts: list[str], image: object, mask: object,
                  options: PaintOptions | None, batch_size: int, vq_factor: int,
                  fit_fix: str = FIT_FIX, denoise: float = 1.0) -> PaintPlan:
    """Check the image and mask once, fit them to the VQ grid (``options.fit``) and choose the
    tokens to regenerate; the VQ encoding comes later (``PaintPlan.with_codes``).

    B images and B or 1 masks (or 1 image and B masks) make B pairs, with one prompt for all
    or one per pair, each running ``batch_size`` items. ``fit_fix``: the off-grid message's
    fix. ``mask`` None: image to image (module docstring). ``denoise`` is checked with the
    run's ``StepSchedule``."""
    options = PaintOptions() if options is None else options
    if not isinstance(options, PaintOptions):
        raise InputError("options", f"is a {type(options).__name__}",
                         "give a PaintOptions or None")
    if image is None:
        raise InputError("image", "is missing, but a mask needs the image it masks",
                         "give the image (float [B, H, W, 3] in [0, 1])")
    whole = mask is None
    if whole:  # image to image: a full mask, every token may change
        image = check_image(image, vq_factor, on_grid=options.fit == "exact", fix=fit_fix)
        mask = image.new_ones(image.shape[:3])
        options = replace(options, paste=False)
    image, masks, fitted = fit_painting(image, mask, vq_factor, options.fit, fix=fit_fix)
    pairs = _pairs(image.shape[0], masks.shape[0], prompts)
    region, coverage = token_mask(masks, vq_factor, options.threshold, options.grow)
    grid = (image.shape[1] // vq_factor, image.shape[2] // vq_factor)

    def items(t: torch.Tensor) -> torch.Tensor:
        return _spread(t, pairs, batch_size)

    region = items(region)
    whole_note = WHOLE_NOTE if whole and denoise == 1.0 else ""
    note = "; ".join(n for n in (fitted, _empty_note(region, coverage, masks, options),
                                 whole_note) if n)
    return PaintPlan(items(image), region,
                     prompts * pairs if len(prompts) == 1 else list(prompts), grid, options,
                     image, batch_size, note, denoise=denoise)


TOKENS_NOTE = ("denoise 1.0 redraws the whole picture: the tokens only set the size (lower "
               "denoise, e.g. 0.5, to keep some of them)")


def plan_tokens(prompts: list[str], tokens: object, grid: tuple[int, int], codebook: int,
                vq_factor: int, batch_size: int, denoise: float = 1.0) -> PaintPlan:
    """Image to image from image tokens (B or 1 rows, paired with the prompts as
    ``plan_painting`` pairs images): the whole grid is the region (module docstring)."""
    codes = check_tokens(tokens, grid, codebook)
    pairs = _pairs(codes.shape[0], 1, prompts)
    codes = _spread(codes, pairs, batch_size)
    blank = torch.zeros(1, grid[0] * vq_factor, grid[1] * vq_factor, 3)
    return PaintPlan(blank.expand(codes.shape[0], -1, -1, -1), torch.ones_like(codes, dtype=bool),
                     prompts * pairs if len(prompts) == 1 else list(prompts), grid,
                     PaintOptions(paste=False), None, batch_size,
                     TOKENS_NOTE if denoise == 1.0 else "", codes=codes, denoise=denoise)

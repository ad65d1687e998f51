"""Image to image by a denoise strength: where in the schedule a redraw starts and which of the
picture's tokens it re-masks.

ComfyUI's KSampler `denoise` and diffusers' ``AmusedImg2ImgPipeline`` (start = T * (1 -
strength)): a strength d in [0, 1] over a schedule of T steps starts at step
s0 = T - round(T * d) (halves round up), so the run takes the last T - s0 steps. The picture's
VQ codes go in as known tokens with the share the official schedule still has masked at s0
re-masked (``remask_count``: ``baseline_keep``'s formula, so the official sampler started at s0
continues its own schedule), chosen at random as aMUSEd does, from a CPU generator of its own
per item (``remask_positions``). ``strategies.from_step.FromStep`` then runs any strategy from
s0. d = 1: s0 = 0, everything masked (text to image); d = 0: s0 = T, nothing to redraw.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from .errors import InputError
from .schedules import Schedule, get_schedule
from .strategies.baseline import baseline_keep
from .strategies.policy import is_real

__all__ = ["DENOISE_FIX", "check_denoise", "remask_count", "remask_positions", "start_step"]

DENOISE_FIX = ("give a number from 0 (keep the picture) to 1 (redraw everything: text to "
               "image), e.g. 0.6")


def check_denoise(value: object, no_picture: tuple[str, str] | None = None) -> float:
    """The denoise strength as a float in [0, 1]; one InputError naming ``denoise`` otherwise
    (not a number, NaN, infinite or out of range). The one check of a strength, made once per
    job where the job is planned (``plan_painting``, ``plan_tokens``; a job without a picture:
    its entry, with ``no_picture`` = (what is missing, the fix), which refuses a strength below
    1, as there is nothing to keep). Downstream (``start_step``, the run, the stats) reads the
    checked float."""
    if not is_real(value) or not 0.0 <= float(value) <= 1.0:  # type: ignore[arg-type]
        raise InputError("denoise", f"is {value!r}", DENOISE_FIX)
    denoise = float(value)  # type: ignore[arg-type]
    if no_picture is not None and denoise < 1.0:
        raise InputError("denoise", f"is {denoise:g} but {no_picture[0]}", no_picture[1])
    return denoise


def start_step(steps: int, denoise: float) -> int:
    """The step s0 = T - round(T * d) a run of strength ``denoise`` (checked:
    ``check_denoise``) starts from (halves round up): 0 at d = 1 (the whole schedule), T at
    d = 0 (nothing to run). A run computes it once (``DiMOOPipeline.run``) and carries it in
    its result (``GenerationResult.start_step``) for the stats."""
    return steps - math.floor(steps * denoise + 0.5)


def remask_count(total: int, start: int, steps: int,
                 schedule: str | Schedule = "cosine") -> int:
    """Tokens of a region of ``total`` that the official schedule of T = ``steps`` still has
    masked when step ``start`` begins: ``total`` at start 0, else max(1, floor(total *
    gamma(start / T))) (``baseline_keep`` of step start - 1), 0 at start T or for an empty
    region."""
    if total <= 0 or start >= steps:
        return 0
    if start <= 0:
        return total
    keep = baseline_keep(total, torch.tensor(start - 1), steps, get_schedule(schedule))
    return int(keep)


def remask_positions(region: torch.Tensor, counts: Sequence[int],
                     generators: Sequence[torch.Generator]) -> torch.Tensor:
    """Which tokens to re-mask: for item b, ``counts[b]`` positions of ``region[b]`` (BoolTensor
    [B, N], True = may change) drawn uniformly at random with ``generators[b]`` (one CPU
    generator per item, apart from the sampler's own, so the sampling draws do not move; the
    same draws on any device). Returns a BoolTensor [B, N] on region's device (True = masked at
    the start). Runs before the sampling loop."""
    out = torch.zeros_like(region)
    for b, (count, gen) in enumerate(zip(counts, generators, strict=True)):
        score = torch.rand(region.shape[1], generator=gen).to(region.device)
        score = score.masked_fill(~region[b], 2.0)  # outside the region: never drawn
        out[b, torch.topk(score, count, largest=False).indices] = True
    return out

"""Image to image by a denoise strength: which of the picture's tokens a redraw re-masks.

As ComfyUI's KSampler `denoise` and diffusers' ``AmusedImg2ImgPipeline``, a strength d in
(0, 1] over T steps starts at s0 = T - round(T * d) (``schedules.StepSchedule.start``) and runs
the last T - s0 steps. The picture's VQ codes go in as known tokens with the share the official
schedule still has masked at s0 re-masked (``remask_count``, ``baseline_keep``'s formula, so the
official sampler started at s0 continues its own schedule), chosen at random as aMUSEd does,
from a CPU generator per item (``remask_positions``); any strategy then runs from s0 (its rule
sees its step in the whole schedule). d = 1: everything masked (text to image); d under half a
step: the codes unchanged; d outside (0, 1]: one InputError naming ``denoise``. The official
sampler's cost at the same strength: ``official_passes(n, StepSchedule(64, d))``. From tokens
(``generate(tokens=, denoise=)``) the same plan runs on the codes as given, with no VQ round
trip or paste-back (on nano the route that works: docs/reports/STRENGTH.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .schedules import Schedule, get_schedule
from .strategies.baseline import baseline_keep

__all__ = ["remask_count", "remask_positions"]


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

"""Image to image by a denoise strength: which of the picture's tokens a redraw re-masks.

ComfyUI's KSampler `denoise` and diffusers' ``AmusedImg2ImgPipeline`` (start = T * (1 -
strength)): a strength d in (0, 1] over a schedule of T steps starts at step
s0 = T - round(T * d) (``schedules.StepSchedule.start``), so the run takes the last T - s0
steps. The picture's VQ codes go in as known tokens with the share the official schedule still
has masked at s0 re-masked (``remask_count``: ``baseline_keep``'s formula, so the official sampler started at s0
continues its own schedule), chosen at random as aMUSEd does, from a CPU generator of its own
per item (``remask_positions``). The sampling loop then runs any strategy from s0 (its rule
sees its step index in the whole schedule). d = 1: s0 = 0, everything masked (text to image;
with an image and no mask the image only sets the size); d under half a step: the picture's
codes, unchanged; d = 0 or outside (0, 1]: one InputError naming ``denoise``. An ML-Cache's
schedule runs over the T - s0 steps and the re-masked count; ``official_passes(n,
StepSchedule(64, d))`` is the official sampler's cost at the same strength. From tokens instead
of a picture (``generate(tokens=, denoise=)``): the same plan and late start on the codes as
given, no VQ round trip and no paste-back, so a picture's codes give the picture route's tokens
(on nano the route that works: docs/reports/STRENGTH.md).
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

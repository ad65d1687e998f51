"""The official sampler's forward passes for a job: what LADR's saving is measured against.

The official Lumina-DiMOO loop (``Baseline``, baseline.py) runs T steps over the tokens an image
generates (all of them for text-to-image and editing; the MASK tokens of its prompt when
inpainting or outpainting). Step s keeps ``baseline_keep`` of them masked, unmasks at least one
(``baseline_remask``) and the loop stops when nothing is masked, so a job of n tokens costs
min(n, T) passes or fewer: the remaining count after step s is min(keep_s, remaining - 1).
That is exact unless two tokens tie in confidence at the cut-off (they are unmasked together,
which can only end the run sooner); with the Gumbel noise of temperature > 0 a tie has
probability zero.

    official_passes(144)       -> 64   (nano text-to-image: 12 x 12 tokens, T = 64)
    official_passes(36)        -> 36   (a 6 x 6 hole: one token per step at the end)

On a StepSchedule of strength d < 1 (image to image, ladr_core.strength) the official sampler
starts at step s0 = T - round(T * d) with ``remask_count`` tokens masked and runs the rest of its schedule:
about round(T * d) passes.
"""

from __future__ import annotations

from functools import lru_cache

import torch

from .schedules import DEFAULT_STEPS, Schedule, StepSchedule, get_schedule
from .strategies.baseline import baseline_keep
from .strength import remask_count


@lru_cache(maxsize=4096)
def _passes(to_generate: int, steps: int, schedule: Schedule, start: int) -> int:
    remaining = remask_count(to_generate, start, steps, schedule)
    if remaining == 0:
        return 0
    for s in range(start, steps):
        keep = int(baseline_keep(to_generate, torch.tensor(s), steps, schedule))
        remaining = min(keep, remaining - 1)
        if remaining <= 0:
            return s + 1 - start
    return steps - start


def official_passes(to_generate: int, steps: int | StepSchedule = DEFAULT_STEPS,
                    schedule: str | Schedule = "cosine") -> int:
    """Denoiser calls (forward passes, CFG branches counted once) the official sampler makes
    to generate ``to_generate`` tokens of one image on the schedule ``steps``: T, or a
    StepSchedule (T started at its denoise strength's step). 0 tokens: 0 passes. The price
    every strategy stays within on the same schedule."""
    if isinstance(to_generate, bool) or not isinstance(to_generate, int) or to_generate < 0:
        raise ValueError(f"to_generate must be an int >= 0 (tokens to generate); got "
                         f"{to_generate!r}")
    plan = StepSchedule.of(steps)
    if to_generate == 0:
        return 0
    return _passes(to_generate, plan.steps, get_schedule(schedule), plan.start)

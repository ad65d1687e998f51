"""The official sampler's forward passes for a job: what LADR's saving is measured against.

The official loop (``Baseline``, baseline.py) runs T steps over the tokens an image generates
(all for text to image and editing; its prompt's MASK tokens when painting). After step s,
min(``baseline_keep``, remaining - 1) stay masked, and the loop stops when none do, so n tokens
cost at most min(n, T) passes. Exact unless two tokens tie in confidence at the cut-off (which
only ends the run sooner; with temperature > 0 a tie has probability zero).

    official_passes(144)       -> 64   (nano text-to-image: 12 x 12 tokens, T = 64)
    official_passes(36)        -> 36   (a 6 x 6 hole: one token per step at the end)

On a StepSchedule of strength d < 1 (ladr_core.strength) it starts at s0 with ``remask_count``
tokens masked: about round(T * d) passes.
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

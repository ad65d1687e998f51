"""`FromStep(inner, start, schedule_steps)`: any strategy continued from step `start` of its
schedule, for image to image by a denoise strength (ladr_core.strength).

The loop (sampling.py) runs the remaining T - start steps from the picture's re-masked codes;
the inner rule sees the whole schedule (RunInfo.steps = T) and its own step index shifted by
`start`, and counts over the region it redraws (RunInfo.total: the mask's tokens, or N for a
whole picture) rather than over the tokens masked at the start, so every schedule (the official
keep table, Halton's, a threshold rule's last step) continues where step `start` would be, and
LADR's inverse schedule, read from the masked ratio, lands there by itself.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ..devices import index
from ..noise import StepNoise
from ..step import Commit, Needs, RunInfo, Stats, StepRule, Strategy


@dataclass(frozen=True)
class FromStep(Strategy):
    """Run ``inner`` from step ``start`` (0 <= start < schedule_steps) of a schedule of
    ``schedule_steps`` (T); a run of it takes T - start steps (``steps``). ``region``: the
    tokens each item's schedule counts over (the mask's count per item; None = N, a whole
    picture). ``name`` is the inner strategy's, so stats and records read as that strategy."""

    inner: Strategy
    start: int
    schedule_steps: int
    region: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.inner, Strategy):
            raise ValueError(f"FromStep(inner=...) must be a Strategy; got {self.inner!r}")
        t, s = self.schedule_steps, self.start
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (t, s)) \
                or not 0 <= s < t:
            raise ValueError(f"FromStep needs ints 0 <= start < schedule_steps; got start={s!r}, "
                             f"schedule_steps={t!r}")

    @property  # type: ignore[override]
    def name(self) -> str:  # type: ignore[override]
        return self.inner.name

    @property  # type: ignore[override]
    def steps(self) -> int:  # type: ignore[override]
        return self.schedule_steps - self.start

    @property  # type: ignore[override]
    def step_invariant(self) -> bool:  # type: ignore[override]
        return self.inner.step_invariant

    def at_steps(self, steps: int | None) -> Strategy:
        """Not defined: a continuation's T is its schedule's (``schedule_steps - start``)."""
        raise ValueError(f"FromStep runs {self.inner.name!r} from step {self.start} of a "
                         f"schedule of {self.schedule_steps} steps, so it has no T of its own to "
                         f"change to {steps!r}: build FromStep(inner, start, schedule_steps) "
                         "with the schedule you want")

    def needs(self) -> Needs:
        return self.inner.needs()

    def begin(self, run: RunInfo) -> StepRule:
        total = None
        if self.region is not None:
            region = index(self.region, run.device)  # queued, the host does not wait
            # per slot: slot s runs item s, or in a rolling batch run.item[s] (updated in place)
            total = region.clone() if run.item is None else region[:0].new_zeros(len(run.item))
        rule = self.inner.begin(replace(run, steps=self.schedule_steps, total=total))
        start = self.start

        def step_rule(step: torch.Tensor, masked: torch.Tensor, stats: Stats,
                      noise: StepNoise) -> Commit:
            if total is not None and run.item is not None:  # in place: graph-safe, no sync
                total.copy_(region.index_select(0, run.item.clamp_min(0)))
            return rule(step + start, masked, stats, noise)

        return step_rule


__all__ = ["FromStep"]

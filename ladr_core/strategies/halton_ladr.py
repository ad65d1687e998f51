"""LADR's rescue on a Halton-ordered baseline: `HaltonLADR(policy)` (docs/SAMPLING.md).

Algorithm 1 (ladr.py) with one change: standard selection (lines 17-20) keeps masked the
n_mask masked tokens latest in the Halton order (halton.py) instead of the least confident
ones; the inverse schedule and the neighbour rescue are LADR's, with the policy's settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, ClassVar

import torch

from ..registry import register_strategy
from ..step import Commit, Needs
from .halton import halton_score
from .ladr import LADR
from .policy import PRESETS, LADRPolicy

if TYPE_CHECKING:  # annotations only
    from ..noise import StepNoise
    from ..step import RunInfo, Stats, StepRule


@register_strategy
@dataclass(frozen=True)
class HaltonLADR(LADR):
    """LADR with Halton-ordered standard selection. policy: the rescue's settings (the
    policy's `selection` is not used: the order ranks). Defaults tuned on nano's
    validation prompts (docs/reports/SAMPLERS.md)."""

    name: ClassVar[str] = "halton-ladr"
    policy: LADRPolicy = field(default_factory=lambda: replace(PRESETS["nano"].policy,
                                                               tau=(0.95, 0.95, 0.95)))

    def needs(self) -> Needs:
        """LADR's, without the noisy confidence of its "gumbel" ranking (the order ranks)."""
        base = super().needs()
        return Needs(base.stats - {"log_conf"}, remask=False, uniform=base.uniform)

    def begin(self, run: RunInfo) -> StepRule:
        return partial(self.halton_commit, run, halton_score(run.grid, run.device))

    def halton_commit(self, run: RunInfo, score: torch.Tensor, step: torch.Tensor,
                      masked: torch.Tensor, stats: Stats, noise: StepNoise) -> Commit:
        """`LADR.commit` with the Halton score [1, N] as standard selection's ranking."""
        return self.commit(run, step, masked, stats, noise, rank=score.expand_as(masked))


__all__ = ["HaltonLADR"]

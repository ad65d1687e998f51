"""Prophet, the paper's comparison method: `Prophet(ProphetPolicy(...))`.

The official baseline plus Prophet's early commit (Li et al. 2025, pixeli99/Prophet), adapted to
images as the LADR paper does: an item whose mean top1 - top2 logit gap over its masked tokens
reaches the threshold for the run's progress commits every masked token to its current
prediction. The policy and the strategy live together here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import ClassVar

import torch

from ..noise import StepNoise
from ..registry import register_strategy
from ..step import Commit, Needs, RunInfo, Stats, StepRule, Strategy
from .baseline import official_step
from .policy import check_bounds, check_triple, is_real
from .select import phase_table


@dataclass(frozen=True)
class ProphetPolicy:
    """Prophet early-commit thresholds (Li et al. 2025, pixeli99/Prophet), adapted to images:
    the threshold on the mean top1 - top2 *logit* gap is thresholds[i] while progress = step /
    steps is below progress_bounds[i] (the last one after them); once the gap reaches it,
    every masked token of the item is committed to its current prediction.
    """

    thresholds: tuple[float, float, float] = (7.5, 5.0, 2.5)
    progress_bounds: tuple[float, float] = (0.33, 0.67)

    def __post_init__(self) -> None:
        th = check_triple("thresholds", self.thresholds)
        if not all(is_real(v) and float(v) >= 0.0 for v in th):
            raise ValueError(
                f"thresholds must be 3 finite numbers >= 0 (logit gaps); got {self.thresholds!r}"
            )
        object.__setattr__(self, "thresholds", tuple(float(v) for v in th))
        object.__setattr__(
            self, "progress_bounds", check_bounds("progress_bounds", self.progress_bounds)
        )

    def threshold(self, progress: float) -> float:
        """Logit-gap threshold for progress = step / steps in [0, 1)."""
        lo, hi = self.progress_bounds
        if progress < lo:
            return self.thresholds[0]
        return self.thresholds[1] if progress < hi else self.thresholds[2]

    def thresholds_at(self, step: torch.Tensor, steps: int) -> torch.Tensor:
        """`threshold(step / steps)` per item: FloatTensor [B] for step LongTensor [B] (the
        progress in float64, as Python's division; no host value)."""
        progress = step.to(torch.float64) / steps
        lo, hi = self.progress_bounds
        phase = (progress >= lo).long() + (progress >= hi).long()
        return phase_table(self.thresholds, torch.float64, step.device)[phase]


def prophet_fire(masked: torch.Tensor, logit_gap: torch.Tensor,
                 threshold: float | torch.Tensor) -> torch.Tensor:
    """Prophet early commit per item, BoolTensor [B]: the mean logit gap over the item's
    masked tokens >= threshold (a number or [B]); an item with nothing masked never fires."""
    remaining = masked.sum(dim=1)
    mean_gap = (logit_gap * masked).sum(dim=1) / remaining.clamp_min(1)
    return (mean_gap >= threshold) & (remaining > 0)


@register_strategy
@dataclass(frozen=True)
class Prophet(Strategy):
    """The baseline plus Prophet's early commit with `policy` (default ProphetPolicy())."""

    name: ClassVar[str] = "prophet"
    policy: ProphetPolicy = field(default_factory=ProphetPolicy)

    def __post_init__(self) -> None:
        if not isinstance(self.policy, ProphetPolicy):
            raise ValueError(f"Prophet(policy): policy must be a ProphetPolicy; got "
                             f"{type(self.policy).__name__}")

    def needs(self) -> Needs:
        return Needs(frozenset({"log_conf", "logit_gap"}), remask=True)

    def begin(self, run: RunInfo) -> StepRule:
        return partial(self._step, run)

    def _step(self, run: RunInfo, step: torch.Tensor, masked: torch.Tensor, stats: Stats,
              noise: StepNoise) -> Commit:
        out = official_step(run, step, masked, stats, noise)
        fire = prophet_fire(masked, stats.logit_gap, self.policy.thresholds_at(step, run.steps))
        out.masked = out.masked & ~fire.unsqueeze(1)
        return out


__all__ = ["Prophet", "ProphetPolicy", "prophet_fire"]

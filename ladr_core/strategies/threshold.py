"""Confidence-threshold parallel decoding (Fast-dLLM, Wu et al. 2025, arXiv 2505.22618):
`Threshold(tau)`, and the same rule restricted to LADR's frontier (rescue.frontier),
`ThresholdFrontier(tau)`. The rules, fields and defaults: docs/SAMPLING.md, "The training-free
rivals". Tensors: masked BoolTensor [B, N], statistics [B, N] at positions; batched, with no
host synchronisation and no host -> device copy.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, ClassVar

import torch

from ..registry import register_strategy
from ..step import Commit, Needs, Strategy, check_choice, check_number
from .policy import RESCUE_TOKENS
from .rescue import frontier
from .select import commit_tokens, finish_last_step, plain_commit, with_most_confident

if TYPE_CHECKING:  # annotations only
    from ..noise import StepNoise
    from ..step import RunInfo, Stats, StepRule


def threshold_pick(top1: torch.Tensor, masked: torch.Tensor, tau: float,
                   pool: torch.Tensor | None = None) -> torch.Tensor:
    """Positions committed by the threshold rule, BoolTensor [B, N]: the masked positions of
    `pool` (None = every masked position) with top1 >= tau, else (none of them clears tau) the
    single most confident one of `pool` (of the mask while `pool` holds none)."""
    pool = masked if pool is None else pool & masked
    return with_most_confident(pool & (top1 >= tau), top1, masked, prefer=pool)


@register_strategy
@dataclass(frozen=True)
class Threshold(Strategy):
    """Commit every masked token with top-1 probability >= tau, at least one per step (fields:
    docs/SAMPLING.md; defaults tuned on nano's validation prompts, docs/reports/SAMPLERS.md)."""

    name: ClassVar[str] = "threshold"
    step_invariant: ClassVar[bool] = True  # `step` is read only as a tensor
    tau: float = 0.94
    token: str = "sample"

    def __post_init__(self) -> None:
        owner = type(self).__name__
        object.__setattr__(self, "tau", check_number(
            owner, "tau", self.tau, 0.0, 1.0, low_open=True,
            fix="tau is the top-1 probability a token needs to be committed"))
        check_choice(owner, "token", self.token, RESCUE_TOKENS)

    def needs(self) -> Needs:
        return Needs(frozenset({"top1", "argmax"} if self.token == "argmax" else {"top1"}))

    def begin(self, run: RunInfo) -> StepRule:
        return partial(self.commit, run)

    def pool(self, masked: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor | None:
        """Where the threshold applies: None = every masked token."""
        return None

    def commit(self, run: RunInfo, step: torch.Tensor, masked: torch.Tensor, stats: Stats,
               noise: StepNoise) -> Commit:
        """One step: step LongTensor [B] (each item's own), masked [B, N]."""
        chosen = threshold_pick(stats.top1, masked, self.tau, self.pool(masked, run.grid))
        chosen = finish_last_step(chosen, masked, step, run.steps)
        return plain_commit(run, masked, chosen, commit_tokens(stats, self.token))


@register_strategy
@dataclass(frozen=True)
class ThresholdFrontier(Threshold):
    """`Threshold` restricted to LADR's frontier: a masked token is committed only when a token
    decoded before this step lies in its 3 x 3 window and its top-1 probability is >= tau."""

    name: ClassVar[str] = "threshold-frontier"
    tau: float = 0.8
    token: str = "sample"

    def pool(self, masked: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor | None:
        return frontier(masked, grid)


__all__ = ["Threshold", "ThresholdFrontier", "threshold_pick"]

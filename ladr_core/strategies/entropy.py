"""Entropy-bounded unmasking (EB-Sampler, Ben-Hamu et al. 2025, arXiv 2505.24857):
`EntropyBound(gamma)`; the rule (and how its bound differs from EB-Sampler's own), fields and
defaults: docs/SAMPLING.md, "The training-free rivals". Ties keep index order (stable sort).
Tensors: masked BoolTensor [B, N], entropy FloatTensor [B, N] at positions; batched, no host
synchronisation, no host -> device copy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, ClassVar

import torch

from ..registry import register_strategy
from ..step import Commit, Needs, Strategy, check_choice, check_number
from .policy import RESCUE_TOKENS
from .select import commit_tokens, finish_last_step, plain_commit

if TYPE_CHECKING:  # annotations only
    from ..noise import StepNoise
    from ..step import RunInfo, Stats, StepRule


def entropy_pick(entropy: torch.Tensor, masked: torch.Tensor, gamma: float) -> torch.Tensor:
    """Positions committed by the entropy bound, BoolTensor [B, N]: per item the masked
    positions in increasing entropy while the running sum stays <= gamma, at least the first.

    entropy: [B, N] >= 0 (only masked positions matter). The running sum is taken in the
    entropy's dtype over the sorted order, the same sum the bound is stated for."""
    score = entropy.masked_fill(~masked, math.inf)
    order = torch.argsort(score, dim=1, stable=True)
    running = score.gather(1, order).cumsum(dim=1)
    first = torch.arange(masked.shape[1], device=masked.device) == 0
    chosen_sorted = (running <= gamma) | first
    return torch.zeros_like(masked).scatter_(1, order, chosen_sorted) & masked


@register_strategy
@dataclass(frozen=True)
class EntropyBound(Strategy):
    """Commit the lowest-entropy masked tokens while their summed entropy is <= gamma (fields:
    docs/SAMPLING.md; defaults tuned on nano's validation prompts, docs/reports/SAMPLERS.md)."""

    name: ClassVar[str] = "entropy"
    step_invariant: ClassVar[bool] = True  # `step` is read only as a tensor
    gamma: float = 0.7
    token: str = "sample"

    def __post_init__(self) -> None:
        owner = type(self).__name__
        object.__setattr__(self, "gamma", check_number(
            owner, "gamma", self.gamma, 0.0, math.inf, high_open=True,
            fix="gamma bounds the summed entropy (nats) of the tokens one step commits"))
        check_choice(owner, "token", self.token, RESCUE_TOKENS)

    def needs(self) -> Needs:
        want = {"entropy", "argmax"} if self.token == "argmax" else {"entropy"}
        return Needs(frozenset(want))

    def begin(self, run: RunInfo) -> StepRule:
        return partial(self.commit, run)

    def commit(self, run: RunInfo, step: torch.Tensor, masked: torch.Tensor, stats: Stats,
               noise: StepNoise) -> Commit:
        """One step: step LongTensor [B] (each item's own), masked [B, N]."""
        chosen = entropy_pick(stats.entropy, masked, self.gamma)
        chosen = finish_last_step(chosen, masked, step, run.steps)
        return plain_commit(run, masked, chosen, commit_tokens(stats, self.token))


__all__ = ["EntropyBound", "entropy_pick"]

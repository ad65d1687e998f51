"""The official Lumina-DiMOO sampler as a strategy: `Baseline()`.

"How many" tokens stay masked after each step comes from the cosine schedule's keep table;
"which" from the official `mask_by_random_topk` ranking, log p(sampled) + temperature x Gumbel.
No function here synchronises with the host or copies host data to the device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

import torch

from ..noise import StepNoise
from ..registry import register_strategy
from ..schedules import Schedule
from ..step import Commit, Needs, RunInfo, Stats, StepRule, Strategy
from .select import effective_time, no_phase, noisy_confidence


def baseline_keep(total: int | torch.Tensor, step: torch.Tensor, steps: int,
                  schedule: Schedule) -> torch.Tensor:
    """Official DiMOO keep count of each item at its own step: LongTensor shaped like `step`.

    keep_n = floor(vq_len * gamma((step + 1) / T)) clamped >= 1, 0 on the last step; vq_len:
    the initial masked count (`total`, an int or [B]; the official painting counts its prompt's
    MASK tokens). In float32 like the official loop: (step + 1) / T divided in float64 (as
    Python) and rounded once (float32 on MPS). No table, no host -> device copy.
    """
    wide = torch.float32 if step.device.type == "mps" else torch.float64
    t = ((step + 1).to(wide) / steps).float()
    n = total.to(torch.float32) if isinstance(total, torch.Tensor) else float(total)
    keep = (n * schedule.gamma(t)).floor().clamp_min(1).long()
    return keep.masked_fill(step == steps - 1, 0)


def baseline_remask(
    masked: torch.Tensor, confidence: torch.Tensor, keep_n: torch.Tensor
) -> torch.Tensor:
    """Official `mask_by_random_topk`, batched: which masked positions stay masked.

    confidence: [B, N] = log p(sampled) + temperature * Gumbel. As official: the sorted masked
    confidences' value at k = clamp(keep_n, 0, L - 1) is the cut-off; positions strictly below
    it stay masked (ties unmask, and at least one token unmasks per step).
    """
    score = confidence.masked_fill(~masked, math.inf)
    sorted_score = torch.sort(score, dim=1).values
    remaining = masked.sum(dim=1)
    k = torch.minimum(keep_n.expand_as(remaining), remaining - 1).clamp_min(0)
    cut = sorted_score.gather(1, k.unsqueeze(1))
    return (score < cut) & masked


def official_step(run: RunInfo, step: torch.Tensor, masked: torch.Tensor, stats: Stats,
                  noise: StepNoise) -> Commit:
    """One step of the official loop: item b keeps masked the `baseline_keep` count of its step
    step[b] (LongTensor [B]) of its least noisy-confident masked tokens."""
    keep = baseline_keep(run.generated(), step, run.steps, run.schedule)
    new_masked = baseline_remask(masked, noisy_confidence(stats, noise, run.temperature), keep)
    t_eff = effective_time(masked, run)
    return Commit(new_masked, stats.sampled, torch.zeros_like(masked), t_eff, no_phase(t_eff))


@register_strategy
@dataclass(frozen=True)
class Baseline(Strategy):
    """The official Lumina-DiMOO `generate_image` loop: the cosine schedule's keep count, the
    noisy-confidence ranking of `mask_by_random_topk`: one forward per step of the run's
    schedule, the price every other strategy stays within."""

    name: ClassVar[str] = "baseline"

    def needs(self) -> Needs:
        return Needs(frozenset({"log_conf"}), remask=True)

    def begin(self, run: RunInfo) -> StepRule:
        return partial(official_step, run)


__all__ = ["Baseline", "baseline_keep", "baseline_remask", "official_step"]

"""Benchmark-only strategy: items finish after a given number of forwards, whatever the logits.

Random weights give a real model's cost per pass but not its stopping, so LADR's runs on the
8B-shaped model are replayed: item b unmasks its tokens evenly and finishes on its step
``finish[b % len(finish)] - 1``, its NFE taken from what LADR measured on DiMOO-nano
(lab/results/quality_test.json). Its tokens are the sampled ones (stats.sampled).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

import torch

from ladr_core import Needs, Strategy
from ladr_core.step import Commit, RunInfo, Stats, StepRule
from ladr_core.strategies.select import effective_time, no_phase

__all__ = ["Replay"]


@dataclass(frozen=True)
class Replay(Strategy):
    """Item b finishes on step ``finish[b % len(finish)] - 1`` (module docstring)."""

    name: ClassVar[str] = "replay-benchmark"
    finish: tuple[int, ...] = (16,)
    steps: int | None = 64

    def needs(self) -> Needs:
        return Needs(frozenset())

    def begin(self, run: RunInfo) -> StepRule:
        table = torch.tensor(self.finish, device=run.device)
        return partial(_replay_step, run, table)


def _replay_step(run: RunInfo, finish: torch.Tensor, step: torch.Tensor, masked: torch.Tensor,
                 stats: Stats, noise: Any) -> Commit:
    """Keep masked the first n * (1 - (step + 1) / f) of each item's masked tokens."""
    item = run.item if run.item is not None else torch.arange(masked.shape[0],
                                                               device=masked.device)
    own = finish[item % finish.numel()]
    left = (run.n * (1 - (step + 1).double() / own)).clamp_min(0).floor().long()
    keep = masked & (masked.long().cumsum(dim=1) <= left[:, None])
    t_eff = effective_time(masked, run)
    return Commit(keep, stats.sampled, torch.zeros_like(masked), t_eff, no_phase(t_eff))

"""What a strategy is: the Strategy interface, what it sees and says per step, and the
selection primitives every strategy shares.

A strategy is a frozen object that declares what the loop must compute for it each step
(`needs()`: per-token statistics and noise) and decides the step (`begin(run)` returns its
per-step rule, a `StepRule`). The loop in sampling.py never asks which strategy it runs.
The strategies themselves: ladr_core.strategies (Baseline, Prophet, the name registry) and
ladr_core.ladr (LADR, Algorithm 1).

Every function is batched tensor work on the inputs' device with no host synchronisation and no
host -> device copy: per-item counts are [B] tensors, selections use a stable sort plus a rank
comparison (never boolean-mask indexing, nonzero() or Python loops over items), and per-phase
policy values enter kernels as Python scalars.

Shapes: B items, N = H * W tokens (row-major). `masked` is a BoolTensor [B, N] (True = still
masked); scores are FloatTensors [B, N].
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch

from .noise import StepNoise
from .schedules import Schedule

STAT_NAMES = ("log_conf", "top1", "margin", "argmax", "logit_gap")
"""Per-token statistics a strategy may ask for (see Stats)."""


# ---------------------------------------------------------------- what a strategy sees and says
@dataclass(frozen=True)
class Needs:
    """What the loop computes each step for a strategy. stats: names from STAT_NAMES; remask:
    a Gumbel [L] per item for the noisy confidence (drawn only at temperature > 0); uniform:
    U[0, 1) [L] per item (random ablations). Draw order: ladr_core.noise."""

    stats: frozenset[str]
    remask: bool = False
    uniform: bool = False


@dataclass(frozen=True)
class RunInfo:
    """The run as a strategy sees it, fixed once the denoiser's device is known."""

    n: int  # tokens per item, H * W
    grid: tuple[int, int]  # (H, W)
    steps: int  # schedule length T
    schedule: Schedule
    temperature: float
    device: torch.device

    @property
    def sched_dtype(self) -> torch.dtype:
        """Precision for the [B]-sized schedule math: float64, except on MPS (no float64)."""
        return torch.float32 if self.device.type == "mps" else torch.float64


@dataclass
class Stats:
    """Per-token statistics of one step's prediction, [B, N] at positions (0 where decoded).

    sampled: LongTensor, the Gumbel-max sample (argmax at temperature 0), always present;
    log_conf: log p(sampled) clamped at 1e-20; top1: top-1 probability; margin: Delta =
    p(1) - p(2); argmax: LongTensor top-1 token; logit_gap: top-1 minus top-2 logit. A field a
    strategy did not ask for is None.
    """

    sampled: torch.Tensor
    log_conf: torch.Tensor | None = None
    top1: torch.Tensor | None = None
    margin: torch.Tensor | None = None
    argmax: torch.Tensor | None = None
    logit_gap: torch.Tensor | None = None


@dataclass
class Commit:
    """A strategy's decision for one step. masked: BoolTensor [B, N] after the step; tokens:
    LongTensor [B, N] the value each position unmasked this step receives; rescued: [B, N]
    positions unmasked by a rescue; t_eff: [B] gamma^-1(masked ratio) at the start of the step;
    phase: LongTensor [B] (LADR's phase index into PHASE_NAMES, -1 = none)."""

    masked: torch.Tensor
    tokens: torch.Tensor
    rescued: torch.Tensor
    t_eff: torch.Tensor
    phase: torch.Tensor


StepRule = Callable[[int, torch.Tensor, Stats, StepNoise], Commit]
"""(step, masked [B, N], stats, noise) -> Commit: a strategy bound to one run."""


class Strategy(ABC):
    """Base of every strategy. `steps`: the schedule length T the strategy was tuned at (None =
    the caller's T); `name`: the string accepted for it at the public boundary."""

    name: ClassVar[str]
    steps: int | None
    # True when the rule depends on the step index only through "is it the last step": on a
    # GPU its middle steps then replay one CUDA graph (ladr_core.graphs).
    step_invariant: ClassVar[bool] = False

    @abstractmethod
    def needs(self) -> Needs:
        """Statistics and noise the loop must provide each step."""

    @abstractmethod
    def begin(self, run: RunInfo) -> StepRule:
        """The per-step rule for one run (called once, after the first denoise call): which
        masked tokens each step commits and what they receive."""


# ---------------------------------------------------------------- selection primitives
def _select_by_rank(score: torch.Tensor, count: torch.Tensor, descending: bool) -> torch.Tensor:
    """Boolean [B, N]: the `count[b]` positions of row b that come first in a stable sort.

    score: [B, N]; count: LongTensor [B]. Ties keep index order, so selections are
    deterministic and exactly `count[b]` positions are chosen (clamped to N).
    """
    order = torch.argsort(score, dim=1, descending=descending, stable=True)
    ranks = torch.arange(score.shape[1], device=score.device).expand_as(order)
    chosen_sorted = ranks < count.unsqueeze(1)
    return torch.zeros_like(chosen_sorted).scatter_(1, order, chosen_sorted)


def keep_lowest(score: torch.Tensor, masked: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """Keep masked the `count[b]` masked positions with the lowest score; the rest unmask.

    Decoded positions never compete (they sort last with +inf) and can never be re-selected.
    """
    score = score.masked_fill(~masked, math.inf)
    return _select_by_rank(score, count, descending=False) & masked


def take_highest(score: torch.Tensor, pool: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """The `count[b]` positions of `pool` with the highest score (count <= |pool| expected)."""
    score = score.masked_fill(~pool, -math.inf)
    return _select_by_rank(score, count, descending=True) & pool


def pick_rescued(metric: str, candidates: str, cand: torch.Tensor, valid: torch.Tensor,
                 m_std: torch.Tensor, top1: torch.Tensor, margin: torch.Tensor,
                 uniform: torch.Tensor | None, k_res: torch.Tensor) -> torch.Tensor:
    """Which k_res[b] tokens are rescued (Alg. 1 lines 29-30, and the paper's ablations).

    cand: the frontier C_t [B, N]; valid: the candidates that pass the threshold; m_std:
    BoolTensor [B, N] after standard selection; top1 / margin: [B, N]; uniform: [B, N] U[0, 1)
    for a random ablation. "margin" takes the k_res valid candidates with the largest Delta;
    the ablations keep k_res and change only which tokens (Fig. 5 candidates, Fig. 6 metric).
    """
    if candidates == "random":
        return take_highest(uniform, m_std, k_res)
    if metric == "margin":
        score, pool = margin, valid
    elif metric == "confidence":
        score, pool = top1, valid
    else:  # "random": uniform over the whole neighbourhood, ignoring certainty (Fig. 6)
        score, pool = uniform, cand
    if candidates == "non_neighbors":
        # Off-frontier masked tokens first (score + 2 beats any score in [0, 1]), then the
        # frontier.
        score, pool = score + 2.0 * (m_std & ~cand), m_std
    return take_highest(score, pool, k_res)


def effective_time(masked: torch.Tensor, run: RunInfo) -> torch.Tensor:
    """t_eff = gamma^-1(masked count / N) per item: [B] in schedule precision (Prop. 2)."""
    return run.schedule.gamma_inv(masked.sum(dim=1).to(run.sched_dtype) / run.n)


def noisy_confidence(stats: Stats, noise: StepNoise, temperature: float) -> torch.Tensor:
    """The official DiMOO ranking score [B, N]: log p(sampled) + temperature * Gumbel (no noise
    at temperature 0)."""
    if noise.remask is None:
        return stats.log_conf
    return stats.log_conf + temperature * noise.remask


def no_phase(t_eff: torch.Tensor) -> torch.Tensor:
    return torch.full_like(t_eff, -1, dtype=torch.long)


__all__ = ["STAT_NAMES", "Commit", "Needs", "RunInfo", "Stats", "StepRule", "Strategy", "pick_rescued",
           "effective_time", "keep_lowest", "no_phase", "noisy_confidence", "take_highest"]

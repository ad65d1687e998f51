"""Selection primitives shared by the strategies: ranked picks, the inverse-scheduled time and
the official noisy-confidence score (shapes: ladr_core.step).

Per-phase / per-progress values enter kernels through `phase_table`, small device tables made
once per process. No host sync, no host -> device copy: per-item counts are [B] tensors and
selections a stable sort plus a rank comparison (never boolean-mask indexing, nonzero() or
Python loops over items).
"""

from __future__ import annotations

import functools
import math

import torch

from ..noise import StepNoise
from ..step import Commit, RunInfo, Stats


def _select_by_rank(score: torch.Tensor, count: torch.Tensor, descending: bool) -> torch.Tensor:
    """BoolTensor [B, N]: the `count[b]` (clamped to N) first positions of row b in a stable
    sort of score [B, N]; ties keep index order."""
    order = torch.argsort(score, dim=1, descending=descending, stable=True)
    ranks = torch.arange(score.shape[1], device=score.device).expand_as(order)
    chosen_sorted = ranks < count.unsqueeze(1)
    return torch.zeros_like(chosen_sorted).scatter_(1, order, chosen_sorted)


def keep_lowest(score: torch.Tensor, masked: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """Keep masked the `count[b]` masked positions with the lowest score; the rest unmask
    (decoded positions sort last and are never re-selected)."""
    score = score.masked_fill(~masked, math.inf)
    return _select_by_rank(score, count, descending=False) & masked


def take_highest(score: torch.Tensor, pool: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """The `count[b]` positions of `pool` with the highest score (count <= |pool| expected)."""
    score = score.masked_fill(~pool, -math.inf)
    return _select_by_rank(score, count, descending=True) & pool


def with_most_confident(chosen: torch.Tensor, score: torch.Tensor, masked: torch.Tensor,
                        prefer: torch.Tensor | None = None) -> torch.Tensor:
    """`chosen` [B, N] plus, per item, its highest-scoring masked position: at least one commit
    per step while anything is masked (none for an item with nothing masked). prefer: a subset
    of positions [B, N] searched first (score in [0, 1] expected: a preferred position wins by
    +2), the rest of the mask when it holds none."""
    if prefer is not None:
        score = score + 2.0 * prefer
    one = torch.ones_like(masked[:, 0], dtype=torch.long)
    return (chosen & masked) | take_highest(score, masked, one)


def finish_last_step(chosen: torch.Tensor, masked: torch.Tensor, step: torch.Tensor,
                     steps: int) -> torch.Tensor:
    """`chosen` [B, N], and every masked position of an item on its last step (step[b] ==
    T - 1), so every strategy ends within T steps."""
    return chosen | (masked & (step == steps - 1).unsqueeze(1))


def commit_tokens(stats: Stats, token: str) -> torch.Tensor:
    """The value each committed position receives, [B, N]: "sample" = the temperature sample
    (`stats.sampled`, the official loop's), "argmax" = the top-1 token (`stats.argmax`)."""
    return stats.argmax if token == "argmax" else stats.sampled


def plain_commit(run: RunInfo, masked: torch.Tensor, chosen: torch.Tensor,
                 tokens: torch.Tensor) -> Commit:
    """The Commit of a strategy with no rescue and no phases: `chosen` [B, N] (a subset of the
    mask) unmasks and receives `tokens`; t_eff = gamma^-1(masked ratio) at the step's start."""
    t_eff = effective_time(masked, run)
    return Commit(masked & ~chosen, tokens, torch.zeros_like(masked), t_eff, no_phase(t_eff))


def effective_time(masked: torch.Tensor, run: RunInfo) -> torch.Tensor:
    """t_eff = gamma^-1(masked count / N_total) per item (Prop. 2): [B] in schedule precision;
    N_total = `run.generated()`, so with known tokens t_eff starts at 0, as the official
    painting's schedule does."""
    total = run.generated()
    if isinstance(total, torch.Tensor):
        total = total.to(run.sched_dtype)
    return run.schedule.gamma_inv(masked.sum(dim=1).to(run.sched_dtype) / total)


def noisy_confidence(stats: Stats, noise: StepNoise, temperature: float) -> torch.Tensor:
    """The official DiMOO ranking score [B, N]: log p(sampled) + temperature * Gumbel (no noise
    at temperature 0)."""
    if noise.remask is None:
        return stats.log_conf
    return stats.log_conf + temperature * noise.remask


@functools.lru_cache(maxsize=64)
def phase_table(values: tuple, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """values as a tensor on `device`, made once per process by fills (Python scalars enter
    kernels as arguments: no host -> device copy, no sync)."""
    out = torch.empty(len(values), dtype=dtype, device=device)
    for i, v in enumerate(values):
        out[i].fill_(v)
    return out


def no_phase(t_eff: torch.Tensor) -> torch.Tensor:
    """Phase -1 per item (strategies without LADR's phases)."""
    return torch.full_like(t_eff, -1, dtype=torch.long)


__all__ = ["commit_tokens", "effective_time", "finish_last_step", "keep_lowest", "no_phase",
           "noisy_confidence", "phase_table", "plain_commit", "take_highest",
           "with_most_confident"]

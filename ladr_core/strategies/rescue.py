"""LADR's neighbour rescue (paper Algorithm 1 lines 21-31): the frontier, the filter, the budget
and the pick, for the paper's Eq. 10 and for the self-calibrating variant.

Frontier (Eq. 9), applied to M_std, the mask left by standard selection:

    M_grid     = Phi(M)                        (row-major reshape [B, N] -> [B, H, W])
    M_frontier = M_grid AND (NOT M_grid (+) K)  ((+) = dilation by the k x k kernel K)
    C_t        = { i | Phi^-1(M_frontier)[i] = 1 }

Dilation is a stride-1 max-pool with padding k // 2 (borders pad with "not decoded").
Eq. 10: R_t = TopK_Delta({i in C_t | Delta_i > tau_t}, floor(|C_t| alpha_t)). The
self-calibrating rescue (`AdaptiveRescue`: threshold from the margins of the step's standard
picks, budget from the schedule's pace) is described in docs/SAMPLING.md (the adaptive preset).

Every function is a pure, batched function of tensors ([B, N] masks and scores) with no host
synchronisation; per-phase policy values come from small cached device tables.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..schedules import Schedule, count_at
from .policy import NO_TAU, PACE_UNIT, LADRPolicy
from .select import phase_table, take_highest


# ---------------------------------------------------------------- the frontier (Eq. 9)
def dilate(decoded: torch.Tensor, grid: tuple[int, int], kernel_size: int = 3) -> torch.Tensor:
    """BoolTensor [B, N] (row-major H x W) -> the positions within Chebyshev distance k // 2
    of a True position, themselves included: BoolTensor [B, N]."""
    h, w = grid
    b, n = decoded.shape
    if n != h * w:
        raise ValueError(f"grid {grid} does not match N={n} tokens (need H * W == N)")
    if kernel_size == 1:
        return decoded.clone()
    x = decoded.view(b, 1, h, w).to(torch.float32)
    pooled = F.max_pool2d(x, kernel_size=kernel_size, stride=1, padding=kernel_size // 2)
    return pooled.view(b, n) > 0


def frontier(masked: torch.Tensor, grid: tuple[int, int], kernel_size: int = 3) -> torch.Tensor:
    """Eq. 9: masked positions [B, N] with a decoded position in their k x k window."""
    return masked & dilate(~masked, grid, kernel_size)


def rescue_candidates(m_std: torch.Tensor, masked_before: torch.Tensor, grid: tuple[int, int],
                      kernel_size: int, seen_only: bool) -> torch.Tensor:
    """Frontier candidates C_t [B, N] (Alg. 1 lines 22-24): Eq. 9 on M_std, or with `seen_only`
    neighbours of tokens decoded before this step (the ones the prediction was conditioned on),
    away from this step's standard picks, which the prediction could not know."""
    if not seen_only:
        return frontier(m_std, grid, kernel_size)
    fresh = masked_before & ~m_std
    return m_std & frontier(masked_before, grid, kernel_size) & ~dilate(fresh, grid, kernel_size)


# ---------------------------------------------------------------- the pick (lines 29-30)
def pick_rescued(policy: LADRPolicy, cand: torch.Tensor, valid: torch.Tensor, m_std: torch.Tensor,
                 top1: torch.Tensor, margin: torch.Tensor, uniform: torch.Tensor | None,
                 k_res: torch.Tensor) -> torch.Tensor:
    """Which k_res[b] tokens are rescued (Alg. 1 lines 29-30): "margin" takes the valid
    candidates (C_t past the threshold) with the largest Delta; the ablations keep k_res and
    change only which tokens (Fig. 5 candidates, Fig. 6 metric; uniform: U[0, 1) [B, N])."""
    if policy.candidates == "random":
        return take_highest(uniform, m_std, k_res)
    if policy.metric == "margin":
        score, pool = margin, valid
    elif policy.metric == "confidence":
        score, pool = top1, valid
    else:  # "random": uniform over the whole neighbourhood, ignoring certainty (Fig. 6)
        score, pool = uniform, cand
    if policy.candidates == "non_neighbors":
        # Off-frontier masked tokens first (score + 2 beats any score in [0, 1]), then the
        # frontier.
        score, pool = score + 2.0 * (m_std & ~cand), m_std
    return take_highest(score, pool, k_res)


# ---------------------------------------------------------------- Eq. 10
def _per_phase(phase: torch.Tensor, values: tuple, dtype: torch.dtype) -> torch.Tensor:
    """values[phase[b]] per item: [B] of `dtype` (one gather from a cached per-phase table)."""
    return phase_table(tuple(values), dtype, phase.device)[phase]


def paper_rescue(policy: LADRPolicy, m_std: torch.Tensor, masked_before: torch.Tensor,
                 top1: torch.Tensor, margin: torch.Tensor, phase: torch.Tensor,
                 grid: tuple[int, int], uniform: torch.Tensor | None,
                 cand: torch.Tensor | None = None) -> torch.Tensor:
    """Rescue set R_t of Eq. 10 (lines 22-31) and the paper's ablations: BoolTensor [B, N], a
    subset of m_std (the mask after standard selection; masked_before: before it). cand: C_t
    in place of the frontier of Eq. 9 (None: `rescue_candidates`)."""
    if cand is None:
        cand = rescue_candidates(m_std, masked_before, grid, policy.kernel_size,
                                 policy.seen_only)
    # Line 25 (|C| > 0) needs no branch: an empty C gives k_res = 0 below.
    tau = _per_phase(phase, tuple(NO_TAU if v is None else v for v in policy.tau), torch.float32)
    valid = cand & (margin > tau.unsqueeze(1))  # line 27: C_valid = {Delta > tau}
    num, den = zip(*policy.alpha_fractions(), strict=True)  # alpha as an exact fraction
    budget = (cand.sum(dim=1) * _per_phase(phase, num, torch.long)
              // _per_phase(phase, den, torch.long))  # floor(|C| * alpha)
    k_res = torch.minimum(budget, valid.sum(dim=1))  # line 28
    return pick_rescued(policy, cand, valid, m_std, top1, margin, uniform, k_res)


# ---------------------------------------------------------------- the self-calibrating rescue
def subset_quantile(values: torch.Tensor, subset: torch.Tensor, q: float) -> torch.Tensor:
    """Per-row lower quantile q of values[b, subset[b]] as numpy.quantile(method="lower"):
    FloatTensor [B], +inf for an empty row."""
    count = subset.sum(dim=1)
    ordered = torch.sort(values.masked_fill(~subset, math.inf), dim=1).values
    rank = torch.floor(q * (count - 1).clamp_min(0).to(torch.float64)).long()
    return ordered.gather(1, rank.unsqueeze(1)).squeeze(1).masked_fill(count == 0, math.inf)


def pace_cap(m_std: torch.Tensor, t_eff: torch.Tensor, steps: int, pace: float,
             schedule: Schedule, total: int | torch.Tensor | None = None) -> torch.Tensor:
    """Most tokens the rescue may add this step, LongTensor [B]: |M_std| - floor(N_total *
    gamma(clamp(t_eff + 1 / T + pace / 64, 0, 1))), at least 0: one step of standard selection
    plus `pace` 64ths of the schedule, whatever T (floor as `schedules.count_at`; total: None
    = N)."""
    total = m_std.shape[1] if total is None else total
    t_far = (t_eff + (1.0 / steps + pace / PACE_UNIT)).clamp(0.0, 1.0)
    return (m_std.sum(dim=1) - count_at(schedule, total, t_far)).clamp_min(0)


def adaptive_rescue(policy: LADRPolicy, m_std: torch.Tensor, masked_before: torch.Tensor,
                    top1: torch.Tensor, margin: torch.Tensor, uniform: torch.Tensor | None,
                    t_eff: torch.Tensor, steps: int, schedule: Schedule,
                    grid: tuple[int, int], total: int | torch.Tensor | None = None,
                    cand: torch.Tensor | None = None) -> torch.Tensor:
    """Rescued positions R_t [B, N] (a subset of m_std) under `policy.adaptive`: valid = C_t
    with Delta >= anchor and Delta > 0, k_res = min(|valid|, pace cap), picked and varied as in
    Eq. 10 (`pick_rescued`, `paper_rescue`'s cand)."""
    cfg = policy.adaptive
    assert cfg is not None
    if cand is None:
        cand = rescue_candidates(m_std, masked_before, grid, policy.kernel_size,
                                 policy.seen_only)
    anchor = subset_quantile(margin, masked_before & ~m_std, cfg.anchor_quantile)
    valid = cand & (margin >= anchor.unsqueeze(1)) & (margin > 0)
    cap = pace_cap(m_std, t_eff, steps, cfg.pace, schedule, total)
    k_res = torch.minimum(valid.sum(dim=1), cap)
    return pick_rescued(policy, cand, valid, m_std, top1, margin, uniform, k_res)


__all__ = ["adaptive_rescue", "dilate", "frontier", "pace_cap", "paper_rescue", "pick_rescued",
           "rescue_candidates", "subset_quantile"]

"""Self-calibrating LADR rescue: thresholds taken from the model's own step, budget from the schedule.

The paper's rescue (Eq. 10) uses absolute constants: a margin threshold tau = 0.05 and a budget
floor(|C_t| * alpha). On a sharp model tau filters nothing (98-99.8 % of frontier candidates of
DiMOO-nano pass) and alpha = 1 commits the whole frontier in one step, so how much a step commits
depends on the model's sharpness and the image's layout rather than on the schedule. The
adaptive rescue replaces both constants with quantities the run itself produces:

* **Threshold from the schedule's own picks.** Standard selection (Algorithm 1 lines 17-20)
  commits the tokens the schedule asks for this step. Their top1 - top2 margins show what this
  model, on this prompt, at this step, counts as a committable token. A frontier candidate is
  valid when its margin Delta is at least the `anchor_quantile` quantile of those margins (and
  > 0: a token with no preference at all is never rescued). A sharper model raises the bar by
  itself; nothing is tuned per model.
* **Budget from the schedule's pace.** Inverse scheduling (Prop. 2) reads the mask ratio as a
  time t_eff. The rescue may bring an item's masked count down to the schedule's count
  `pace` steps further on, i.e. to floor(N * gamma(t_eff + (1 + pace) / T)); one forward
  pass never advances the schedule by more than 1 + pace of its own steps, whatever the
  frontier's size. The NFE is then at least about T / (1 + pace).

Degenerate margins (all equal) make the anchor equal to that value: every candidate is valid and
the budget alone decides, so the run advances at exactly the capped pace (uniform logits, all
margins 0, rescue nothing and fall back to the schedule's own pace). It never stalls: standard
selection still commits its tokens and the last step commits everything.

Everything here is a pure, batched function of tensors ([B, N] masks and scores, no host sync);
`ladr_core.sampling` calls `adaptive_rescue` in place of Eq. 10 when `LADRPolicy.adaptive` is set.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from numbers import Real
from typing import Any

import torch

from .frontier import rescue_candidates
from .schedules import Schedule
from .step import pick_rescued

PACE_RANGE = (0.0, 1024.0)


def _number_in(name: str, value: object, lo: float, hi: float) -> float:
    ok = isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(float(value))
    if not ok or not lo <= float(value) <= hi:
        raise ValueError(f"adaptive {name} must be a number in [{lo:g}, {hi:g}]; got {value!r}")
    return float(value)


@dataclass(frozen=True)
class AdaptiveRescue:
    """Settings of the self-calibrating rescue (module docstring).

    pace: schedule steps one forward pass may skip by rescue, in [0, 1024]; 0 = no rescue.
        The rescue never brings the masked count below floor(N * gamma(t_eff + (1 + pace) / T)).
    anchor_quantile: in [0, 1]. A frontier candidate is valid when its margin is >= this
        quantile (lower interpolation) of the margins of the tokens standard selection commits
        in the same step: 0 = the least certain of them, 0.5 = their median, 1 = the most
        certain.
    """

    pace: float = 3.0
    anchor_quantile: float = 0.5

    def __post_init__(self) -> None:
        object.__setattr__(self, "pace", _number_in("pace", self.pace, *PACE_RANGE))
        object.__setattr__(self, "anchor_quantile",
                           _number_in("anchor_quantile", self.anchor_quantile, 0.0, 1.0))


def subset_quantile(values: torch.Tensor, subset: torch.Tensor, q: float) -> torch.Tensor:
    """Per-row lower quantile q of values[b, subset[b]]: FloatTensor [B] (+inf for an empty row).

    values: [B, N]; subset: BoolTensor [B, N]. The element of rank floor(q * (count - 1)) in
    ascending order, as numpy.quantile(..., method="lower"); batched, no host sync.
    """
    count = subset.sum(dim=1)
    ordered = torch.sort(values.masked_fill(~subset, math.inf), dim=1).values
    rank = torch.floor(q * (count - 1).clamp_min(0).to(torch.float64)).long()
    return ordered.gather(1, rank.unsqueeze(1)).squeeze(1).masked_fill(count == 0, math.inf)


def pace_cap(m_std: torch.Tensor, t_eff: torch.Tensor, steps: int, pace: float,
             schedule: Schedule) -> torch.Tensor:
    """Most tokens the rescue may add this step: LongTensor [B].

    |M_std| - floor(N * gamma(clamp(t_eff + (1 + pace) / T, 0, 1))), at least 0. t_eff: [B]
    (schedule precision) at the start of the step; the floor has the same 1e-9 N guard as the
    inverse schedule, so exact integers are not rounded down.
    """
    n = m_std.shape[1]
    t_far = (t_eff + (1.0 + pace) / steps).clamp(0.0, 1.0)
    guard = n * (1e-9 if t_eff.dtype == torch.float64 else 1e-6)
    floor_count = (float(n) * schedule.gamma(t_far) + guard).floor().long()
    return (m_std.sum(dim=1) - floor_count).clamp_min(0)


def adaptive_rescue(m_std: torch.Tensor, masked_before: torch.Tensor, top1: torch.Tensor,
                    margin: torch.Tensor, uniform: torch.Tensor | None, t_eff: torch.Tensor,
                    steps: int, schedule: Schedule, policy: Any,
                    grid: tuple[int, int]) -> torch.Tensor:
    """Rescued positions R_t [B, N] (a subset of m_std) under `policy.adaptive`.

    m_std / masked_before: BoolTensor [B, N] after / before standard selection; top1, margin:
    [B, N] top-1 probability and Delta = p(1) - p(2); uniform: [B, N] U[0, 1) for the random
    ablations, else None; t_eff: [B]. policy: an LADRPolicy whose `adaptive` is set (its
    kernel_size, seen_only, metric and candidates apply as in Eq. 10).

    valid = C_t with Delta >= anchor and Delta > 0; k_res = min(|valid|, pace cap). "margin"
    rescues the k_res valid candidates with the largest Delta; the ablations keep k_res and
    change only which tokens (`ladr_core.step.pick_rescued`, shared with Eq. 10).
    """
    cfg: AdaptiveRescue = policy.adaptive
    cand = rescue_candidates(m_std, masked_before, grid, policy.kernel_size, policy.seen_only)
    anchor = subset_quantile(margin, masked_before & ~m_std, cfg.anchor_quantile)
    valid = cand & (margin >= anchor.unsqueeze(1)) & (margin > 0)
    cap = pace_cap(m_std, t_eff, steps, cfg.pace, schedule)
    k_res = torch.minimum(valid.sum(dim=1), cap)
    return pick_rescued(policy.metric, policy.candidates, cand, valid, m_std, top1, margin,
                        uniform, k_res)

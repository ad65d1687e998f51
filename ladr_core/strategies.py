"""Which tokens unmask each step: official baseline, LADR (Algorithm 1) with ablations, Prophet.

"How many" comes from the mask schedule (ladr_core.schedules); this module decides "which".
Every function is batched tensor work on the inputs' device with no host synchronisation:
per-item counts are [B] tensors and selections use a stable sort plus a rank comparison, never
boolean-mask indexing, nonzero() or Python loops over items.

Shapes: B items, N = H * W tokens (row-major). `masked` is a BoolTensor [B, N] (True = still
masked); scores are FloatTensors [B, N].
"""

from __future__ import annotations

import math

import torch

from .frontier import dilate, frontier
from .policy import LADRPolicy
from .schedules import Schedule

NO_TAU = -1.0  # tau "None": margins are >= 0, so Delta > -1 keeps every candidate


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
    """Keep masked the `count[b]` masked positions with the lowest score (Alg. 1 lines 18-20).

    Algorithm 1 line 20 reads M_std[I_rank[n_mask:N]] <- 0 with I_rank sorted *descending*,
    which would unmask the LEAST confident tokens. Its own comment ("Unmask most confident") and
    the DiMOO baseline show the intent, which we follow: the n_mask least confident masked
    tokens stay masked, the most confident ones are unmasked. Decoded positions never compete
    (they sort last with +inf) and can never be re-selected.
    """
    score = score.masked_fill(~masked, math.inf)
    return _select_by_rank(score, count, descending=False) & masked


def take_highest(score: torch.Tensor, pool: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """The `count[b]` positions of `pool` with the highest score (count <= |pool| expected)."""
    score = score.masked_fill(~pool, -math.inf)
    return _select_by_rank(score, count, descending=True) & pool


def baseline_keep_table(
    n: int, steps: int, schedule: Schedule, device: torch.device
) -> torch.Tensor:
    """Official DiMOO keep counts per step: LongTensor [steps].

    keep_n = floor(vq_len * gamma((step + 1) / T)) clamped >= 1, and 0 on the last step, with
    vq_len the initial masked count N. Evaluated in float32 on `device` like the official loop
    (t is the Python float (step+1)/T rounded once to float32).
    """
    t = torch.tensor([(s + 1) / steps for s in range(steps)], dtype=torch.float32).to(device)
    keep = (float(n) * schedule.gamma(t)).floor().clamp_min(1).long()
    keep[-1] = 0
    return keep


def baseline_remask(
    masked: torch.Tensor, confidence: torch.Tensor, keep_n: torch.Tensor
) -> torch.Tensor:
    """Official `mask_by_random_topk`, batched: which masked positions stay masked.

    confidence: [B, N] = log p(sampled) + temperature * Gumbel (only masked positions matter).
    keep_n: LongTensor [B] or scalar. Exactly as official: sort the masked confidences ascending,
    take the value at index k = clamp(keep_n, 0, L - 1) (L = masked count) as the cut-off and keep
    masked every position strictly below it (ties at the cut-off are unmasked, and since
    k <= L - 1 at least one token is unmasked per step).
    """
    score = confidence.masked_fill(~masked, math.inf)
    sorted_score = torch.sort(score, dim=1).values
    remaining = masked.sum(dim=1)
    k = torch.minimum(keep_n.expand_as(remaining), remaining - 1).clamp_min(0)
    cut = sorted_score.gather(1, k.unsqueeze(1))
    return (score < cut) & masked


def ladr_keep_counts(
    masked: torch.Tensor, t_eff: torch.Tensor, step: int, steps: int, schedule: Schedule
) -> torch.Tensor:
    """n_mask of Algorithm 1 lines 8-11 (Prop. 2 inverse scheduling): LongTensor [B].

    t_next = clamp(t_eff + 1/T, 0, 1), n_mask = floor(N * gamma(t_next)), clamped to the current
    masked count. t_eff: [B] in schedule precision (float64 where the device has it). The floor
    gets a guard of 1e-9 N (float64) / 1e-6 N (float32) so exact integers such as
    36 * (1 - 1/3) = 24 under the linear schedule are not rounded down to 23. On the last step
    (step == T - 1) n_mask = 0, so LADR always finishes within T steps whatever the rounding.
    """
    remaining = masked.sum(dim=1)
    if step == steps - 1:
        return torch.zeros_like(remaining)
    n = masked.shape[1]
    t_next = (t_eff + 1.0 / steps).clamp(0.0, 1.0)
    guard = n * (1e-9 if t_eff.dtype == torch.float64 else 1e-6)
    n_mask = (float(n) * schedule.gamma(t_next) + guard).floor().long()
    return torch.minimum(n_mask, remaining)


def schedule_dtype(device: torch.device) -> torch.dtype:
    """Precision for the [B]-sized schedule math: float64, except on MPS (no float64)."""
    return torch.float32 if device.type == "mps" else torch.float64


class LADRTables:
    """Per-phase policy values as small tensors on the sampling device (built once per run)."""

    def __init__(self, policy: LADRPolicy, device: torch.device) -> None:
        self.policy = policy
        self.bounds = policy.phase_bounds
        tau = [NO_TAU if v is None else v for v in policy.tau]
        self.tau = torch.tensor(tau, dtype=torch.float32).to(device)
        frac = policy.alpha_fractions()
        self.alpha_num = torch.tensor([f[0] for f in frac], dtype=torch.long).to(device)
        self.alpha_den = torch.tensor([f[1] for f in frac], dtype=torch.long).to(device)

    def phase(self, t_eff: torch.Tensor) -> torch.Tensor:
        """Phase per item from t_eff [B]: 0 exploration, 1 structure, 2 refinement (Sec. 3.3.2)."""
        lo, hi = self.bounds
        return (t_eff >= lo).long() + (t_eff >= hi).long()


def ladr_rescue(
    m_std: torch.Tensor,
    top1: torch.Tensor,
    margin: torch.Tensor,
    phase: torch.Tensor,
    tables: LADRTables,
    grid: tuple[int, int],
    uniform: torch.Tensor | None,
    masked_before: torch.Tensor | None = None,
) -> torch.Tensor:
    """Rescue set R_t of Eq. 10 (Algorithm 1 lines 22-31), plus the paper's ablations.

    m_std: BoolTensor [B, N] after standard selection; top1 / margin: [B, N] top-1 probability
    and Delta = p(1) - p(2); phase: LongTensor [B]; uniform: [B, N] in [0, 1) drawn from the
    generator when the policy has a random ablation, else None. Returns BoolTensor [B, N] of
    rescued positions (a subset of m_std).

    C = frontier(m_std) (Eq. 9); valid = C with Delta > tau; k_res = min(floor(|C| alpha),
    |valid|) (alpha applied exactly as a fraction); "neighbors" + "margin" rescues the k_res valid
    candidates with the largest Delta. Ablations keep k_res and change only which tokens.
    """
    policy = tables.policy
    k = policy.kernel_size
    if policy.seen_only:
        # Neighbours of tokens the forward pass saw, away from this step's standard picks.
        fresh = masked_before & ~m_std
        cand = m_std & frontier(masked_before, grid, k) & ~dilate(fresh, grid, k)
    else:
        cand = frontier(m_std, grid, k)
    valid = cand & (margin > tables.tau[phase].unsqueeze(1))
    budget = cand.sum(dim=1) * tables.alpha_num[phase] // tables.alpha_den[phase]
    k_res = torch.minimum(budget, valid.sum(dim=1))
    if policy.candidates == "random":
        return take_highest(uniform, m_std, k_res)
    if policy.metric == "margin":
        score, pool = margin, valid
    elif policy.metric == "confidence":
        score, pool = top1, valid
    else:  # "random": uniform over the whole neighbourhood, ignoring certainty (Fig. 6)
        score, pool = uniform, cand
    if policy.candidates == "non_neighbors":
        # Off-frontier masked tokens first (score + 2 beats any score in [0, 1]), then neighbours.
        score, pool = score + 2.0 * (m_std & ~cand), m_std
    return take_highest(score, pool, k_res)


def prophet_fire(masked: torch.Tensor, logit_gap: torch.Tensor, threshold: float) -> torch.Tensor:
    """Prophet early commit per item: BoolTensor [B].

    Fires when the mean top1 - top2 logit gap over the item's masked tokens is >= threshold
    (items with nothing masked never fire).
    """
    remaining = masked.sum(dim=1)
    mean_gap = (logit_gap * masked).sum(dim=1) / remaining.clamp_min(1)
    return (mean_gap >= threshold) & (remaining > 0)

"""LADR, Locality-Aware Dynamic Rescue: paper Algorithm 1, read top to bottom in one class.

`LADR(policy).begin(run)` gives the rule for one step; `LADR.commit` is Algorithm 1 lines 7-34
for one step of a batch, with the paper's line numbers in comments. What is not in this file:
  lines 1-6   initialisation and `break` when nothing is masked: the loop (ladr_core.sampling),
  line 13     the denoiser call L = p_theta(z): the loop, once per step for any strategy,
  lines 14-16 P = Softmax(L), z_pred = Sampling(P), Delta = Top1(P) - Top2(P): computed by the
              loop for the masked rows because `needs()` asks for them (ladr_core.sampling
              `item_stats`, Gumbel-max in ladr_core.noise), handed in as `Stats`,
  lines 22-24 the frontier of Eq. 9: ladr_core.frontier.rescue_candidates (dilation),
  lines 29-30 the top-k_res pick and its ablations: ladr_core.step.pick_rescued (shared
              with the adaptive rescue of ladr_core.adaptive),
  Sec. 3.3.2  the policy Pi(t) = (alpha_t, tau_t) as data: ladr_core.policy.LADRPolicy.
Every operation is batched over items with no host synchronisation and no host -> device copy.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, ClassVar

import torch

from .adaptive import adaptive_rescue
from .frontier import rescue_candidates
from .policy import NO_TAU, PRESETS, LADRPolicy
from .step import (
    Commit,
    Needs,
    Strategy,
    effective_time,
    keep_lowest,
    noisy_confidence,
    pick_rescued,
)

if TYPE_CHECKING:  # annotations only
    from .noise import StepNoise
    from .schedules import Schedule
    from .step import RunInfo, Stats, StepRule


@functools.lru_cache(maxsize=64)
def _table(values: tuple, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """values as a tensor on `device`, made once per process by fills (Python scalars enter
    kernels as arguments: no host -> device copy, no sync)."""
    out = torch.empty(len(values), dtype=dtype, device=device)
    for i, v in enumerate(values):
        out[i].fill_(v)
    return out


def _per_phase(phase: torch.Tensor, values: tuple, dtype: torch.dtype) -> torch.Tensor:
    """values[phase[b]] per item: [B] of `dtype` (one gather from a cached per-phase table)."""
    return _table(tuple(values), dtype, phase.device)[phase]


@dataclass(frozen=True)
class LADR(Strategy):
    """LADR with `policy` (default: the paper's). steps: the T the policy was tuned at, or None
    (the caller's T); `LADR.preset(name)` takes both from ladr_core.policy.PRESETS."""

    name: ClassVar[str] = "ladr"
    step_invariant: ClassVar[bool] = True  # `step` is read only by keep_count's last-step test
    policy: LADRPolicy = field(default_factory=LADRPolicy)
    steps: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.policy, LADRPolicy):
            raise ValueError(f"LADR(policy): policy must be a LADRPolicy; got "
                             f"{type(self.policy).__name__}")

    @classmethod
    def preset(cls, name: str) -> LADR:
        """The preset's policy with the T it was tuned at (ladr_core.policy.PRESETS)."""
        if name not in PRESETS:
            raise ValueError(f"LADR preset must be one of {sorted(PRESETS)}; got {name!r}")
        return cls(PRESETS[name].policy, PRESETS[name].steps)

    def needs(self) -> Needs:
        """Top-1 and margin always (lines 16, 18); the argmax token for rescue_token "argmax";
        the noisy confidence for selection "gumbel"; uniforms for the random ablations."""
        p = self.policy
        stats = {"top1", "margin"}
        if p.rescue_token == "argmax":
            stats.add("argmax")
        if p.selection == "gumbel":
            stats.add("log_conf")
        return Needs(frozenset(stats), remask=p.selection == "gumbel",
                     uniform="random" in (p.metric, p.candidates))

    def begin(self, run: RunInfo) -> StepRule:
        return partial(self.commit, run)

    def commit(self, run: RunInfo, step: int, masked: torch.Tensor, stats: Stats,
               noise: StepNoise) -> Commit:
        """Algorithm 1 lines 7-34 for one step. masked: BoolTensor [B, N] (M); stats: the
        prediction of lines 13-16 at positions [B, N]; noise: the item's draws (ladr_core.noise)."""
        p = self.policy
        # -- Step 1: inverse scheduling (lines 7-11; Prop. 2 "manifold consistency", which the
        # algorithm labels Prop. 1).
        t_eff = effective_time(masked, run)  # lines 8-9: t_eff = gamma^-1(sum(M) / N_total)
        n_mask = self.keep_count(masked, t_eff, step, run.steps, run.schedule)  # lines 10-11
        # -- Step 2: parallel prediction (lines 12-16): z_pred = stats.sampled,
        # Top1(P) = stats.top1, Delta = stats.margin (computed by the loop, see module doc).
        # -- Step 3: standard selection (lines 17-20). Line 18 ranks by Top1(P) (selection
        # "top1", the paper); "gumbel" ranks by the official baseline's noisy confidence.
        # Line 20 reads M_std[I_rank[n_mask:N]] <- 0 with I_rank sorted DESCENDING, which would
        # unmask the LEAST confident tokens; its own comment ("unmask most confident") and the
        # DiMOO baseline say the opposite, and we follow them: the n_mask least confident masked
        # tokens stay masked (line 19's M_std <- 1 is the masked_fill inside keep_lowest).
        rank = stats.top1 if p.selection == "top1" else noisy_confidence(stats, noise,
                                                                         run.temperature)
        m_std = keep_lowest(rank, masked, n_mask)
        # -- Step 4: neighbour rescue (lines 21-31).
        phase = self.phase(t_eff)  # line 26: alpha, tau by the phase of t_eff (Sec. 3.3.2)
        if p.adaptive is None:
            rescued = self.rescue(m_std, stats.top1, stats.margin, phase, run.grid,
                                  noise.uniform, masked)
        else:  # self-calibrating threshold and budget instead of Eq. 10's tau, alpha
            rescued = adaptive_rescue(m_std, masked, stats.top1, stats.margin, noise.uniform,
                                      t_eff, run.steps, run.schedule, p, run.grid)
        # -- Step 5: state update (lines 32-34): M <- M_std without the rescued tokens; z takes
        # z_pred where unmasked (rescue_token "argmax": the top-1 token at rescued positions).
        tokens = stats.sampled
        if p.rescue_token == "argmax":
            tokens = torch.where(rescued, stats.argmax, stats.sampled)
        return Commit(m_std & ~rescued, tokens, rescued, t_eff, phase)

    @staticmethod
    def keep_count(masked: torch.Tensor, t_eff: torch.Tensor, step: int, steps: int,
                   schedule: Schedule) -> torch.Tensor:
        """n_mask of lines 10-11: LongTensor [B].

        t_next = clamp(t_eff + 1/T, 0, 1), n_mask = floor(N * gamma(t_next)), clamped to the
        current masked count. t_eff: [B] in schedule precision (float64 where the device has
        it). The floor gets a guard of 1e-9 N (float64) / 1e-6 N (float32) so exact integers
        such as 36 * (1 - 1/3) = 24 under the linear schedule are not rounded down to 23. On the
        last step (step == T - 1) n_mask = 0, so LADR always finishes within T steps.
        """
        remaining = masked.sum(dim=1)
        if step == steps - 1:
            return torch.zeros_like(remaining)
        n = masked.shape[1]
        t_next = (t_eff + 1.0 / steps).clamp(0.0, 1.0)  # line 10
        guard = n * (1e-9 if t_eff.dtype == torch.float64 else 1e-6)
        n_mask = (float(n) * schedule.gamma(t_next) + guard).floor().long()  # line 11
        return torch.minimum(n_mask, remaining)

    def phase(self, t_eff: torch.Tensor) -> torch.Tensor:
        """Phase per item from t_eff [B] (line 26, Sec. 3.3.2): LongTensor [B], index into
        PHASE_NAMES: 0 exploration (t_eff < lo), 1 structure (< hi), 2 refinement."""
        bounds = _table(tuple(self.policy.phase_bounds), t_eff.dtype, t_eff.device)
        return torch.bucketize(t_eff, bounds, right=True)  # how many bounds t_eff reached

    def rescue(self, m_std: torch.Tensor, top1: torch.Tensor, margin: torch.Tensor,
               phase: torch.Tensor, grid: tuple[int, int], uniform: torch.Tensor | None,
               masked_before: torch.Tensor | None = None) -> torch.Tensor:
        """Rescue set R_t of Eq. 10 (lines 22-31), plus the paper's ablations: BoolTensor [B, N],
        a subset of m_std.

        m_std: BoolTensor [B, N] after standard selection; top1 / margin: [B, N] top-1
        probability and Delta; phase: LongTensor [B]; uniform: [B, N] in [0, 1) for a random
        ablation, else None; masked_before: the mask M before this step (policy.seen_only).
        Ablations keep k_res and change only which tokens are rescued.
        """
        p = self.policy
        # Lines 22-24: C = M_std AND dilate(NOT M_std) (seen_only: neighbours of tokens the
        # forward pass saw, away from this step's standard picks).
        cand = rescue_candidates(m_std, masked_before, grid, p.kernel_size, p.seen_only)
        # Line 25 (|C| > 0) needs no branch: an empty C gives k_res = 0 below.
        tau = _per_phase(phase, tuple(NO_TAU if v is None else v for v in p.tau), torch.float32)
        valid = cand & (margin > tau.unsqueeze(1))  # line 27: C_valid = {Delta > tau}
        num, den = zip(*p.alpha_fractions(), strict=True)  # alpha as an exact fraction
        budget = (cand.sum(dim=1) * _per_phase(phase, num, torch.long)
                  // _per_phase(phase, den, torch.long))  # floor(|C| * alpha)
        k_res = torch.minimum(budget, valid.sum(dim=1))  # line 28
        # Lines 29-30: the k_res valid candidates with the largest Delta are unmasked.
        return pick_rescued(p.metric, p.candidates, cand, valid, m_std, top1, margin, uniform,
                            k_res)

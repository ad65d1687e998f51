"""LADR, Locality-Aware Dynamic Rescue: paper Algorithm 1, read top to bottom in two files.

`LADR(policy).begin(run)` gives the rule for one step; `LADR.commit` is Algorithm 1 lines 7-34
for one step of a batch, with the paper's line numbers in comments; the rescue it calls (lines
21-31: frontier, filter, budget, pick, and the self-calibrating variant) is rescue.py. Where the
other lines are (the loop, the denoiser, the statistics, the policy as data):

  lines  what                                   where
  1-2    z <- [MASK]^N, M <- 1^N                sampling.SampleRun.start
  3-6    for step < T; break when sum(M) = 0    sampling.sample (the one host sync)
  7-9    rho, t_eff = gamma^-1(rho)             LADR.commit (select.effective_time)
  10-11  t_next, n_mask                         LADR.keep_count
  13     L = p_theta(z)                         the denoiser (dimoo/denoise/denoiser.py)
  14-16  P, z_pred, Delta                       stats.item_stats + noise.gumbel_max (LADR.needs)
  17-20  standard selection (*)                 LADR.commit -> select.keep_lowest
  21-24  M_grid, frontier C (Eq. 9)             rescue.paper_rescue -> rescue_candidates, frontier
  25-28  alpha, tau by phase; C_valid; k_res    LADR.phase, rescue.paper_rescue (policy.LADRPolicy;
                                                adaptive variant: rescue.adaptive_rescue)
  29-30  S_res, M_std[S_res] <- 0               rescue.pick_rescued (both rescues)
  32-34  M <- M_std; z <- z_pred where unmasked LADR.commit (Commit) + sampling.SampleRun.step

(*) Line 20 sorts I_rank descending and unmasks I_rank[n_mask:N], which would unmask the LEAST
confident tokens; its own comment ("unmask most confident") and the DiMOO baseline say the
opposite. We follow the comment and the baseline: the n_mask least confident stay masked.

Every operation is batched over items with no host synchronisation and no host -> device copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, ClassVar

import torch

from ..registry import register_strategy
from ..schedules import count_at
from ..step import Commit, Needs, Strategy
from .policy import PRESETS, LADRPolicy
from .rescue import adaptive_rescue, paper_rescue
from .select import effective_time, keep_lowest, noisy_confidence, phase_table

if TYPE_CHECKING:  # annotations only
    from ..noise import StepNoise
    from ..schedules import Schedule
    from ..step import RunInfo, Stats, StepRule


@register_strategy
@dataclass(frozen=True)
class LADR(Strategy):
    """LADR with `policy` (default: the paper's); `LADR.preset(name)` takes it from
    policy.PRESETS. It plans within the run's schedule (T = RunInfo.steps) and can only
    finish sooner."""

    name: ClassVar[str] = "ladr"
    step_invariant: ClassVar[bool] = True  # `step` is read only as a tensor (keep_count)
    policy: LADRPolicy = field(default_factory=LADRPolicy)

    def __post_init__(self) -> None:
        if not isinstance(self.policy, LADRPolicy):
            raise ValueError(f"LADR(policy): policy must be a LADRPolicy; got "
                             f"{type(self.policy).__name__}")

    @classmethod
    def preset(cls, name: str) -> LADR:
        """The preset's policy (policy.PRESETS)."""
        if name not in PRESETS:
            raise ValueError(f"LADR preset must be one of {sorted(PRESETS)}; got {name!r}")
        return cls(PRESETS[name].policy)

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

    def commit(self, run: RunInfo, step: torch.Tensor, masked: torch.Tensor, stats: Stats,
               noise: StepNoise, rank: torch.Tensor | None = None) -> Commit:
        """Algorithm 1 lines 7-34 for one step (masked: M; stats: lines 13-16). rank: a fixed
        ranking for standard selection ([B, N] or [1, N], higher = unmasked first) in place of
        the policy's `selection` (a variant's, e.g. halton_ladr.py)."""
        p = self.policy
        # -- Step 1: inverse scheduling (lines 7-11; Prop. 2 "manifold consistency", which the
        # algorithm labels Prop. 1).
        t_eff = effective_time(masked, run)  # lines 8-9: t_eff = gamma^-1(sum(M) / N_total)
        n_mask = self.keep_count(masked, t_eff, step, run.steps, run.schedule,
                                 run.generated())  # lines 10-11
        # -- Step 2: parallel prediction (lines 12-16): z_pred = stats.sampled,
        # Top1(P) = stats.top1, Delta = stats.margin (computed by the loop, see module doc).
        # -- Step 3: standard selection (lines 17-20). Line 18 ranks by Top1(P) (selection
        # "top1", the paper); "gumbel" by the official baseline's noisy confidence. The n_mask
        # least confident stay masked (line 20: module docstring (*)).
        if rank is None:
            rank = stats.top1 if p.selection == "top1" else noisy_confidence(stats, noise,
                                                                             run.temperature)
        m_std = keep_lowest(rank, masked, n_mask)
        # -- Step 4: neighbour rescue (lines 21-31, rescue.py).
        phase = self.phase(t_eff)  # line 26: alpha, tau by the phase of t_eff (Sec. 3.3.2)
        cand = self.rescue_pool(m_std)  # None: the frontier C_t of Eq. 9 (lines 22-24)
        if p.adaptive is None:  # Eq. 10
            rescued = paper_rescue(p, m_std, masked, stats.top1, stats.margin, phase, run.grid,
                                   noise.uniform, cand)
        else:  # self-calibrating threshold and budget instead of Eq. 10's tau, alpha
            rescued = adaptive_rescue(p, m_std, masked, stats.top1, stats.margin, noise.uniform,
                                      t_eff, run.steps, run.schedule, run.grid, run.generated(),
                                      cand)
        # -- Step 5: state update (lines 32-34): M <- M_std without the rescued tokens; z takes
        # z_pred where unmasked (rescue_token "argmax": the top-1 token at rescued positions).
        tokens = stats.sampled
        if p.rescue_token == "argmax":
            tokens = torch.where(rescued, stats.argmax, stats.sampled)
        return Commit(m_std & ~rescued, tokens, rescued, t_eff, phase)

    def rescue_pool(self, m_std: torch.Tensor) -> torch.Tensor | None:
        """The rescue's candidate set [B, N] in place of the frontier; None = the frontier C_t
        of Eq. 9 (LADR). A variant without locality returns every still-masked token
        (ladr_global.py)."""
        return None

    @staticmethod
    def keep_count(masked: torch.Tensor, t_eff: torch.Tensor, step: torch.Tensor, steps: int,
                   schedule: Schedule, total: int | torch.Tensor | None = None) -> torch.Tensor:
        """n_mask of lines 10-11, LongTensor [B]: floor(N_total * gamma(clamp(t_eff + 1/T, 0,
        1))) (`schedules.count_at`; total None: N), at most the masked count, and 0 on an
        item's step T - 1, so LADR always finishes within T steps."""
        remaining = masked.sum(dim=1)
        total = masked.shape[1] if total is None else total
        t_next = (t_eff + 1.0 / steps).clamp(0.0, 1.0)  # line 10
        n_mask = torch.minimum(count_at(schedule, total, t_next), remaining)  # line 11
        return n_mask.masked_fill(step == steps - 1, 0)

    def phase(self, t_eff: torch.Tensor) -> torch.Tensor:
        """Phase per item from t_eff [B] (line 26, Sec. 3.3.2): LongTensor [B], index into
        PHASE_NAMES: 0 exploration (t_eff < lo), 1 structure (< hi), 2 refinement."""
        bounds = phase_table(tuple(self.policy.phase_bounds), t_eff.dtype, t_eff.device)
        return torch.bucketize(t_eff, bounds, right=True)  # how many bounds t_eff reached


__all__ = ["LADR"]

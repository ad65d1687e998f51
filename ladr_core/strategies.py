"""The strategies and their public names: `Baseline()`, `Prophet(policy)` here, `LADR(policy)` in
ladr_core.ladr (Algorithm 1), and STRATEGIES, the names accepted at the public boundary.

"How many" comes from the mask schedule (ladr_core.schedules); a strategy decides "which". The
interface (Strategy, Needs, Stats, Commit) and the shared selection primitives live in
ladr_core.step. Adding a strategy: one class here with `needs()` and `begin()`, one entry in
STRATEGIES. No function here synchronises with the host or copies host data to the device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import partial
from typing import ClassVar

import torch

from .ladr import LADR
from .noise import StepNoise
from .policy import DEFAULT_STEPS, LADRPolicy, ProphetPolicy
from .schedules import Schedule
from .step import (
    Commit,
    Needs,
    RunInfo,
    Stats,
    StepRule,
    Strategy,
    effective_time,
    no_phase,
    noisy_confidence,
)


# ---------------------------------------------------------------- official DiMOO baseline
def baseline_keep_table(
    n: int, steps: int, schedule: Schedule, device: torch.device
) -> torch.Tensor:
    """Official DiMOO keep counts per step: LongTensor [steps].

    keep_n = floor(vq_len * gamma((step + 1) / T)) clamped >= 1, and 0 on the last step, with
    vq_len the initial masked count N. Evaluated in float32 on `device` like the official loop
    (t is the Python float (step+1)/T rounded once to float32). Built on the device (float64
    division, as Python's, then float32), so no host -> device copy is made.
    """
    if device.type == "mps":  # no float64 there: the same numbers from the host
        t = torch.tensor([(s + 1) / steps for s in range(steps)], dtype=torch.float32)
        t = t.to(device)
    else:
        t = (torch.arange(1, steps + 1, dtype=torch.float64, device=device) / steps).float()
    keep = (float(n) * schedule.gamma(t)).floor().clamp_min(1).long()
    keep[-1:].zero_()  # a kernel, not a Python scalar copied in (a sync on an accelerator)
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


def official_step(run: RunInfo, keep: torch.Tensor, step: int, masked: torch.Tensor,
                  stats: Stats, noise: StepNoise) -> Commit:
    """One step of the official loop: keep masked the keep[step] least noisy-confident."""
    new_masked = baseline_remask(masked, noisy_confidence(stats, noise, run.temperature),
                                 keep[step])
    t_eff = effective_time(masked, run)
    return Commit(new_masked, stats.sampled, torch.zeros_like(masked), t_eff, no_phase(t_eff))


@dataclass(frozen=True)
class Baseline(Strategy):
    """The official Lumina-DiMOO `generate_image` loop: the cosine schedule's keep count, the
    noisy-confidence ranking of `mask_by_random_topk`."""

    name: ClassVar[str] = "baseline"
    steps: int | None = None

    def needs(self) -> Needs:
        return Needs(frozenset({"log_conf"}), remask=True)

    def begin(self, run: RunInfo) -> StepRule:
        keep = baseline_keep_table(run.n, run.steps, run.schedule, run.device)
        return partial(official_step, run, keep)


# ---------------------------------------------------------------- Prophet
def prophet_fire(masked: torch.Tensor, logit_gap: torch.Tensor, threshold: float) -> torch.Tensor:
    """Prophet early commit per item: BoolTensor [B].

    Fires when the mean top1 - top2 logit gap over the item's masked tokens is >= threshold
    (items with nothing masked never fire).
    """
    remaining = masked.sum(dim=1)
    mean_gap = (logit_gap * masked).sum(dim=1) / remaining.clamp_min(1)
    return (mean_gap >= threshold) & (remaining > 0)


@dataclass(frozen=True)
class Prophet(Strategy):
    """The baseline plus Prophet's early commit (Li et al. 2025, adapted to images as the paper
    does): an item whose mean logit gap over its masked tokens reaches the threshold for the
    run's progress commits every masked token to its current prediction."""

    name: ClassVar[str] = "prophet"
    policy: ProphetPolicy = field(default_factory=ProphetPolicy)
    steps: int | None = None

    def needs(self) -> Needs:
        return Needs(frozenset({"log_conf", "logit_gap"}), remask=True)

    def begin(self, run: RunInfo) -> StepRule:
        keep = baseline_keep_table(run.n, run.steps, run.schedule, run.device)
        return partial(self._step, run, keep)

    def _step(self, run: RunInfo, keep: torch.Tensor, step: int, masked: torch.Tensor,
              stats: Stats, noise: StepNoise) -> Commit:
        out = official_step(run, keep, step, masked, stats, noise)
        fire = prophet_fire(masked, stats.logit_gap, self.policy.threshold(step / run.steps))
        out.masked = out.masked & ~fire.unsqueeze(1)
        return out


# ---------------------------------------------------------------- the public names
STRATEGIES: dict[str, type[Strategy]] = {"baseline": Baseline, "ladr": LADR, "prophet": Prophet}
"""The strategy names accepted at the public boundary (sample / generate / the node)."""
STRATEGY_NAMES: tuple[str, ...] = tuple(STRATEGIES)


def as_strategy(strategy: str | Strategy, policy: object = None,
                prophet: object = None) -> Strategy:
    """A Strategy object from the public boundary's arguments.

    A Strategy object is returned as is (it carries its own policy; policy= / prophet= must then
    be None). A name builds the object the way older callers meant it: `policy` is LADR's
    LADRPolicy (or, for "prophet" in `generate`, a ProphetPolicy), `prophet` Prophet's
    ProphetPolicy; a policy meant for another strategy is not used (None = the defaults).
    """
    if isinstance(strategy, Strategy):
        if policy is not None or prophet is not None:
            raise ValueError(
                f"strategy is a {type(strategy).__name__} object, which carries its own policy; "
                "pass policy=None and prophet=None (or a strategy name with policy=)"
            )
        return strategy
    if not isinstance(strategy, str) or strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGY_NAMES} or a Strategy object "
                         f"(Baseline(), LADR(policy), Prophet(policy)); got {strategy!r}")
    if policy is not None and not isinstance(policy, (LADRPolicy, ProphetPolicy)):
        raise ValueError(f"policy must be a LADRPolicy or None; got {type(policy).__name__}")
    if prophet is not None and not isinstance(prophet, ProphetPolicy):
        raise ValueError(f"prophet must be a ProphetPolicy or None; got {type(prophet).__name__}")
    if strategy == "ladr":
        return LADR(policy if isinstance(policy, LADRPolicy) else LADRPolicy())
    if strategy == "prophet":
        chosen = prophet if prophet is not None else policy
        return Prophet(chosen if isinstance(chosen, ProphetPolicy) else ProphetPolicy())
    return Baseline()


def default_steps(strategy: Strategy) -> int:
    """The T to run a strategy at when the caller gives none: its tuned T, else DiMOO's 64."""
    return DEFAULT_STEPS if strategy.steps is None else strategy.steps


__all__ = ["STRATEGIES", "STRATEGY_NAMES", "Baseline", "LADR", "Prophet", "Strategy",
           "as_strategy", "baseline_keep_table", "baseline_remask", "default_steps",
           "official_step", "prophet_fire"]

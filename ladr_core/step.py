"""What a strategy is: the Strategy interface and what it sees and says per step.

A strategy is a frozen object that declares what the loop must compute for it each step
(`needs()`: statistics and noise) and decides the step (`begin(run)` returns its `StepRule`);
the loop never asks which strategy it runs. The strategies and their shared primitives:
ladr_core.strategies; names: ladr_core.registry.

A strategy has no step count: it reads T from `RunInfo.steps` (the run's one `StepSchedule`),
plans within it and can only finish sooner, so it never runs more forward passes than the
official sampler on the same schedule (tests/dimoo/test_cost_contract.py). A rule that reads
`step` only as a tensor sets `step_invariant = True`; on CUDA it is then captured once per
run and replayed (graphs.py).

A rule is batched tensor work on the inputs' device with no host synchronisation and no
host -> device copy. Shapes: B items, N = H * W tokens (row-major); `masked` BoolTensor
[B, N] (True = still masked); scores FloatTensors [B, N].
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from numbers import Real
from typing import ClassVar

import torch

from .noise import StepNoise
from .schedules import Schedule

STAT_NAMES = ("log_conf", "top1", "margin", "argmax", "logit_gap", "entropy")
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
    steps: int  # schedule length T (the whole schedule, also when the run starts late)
    schedule: Schedule
    temperature: float
    device: torch.device
    # N_total of Algorithm 1 per item, LongTensor [B] (the region it generates, the official
    # painting's `vq_len`; more than its masked count at a late start); None: N. Schedules run
    # over it. It and `item` (each slot's item, [S]; None: slot s runs item s) are updated in
    # place as items join a rolling batch.
    total: torch.Tensor | None = None
    item: torch.Tensor | None = None

    def generated(self) -> int | torch.Tensor:
        """N_total per item: `total` (clamped >= 1: a division never meets 0), else N."""
        return self.n if self.total is None else self.total.clamp_min(1)

    @property
    def sched_dtype(self) -> torch.dtype:
        """Precision for the [B]-sized schedule math: float64, except on MPS (no float64)."""
        return torch.float32 if self.device.type == "mps" else torch.float64


@dataclass
class Stats:
    """Per-token statistics of one step's prediction, [B, N] at positions (0 where decoded).

    sampled: LongTensor, the Gumbel-max sample (argmax at temperature 0), always present;
    log_conf: log p(sampled) clamped at 1e-20; top1: top-1 probability; margin: Delta =
    p(1) - p(2); argmax: LongTensor top-1 token; logit_gap: top-1 minus top-2 logit; entropy:
    -sum_k p_k log p_k of the prediction in nats (EB-Sampler's error proxy). A field a strategy
    did not ask for is None.
    """

    sampled: torch.Tensor
    log_conf: torch.Tensor | None = None
    top1: torch.Tensor | None = None
    margin: torch.Tensor | None = None
    argmax: torch.Tensor | None = None
    logit_gap: torch.Tensor | None = None
    entropy: torch.Tensor | None = None


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


StepRule = Callable[[torch.Tensor, torch.Tensor, Stats, StepNoise], Commit]
"""(step LongTensor [B], masked [B, N], stats, noise) -> Commit: a strategy bound to one run.
`step[b]` is item b's own 0-based step (from s0 at a late start); items of a rolling batch are
at different steps, so a rule reads it per item, as a tensor, never as a host value."""


class Strategy(ABC):
    """Base of every strategy (module docstring): `name` is its registered name
    (ladr_core.registry); it must unmask everything by its step T - 1."""

    name: ClassVar[str]
    step_invariant: ClassVar[bool] = False  # reads `step` only as a tensor (module docstring)

    @abstractmethod
    def needs(self) -> Needs:
        """Statistics and noise the loop must provide each step."""

    @abstractmethod
    def begin(self, run: RunInfo) -> StepRule:
            """The per-step rule for one run (called after the first denoise call)."""


def check_number(owner: str, name: str, value: object, low: float, high: float, *,
                 low_open: bool = False, high_open: bool = False, fix: str = "") -> float:
    """A strategy's numeric parameter as a float: a finite real (not a bool) in low..high,
    else one ValueError naming `owner(name=...)`, the range and `fix`."""
    ok = isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(float(value))
    if ok:
        v = float(value)  # type: ignore[arg-type]
        ok = (low < v if low_open else low <= v) and (v < high if high_open else v <= high)
    if not ok:
        span = (f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}")
        raise ValueError(f"{owner}({name}=...): {name} must be a finite number in {span}; got "
                         f"{value!r}{'; ' + fix if fix else ''}")
    return float(value)  # type: ignore[arg-type]


def check_choice(owner: str, name: str, value: object, options: Sequence[str]) -> None:
    """A strategy's named option: one of `options` (ValueError naming owner(name=...))."""
    if not isinstance(value, str) or value not in options:
        raise ValueError(f"{owner}({name}=...): {name} must be one of {tuple(options)}; got "
                         f"{value!r}")


__all__ = ["STAT_NAMES", "Commit", "Needs", "RunInfo", "Stats", "StepRule", "Strategy",
           "check_choice", "check_number"]

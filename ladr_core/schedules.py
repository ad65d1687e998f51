"""Mask schedules gamma(t) and their inverses gamma^-1(r).

gamma(t) is the expected fraction of image tokens still masked at time t in [0, 1]
(paper Eq. 1: q(z_t,i = [MASK]) = gamma(t)); gamma(0) = 1 (all masked), gamma(1) = 0.
LADR's inverse scheduling (paper Prop. 2 "Manifold Consistency", the step Algorithm 1 labels
"Prop. 1") needs gamma^-1 to turn the actual mask ratio back into an effective time t_eff.

Both functions accept a float or a tensor (any shape, any floating dtype, any device) and clamp
their input to [0, 1] first, so rounding slop just outside the range is harmless. Tensor in gives
tensor out on the same device and dtype: the sampler evaluates the schedule on the denoiser's
device, exactly as the official DiMOO loop does (cos on the model's device, float32).

`StepSchedule` is the run's schedule as one value: the step count T (the price: the official
sampler's forward passes) and the start step of a denoise strength d < 1, checked once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import torch

from .errors import InputError

Value = TypeVar("Value", float, torch.Tensor)


def _clamp01(x: Value) -> Value:
    if isinstance(x, torch.Tensor):
        return x.clamp(0.0, 1.0)
    return min(max(float(x), 0.0), 1.0)


def cosine_gamma(t: Value) -> Value:
    """MaskGIT / DiMOO cosine schedule gamma(t) = cos(pi t / 2) (official `cosine_schedule`)."""
    t = _clamp01(t)
    if isinstance(t, torch.Tensor):
        return torch.cos(0.5 * math.pi * t)
    return math.cos(0.5 * math.pi * t)


def cosine_gamma_inv(r: Value) -> Value:
    """Inverse of the cosine schedule: gamma^-1(r) = (2 / pi) * arccos(r)."""
    r = _clamp01(r)
    if isinstance(r, torch.Tensor):
        return torch.arccos(r) * (2.0 / math.pi)
    return math.acos(r) * (2.0 / math.pi)


def linear_gamma(t: Value) -> Value:
    """Linear schedule gamma(t) = 1 - t (LLaDA's forward process)."""
    return 1.0 - _clamp01(t)


def linear_gamma_inv(r: Value) -> Value:
    """Inverse of the linear schedule: gamma^-1(r) = 1 - r."""
    return 1.0 - _clamp01(r)


@dataclass(frozen=True)
class Schedule:
    """A mask schedule: `gamma` (time -> masked fraction) with its inverse `gamma_inv`.

    Both are monotone decreasing bijections of [0, 1] with gamma(0) = 1 and gamma(1) = 0.
    """

    name: str
    gamma: Callable[[Value], Value]
    gamma_inv: Callable[[Value], Value]


SCHEDULES: dict[str, Schedule] = {
    "cosine": Schedule("cosine", cosine_gamma, cosine_gamma_inv),
    "linear": Schedule("linear", linear_gamma, linear_gamma_inv),
}


def get_schedule(schedule: str | Schedule = "cosine") -> Schedule:
    """The named schedule ("cosine", "linear") or `schedule` itself; else a ValueError naming
    the allowed names."""
    if isinstance(schedule, Schedule):
        return schedule
    if isinstance(schedule, str) and schedule in SCHEDULES:
        return SCHEDULES[schedule]
    raise ValueError(
        f"schedule must be one of {sorted(SCHEDULES)} or a ladr_core.schedules.Schedule; "
        f"got {schedule!r}"
    )


def count_at(schedule: Schedule, n: int | torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """floor(n * gamma(t)) per item: LongTensor shaped like t (t in schedule precision).

    n: the count the schedule runs over, an int or [B]. The floor's guard (1e-9 n in float64,
    1e-6 n in float32) keeps exact integers such as 36 * (1 - 1/3) = 24 from flooring to 23.
    """
    eps = 1e-9 if t.dtype == torch.float64 else 1e-6
    if isinstance(n, torch.Tensor):
        count = n.to(t.dtype)
        return (count * schedule.gamma(t) + count * eps).floor().long()
    return (float(n) * schedule.gamma(t) + n * eps).floor().long()


DEFAULT_STEPS = 64
"""DiMOO's default schedule length T (the official `generate_image` default)."""
MAX_STEPS = 1000
"""The largest T accepted (the sampler node's steps widget stops there)."""
STEPS_FIX = f"give a whole number of steps from 1 to {MAX_STEPS} (the official sampler's " \
            f"forward passes; DiMOO's default is {DEFAULT_STEPS})"
DENOISE_FIX = ("give a number above 0 and at most 1 (1 redraws everything: text to image; "
               "e.g. 0.6 keeps part of the picture)")


def check_denoise(value: object, no_picture: tuple[str, str] | None = None) -> float:
    """The denoise strength d as a float in (0, 1]; one InputError naming ``denoise`` otherwise
    (not a number, NaN, infinite, 0 or below, above 1). ``no_picture`` = (what is missing, the
    fix): a job without a picture, which refuses d < 1 (there is nothing to keep)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not ok or not math.isfinite(float(value)) or not 0.0 < float(value) <= 1.0:
        raise InputError("denoise", f"is {value!r}", DENOISE_FIX)
    denoise = float(value)
    if no_picture is not None and denoise < 1.0:
        raise InputError("denoise", f"is {denoise:g} but {no_picture[0]}", no_picture[1])
    return denoise


@dataclass(frozen=True)
class StepSchedule:
    """The schedule a run follows, one value read by the loop, the strategies, painting and the
    stats (as ComfyUI's SIGMAS): ``steps`` = T, the official sampler's price in forward
    passes, and ``denoise`` = d in (0, 1], an image to image strength (KSampler ``denoise``).
    Checked on construction (InputError naming ``steps`` or ``denoise``)."""

    steps: int = DEFAULT_STEPS
    denoise: float = 1.0

    def __post_init__(self) -> None:
        t = self.steps
        if not isinstance(t, int) or isinstance(t, bool) or not 1 <= t <= MAX_STEPS:
            raise InputError("steps", f"is {t!r}", STEPS_FIX)
        object.__setattr__(self, "denoise", check_denoise(self.denoise))

    @classmethod
    def of(cls, steps: int | StepSchedule | None, denoise: float = 1.0) -> StepSchedule:
        """``steps`` as a schedule: a StepSchedule as is, None = DiMOO's 64, an int = T."""
        if isinstance(steps, StepSchedule):
            return steps
        return cls(DEFAULT_STEPS if steps is None else steps, denoise)  # type: ignore[arg-type]

    @property
    def start(self) -> int:
        """The step s0 = T - round(T * d) a run starts from (halves round up): 0 at d = 1,
        T for a d too small to redraw a step (nothing to run)."""
        return self.steps - math.floor(self.steps * self.denoise + 0.5)

    @property
    def left(self) -> int:
        """Steps the run takes at most: T - s0 (the official sampler's forward passes)."""
        return self.steps - self.start

"""LADR's policy as data: frozen, validated dataclasses holding the paper's defaults, and the
named presets.

`LADRPolicy` is the phase-aware policy Pi(t) = (alpha_t, tau_t) of paper Sec. 3.3.2 together
with the frontier kernel of Eq. 9 and the ablation switches of Sec. 4.3 (Table 5 / Figs. 5-6).
`AdaptiveRescue` holds the settings of the self-calibrating rescue (rescue.py).
`PRESETS` names every recipe (a policy; the run's steps set its schedule, which no preset
overrules). Prophet's policy lives beside Prophet (prophet.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from fractions import Fraction
from numbers import Real

METRICS = ("margin", "confidence", "random")
CANDIDATES = ("neighbors", "non_neighbors", "random")
SELECTIONS = ("top1", "gumbel")
RESCUE_TOKENS = ("sample", "argmax")
PHASE_NAMES = ("exploration", "structure", "refinement")
"""LADR's phases in order (index = the step record's `phase`; -1 = no phase, other strategies)."""
NO_TAU = -1.0
"""Where a number must stand for tau = None (no threshold): widgets, device tables. Margins are
>= 0, so Delta > -1 keeps every candidate."""
PACE_RANGE = (0.0, 1024.0)
PACE_UNIT = 64
"""`AdaptiveRescue.pace` counts in 1/64ths of the schedule (a step of DiMOO's default 64-step
schedule), so the rescue's reach is the same share of the schedule at any steps."""
ADAPTIVE_REPLACES = ("tau", "alpha", "delayed")
"""LADRPolicy fields the adaptive rescue does not read (its threshold and budget replace them)."""


def is_real(x: object) -> bool:
    """A finite real number that is not a bool."""
    return isinstance(x, Real) and not isinstance(x, bool) and math.isfinite(float(x))


def check_triple(name: str, value: object) -> tuple:
    if not isinstance(value, (tuple, list)) or len(value) != 3:
        raise ValueError(
            f"{name} must be a tuple of 3 values (exploration, structure, refinement); "
            f"got {value!r}"
        )
    return tuple(value)


def check_bounds(name: str, value: object) -> tuple[float, float]:
    """A monotone pair (lo, hi) within [0, 1], as floats; ValueError naming `name` otherwise."""
    if (
        not isinstance(value, (tuple, list))
        or len(value) != 2
        or not all(is_real(v) for v in value)
    ):
        raise ValueError(f"{name} must be a pair of numbers (lo, hi); got {value!r}")
    lo, hi = float(value[0]), float(value[1])
    if not 0.0 <= lo <= hi <= 1.0:
        raise ValueError(
            f"{name} must be monotone within [0, 1] (0 <= lo <= hi <= 1); got {value!r}"
        )
    return lo, hi


def _number_in(name: str, value: object, lo: float, hi: float) -> float:
    if not is_real(value) or not lo <= float(value) <= hi:
        raise ValueError(f"adaptive {name} must be a number in [{lo:g}, {hi:g}]; got {value!r}")
    return float(value)


@dataclass(frozen=True)
class AdaptiveRescue:
    """Settings of the self-calibrating rescue (rescue.adaptive_rescue). pace: how far past
    standard selection a pass may reach, in 64ths of the schedule whatever T, in [0, 1024]
    (0: no rescue; rescue.pace_cap). anchor_quantile in [0, 1]: a frontier candidate is valid
    when its margin is >= this lower quantile of the margins standard selection commits in the
    same step (0: the least certain of them, 1: the most)."""

    pace: float = 3.0
    anchor_quantile: float = 0.5

    def __post_init__(self) -> None:
        object.__setattr__(self, "pace", _number_in("pace", self.pace, *PACE_RANGE))
        object.__setattr__(self, "anchor_quantile",
                           _number_in("anchor_quantile", self.anchor_quantile, 0.0, 1.0))


@dataclass(frozen=True, repr=False)
class LADRPolicy:
    """Phase-aware rescue policy of LADR (paper Sec. 3.3, Algorithm 1 lines 22-31). The
    defaults are the paper's; each field (phases by t_eff, Eq. 10's tau and alpha per phase, the
    Eq. 9 kernel, the ablations of Figs. 5-6 and Table 5, standard selection's ranking, the
    rescued token, seen_only, the adaptive rescue) is explained in docs/SAMPLING.md's
    LADRPolicy table. The repr leaves `adaptive` out while None, so reprs recorded before the
    field existed still name the same policy."""

    phase_bounds: tuple[float, float] = (0.2, 0.7)
    tau: tuple[float | None, float | None, float | None] = (0.05, 0.05, None)
    alpha: tuple[float, float, float] = (0.1, 0.3, 1.0)
    kernel_size: int = 3
    metric: str = "margin"
    candidates: str = "neighbors"
    delayed: bool = False
    selection: str = "top1"
    rescue_token: str = "sample"
    seen_only: bool = False
    adaptive: AdaptiveRescue | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "phase_bounds", check_bounds("phase_bounds", self.phase_bounds))
        tau = check_triple("tau", self.tau)
        for v in tau:
            if v is not None and not (is_real(v) and 0.0 <= float(v) <= 1.0):
                raise ValueError(f"tau values must be None or in [0, 1]; got tau={self.tau!r}")
        object.__setattr__(self, "tau", tuple(None if v is None else float(v) for v in tau))
        alpha = check_triple("alpha", self.alpha)
        if not all(is_real(v) and 0.0 <= float(v) <= 1.0 for v in alpha):
            raise ValueError(f"alpha values must be numbers in [0, 1]; got alpha={self.alpha!r}")
        object.__setattr__(self, "alpha", tuple(float(v) for v in alpha))
        k = self.kernel_size
        if not isinstance(k, int) or isinstance(k, bool) or k < 1 or k % 2 == 0:
            raise ValueError(f"kernel_size must be an odd integer >= 1 (e.g. 3); got {k!r}")
        if self.metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}; got {self.metric!r}")
        if self.candidates not in CANDIDATES:
            raise ValueError(f"candidates must be one of {CANDIDATES}; got {self.candidates!r}")
        if self.selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {SELECTIONS}; got {self.selection!r}")
        if self.rescue_token not in RESCUE_TOKENS:
            raise ValueError(
                f"rescue_token must be one of {RESCUE_TOKENS}; got {self.rescue_token!r}")
        if not isinstance(self.seen_only, bool):
            raise ValueError(f"seen_only must be True or False; got {self.seen_only!r}")
        if not isinstance(self.delayed, bool):
            raise ValueError(f"delayed must be True or False; got {self.delayed!r}")
        self._check_adaptive()

    def _check_adaptive(self) -> None:
        if self.adaptive is None:
            return
        if not isinstance(self.adaptive, AdaptiveRescue):
            raise ValueError("adaptive must be None or ladr_core.AdaptiveRescue(pace=..., "
                             f"anchor_quantile=...); got {self.adaptive!r}")
        d = LADRPolicy()
        unused = [f for f in ADAPTIVE_REPLACES if getattr(self, f) != getattr(d, f)]
        if unused:
            raise ValueError(f"{', '.join(unused)} are not used with adaptive rescue (its "
                             "threshold and budget replace them); leave them at their defaults")

    def __repr__(self) -> str:
        names = [f.name for f in fields(self) if f.name != "adaptive" or self.adaptive is not None]
        return f"LADRPolicy({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

    def alpha_fractions(self) -> tuple[tuple[int, int], ...]:
        """alpha per phase as an exact (numerator, denominator), so floor(|C| * alpha) is
        computed in integers (0.29 * 100 gives 29, not float's 28). `delayed`: exploration 0."""
        out = []
        for phase, a in enumerate(self.alpha):
            if phase == 0 and self.delayed:
                a = 0.0
            f = Fraction(repr(a)).limit_denominator(1_000_000)
            out.append((f.numerator, f.denominator))
        return tuple(out)


def tau_from_number(name: str, value: float) -> float | None:
    """A tau written as a plain number (a widget): NO_TAU (-1) = None, else a value in [0, 1];
    any other negative value is refused rather than read as "no threshold"."""
    v = float(value)
    if v == NO_TAU:
        return None
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"{name}={value!r}: tau must be in [0, 1], or -1 for no threshold")
    return v


@dataclass(frozen=True)
class Preset:
    """A named LADR recipe: its policy and a one-line summary. A preset brings no schedule
    length: it runs the caller's steps (the price), planning within them."""

    policy: LADRPolicy
    summary: str = ""


PRESETS: dict[str, Preset] = {
    "paper": Preset(LADRPolicy(), summary="the published settings, tuned for the 8B model's "
                    "1024-token images (~4x fewer forward passes there)"),
    "delayed": Preset(LADRPolicy(delayed=True),
                      summary="no rescue in the exploration phase (paper Table 5; ~2.5x)"),
    "off": Preset(LADRPolicy(alpha=(0.0, 0.0, 0.0)),
                  summary="rescue disabled: inverse scheduling and standard selection only"),
    "ablation_non_neighbors": Preset(LADRPolicy(candidates="non_neighbors"),
                                     summary="paper Fig. 5 ablation: off-frontier candidates"),
    "ablation_random_candidates": Preset(LADRPolicy(candidates="random"),
                                         summary="paper Fig. 5 ablation: random candidates"),
    "ablation_confidence": Preset(LADRPolicy(metric="confidence"),
                                  summary="paper Fig. 6 ablation: rank by top-1 probability"),
    "ablation_random_metric": Preset(LADRPolicy(metric="random"),
                                     summary="paper Fig. 6 ablation: random ranking"),
    # Picked for DiMOO-nano by `python -m lab.nano.tune_policy` (lab/results/nano_policy_sweep.json;
    # per-token thresholds hold at any steps); the paper's policy, set for 1024-token images,
    # breaks nano's shapes.
    "nano": Preset(LADRPolicy(tau=(0.9, 0.9, 0.9), alpha=(1.0, 1.0, 1.0), selection="gumbel",
                              rescue_token="argmax", seen_only=True),
                   summary="rescue tuned for the built-in DiMOO-nano"),
    # Self-calibrating rescue (rescue.adaptive_rescue, docs/SAMPLING.md): no per-model constant;
    # the anchor is the median margin the schedule commits, the pace 3/64 (3 steps at T = 64).
    "adaptive": Preset(LADRPolicy(selection="gumbel", rescue_token="argmax", seen_only=True,
                                  adaptive=AdaptiveRescue(pace=3.0, anchor_quantile=0.5)),
                       summary="self-calibrating rescue, no per-model tuning"),
}
"""The one definition of every preset (``LADR.preset(name)``, ``resolve_strategy(name)``)."""

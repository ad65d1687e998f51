"""What a calibration runs: named candidates (a strategy object and its T) and their JSON form.

The list (``default_candidates``), in the order they run:
  baseline-<T>   the official sampler at the official T (the reference, default 64);
  paper          LADR with the paper's policy as printed (Algorithm 1, top-1 ranking);
  paper-gumbel   the same policy ranking like the official sampler: log p(sampled) + Gumbel
                 noise (``selection="gumbel"``); the paper does not say which its authors ran;
  adaptive       the self-calibrating rescue (``PRESETS["adaptive"]``, T = 64);
  nano           the preset tuned on DiMOO-nano (tau 0.9, T = 128);
  tau<x>         a small grid over the rescue's own threshold: tau = x in every phase, alpha
                 1, gumbel ranking, argmax rescue token, seen-only frontier (the nano preset's
                 rule at DiMOO's T = 64), x in ``TAU_GRID``;
and, after them, the baseline at each candidate's measured NFE (rounded; one run per distinct
T), against which every candidate is also compared.

A candidate is stored as {"kind": "baseline" | "ladr", "steps": T, "policy": {field: value}}
(``strategy_spec``); ``strategy_from_spec`` rebuilds the object and refuses a damaged entry
with a message naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from ..baseline import Baseline
from ..ladr import LADR
from ..policy import PRESETS, AdaptiveRescue, LADRPolicy
from ..step import Strategy

__all__ = ["TAU_GRID", "Candidate", "default_candidates", "matched_baseline", "strategy_from_spec",
           "strategy_spec", "tau_policy"]

TAU_GRID = (0.5, 0.7, 0.9)


@dataclass(frozen=True)
class Candidate:
    """A named setting to measure: ``strategy`` run at ``steps`` (its T)."""

    name: str
    strategy: Strategy
    steps: int
    role: str = "candidate"  # "reference" | "candidate" | "matched"


def tau_policy(tau: float) -> LADRPolicy:
    """The grid's policy: threshold ``tau`` in every phase, the nano preset's other fields."""
    return LADRPolicy(tau=(tau, tau, tau), alpha=(1.0, 1.0, 1.0), selection="gumbel",
                      rescue_token="argmax", seen_only=True)


def default_candidates(steps: int = 64) -> list[Candidate]:
    """The reference and the LADR candidates (module docstring), in run order."""
    paper = PRESETS["paper"].policy
    out = [Candidate(f"baseline-{steps}", Baseline(), steps, "reference"),
           Candidate("paper", LADR(paper), steps),
           Candidate("paper-gumbel", LADR(replace(paper, selection="gumbel")), steps)]
    for preset in ("adaptive", "nano"):
        out.append(Candidate(preset, LADR.preset(preset), PRESETS[preset].steps or steps))
    out += [Candidate(f"tau{t:g}", LADR(tau_policy(t)), steps) for t in TAU_GRID]
    return out


def matched_baseline(nfe: float) -> Candidate:
    """The official sampler at T = round(nfe) (at least 1): the same number of forwards."""
    t = max(1, round(nfe))
    return Candidate(f"baseline-{t}", Baseline(), t, "matched")


def _policy_dict(policy: LADRPolicy) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields(policy):
        value = getattr(policy, f.name)
        if isinstance(value, AdaptiveRescue):
            value = {"pace": value.pace, "anchor_quantile": value.anchor_quantile}
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


def strategy_spec(candidate: Candidate) -> dict[str, Any]:
    """JSON-ready description of a candidate's strategy (module docstring)."""
    s = candidate.strategy
    if isinstance(s, LADR):
        return {"kind": "ladr", "steps": candidate.steps, "policy": _policy_dict(s.policy)}
    if isinstance(s, Baseline):
        return {"kind": "baseline", "steps": candidate.steps}
    raise ValueError(f"cannot describe a {type(s).__name__} candidate")


def strategy_from_spec(spec: Any, where: str = "strategy") -> tuple[Strategy, int]:
    """(strategy object, T) from ``strategy_spec``'s dict; ValueError naming the bad field."""
    if not isinstance(spec, dict):
        raise ValueError(f"{where} must be an object with kind, steps (and policy); got {spec!r}")
    steps = spec.get("steps")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"{where}.steps must be an int >= 1; got {steps!r}")
    kind = spec.get("kind")
    if kind == "baseline":
        return Baseline(steps=steps), steps
    if kind != "ladr":
        raise ValueError(f"{where}.kind must be 'baseline' or 'ladr'; got {kind!r}")
    raw = spec.get("policy")
    if not isinstance(raw, dict):
        raise ValueError(f"{where}.policy must be an object of LADRPolicy fields; got {raw!r}")
    known = {f.name for f in fields(LADRPolicy)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"{where}.policy has unknown fields {unknown} (known: {sorted(known)})")
    args = {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()}
    if isinstance(args.get("adaptive"), dict):
        try:
            args["adaptive"] = AdaptiveRescue(**args["adaptive"])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}.policy.adaptive: {exc}") from None
    try:
        return LADR(LADRPolicy(**args), steps), steps
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}.policy: {exc}") from None

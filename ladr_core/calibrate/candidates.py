"""What a calibration runs: named candidates (a strategy object and its T) and their JSON form.

The list (`default_candidates`), in the order they run:

    baseline-<T>   the official sampler at the official T (the reference, default 64);
    paper          LADR with the paper's policy as printed (Algorithm 1, top-1 ranking);
    paper-gumbel   the same, ranking like the official sampler (log p + Gumbel noise); the
                   paper does not say which its authors ran;
    adaptive       the self-calibrating rescue (`PRESETS["adaptive"]`);
    nano           the preset tuned on DiMOO-nano, at the 128 steps it was tuned at;
    tau<x>         the nano preset's rule at T = 64 with tau = x in every phase, x in `TAU_GRID`;
    halton-ladr,   LADR's rescue on a Halton-ordered baseline and over every masked token: the
    ladr-global    best training-free settings on nano at about 12 and 18 forwards per image
                   (docs/reports/SAMPLERS.md), at `TUNED_STEPS`;

then the baseline at each candidate's measured NFE (rounded; one run per distinct T).

A candidate is stored as {"kind": its registered strategy name, "steps": T, every other field}
with nested dataclasses as objects and tuples as lists (`strategy_spec`), e.g. {"kind":
"ladr", "steps": T, "policy": {field: value}}; `strategy_from_spec` rebuilds any registered
dataclass strategy and refuses a damaged entry naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass, replace
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

from ..registry import strategy_class, strategy_names
from ..step import Strategy
from ..strategies.baseline import Baseline
from ..strategies.halton_ladr import HaltonLADR
from ..strategies.ladr import LADR
from ..strategies.ladr_global import LADRGlobal
from ..strategies.policy import PRESETS, LADRPolicy

__all__ = ["TAU_GRID", "Candidate", "default_candidates", "matched_baseline", "strategy_from_spec",
           "strategy_spec", "tau_policy"]

TAU_GRID = (0.5, 0.7, 0.9)
TUNED_STEPS = {"nano": 128, "halton-ladr": 128, "ladr-global": 256}
"""The steps these candidates were tuned at on nano's validation prompts, where the calibration
runs them (a strategy has no step count of its own; the candidate names the schedule)."""


@dataclass(frozen=True)
class Candidate:
    """A named setting to measure: ``strategy`` run at ``steps`` (its T, the price)."""

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
        out.append(Candidate(preset, LADR.preset(preset), TUNED_STEPS.get(preset, steps)))
    out += [Candidate(f"tau{t:g}", LADR(tau_policy(t)), steps) for t in TAU_GRID]
    out += [Candidate(s.name, s, TUNED_STEPS[s.name]) for s in (HaltonLADR(), LADRGlobal())]
    return out


def matched_baseline(nfe: float) -> Candidate:
    """The official sampler at T = round(nfe) (at least 1): the same number of forwards."""
    t = max(1, round(nfe))
    return Candidate(f"baseline-{t}", Baseline(), t, "matched")


def _to_json(value: Any) -> Any:
    """A strategy field as JSON data: a dataclass as {field: value}, a tuple as a list."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_json(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple):
        return [_to_json(v) for v in value]
    return value


def strategy_spec(candidate: Candidate) -> dict[str, Any]:
    """JSON-ready description of a candidate's strategy (module docstring); ValueError for one
    that is not a registered dataclass."""
    s = candidate.strategy
    registered = s.name in strategy_names() and strategy_class(s.name) is type(s)
    if not is_dataclass(s) or not registered:
        raise ValueError(f"cannot describe a {type(s).__name__} candidate: only a registered "
                         "dataclass strategy (ladr_core.register_strategy) has a JSON form")
    out: dict[str, Any] = {"kind": s.name, "steps": candidate.steps}
    out.update({f.name: _to_json(getattr(s, f.name)) for f in fields(s)})
    return out


def _dataclass_of(hint: Any) -> type | None:
    """The dataclass a field annotation names (X or X | None), else None."""
    options = get_args(hint) if get_origin(hint) in (Union, UnionType) else (hint,)
    return next((o for o in options if isinstance(o, type) and is_dataclass(o)), None)


def _from_json(value: Any, hint: Any, where: str) -> Any:
    """A field's value from JSON data: a dict rebuilds the dataclass the annotation names, a
    list becomes a tuple; ValueError naming `where` (the field's path) otherwise."""
    nested = _dataclass_of(hint)
    if nested is not None and isinstance(value, dict):
        return _build(nested, value, where)
    if nested is not None and value is not None:
        raise ValueError(f"{where} must be an object of {nested.__name__} fields; got {value!r}")
    if isinstance(value, list):
        return tuple(tuple(v) if isinstance(v, list) else v for v in value)
    return value


def _build(cls: type, data: dict[str, Any], where: str) -> Any:
    """cls(**fields from data), a missing field at its default (older files stay readable); an
    unknown field or a refused value is a ValueError naming `where`."""
    names = {f.name for f in fields(cls) if f.init}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(f"{where} has unknown fields {unknown} (known: {sorted(names)})")
    hints = get_type_hints(cls)
    args = {k: _from_json(v, hints.get(k), f"{where}.{k}") for k, v in data.items()}
    try:
        return cls(**args)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from None


def strategy_from_spec(spec: Any, where: str = "strategy") -> tuple[Strategy, int]:
    """(strategy object, T) from ``strategy_spec``'s dict, for any registered dataclass
    strategy; ValueError naming the bad field (its path under `where`)."""
    if not isinstance(spec, dict):
        raise ValueError(f"{where} must be an object with kind, steps and the strategy's "
                         f"fields; got {spec!r}")
    steps = spec.get("steps")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"{where}.steps must be an int >= 1; got {steps!r}")
    kind = spec.get("kind")
    cls = strategy_class(kind, f"{where}.kind")
    if not is_dataclass(cls):
        raise ValueError(f"{where}.kind {kind!r} is not a dataclass strategy; it has no JSON "
                         "form")
    data = {k: v for k, v in spec.items() if k not in ("kind", "steps")}
    return _build(cls, data, where), steps

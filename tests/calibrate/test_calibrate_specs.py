"""Calibration candidates as JSON: every registered dataclass strategy round-trips through
`strategy_spec` / `strategy_from_spec`, files written before a field existed stay readable, and
a damaged entry is refused with a message naming the field."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from ladr_core import (
    PRESETS,
    AdaptiveRescue,
    EntropyBound,
    LADRPolicy,
    Threshold,
    resolve_strategy,
    strategy_names,
)
from ladr_core.calibrate.candidates import (
    Candidate,
    default_candidates,
    strategy_from_spec,
    strategy_spec,
)


def _variants() -> list:
    """Each registered strategy's defaults, and one non-default setting of every field."""
    out = []
    for name in strategy_names():
        s = resolve_strategy(name)
        out.append(s)
        if hasattr(s, "policy") and isinstance(s.policy, LADRPolicy):
            out.append(replace(s, policy=PRESETS["adaptive"].policy))
    return out + [Threshold(0.5, token="sample"), EntropyBound(0.25, token="sample")]


@pytest.mark.parametrize("strategy", _variants(), ids=repr)
def test_every_registered_strategy_round_trips_through_json(strategy) -> None:
    cand = Candidate("x", strategy, 7)
    spec = json.loads(json.dumps(strategy_spec(cand)))
    assert spec["kind"] == strategy.name and spec["steps"] == cand.steps
    back, steps = strategy_from_spec(spec)
    assert steps == cand.steps and type(back) is type(strategy) and back == strategy


def test_the_default_candidates_round_trip() -> None:
    for cand in default_candidates():
        back, steps = strategy_from_spec(json.loads(json.dumps(strategy_spec(cand))))
        assert steps == cand.steps and back.name == cand.strategy.name
        assert getattr(back, "policy", None) == getattr(cand.strategy, "policy", None)


def test_files_of_the_earlier_format_stay_readable() -> None:
    """The format before generic specs: baseline {kind, steps}; LADR {kind, steps, policy} with
    lists for tuples, an adaptive rescue as an object, and without fields added later."""
    base, t = strategy_from_spec({"kind": "baseline", "steps": 64})
    assert t == 64 and base == resolve_strategy("baseline")
    old = {"kind": "ladr", "steps": 128, "policy": {
        "phase_bounds": [0.2, 0.7], "tau": [0.9, 0.9, 0.9], "alpha": [1.0, 1.0, 1.0],
        "kernel_size": 3, "metric": "margin", "candidates": "neighbors", "delayed": False,
        "selection": "gumbel", "rescue_token": "argmax", "seen_only": True}}  # no "adaptive"
    ladr, t = strategy_from_spec(old)
    assert t == 128 and ladr.policy == PRESETS["nano"].policy
    adaptive = json.loads(json.dumps(old))
    adaptive["policy"].update(tau=[0.05, 0.05, None], alpha=[0.1, 0.3, 1.0],
                              adaptive={"pace": 4.0, "anchor_quantile": 1.0})
    got, _ = strategy_from_spec(adaptive)
    assert got.policy.adaptive == AdaptiveRescue(pace=4.0, anchor_quantile=1.0)


@pytest.mark.parametrize(("spec", "message"), [
    ({"kind": "threshold", "steps": 8, "tau": 1.5}, r"^strategy: Threshold\(tau=\.\.\.\): tau "),
    ({"kind": "entropy", "steps": 8, "gamma": -2}, r"^strategy: EntropyBound\(gamma=\.\.\.\)"),
    ({"kind": "threshold", "steps": 8, "tau": 0.9, "tua": 1}, r"^strategy has unknown fields "
                                                              r"\['tua'\]"),
    ({"kind": "maskgit", "steps": 8}, r"^strategy.kind must be a registered strategy name "
                                      r"\[.*'threshold'.*\]; got 'maskgit'"),
    ({"kind": "halton", "steps": 0}, r"^strategy.steps must be an int >= 1; got 0"),
    ({"kind": "ladr", "steps": 8, "policy": 3}, r"^strategy.policy must be an object of "
                                                r"LADRPolicy fields; got 3"),
    ({"kind": "ladr", "steps": 8, "policy": {"tau": "high"}}, r"^strategy.policy: tau must be"),
    ({"kind": "ladr", "steps": 8, "policy": {"adaptive": {"pace": -1}}},
     r"^strategy.policy.adaptive: adaptive pace must be a number in \[0, 1024\]"),
    ({"kind": "halton-ladr", "steps": 8, "policy": {"sigma": 1}},
     r"^strategy.policy has unknown fields \['sigma'\]"),
    ("threshold", r"^strategy must be an object with kind, steps"),
])
def test_a_damaged_entry_is_refused_naming_its_field(spec, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        strategy_from_spec(spec)

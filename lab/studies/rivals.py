"""Settings of the training-free rival samplers as short strings, and the validation picks.

A setting string names a registered strategy and its options (lab/studies/samplers.py sweeps
them on nano's validation prompts; lab/studies/quality.py and lab/studies/painting.py run the
picks by their table names):

    threshold:tau=0.9,token=argmax,steps=32     Threshold(tau=0.9, token="argmax") at T 32
    entropy:gamma=1.5,steps=32                  EntropyBound(gamma=1.5) at T 32
    halton:steps=12                             Halton() at T 12
    baseline:steps=18                           Baseline() at T 18
    ladr:preset=nano,tau=0.8,steps=64           LADR(nano policy with tau 0.8 in every phase) at T 64

`steps` is the run's schedule (the price; 64 when absent), never a field of the strategy. For
LADR and its variants (ladr, ladr-global, halton-ladr) `preset` picks the base policy
(ladr_core.PRESETS, default nano) and `tau` sets its threshold in every phase; other keys are
the strategy's own fields. Values are read as int, then float, else kept as text.

    python -m lab.studies.rivals [SETTING ...]

prints the picks and, for each setting string, the strategy it builds in the calibration's JSON
form (ladr_core.calibrate.strategy_spec) or the message refusing it (exit status 1 then).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

LADR_FAMILY = ("ladr", "ladr-global", "halton-ladr")

# The validation picks (lab/results/samplers_validation.json, `picks`): for each rival
# and budget, the best validation score among the swept settings within 1 NFE of the budget;
# ladr-global-eq18: LADR without locality at the NFE of ladr-n18 (the ablation).
# lab/tests/bench/test_samplers_benchmark.py checks this table against the committed JSON.
PICKS: dict[str, str] = {
    "threshold-n12": "threshold:tau=0.9,token=sample,steps=32",
    "threshold-n18": "threshold:tau=0.94,token=sample,steps=32",
    "entropy-n12": "entropy:gamma=1.2,token=sample,steps=32",
    "entropy-n18": "entropy:gamma=0.7,token=sample,steps=32",
    "halton-n12": "halton:steps=12",
    "halton-n18": "halton:steps=18",
    "threshold-frontier-n12": "threshold-frontier:tau=0.4,token=sample,steps=32",
    "threshold-frontier-n18": "threshold-frontier:tau=0.8,token=sample,steps=32",
    "ladr-n12": "ladr:tau=0.8,steps=48",
    "ladr-n18": "ladr:tau=0.9,steps=128",
    "ladr-global-n12": "ladr-global:tau=0.95,steps=128",
    "ladr-global-n18": "ladr-global:tau=0.95,steps=256",
    "halton-ladr-n12": "halton-ladr:tau=0.95,steps=128",
    "halton-ladr-n18": "halton-ladr:tau=0.998,steps=256",
    "ladr-global-eq18": "ladr-global:tau=0.99,steps=192",
}


def _value(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse_setting(spec: str) -> dict[str, Any]:
    """{"name": registered name, key: value, ...} of a setting string (module docstring)."""
    name, _, rest = spec.partition(":")
    out: dict[str, Any] = {"name": name}
    for part in filter(None, rest.split(",")):
        key, eq, val = part.partition("=")
        if not eq:
            raise ValueError(f"setting {spec!r}: {part!r} is not key=value")
        out[key] = _value(val)
    return out


def build(spec: str) -> Any:
    """The strategy object of a setting string (ValueError naming a bad key); its `steps` is
    the run's schedule, not a field of the strategy (`table_entry`)."""
    from ladr_core import PRESETS, strategy_class, strategy_names

    opts = parse_setting(spec)
    name = opts.pop("name")
    opts.pop("steps", None)
    if name not in strategy_names():
        raise ValueError(f"setting {spec!r}: {name!r} is not a strategy {strategy_names()}")
    cls = strategy_class(name)
    if name in LADR_FAMILY:
        policy = PRESETS[opts.pop("preset", "nano")].policy
        if "tau" in opts:
            tau = float(opts.pop("tau"))
            policy = replace(policy, tau=(tau, tau, tau))
        known = {f.name for f in fields(policy)}
        policy = replace(policy, **{k: opts.pop(k) for k in list(opts) if k in known})
        opts["policy"] = policy
    allowed = {f.name for f in fields(cls)}
    unknown = sorted(set(opts) - allowed)
    if unknown:
        raise ValueError(f"setting {spec!r}: unknown keys {unknown} (fields: {sorted(allowed)})")
    return cls(**opts)


def table_entry(spec: str) -> dict[str, Any]:
    """A lab/studies/quality.py table entry: {"strategy": object, "steps": the setting's T
    (64 when it names none)}."""
    steps = parse_setting(spec).get("steps", 64)
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"setting {spec!r}: steps must be an int >= 1; got {steps!r}")
    return {"strategy": build(spec), "steps": steps}


def ablation_pairs(results: Any) -> list[tuple[str, str]]:
    """(LADR without locality, LADR) at each budget b where both ran, the frontier's ablation
    at about equal forwards: `ladr-global-eq<b>` (its NFE closest to LADR's, when that is
    another setting than the budget's pick) else `ladr-global-n<b>`, against `ladr-n<b>`."""
    out = []
    for k in results:
        if not k.startswith("ladr-n"):
            continue
        b = k.removeprefix("ladr-n")
        other = next((o for o in (f"ladr-global-eq{b}", f"ladr-global-n{b}") if o in results),
                     None)
        if other is not None:
            out.append((other, k))
    return out


def table() -> dict[str, dict[str, Any]]:
    """The picks as quality.py table entries, by their table names."""
    return {name: table_entry(spec) for name, spec in PICKS.items()}


def describe(spec: str) -> dict[str, Any]:
    """{"strategy": the JSON form of what `spec` builds, "steps": its T}, or {"error": why not}."""
    from ladr_core.calibrate import Candidate, strategy_spec

    try:
        entry = table_entry(spec)
    except ValueError as exc:
        return {"error": str(exc)}
    return {"strategy": strategy_spec(Candidate(spec, entry["strategy"], entry["steps"])),
            "steps": entry["steps"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="The validation picks and what setting strings "
                                 "build (module docstring), as JSON.")
    ap.add_argument("settings", nargs="*", help="setting strings, e.g. threshold:tau=0.9")
    a = ap.parse_args(argv)
    described = {spec: describe(spec) for spec in a.settings}
    print(json.dumps({"picks": PICKS, "settings": described}, indent=1))
    return 1 if any("error" in d for d in described.values()) else 0


__all__ = ["LADR_FAMILY", "PICKS", "ablation_pairs", "build", "parse_setting", "table", "table_entry",
           "describe", "main"]


if __name__ == "__main__":
    sys.exit(main())

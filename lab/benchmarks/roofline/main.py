"""``python -m lab.benchmarks.roofline``: trace the 8B model's step on each emulated card and
weight layout (run.py), price it with each card's roofline (cost.py) and write
``lab/results/roofline.json``: the commit and machine, each card's spec values, the kernel
tables, per card / layout / size the seconds per step and per image of baseline-64 and the
LADR strategies (their mean forwards on DiMOO-nano's test set), and the check against the one
H100 measurement (check.py). Which cases fit is card_fit's (lab/results/card_fit.json); a case
that does not fit is not traced. ``--cards``, ``--layouts``, ``--sizes`` narrow the sweep; an
unknown choice is refused with one message naming the choices."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from lab.benchmarks.card_fit.main import LAYOUTS, SIZES, selected
from lab.benchmarks.card_fit.table import load as load_fit
from lab.benchmarks.common import RESULTS_DIR, env_info, json_text
from tests.kit.cuda_emu import CARDS

from . import check as h100
from .cost import seconds
from .run import rules_key, trace_layout
from .strategies import strategies

DEFAULT_JSON = RESULTS_DIR / "roofline.json"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m lab.benchmarks.roofline", description=__doc__)
    p.add_argument("--cards", default=",".join(CARDS), help=f"of {', '.join(CARDS)}")
    p.add_argument("--layouts", default=",".join(LAYOUTS), help=f"of {', '.join(LAYOUTS)}")
    p.add_argument("--sizes", default=",".join(map(str, SIZES)), help="px, of 512, 1024")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON)
    return p


def _fits(fit: dict[str, Any] | None, key: str) -> bool | None:
    """card_fit's answer for ``card/layout/px``; None where it has none."""
    case = (fit or {}).get("cases", {}).get(key)
    return None if case is None else bool(case["fits"])


def _card_doc(name: str) -> dict[str, Any]:
    c = CARDS[name]
    return {"label": c.label.removesuffix(" (emulated)"), "gb": c.nominal_gb,
            "capability": list(c.capability), "peaks": dict(c.peaks),
            "bandwidth": c.bandwidth, "launch_s": c.launch_s}


def _case(name: str, tables: dict[str, Any], labels: dict[str, Any]) -> dict[str, Any]:
    """Seconds of one card / layout / size from its kernel tables (run.py's docstring)."""
    step, first = seconds(tables["call"], CARDS[name]), seconds(tables["first"], CARDS[name])
    per_image = {label: first["seconds"] + (s["nfe_mean"] - 1) * step["seconds"]
                 for label, s in labels.items()}
    return {"step": step, "first_step_s": first["seconds"], "per_image_s": per_image}


def sweep(cards: list[str], layouts: list[str], sizes: list[int]) -> dict[str, Any]:
    fit, labels, env = load_fit(), strategies(), env_info()
    doc: dict[str, Any] = {
        "benchmark": "roofline", "env": env,
        "device": f"estimated: roofline over the kernels of tests/kit/cuda_emu card profiles, "
                  f"meta storage, on {env['processor']}",
        "fit_file": "lab/results/card_fit.json" if fit else None,
        "cards": {c: _card_doc(c) for c in cards}, "layouts": layouts, "sizes": sizes,
        "strategies": labels, "traces": {}, "trace_of": {}, "cases": {}}
    start, shared = time.perf_counter(), {}
    for name in cards:
        for layout in layouts:
            keys = {px: f"{name}/{layout}/{px}" for px in sizes}
            doc["cases"].update({k: {"fits": _fits(fit, k)} for k in keys.values()})
            want = [px for px in sizes if _fits(fit, keys[px]) is not False]
            check_here = name == "h100" and layout == "bf16"
            if not want and not check_here:
                continue
            owner = shared.setdefault(rules_key(name, layout), name)
            doc["trace_of"][f"{name}/{layout}"] = owner
            traced = doc["traces"].setdefault(owner, {})
            if layout not in traced:  # with the H100 check's trace where the sweep has it
                again = layout == "bf16" and "h100" in cards
                traced[layout] = trace_layout(owner, layout, sizes,
                                              h100.old_tokens() if again else None)
                print(f"{name} {layout}: traced on {owner} ({traced[layout]['seconds']} s)",
                      flush=True)
            for px in want:
                doc["cases"][keys[px]].update(_case(name, traced[layout][str(px)], labels))
    doc["check"] = h100.check(doc)
    doc["seconds"] = round(time.perf_counter() - start, 1)
    return doc


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    doc = sweep(*selected(parser, args))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json_text(doc))
    print(f"wrote {args.json} ({doc['seconds']} s); check: {doc['check'].get('rows')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

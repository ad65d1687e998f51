"""``python -m lab.benchmarks.card_fit``: run the 8B model's node path on each emulated card,
weight layout and size (run.py) and write ``lab/results/card_fit.json`` (the commit and
machine, each case's fit, peaks, attention backends and fallbacks, and where it disagrees
with gpu_estimate's estimate, why). ``--cards``, ``--layouts``, ``--sizes`` narrow the sweep;
an unknown choice is refused with one message naming the choices."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from lab.benchmarks.common import RESULTS_DIR, env_info, json_text
from lab.benchmarks.gpu_check.speed import LAYOUTS as ALL_LAYOUTS
from lab.benchmarks.gpu_estimate.choices import check, parse_list
from tests.kit.cuda_emu import CARDS

from .compare import compare

DEFAULT_JSON = RESULTS_DIR / "card_fit.json"
LAYOUTS = tuple(lay for lay in ALL_LAYOUTS if lay != "low_vram")  # run.py: not run
SIZES = (512, 1024)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m lab.benchmarks.card_fit", description=__doc__)
    p.add_argument("--cards", default=",".join(CARDS), help=f"of {', '.join(CARDS)}")
    p.add_argument("--layouts", default=",".join(LAYOUTS), help=f"of {', '.join(LAYOUTS)}")
    p.add_argument("--sizes", default=",".join(map(str, SIZES)), help="px, of 512, 1024")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON)
    return p


def sweep(cards: list[str], layouts: list[str], sizes: list[int]) -> dict[str, Any]:
    from .run import fit_case

    env = env_info()
    doc: dict[str, Any] = {
        "benchmark": "card_fit", "env": env,
        "device": f"emulated: tests/kit/cuda_emu card profiles, meta storage, on {env['processor']}",
        "cards": {c: {"gb": CARDS[c].nominal_gb, "capability": list(CARDS[c].capability),
                      "context_bytes": CARDS[c].context_bytes, "bf16": CARDS[c].bf16}
                  for c in cards},
        "layouts": layouts, "sizes": sizes, "cases": {}}
    start = time.perf_counter()
    for card in cards:
        for layout in layouts:
            for px in sizes:
                case = fit_case(card, layout, px)
                doc["cases"][f"{card}/{layout}/{px}"] = case
                print(f"{card} {layout} {px}: {'fits' if case['fits'] else case['failed']} "
                      f"({case['seconds']} s)", flush=True)
    doc["seconds"] = round(time.perf_counter() - start, 1)
    doc["versus_estimate"] = compare(doc)
    return doc


def selected(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[list, list, list]:
    """The --cards, --layouts and --sizes a sweep runs (card_fit's and the roofline's), each
    checked against its choices; a wrong one ends in the parser's error naming the choices."""
    try:
        return (check("--cards", parse_list(args.cards), tuple(CARDS)),
                check("--layouts", parse_list(args.layouts), LAYOUTS),
                check("--sizes", parse_list(args.sizes, int), SIZES))
    except ValueError as exc:
        parser.error(str(exc))


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    doc = sweep(*selected(parser, args))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json_text(doc))
    print(f"wrote {args.json} ({doc['seconds']} s)")
    print(json.dumps(doc["versus_estimate"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

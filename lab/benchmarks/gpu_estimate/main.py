"""Command line: ``python -m lab.benchmarks.gpu_estimate`` estimates and writes the JSON;
``--docs`` rewrites the documents' generated parts from it (``--check``: only compare)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from lab.benchmarks.common import RESULTS_DIR, json_text

from .choices import BATCHES, CACHES, LAYOUTS, SHAPES, SIZES, STORAGES, check, parse_list

DEFAULT_JSON = RESULTS_DIR / "gpu_estimate.json"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m lab.benchmarks.gpu_estimate",
        description="Peak device memory and FLOPs of the 8B model per weight layout, size, "
                    "batch and ML-Cache, from the pack's own code on an emulated CUDA device "
                    "(tests/kit/cuda_emu, meta storage): no GPU, no weights.")
    p.add_argument("--json", type=Path, default=DEFAULT_JSON,
                   help="the estimate's JSON (default "
                        f"{DEFAULT_JSON.relative_to(RESULTS_DIR.parents[1])})")
    p.add_argument("--docs", action="store_true",
                   help="rewrite the generated parts of docs/reports/GPU.md and README.md from "
                        "the JSON instead of estimating")
    p.add_argument("--check", action="store_true",
                   help="with --docs: exit 1 when the documents differ from the JSON")
    p.add_argument("--shape", default="8b", choices=SHAPES,
                   help="the model shape: 8b (LLaDA-8B) or tiny (the tests' stand-in)")
    p.add_argument("--storage", default="meta", choices=STORAGES,
                   help="meta: shapes only (the estimate); cpu: real values (tiny checks)")
    p.add_argument("--layouts", default=",".join(LAYOUTS),
                   help=f"comma-separated, of {', '.join(LAYOUTS)}")
    p.add_argument("--sizes", default=None,
                   help="comma-separated px (8b: 512,1024; tiny: 64,128); default both")
    p.add_argument("--batches", default=",".join(map(str, BATCHES)),
                   help=f"comma-separated, of {', '.join(map(str, BATCHES))}")
    p.add_argument("--caches", default=",".join(CACHES),
                   help=f"comma-separated, of {', '.join(CACHES)}")
    p.add_argument("--strategies", default=None,
                   help="comma-separated labels for the compute floor (default: every label "
                        "of the committed test-set results and baseline-64+mlcache-official)")
    return p


def _choices(args: argparse.Namespace) -> dict[str, Any]:
    """The checked lists, or ValueError naming the first bad option and its choices."""
    from .compute import OFFICIAL_CACHE, strategy_results

    known = [*strategy_results(), OFFICIAL_CACHE]
    sizes = SIZES[args.shape]
    return {
        "layouts": check("--layouts", parse_list(args.layouts), LAYOUTS),
        "sizes": check("--sizes", parse_list(args.sizes, int) if args.sizes else sizes, sizes),
        "batches": check("--batches", parse_list(args.batches, int), BATCHES),
        "caches": check("--caches", parse_list(args.caches), CACHES),
        "strategies": check("--strategies", parse_list(args.strategies)
                            if args.strategies else known, known),
    }


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.docs:
        from .docs import check_docs, update_docs

        doc = json.loads(args.json.read_text())
        if args.check:
            stale = check_docs(doc)
            for name in stale:
                print(f"{name}: generated part differs from {args.json}", file=sys.stderr)
            return 1 if stale else 0
        for name in update_docs(doc):
            print(f"rewrote {name}")
        return 0
    try:
        chosen = _choices(args)
    except ValueError as exc:
        parser.error(str(exc))
    from .run import estimate

    doc = estimate(args.shape, args.storage, **chosen)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json_text(doc))
    print(f"wrote {args.json} ({doc['seconds']} s)")
    return 0

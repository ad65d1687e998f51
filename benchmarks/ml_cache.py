"""ML-Cache: fraction of token-forwards saved at the official defaults, alone and with LADR.

A *token-forward* is one real token pushed through the transformer (cond and uncond rows both
count); ``GenerationResult.token_forwards`` counts them. The reference is the official
baseline sampler without cache. For each case the script reports NFE, token-forwards, the
fraction saved against the reference, and the wall time (interleaved repetitions, medians).
ML-Cache defaults are the official ones (``MLCacheConfig()``: cache_ratio 0.9, warmup_ratio 0.3,
refresh_interval 5). Model: the shipped nano model, or the tests' tiny fixture while the nano
model is absent (the JSON says which).

Run: ``python -m benchmarks.ml_cache [--steps 64]``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import torch

import ladr_core
from benchmarks.common import (
    apply_threads,
    base_parser,
    interleaved,
    model_for_bench,
    print_table,
    ratio,
    write_result,
)

CASES = (("baseline", False), ("baseline", True), ("ladr", False), ("ladr", True),
         ("prophet", False), ("prophet", True))
PROMPT = "a red circle left of a blue square"


def run_cases(pipe: Any, steps: int, reps: int, batch: int) -> list[dict[str, Any]]:
    results: dict[str, Any] = {}

    def case(strategy: str, cache: bool):  # noqa: ANN202
        def run() -> None:
            results[(strategy, cache)] = pipe.generate(
                PROMPT, steps=steps, strategy=strategy, seed=0, batch_size=batch, decode=False,
                cache=ladr_core.MLCacheConfig() if cache else None)
        return run

    for strategy, cache in CASES:  # cheap warm-up of every code path (2 steps)
        pipe.generate(PROMPT, steps=2, strategy=strategy, seed=0, batch_size=batch, decode=False,
                      cache=ladr_core.MLCacheConfig() if cache else None)
    timings = interleaved({f"{s}{'+cache' if c else ''}": case(s, c) for s, c in CASES},
                          reps=reps, warmup=0)
    ref = results[("baseline", False)]
    ref_t = timings["baseline"].median
    rows = []
    for (strategy, cache), res in results.items():
        name = f"{strategy}{'+cache' if cache else ''}"
        rows.append({
            "case": name, "strategy": strategy, "ml_cache": cache, "nfe": res.nfe,
            "token_forwards": res.token_forwards,
            "saved_vs_baseline": 1.0 - ratio(res.token_forwards, ref.token_forwards),
            "saved_within_run": 1.0 - ratio(res.token_forwards, res.token_forwards_full),
            "median_s": timings[name].median, "speedup_vs_baseline": ratio(ref_t, timings[name].median),
        })
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--model", type=Path, default=None, help="model folder (default: nano)")
    args = parser.parse_args(argv)
    apply_threads(args)
    steps = args.steps or (8 if args.tiny else 64)
    reps = args.reps or (1 if args.tiny else 2)
    with tempfile.TemporaryDirectory() as tmp:
        folder, label = (args.model, "given") if args.model else model_for_bench(Path(tmp))
        pipe = ladr_core.load_dimoo(folder, dtype=torch.float32)
        rows = run_cases(pipe, steps, reps, args.batch)
    print_table(f"ML-Cache token-forwards on the {label} model, T={steps}, "
                f"default size {pipe.default_size}px", rows)
    result = {"model": label, "steps": steps, "batch": args.batch, "size": pipe.default_size,
              "cache_config": vars(ladr_core.MLCacheConfig()), "rows": rows}
    print(f"wrote {write_result('ml_cache', result, args.out)}")
    return result


if __name__ == "__main__":
    main()

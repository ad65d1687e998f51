"""End to end on the nano model: images per second at batch 1 and 8 for each strategy.

``DiMOOPipeline.generate`` (prompt layout, batched CFG, sampler, VQ decode) at the model's
default size, T = 64 steps (DiMOO's default), the model's ``default_cfg`` (DiMOO: 4; the cost
is the same for any scale > 0), temperature 1, fp32 on the CPU. Strategies
are interleaved per batch size (baseline, ladr, prophet, baseline, ...) and medians reported:
images/s including the VQ decode, NFE, and the speed-up over the baseline measured in the same
loop. Model: the shipped nano model, or the tests' tiny fixture while nano is absent (labelled).

Run: ``python -m lab.benchmarks.end_to_end [--batch 1 8] [--steps 64]``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import torch

import ladr_core
from lab.benchmarks.common import (
    apply_threads,
    base_parser,
    interleaved,
    model_for_bench,
    print_table,
    ratio,
    write_result,
)

STRATEGIES = ("baseline", "ladr", "prophet")
PROMPT = "a red circle left of a blue square"


def bench_batch(pipe: Any, batch: int, steps: int, reps: int) -> list[dict[str, Any]]:
    last: dict[str, Any] = {}

    def case(strategy: str):  # noqa: ANN202
        def run() -> None:
            last[strategy] = pipe.generate(PROMPT, steps=steps, strategy=strategy, seed=0,
                                           batch_size=batch)
        return run

    for strategy in STRATEGIES:  # warm-up of every code path at 2 steps
        pipe.generate(PROMPT, steps=2, strategy=strategy, batch_size=batch)
    t = interleaved({s: case(s) for s in STRATEGIES}, reps=reps, warmup=0)
    base = t["baseline"].median
    return [{"batch": batch, "strategy": s, "steps_run": last[s].steps, "nfe": last[s].nfe,
             "median_s": t[s].median, "images_per_s": batch / t[s].median,
             "decode_s": last[s].decode_seconds, "speedup_vs_baseline": ratio(base, t[s].median)}
            for s in STRATEGIES]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=None)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--model", type=Path, default=None, help="model folder (default: nano)")
    args = parser.parse_args(argv)
    apply_threads(args)
    steps = args.steps or (6 if args.tiny else 64)
    batches = args.batch or ([1, 2] if args.tiny else [1, 8])
    reps = args.reps or (1 if args.tiny else 2)
    with tempfile.TemporaryDirectory() as tmp:
        folder, label = (args.model, "given") if args.model else model_for_bench(Path(tmp))
        pipe = ladr_core.load_dimoo(folder, dtype=torch.float32)
        rows = [r for b in batches for r in bench_batch(pipe, b, steps, reps)]
    print_table(f"end to end on the {label} model, {pipe.default_size}px, T={steps}, "
                f"CFG {pipe.default_cfg:g}", rows)
    result = {"model": label, "size": pipe.default_size, "steps": steps, "cfg": pipe.default_cfg,
              "rows": rows}
    print(f"wrote {write_result('end_to_end', result, args.out)}")
    return result


if __name__ == "__main__":
    main()

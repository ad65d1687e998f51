"""Soak: many consecutive generations must not grow memory (RSS) or leak live tensors.

After ``--warmup`` generations (the last one interrupted from its callback, so the preview
table a run with a callback builds once exists before counting), ``--gens`` more run on one pipeline, cycling through every
strategy with and without ML-Cache, and every 10th run is interrupted from its step callback
(a BaseException, like ComfyUI's interrupt). After each run the script records the resident set
(``VmRSS``) and the number of live ``torch.Tensor`` objects (``gc``, every 10th run). Figures: RSS growth from the
first to the last measured run, the median of the last 20 minus that of the first 20 (robust
to one run's transient peak) and the least-squares slope per generation, and the live-tensor
count range (a leak of references shows up there exactly, RSS only when large).

Run: ``python -m lab.benchmarks.soak [--gens 100] [--model DIR]``.
"""

from __future__ import annotations

import contextlib
import gc
import statistics
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import torch

import ladr_core
from lab.benchmarks.common import apply_threads, base_parser, model_for_bench, write_result

PLAN = [("baseline", False), ("ladr", False), ("prophet", False), ("baseline", True),
        ("ladr", True), ("prophet", True)]


class Interrupted(BaseException):
    """Stands in for ComfyUI's interrupt (a BaseException raised from the callback)."""


def rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def live_tensors() -> int:
    gc.collect()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # isinstance() on lazy torch attributes may warn
        return sum(1 for o in gc.get_objects() if isinstance(o, torch.Tensor))


def one_run(pipe: Any, i: int, steps: int, interrupt: bool | None = None) -> None:
    """Run ``i`` of the plan; interrupted from its callback every 10th run (or as ``interrupt``
    says)."""
    strategy, cache = PLAN[i % len(PLAN)]
    if interrupt is None:
        interrupt = i % 10 == 9

    def stop(record: dict[str, Any]) -> None:
        if record["step"] == 1:
            raise Interrupted

    kwargs = dict(steps=steps, strategy=strategy, seed=i, batch_size=2,
                  cache=ladr_core.MLCacheConfig() if cache else None,
                  callback=stop if interrupt else None)
    with contextlib.suppress(Interrupted):
        pipe.generate(["a red circle", "a blue square"], **kwargs)


def median_growth(values: list[int], window: int = 20) -> float:
    """Median of the last ``window`` values minus median of the first: robust to the transient
    peaks a single generation leaves (freed memory is not always returned at once)."""
    w = max(1, min(window, len(values) // 2))
    return statistics.median(values[-w:]) - statistics.median(values[:w])


def slope(values: list[int]) -> float:
    """Least-squares slope of values against their index."""
    n = len(values)
    if n < 2:
        return 0.0
    mx, my = (n - 1) / 2, sum(values) / n
    num = sum((x - mx) * (y - my) for x, y in enumerate(values))
    return num / sum((x - mx) ** 2 for x in range(n))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--gens", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=12)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--model", type=Path, default=None, help="model folder (default: nano)")
    args = parser.parse_args(argv)
    apply_threads(args)
    steps = args.steps or (8 if args.tiny else 16)
    with tempfile.TemporaryDirectory() as tmp:
        folder, label = (args.model, "given") if args.model else model_for_bench(Path(tmp))
        pipe = ladr_core.load_dimoo(folder, dtype=torch.float32)
        for i in range(args.warmup):  # the last one with a callback: a run with a callback
            # builds the pipeline's preview table once (DiMOOPipeline.run), a cache kept like
            # the weights, which the live-tensor count must not read as a leak
            one_run(pipe, i, steps, interrupt=i % 10 == 9 or i == args.warmup - 1)
        rss, tensors = [], []
        t0 = time.perf_counter()
        for i in range(args.gens):
            one_run(pipe, args.warmup + i, steps)
            rss.append(rss_bytes())
            if i % 10 == 0 or i == args.gens - 1:  # a gc scan is slow: every 10th run
                tensors.append(live_tensors())
        seconds = time.perf_counter() - t0
    result = {
        "model": label, "gens": args.gens, "warmup": args.warmup, "steps": steps,
        "seconds": seconds, "rss_first": rss[0], "rss_last": rss[-1], "rss_max": max(rss),
        "rss_growth": rss[-1] - rss[0], "rss_slope_per_gen": slope(rss),
        "rss_growth_median": median_growth(rss),
        "live_tensors_min": min(tensors), "live_tensors_max": max(tensors),
        "rss": rss, "live_tensors": tensors,
    }
    print(f"soak on the {label} model: {args.gens} generations in {seconds:.1f} s; "
          f"RSS {rss[0] / 2**20:.1f} -> {rss[-1] / 2**20:.1f} MB, median of the last 20 minus "
          f"the first 20 {median_growth(rss) / 2**20:+.1f} MB "
          f"(max {max(rss) / 2**20:.1f}, slope {slope(rss) / 1024:.1f} KB/gen); "
          f"live tensors {min(tensors)}..{max(tensors)}")
    print(f"wrote {write_result('soak', result, args.out)}")
    return result


if __name__ == "__main__":
    main()

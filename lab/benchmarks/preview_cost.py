"""Per-step preview cost as a share of a sampling step, at nano size and at 4096 tokens.

The live preview is a codebook -> RGB table gather (``pipe.preview``), never a VQ decode. Two
costs are timed per step, interleaved with the step they are compared with:

* ``table preview``: ``pipe.preview(tokens, masked, grid)`` (gather + reshape);
* ``node callback``: the ComfyUI sampler node's own per-step callback
  (``nodes.run.make_callback``): the table preview, its PIL image, the ``ladr.step`` event
  payload (bit-packed masks, PNG) and the progress update (the ComfyUI calls are no-ops here).
  Its host syncs are counted as well (the sampler leaves syncing to the callback,
  docs/ARCHITECTURE.md section 1).

Denominators: on the nano model (or the tests' tiny fixture while nano is absent), the time of
one sampling step of ``generate`` (forward + sampler, baseline, no cache); at 4096 tokens
(DiMOO 1024^2, K = 8192) where the 8B forward cannot run here, the sampler step ALONE (LADR,
temperature 1, constant fake denoiser) - a lower bound of the real step, so the share printed is
an upper bound. The one-off table build (K / 256 VQ-decoder calls) is reported separately.
Target: share <= 2 %.

Run: ``python -m lab.benchmarks.preview_cost``.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
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
from lab.benchmarks.sampler_overhead import make_logits, sampler_case
from tests.kit.fakes import TablePipe, fake_record
from tests.kit.syncs import SyncCounter

TARGET = 0.02


def node_callback(pipe: Any) -> Callable[[dict[str, Any]], Any]:
    """The sampler node's own per-step callback (nodes/run.py ``make_callback``): preview,
    PIL image, ``ladr.step`` payload, progress update; without ComfyUI the nodes are declared
    against the tests' strict stand-in of its V3 API and the host calls are no-ops."""
    import importlib.util

    if "comfy_api" not in sys.modules and importlib.util.find_spec("comfy_api") is None:
        from tests.kit import comfy_stand_in

        comfy_stand_in.install()
    from nodes import host, make_callback

    return make_callback(pipe, "1", host.Progress(16, None), [])


def share_rows(label: str, step: Callable[[], float], preview: Callable[[], Any],
               callback: Callable[[], Any], reps: int) -> list[dict[str, Any]]:
    step_times: list[float] = []
    t = interleaved({"step": lambda: step_times.append(step()), "table preview": preview,
                     "node callback": callback}, reps=reps)
    step_s = sorted(step_times[1:])[len(step_times[1:]) // 2]
    with SyncCounter() as syncs:
        callback()
    rows = [{"size": label, "case": "sampling step", "ms": step_s * 1e3, "share": 1.0,
             "meets_target": None, "host_syncs": None}]
    for name in ("table preview", "node callback"):
        share = ratio(t[name].median, step_s)
        rows.append({"size": label, "case": name, "ms": t[name].median * 1e3, "share": share,
                     "meets_target": share <= TARGET,
                     "host_syncs": syncs.total if name == "node callback" else None})
    return rows


def model_rows(reps: int, steps: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        folder, label = model_for_bench(Path(tmp))
        pipe = ladr_core.load_dimoo(folder, dtype=torch.float32)
    t0 = time.perf_counter()
    pipe.preview_table()
    build_s = time.perf_counter() - t0
    h = w = pipe.default_size // pipe.vq_factor
    record = fake_record(1, (h, w), pipe.ids.codebook_size)
    callback = node_callback(pipe)

    def step() -> float:
        res = pipe.generate("a red circle", steps=steps, strategy="baseline", decode=False)
        return res.seconds / res.steps

    rows = share_rows(f"{label} {h}x{w}", step,
                      lambda: pipe.preview(record["tokens"], record["masked"], (h, w)),
                      lambda: callback(record), reps)
    return rows, {"model": label, "grid": [h, w], "table_build_s": build_s,
                  "table_shape": list(pipe.preview_table().shape)}


def dimoo_rows(reps: int, grid: tuple[int, int], k: int) -> list[dict[str, Any]]:
    table = torch.rand(k, 4, 4, 3)
    record = fake_record(1, grid, k)
    logits = make_logits(1, grid[0] * grid[1], k)
    log: list[tuple[float, float]] = []
    run = sampler_case(logits, grid, 2, "ladr", 1.0, log, paired_floor=False)

    def step() -> float:
        run()
        return log[-1][0]

    pipe = TablePipe(table)
    callback = node_callback(pipe)
    return share_rows(f"{grid[0]}x{grid[1]} tokens, K={k} (sampler-only step)", step,
                      lambda: pipe.preview(record["tokens"], record["masked"], grid),
                      lambda: callback(record), reps)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    args = parser.parse_args(argv)
    apply_threads(args)
    reps = args.reps or (2 if args.tiny else 5)
    rows, info = model_rows(reps, steps=2 if args.tiny else 4)
    grid, k = ((8, 8), 64) if args.tiny else ((64, 64), 8192)
    rows += dimoo_rows(reps, grid, k)
    print_table(f"preview cost per step (target <= {TARGET:.0%} of a step)", rows)
    print(f"one-off preview table build on the {info['model']} model: "
          f"{info['table_build_s'] * 1e3:.1f} ms for {info['table_shape']}")
    result = {"target_share": TARGET, "rows": rows, **info}
    print(f"wrote {write_result('preview_cost', result, args.out)}")
    return result


if __name__ == "__main__":
    main()

"""Host synchronisations per sampler step, counted with a TorchDispatchMode, for every strategy.

A host sync is any op whose value or output shape the CPU must wait for on a GPU
(``.item()``, ``bool(t)``, ``nonzero``, boolean-mask indexing, ``.tolist()``, ``.cpu()``...;
see ``tests.kit.syncs.SyncCounter``). Counting works on CPU because it inspects which ops
run, not how long they wait. The sampler's contract (docs/ARCHITECTURE.md section 1) is at most
one per step; the target here is <= 1 for every strategy, temperature and LADR policy preset,
plus at most one tensor made from host data per run (``host_data``: on an accelerator each is
a host -> device copy that waits for the host).

Figures per case: total syncs inside ``sample()`` (the fake denoiser makes none), steps run,
mean per step, and the largest count between two consecutive step callbacks (the first interval
also holds argument validation and setup, reported separately as ``first_interval``).
With ``--pipeline`` the same count is taken around a whole ``DiMOOPipeline.generate`` on the
nano model (or the tests' tiny fixture while nano is absent): denoiser, CFG, ML-Cache and VQ
decode included - informative, the target applies to the sampler loop.

On a GPU the same counts are taken by CUDA itself (``torch.cuda.set_sync_debug_mode``), for
the sampler under every strategy and preset and for whole pipeline runs in every weight
layout, by ``python -m lab.benchmarks.gpu_check`` (section a).

Run: ``python -m lab.benchmarks.host_syncs [--pipeline]``.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import torch

import ladr_core
from lab.benchmarks.common import (
    apply_threads,
    base_parser,
    device_slug,
    model_for_bench,
    print_table,
    strategy_from,
    write_result,
)
from ladr_core import PRESETS, sample
from tests.kit.fakes import varied_denoiser
from tests.kit.syncs import HostData, SyncCounter, count_syncs, sampler_reads

TARGET = 1.0


def count_case(b: int, grid: tuple[int, int], k: int, steps: int, strategy: str,
               temperature: float, policy_name: str | None, with_callback: bool
               ) -> dict[str, Any]:
    """Run one sample() under a SyncCounter and summarise syncs per step."""
    denoise = varied_denoiser(b, grid[0] * grid[1], k)
    gens = [torch.Generator().manual_seed(i) for i in range(b)]
    policy = PRESETS[policy_name].policy if policy_name else None
    marks: list[Counter] = []
    counter = SyncCounter()

    def callback(record: dict[str, Any]) -> None:
        marks.append(counter.snapshot())

    host_data = HostData()
    with counter, host_data:
        res = sample(denoise, shape=(b, *grid), steps=steps,
                     strategy=strategy_from(strategy, policy), temperature=temperature, generator=gens,
                     callback=callback if with_callback else None)
    totals = [sum(m.values()) for m in marks] + [counter.total]
    intervals = [b2 - a for a, b2 in zip([0, *totals[:-1]], totals, strict=True)]
    return {
        "batch": b, "strategy": strategy, "policy": policy_name or "default",
        "temperature": temperature, "callback": with_callback, "steps": res.steps,
        "total_syncs": counter.total, "per_step": counter.total / res.steps,
        "first_interval": intervals[0] if with_callback else None,
        "max_later_interval": max(intervals[1:], default=0) if with_callback else None,
        "ops": dict(counter.counts),
        "host_data": host_data.count,
        "meets_target": counter.total / res.steps <= TARGET and host_data.count <= 1,
    }


PIPELINE_CACHES = {"": None, "official": ladr_core.MLCacheConfig(),
                   "ladr": ladr_core.MLCacheConfig.ladr()}


def pipeline_case(pipe: Any, label: str, steps: int, strategy: str,
                  cache: str) -> dict[str, Any]:
    """Syncs of a whole generate() (prompt layout, denoiser, CFG, cache, sampler, VQ decode).
    ``beyond_steps``: those beyond the sampler's one per step (it reads nothing after step T)."""
    out: list[Any] = []

    def run() -> None:
        out.append(pipe.generate("a red circle", steps=steps, strategy=strategy, seed=0,
                                 cache=PIPELINE_CACHES[cache]))

    total, ops = count_syncs(run, pipe.device)
    res = out[0]
    beyond = total - sampler_reads(res.steps, steps)
    return {"model": label, "strategy": strategy, "ml_cache": cache, "steps": res.steps,
            "total_syncs": total, "per_step": total / max(res.steps, 1),
            "beyond_steps": beyond, "meets_target": beyond <= 1, "ops": ops}


def pipeline_rows(steps: int) -> list[dict[str, Any]]:
    """Every strategy x cache through ``generate()`` (float32, CPU)."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder, label = model_for_bench(Path(tmp))
        pipe = ladr_core.load_dimoo(folder, dtype=torch.float32)
        for strat in ("baseline", "ladr", "prophet"):
            for cache in PIPELINE_CACHES:
                rows.append({**pipeline_case(pipe, label, steps, strat, cache),
                             "layout": "float32"})
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--pipeline", action="store_true",
                        help="also count a whole generate() on the nano model")
    args = parser.parse_args(argv)
    apply_threads(args)
    device = torch.device("cpu")
    grid, k, steps = ((4, 4), 16, 6) if args.tiny else ((16, 16), 256, 16)
    rows = []
    for b in (1, 2):
        for temp in (1.0, 0.0):
            for strat in ("baseline", "ladr", "prophet"):
                rows.append(count_case(b, grid, k, steps, strat, temp, None, True))
    for name in PRESETS:
        rows.append(count_case(2, grid, k, steps, "ladr", 1.0, name, True))
    for strat in ("baseline", "ladr", "prophet"):
        rows.append(count_case(2, grid, k, steps, strat, 1.0, None, False))
    print_table(f"host syncs per step, grid {grid}, K={k}, T={steps} (target <= {TARGET:g})",
                [{c: r[c] for c in ("batch", "strategy", "policy", "temperature", "callback",
                                    "steps", "total_syncs", "per_step", "max_later_interval",
                                    "host_data", "meets_target")} for r in rows])
    pipe_rows = pipeline_rows(steps) if args.pipeline else []
    if pipe_rows:
        print_table(f"host syncs, whole generate() on the {pipe_rows[0]['model']} model "
                    "(target: one per step + at most one more)",
                    [{c: r[c] for c in ("layout", "strategy", "ml_cache", "steps",
                                        "total_syncs", "per_step", "beyond_steps",
                                        "meets_target")} for r in pipe_rows])
    result = {"device": device_slug(device), "grid": list(grid), "codes": k, "steps": steps,
              "target_per_step": TARGET, "rows": rows,
              "all_meet_target": all(r["meets_target"] for r in rows),
              "pipeline_rows": pipe_rows}
    print(f"wrote {write_result('host_syncs', result, args.out)}")
    return result


if __name__ == "__main__":
    main()

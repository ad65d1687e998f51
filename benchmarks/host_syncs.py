"""Host synchronisations per sampler step, counted with a TorchDispatchMode, for every strategy.

A host sync is any op whose value or output shape the CPU must wait for on a GPU
(``.item()``, ``bool(t)``, ``nonzero``, boolean-mask indexing, ``.tolist()``, ``.cpu()``...;
see ``testbed.syncs.SyncCounter``). Counting works on CPU because it inspects which ops
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

On a GPU (``--device cuda``) the same cases run on the GPU and each sync is counted by CUDA
itself (``torch.cuda.set_sync_debug_mode``), the pipeline in bf16, also with fp8 weights and
with blocks streamed from the CPU (low VRAM). The result goes to ``host_syncs_<gpu>.json``.

Run: ``python -m benchmarks.host_syncs [--pipeline] [--device cuda]``.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import torch

import ladr_core
from benchmarks.common import (
    apply_threads,
    base_parser,
    device_slug,
    model_for_bench,
    print_table,
    result_name,
    strategy_from,
    write_result,
)
from ladr_core import PRESETS, sample
from testbed.fakes import varied_denoiser
from testbed.syncs import HostData, SyncCounter, count_syncs, sampler_reads

TARGET = 1.0


def count_case(b: int, grid: tuple[int, int], k: int, steps: int, strategy: str,
               temperature: float, policy_name: str | None, with_callback: bool,
               device: torch.device | None = None) -> dict[str, Any]:
    """Run one sample() under a SyncCounter (on a GPU: CUDA's sync debug mode) and summarise
    syncs per step."""
    device = device or torch.device("cpu")
    denoise = varied_denoiser(b, grid[0] * grid[1], k, device=device)
    gens = [torch.Generator(device=device).manual_seed(i) for i in range(b)]
    policy = PRESETS[policy_name].policy if policy_name else None
    if device.type == "cuda":
        return cuda_case(denoise, gens, b, grid, steps, strategy, temperature, policy,
                         policy_name, with_callback)
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


def cuda_case(denoise: Any, gens: list[torch.Generator], b: int, grid: tuple[int, int],
              steps: int, strategy: str, temperature: float, policy: Any,
              policy_name: str | None, with_callback: bool) -> dict[str, Any]:
    """``count_case`` on a GPU: the syncs CUDA reports over the whole run (no per-interval
    split: the debug mode's warnings carry no step)."""
    out: list[Any] = []
    host_data = HostData()

    def run() -> None:
        with host_data:
            out.append(sample(denoise, shape=(b, *grid), steps=steps,
                              strategy=strategy_from(strategy, policy), temperature=temperature, generator=gens,
                              callback=(lambda record: None) if with_callback else None))

    total, sites = count_syncs(run, torch.device("cuda"))
    res = out[0]
    return {
        "batch": b, "strategy": strategy, "policy": policy_name or "default",
        "temperature": temperature, "callback": with_callback, "steps": res.steps,
        "total_syncs": total, "per_step": total / res.steps, "first_interval": None,
        "max_later_interval": None, "ops": sites, "host_data": host_data.count,
        "meets_target": total / res.steps <= TARGET and host_data.count <= 1,
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

    total, ops = count_syncs(run, pipe.device)  # on a GPU, ops = the lines that synchronized
    res = out[0]
    beyond = total - sampler_reads(res.steps, steps)
    return {"model": label, "strategy": strategy, "ml_cache": cache, "steps": res.steps,
            "total_syncs": total, "per_step": total / max(res.steps, 1),
            "beyond_steps": beyond, "meets_target": beyond <= 1, "ops": ops}


# How the pipeline is loaded per memory layout (load_dimoo's keywords); a CPU run uses "float32".
PIPELINE_LAYOUTS = {"float32": dict(dtype=torch.float32), "bf16": dict(dtype=torch.bfloat16),
                    "fp8": dict(dtype=torch.bfloat16, weight_dtype="fp8_e4m3fn"),
                    "low_vram": dict(dtype=torch.bfloat16, offload_blocks=True)}


def pipeline_rows(steps: int, device: torch.device) -> list[dict[str, Any]]:
    """Every strategy x cache through ``generate()``; on a GPU also fp8 and low-VRAM layouts."""
    layouts = ("bf16", "fp8", "low_vram") if device.type == "cuda" else ("float32",)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder, label = model_for_bench(Path(tmp))
        for layout in layouts:
            pipe = ladr_core.load_dimoo(folder, device=device, **PIPELINE_LAYOUTS[layout])
            for strat in ("baseline", "ladr", "prophet"):
                for cache in PIPELINE_CACHES:
                    rows.append({**pipeline_case(pipe, label, steps, strat, cache),
                                 "layout": layout})
            del pipe
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--pipeline", action="store_true",
                        help="also count a whole generate() on the nano model")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    args = parser.parse_args(argv)
    apply_threads(args)
    device = torch.device(args.device)
    grid, k, steps = ((4, 4), 16, 6) if args.tiny else ((16, 16), 256, 16)
    rows = []
    for b in (1, 2):
        for temp in (1.0, 0.0):
            for strat in ("baseline", "ladr", "prophet"):
                rows.append(count_case(b, grid, k, steps, strat, temp, None, True, device))
    for b in (1, 2) if device.type == "cuda" else (2,):
        for name in PRESETS:
            rows.append(count_case(b, grid, k, steps, "ladr", 1.0, name, True, device))
    for strat in ("baseline", "ladr", "prophet"):
        rows.append(count_case(2, grid, k, steps, strat, 1.0, None, False, device))
    print_table(f"host syncs per step, grid {grid}, K={k}, T={steps} (target <= {TARGET:g})",
                [{c: r[c] for c in ("batch", "strategy", "policy", "temperature", "callback",
                                    "steps", "total_syncs", "per_step", "max_later_interval",
                                    "host_data", "meets_target")} for r in rows])
    pipe_rows = pipeline_rows(steps, device) if args.pipeline else []
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
    print(f"wrote {write_result(result_name('host_syncs', device), result, args.out)}")
    return result


if __name__ == "__main__":
    main()

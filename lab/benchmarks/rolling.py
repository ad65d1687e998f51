"""Batches that cost what their images need: one at a time vs a batch vs a rolling batch.

For each strategy, the same prompts and seeds run as
* ``single``: one image at a time (B = 1 each);
* ``batch-stay``: one batch in which finished images stay in every pass (the denoiser is sent
  every item, as before items could leave);
* ``batch``: one batch in which finished images leave the pass;
* ``rolling-M``: a rolling batch with M images in flight (the next prompt joins when one ends).
Reported per mode, measured side by side in one run: wall seconds, images per second and the
ratio to ``single``, token-forwards and their ratio to the single runs' sum, and whether every
image is identical to its single run (it must be, in float32).

CPU (nano): ``python -m lab.benchmarks.rolling --prompts 48`` -> rolling.json. On a GPU, rolling
batches of the 8B-shaped model are measured by ``python -m lab.benchmarks.gpu_check`` (section c).
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

import torch

from lab.benchmarks.common import (
    RESULTS_DIR,
    apply_threads,
    base_parser,
    print_table,
    ratio,
    sync_device,
    write_result,
)
from ladr_core import LADR, Baseline, Prophet, Strategy, sample

STEPS = {"ladr-nano": 128}  # the steps the nano preset was tuned at; the rest run 64
STRATEGIES = {"baseline-64": Baseline(), "ladr-nano": LADR.preset("nano"),
              "ladr-adaptive": LADR.preset("adaptive"), "prophet": Prophet()}


def run_modes(pipe: Any, prompts: list[str], strategy: Strategy, in_flight: list[int],
              seed: int = 0, steps: int = 64) -> list[dict[str, Any]]:
    """Every mode of one strategy on the same prompts and seeds (module docstring)."""
    gens = partial(_generators, pipe, seed)
    singles, single_s, single_fwd = [], 0.0, 0
    for i, prompt in enumerate(prompts):
        den = pipe.make_denoiser(prompt, steps=steps)
        t0 = time.perf_counter()
        res = sample(den, (1, den.layout.h, den.layout.w), steps, strategy,
                     generator=gens(i, 1), device=pipe.device)
        sync_device(pipe.device)
        single_s += time.perf_counter() - t0
        single_fwd += den.stats.token_forwards
        singles.append(res)
    rows = [{"mode": "single", "seconds": single_s, "token_forwards": single_fwd,
             "item_nfe": [r.nfe for r in singles], "identical": True}]
    tokens = torch.cat([r.tokens for r in singles])
    modes: dict[str, Any] = {"batch-stay": None, "batch": None}
    modes.update({f"rolling-{m}": m for m in in_flight if m < len(prompts)})
    for mode, width in modes.items():
        den = pipe.make_denoiser(prompts, steps=steps)
        call = den if mode != "batch-stay" else (lambda t, m, den=den: den(t, m))
        t0 = time.perf_counter()
        res = sample(call, (len(prompts), den.layout.h, den.layout.w), steps, strategy,
                     generator=gens(0, len(prompts)), device=pipe.device, max_batch=width)
        sync_device(pipe.device)
        rows.append({"mode": mode, "seconds": time.perf_counter() - t0,
                     "token_forwards": den.stats.token_forwards, "item_nfe": res.item_nfe,
                     "calls": res.nfe, "identical": bool(torch.equal(res.tokens, tokens))})
    for row in rows:
        row["images_per_s"] = len(prompts) / row["seconds"]
        row["speed_vs_single"] = ratio(single_s, row["seconds"])
        row["token_forwards_vs_single"] = ratio(row["token_forwards"], single_fwd)
    return rows


def best_of(reps: int, measure: Any) -> list[dict[str, Any]]:
    """`measure()` `reps` times; each mode keeps its fastest time (a shared machine only ever
    slows a run down), and the ratios are taken again from those."""
    runs = [measure() for _ in range(reps)]
    rows = runs[0]
    for row, *others in zip(*runs, strict=True):
        row["seconds"] = min([row["seconds"], *(o["seconds"] for o in others)])
    for row in rows:
        row["images_per_s"] = len(row["item_nfe"]) / row["seconds"]
        row["speed_vs_single"] = ratio(rows[0]["seconds"], row["seconds"])
    rows[0]["reps"] = reps
    return rows


def _generators(pipe: Any, seed: int, first: int, count: int) -> list[torch.Generator]:
    from ladr_core.dimoo.runs import item_generator

    return [item_generator(seed + first + i, pipe.device) for i in range(count)]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=48)
    parser.add_argument("--in-flight", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES),
                        choices=list(STRATEGIES))
    args = parser.parse_args(argv)
    apply_threads(args)
    import ladr_core
    from lab.benchmarks.common import model_for_bench
    from lab.nano import scenes

    folder, label = model_for_bench(args.out if args.tiny else RESULTS_DIR)
    pipe = ladr_core.load_dimoo(folder, dtype=torch.float32)
    prompts = [scenes.caption_for(s) for s in scenes.quality_test_specs(args.prompts)]
    result: dict[str, Any] = {"model": label, "prompts": len(prompts), "rows": {}}
    for name in args.strategies:
        rows = best_of(args.reps or 1, lambda name=name: run_modes(
            pipe, prompts, STRATEGIES[name], args.in_flight, steps=STEPS.get(name, 64)))
        result["rows"][name] = rows
        print_table(f"{name}, {len(prompts)} prompts", [
            {k: v for k, v in r.items() if k != "item_nfe"} for r in rows])
    nano = result["rows"].get("ladr-nano")
    if nano:
        result["finish_nfe"] = nano[0]["item_nfe"]  # LADR nano's per-image NFE
    if not args.tiny or args.out != RESULTS_DIR:  # a tiny run: only to an explicit --out
        print("wrote", write_result("rolling", result, args.out))
    return result


if __name__ == "__main__":
    main()

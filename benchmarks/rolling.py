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

CPU (nano): ``python -m benchmarks.rolling --prompts 48`` -> rolling.json.
GPU (8B-shaped random model, no weights needed): ``python -m benchmarks.rolling --device cuda
--size 512 1024 --in-flight 1 2 4 8 --prompts 16`` -> rolling_<gpu>.json. Random weights never
let LADR stop early, so each item runs the `Replay` strategy: it unmasks its tokens evenly and
finishes after the number of forwards drawn from the per-image NFE that LADR ``nano`` measured
on nano (rolling.json, ``finish_nfe``), which is what makes a rolling batch pay off.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

import torch

from benchmarks.common import (
    RESULTS_DIR,
    apply_threads,
    base_parser,
    print_table,
    ratio,
    sync_device,
    write_result,
)
from ladr_core import LADR, Baseline, Prophet, sample
from ladr_core.select import effective_time, no_phase
from ladr_core.step import Commit, Needs, RunInfo, Stats, StepRule, Strategy

STRATEGIES = {"baseline-64": Baseline(), "ladr-nano": LADR.preset("nano"),
              "ladr-adaptive": LADR.preset("adaptive"), "prophet": Prophet()}


def run_modes(pipe: Any, prompts: list[str], strategy: Strategy, in_flight: list[int],
              seed: int = 0) -> list[dict[str, Any]]:
    """Every mode of one strategy on the same prompts and seeds (module docstring)."""
    steps = strategy.run_steps()
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
    from ladr_core.dimoo import item_generator

    return [item_generator(seed + first + i, pipe.device) for i in range(count)]


# ---------------------------------------------------------------- the GPU replay
@dataclass(frozen=True)
class Replay(Strategy):
    """Benchmark-only: item b unmasks its tokens evenly and finishes on its step
    ``finish[b % len(finish)] - 1`` (its NFE drawn from a measured distribution), whatever the
    logits say: random weights give a real model's cost per pass but not its stopping."""

    name: ClassVar[str] = "replay-benchmark"
    finish: tuple[int, ...] = (16,)
    steps: int | None = 64

    def needs(self) -> Needs:
        return Needs(frozenset())

    def begin(self, run: RunInfo) -> StepRule:
        table = torch.tensor(self.finish, device=run.device)
        return partial(_replay_step, run, table)


def _replay_step(run: RunInfo, finish: torch.Tensor, step: torch.Tensor, masked: torch.Tensor,
                 stats: Stats, noise: Any) -> Commit:
    """Keep masked the first n * (1 - (step + 1) / f) of each item's masked tokens."""
    item = run.item if run.item is not None else torch.arange(masked.shape[0],
                                                               device=masked.device)
    own = finish[item % finish.numel()]
    left = (run.n * (1 - (step + 1).double() / own)).clamp_min(0).floor().long()
    keep = masked & (masked.long().cumsum(dim=1) <= left[:, None])
    t_eff = effective_time(masked, run)
    return Commit(keep, stats.sampled, torch.zeros_like(masked), t_eff, no_phase(t_eff))


def replay_modes(bench: Any, prompts: int, finish: tuple[int, ...], in_flight: list[int]
                 ) -> list[dict[str, Any]]:
    """The modes of `run_modes` on the 8B-shaped random model: every item runs `Replay`."""
    from benchmarks.gpu import CFG, PROMPT
    from ladr_core.dimoo import DiMOODenoiser, build_prompt_batch

    strategy, lay = Replay(finish=finish), bench.layout

    def denoiser(n: int) -> Any:
        batch = build_prompt_batch(bench.encode, bench.ids, [PROMPT] * n, None, lay, True)
        return DiMOODenoiser(bench.model, batch, bench.ids, CFG, None, None)

    def run(n: int, width: int | None, stay: bool = False, first: int = 0) -> tuple[Any, Any]:
        """Items first .. first + n - 1, each finishing as item (first + b) of the list."""
        rule = strategy if n > 1 else Replay(finish=(finish[first % len(finish)],))
        den = denoiser(n)
        call = (lambda t, m, den=den: den(t, m)) if stay else den
        gens = [torch.Generator(bench.device).manual_seed(first + i) for i in range(n)]
        res = sample(call, (n, lay.h, lay.w), rule.steps, rule, generator=gens,
                     device=bench.device, max_batch=width)
        return res, den

    run(min(prompts, 2), None)  # warm-up: kernels and allocator
    sync_device(bench.device)
    rows = []
    t0, fwd, nfe = time.perf_counter(), 0, []
    for i in range(prompts):
        res, den = run(1, None, first=i)
        fwd += den.stats.token_forwards
        nfe += res.item_nfe
    sync_device(bench.device)
    rows.append({"mode": "single", "seconds": time.perf_counter() - t0, "token_forwards": fwd,
                 "item_nfe": nfe})
    modes: dict[str, Any] = {"batch-stay": None, "batch": None}
    modes.update({f"rolling-{m}": m for m in in_flight if m < prompts})
    for mode, width in modes.items():
        t0 = time.perf_counter()
        res, den = run(prompts, width, stay=mode == "batch-stay")
        sync_device(bench.device)
        rows.append({"mode": mode, "seconds": time.perf_counter() - t0,
                     "token_forwards": den.stats.token_forwards, "item_nfe": res.item_nfe,
                     "calls": res.nfe})
    for row in rows:
        row["images_per_s"] = prompts / row["seconds"]
        row["speed_vs_single"] = ratio(rows[0]["seconds"], row["seconds"])
        row["token_forwards_vs_single"] = ratio(row["token_forwards"], rows[0]["token_forwards"])
    return rows


def replay_main(args: Any) -> dict[str, Any]:
    """The 8B-shaped model with random weights (``--tiny``: a small one, for the CPU smoke
    test) at each ``--size``; items finish as LADR ``nano`` measured on nano (rolling.json)."""
    import json

    from benchmarks.common import device_slug, result_name
    from benchmarks.gpu import Bench
    from ladr_core.dimoo import ImageLayout

    device = torch.device(args.device)
    if device.type != "cuda" and not args.tiny:
        raise SystemExit("rolling --device: the 8B-shaped run needs a CUDA device; use --tiny "
                         "for the CPU smoke test")
    measured = RESULTS_DIR / "rolling.json"
    if args.tiny:
        finish = (3, 5, 4, 2)
    elif measured.is_file():
        finish = tuple(json.loads(measured.read_text())["finish_nfe"])
    else:
        raise SystemExit(f"{measured} is missing: run the CPU benchmark first "
                         "(python -m benchmarks.rolling), it measures the finishing steps")
    bench = Bench(args.tiny, device)
    result: dict[str, Any] = {"device": device_slug(device), "tiny": args.tiny,
                              "dtype": str(bench.dtype), "prompts": args.prompts,
                              "finish_nfe": list(finish), "sizes": {}}
    for size in args.size:
        grid = max(2, size // 16) if not args.tiny else max(2, size // 64)
        bench.layout = ImageLayout(grid, grid)
        rows = replay_modes(bench, args.prompts, finish, args.in_flight)
        result["sizes"][str(size)] = rows
        print_table(f"replay {size} px, {args.prompts} prompts", [
            {k: v for k, v in r.items() if k != "item_nfe"} for r in rows])
    name = "rolling_tiny" if args.tiny else result_name("rolling", device)  # tiny: a smoke run
    print("wrote", write_result(name, result, args.out))
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=48)
    parser.add_argument("--in-flight", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES),
                        choices=list(STRATEGIES))
    parser.add_argument("--device", default=None,
                        help="cuda: the 8B-shaped replay run (module docstring); default: nano "
                             "on the CPU")
    parser.add_argument("--size", type=int, nargs="+", default=[512, 1024],
                        help="image sizes of the replay run")
    args = parser.parse_args(argv)
    apply_threads(args)
    if args.device:
        return replay_main(args)
    import ladr_core
    from benchmarks.common import model_for_bench
    from testbed import scenes

    folder, label = model_for_bench(args.out if args.tiny else RESULTS_DIR)
    pipe = ladr_core.load_dimoo(folder, dtype=torch.float32)
    prompts = [scenes.caption_for(s) for s in scenes.quality_test_specs(args.prompts)]
    result: dict[str, Any] = {"model": label, "prompts": len(prompts), "rows": {}}
    for name in args.strategies:
        rows = best_of(args.reps or 1, lambda name=name: run_modes(
            pipe, prompts, STRATEGIES[name], args.in_flight))
        result["rows"][name] = rows
        print_table(f"{name}, {len(prompts)} prompts", [
            {k: v for k, v in r.items() if k != "item_nfe"} for r in rows])
    nano = result["rows"].get("ladr-nano")
    if nano:
        result["finish_nfe"] = nano[0]["item_nfe"]  # LADR nano's per-image NFE, for the GPU
    print("wrote", write_result("rolling_tiny" if args.tiny else "rolling", result, args.out))
    return result


if __name__ == "__main__":
    main()

"""Sampler overhead per step at DiMOO shape, as a ratio to the floor (softmax + top-2).

A constant fake denoiser returns precomputed CFG-combined logits [B, N, K] (DiMOO 1024^2:
64 x 64 = 4096 tokens, K = 8192 codes), so everything timed is the sampler's own work:
sampling (Gumbel-max at temperature 1, argmax at 0), per-token statistics, the unmasking rule
and the step record. The floor is what any confidence-based sampler must do per step at least:
one softmax plus a top-2 over the same logits tensor. Cases are interleaved (A B C ... A B C),
medians reported. Headline (``paired_ratio``, target <= 2): each sampler step is preceded by a
floor run inside the fake denoiser call on the same logits, so sampler and floor are timed
seconds apart; the ratio of their per-step means is taken per run, median over runs. Also
reported: median sampler time / median of the separately interleaved floor (``ratio_to_floor``)
and the ratio of minima (least sensitive to background load). LADR runs its default (paper) policy and, at
temperature 1, the ``nano`` and ``adaptive`` presets. The sampler draws noise and statistics only for still-masked
rows (as the official loop), so its cost falls during a run: the figure is the mean per step of
a ``--steps``-step run (default 4), the floor is always over all N tokens.

When a case misses the target, one extra run is profiled with ``torch.profiler`` and the ops
with the largest self CPU time are written next to it (``top_ops``).

On a GPU (``--device cuda``) every timed region ends with a device synchronize, the fake
denoiser first waits for the sampler's queued kernels (their time is the sampler's), and each
sampler case also reports ``kernels_per_step`` (CUDA kernel launches, from ``torch.profiler``)
and ``kernel_ms_per_step`` (their device time, to set against the wall time):
at B = 1 the sampler's kernels are small, so their count, not their arithmetic, sets its time.
The result goes to ``sampler_overhead_<gpu>.json``.

Run: ``python -m lab.benchmarks.sampler_overhead [--batch 1 2] [--steps 6] [--device cuda]``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from lab.benchmarks.common import (
    apply_threads,
    base_parser,
    device_slug,
    interleaved,
    print_table,
    ratio,
    result_name,
    strategy_from,
    sync_device,
    write_result,
)
from ladr_core import PRESETS, sample

TARGET = 2.0
STRATEGIES = ("baseline", "ladr", "prophet")
PRESET_CASES = ("ladr[nano]", "ladr[adaptive]")  # LADR's shipped presets, temperature 1 only


class ConstantDenoiser:
    """denoise(tokens, masked) -> the same precomputed logits [B, N, K]; accumulates its time.

    With ``paired_floor`` each call first runs the floor (softmax + top-2 over the logits) and
    times it: the floor is then measured at the same moments as the sampler's own work, step by
    step, which cancels slow drifts of the background load. Its time counts as denoiser time.
    """

    def __init__(self, logits: torch.Tensor, paired_floor: bool = False) -> None:
        self.logits = logits
        self.device = logits.device
        self.paired_floor = paired_floor
        self.seconds = 0.0
        self.floor_seconds = 0.0
        self.calls = 0

    def __call__(self, tokens: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        sync_device(self.device)  # the sampler's queued kernels finish on the sampler's clock
        t0 = time.perf_counter()
        if self.paired_floor:
            torch.softmax(self.logits, dim=-1).topk(2, dim=-1)
            sync_device(self.device)
            self.floor_seconds += time.perf_counter() - t0
        out = self.logits
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        return out


def make_logits(batch: int, n: int, k: int, seed: int = 0, scale: float = 4.0) -> torch.Tensor:
    """Random logits N(0, scale^2): peaked enough that margins spread over [0, 1]."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, n, k, generator=g) * scale


def synced(fn: Callable[[], Any], device: torch.device) -> Callable[[], Any]:
    """``fn`` followed by a device synchronize, so a wall-clock timer sees its kernels."""
    def run() -> Any:
        out = fn()
        sync_device(device)
        return out

    return run


def generators(n: int, device: torch.device) -> list[torch.Generator]:
    return [torch.Generator(device=device).manual_seed(i) for i in range(n)]


def floor_op(logits: torch.Tensor) -> Callable[[], Any]:
    """The floor: one softmax and one top-2 over the logits."""
    return synced(lambda: torch.softmax(logits, dim=-1).topk(2, dim=-1), logits.device)


def gumbel_draw_op(logits: torch.Tensor) -> Callable[[], Any]:
    """Reference: only the official per-item Gumbel noise draw [N, K] (uniform + 2 logs)."""
    from ladr_core.noise import gumbel_

    gens = generators(logits.shape[0], logits.device)
    n, k = logits.shape[1:]
    return synced(lambda: [gumbel_(torch.rand(n, k, generator=g, device=g.device))
                           for g in gens], logits.device)


def inverse_cdf_op(logits: torch.Tensor) -> Callable[[], Any]:
    """Reference (a proposal, not what the sampler does): categorical sampling with ONE uniform
    per token, softmax -> cumsum -> searchsorted, instead of N x K Gumbel draws. Same
    distribution, different random stream (no bit parity with the official sampler)."""
    g = torch.Generator(device=logits.device).manual_seed(0)

    def run() -> torch.Tensor:
        cdf = torch.softmax(logits, dim=-1).cumsum_(dim=-1)
        u = torch.rand(*logits.shape[:2], 1, generator=g, device=g.device) * cdf[..., -1:]
        return torch.searchsorted(cdf, u).clamp_(max=logits.shape[-1] - 1)

    return synced(run, logits.device)


def sampler_case(logits: torch.Tensor, grid: tuple[int, int], steps: int, strategy: str,
                 temperature: float, log: list[tuple[float, float, int]],
                 paired_floor: bool = True) -> Callable[[], None]:
    """One full sample() call; appends (overhead per step, paired floor per step in s, steps
    run) to ``log``.
    ``strategy``: a name, or ``ladr[<preset>]`` for LADR with a policy preset; a trailing
    `` eager`` runs it with ladr_core.graphs off (no CUDA graph for the rule)."""
    b = logits.shape[0]
    strategy, eager = strategy.removesuffix(" eager"), strategy.endswith(" eager")
    name, _, preset = strategy.partition("[")
    policy = PRESETS[preset.rstrip("]")].policy if preset else None

    def run() -> None:
        den = ConstantDenoiser(logits, paired_floor)
        gens = generators(b, logits.device)
        sync_device(logits.device)
        t0 = time.perf_counter()
        res = sample(den, shape=(b, *grid), steps=steps, strategy=strategy_from(name, policy),
                     temperature=temperature, generator=gens, cuda_graph=not eager)
        sync_device(logits.device)
        total = time.perf_counter() - t0
        log.append(((total - den.seconds) / res.steps, den.floor_seconds / den.calls,
                    res.steps))

    return run


LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx")


def profile_run(fn: Callable[[], None], device: torch.device,
                top: int = 6) -> tuple[list[dict[str, Any]], int, float]:
    """One call of ``fn`` under ``torch.profiler``: its heaviest ops by self CPU time (ms and
    share of the total; on a GPU also their device time), its CUDA kernel launches and the
    kernels' summed device time in ms."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        fn()
        sync_device(device)
    averages = prof.key_averages()
    launches = sum(e.count for e in averages if e.key in LAUNCHES)
    kernel_us = sum(e.self_device_time_total for e in averages
                    if str(e.device_type).endswith("CUDA"))
    events = [e for e in averages if e.self_cpu_time_total > 0 and e.key not in LAUNCHES]
    total = sum(e.self_cpu_time_total for e in events) or 1.0
    events.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    ops = []
    for e in events[:top]:
        op = {"op": e.key, "self_cpu_ms": e.self_cpu_time_total / 1e3, "calls": e.count,
              "share": e.self_cpu_time_total / total}
        if device.type == "cuda":
            op["self_device_ms"] = getattr(e, "self_device_time_total", 0) / 1e3
        ops.append(op)
    return ops, launches, kernel_us / 1e3


def bench_batch(batch: int, grid: tuple[int, int], k: int, steps: int, reps: int,
                temperatures: tuple[float, ...],
                device: torch.device | None = None) -> list[dict[str, Any]]:
    device = device or torch.device("cpu")
    logits = make_logits(batch, grid[0] * grid[1], k).to(device)
    checksum = float(logits.sum())
    cases: dict[str, Callable[[], Any]] = {"floor": floor_op(logits)}
    refs = {"ref: gumbel noise draw only": gumbel_draw_op(logits),
            "ref: inverse-CDF sample (proposal)": inverse_cdf_op(logits)}
    cases.update(refs)
    logs: dict[str, list[tuple[float, float, int]]] = {}
    for temp in temperatures:
        eager = tuple(f"{c} eager" for c in ("ladr", *PRESET_CASES)) \
            if device.type == "cuda" and temp == 1.0 else ()  # the rule without its CUDA graph
        for strat in STRATEGIES + (PRESET_CASES if temp == 1.0 else ()) + eager:
            name = f"{strat}@T={temp:g}"
            logs[name] = []
            cases[name] = sampler_case(logits, grid, steps, strat, temp, logs[name])
    timings = interleaved(cases, reps=reps, warmup=1)
    if float(logits.sum()) != checksum:
        raise RuntimeError("the sampler modified the denoiser's logits in place")
    floor, floor_min = timings["floor"].median, timings["floor"].minimum
    rows = [{"batch": batch, "case": "floor (softmax+top2)", "per_step_ms": floor * 1e3,
             "ratio_to_floor": 1.0, "ratio_of_minima": 1.0, "paired_ratio": 1.0,
             "meets_target": True}]
    rows += [{"batch": batch, "case": name, "per_step_ms": timings[name].median * 1e3,
              "ratio_to_floor": ratio(timings[name].median, floor),
              "ratio_of_minima": ratio(timings[name].minimum, floor_min), "paired_ratio": None,
              "meets_target": None}
             for name in refs]
    for name, pairs in logs.items():
        timed = [o for o, _, _ in pairs[1:]]  # drop the warm-up call
        paired = statistics.median(ratio(o, f) for o, f, _ in pairs[1:])
        row = {"batch": batch, "case": name, "per_step_ms": statistics.median(timed) * 1e3,
               "ratio_to_floor": ratio(statistics.median(timed), floor),
               "ratio_of_minima": ratio(min(timed), floor_min),
               "paired_ratio": paired, "meets_target": paired <= TARGET}
        if paired > TARGET or device.type == "cuda":
            strat, temp = name.split("@T=")
            steps_log: list[tuple[float, float, int]] = []
            case = sampler_case(logits, grid, steps, strat, float(temp), steps_log,
                                paired_floor=False)
            ops, launches, kernel_ms = profile_run(case, device)
            if paired > TARGET:
                row["top_ops"] = ops
            if device.type == "cuda":
                row["kernels_per_step"] = launches / steps_log[0][2]  # per step it ran
                row["kernel_ms_per_step"] = kernel_ms / steps_log[0][2]
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=None, help="sampler steps per timed run")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[1.0, 0.0])
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    args = parser.parse_args(argv)
    apply_threads(args)
    device = torch.device(args.device)
    grid, k = ((8, 8), 64) if args.tiny else ((64, 64), 8192)
    steps = args.steps or 4
    reps = args.reps or (2 if args.tiny else 3)
    rows: list[dict[str, Any]] = []
    for b in args.batch:
        rows += bench_batch(b, grid, k, steps, reps, tuple(args.temperatures), device)
    print_table(f"sampler overhead per step, {grid[0]}x{grid[1]} tokens, K={k} "
                f"(target <= {TARGET}x floor)",
                [{k2: v for k2, v in r.items() if k2 != "top_ops"} for r in rows])
    for r in rows:
        if "top_ops" in r:
            ops = ", ".join(f"{o['op']} {o['share']:.0%}" for o in r["top_ops"][:4])
            print(f"  {r['case']} B={r['batch']} misses; heaviest ops: {ops}")
    result = {"device": device_slug(device), "grid": list(grid), "codes": k, "steps": steps,
              "target_ratio": TARGET, "rows": rows}
    print(f"wrote {write_result(result_name('sampler_overhead', device), result, args.out)}")
    return result


if __name__ == "__main__":
    main()

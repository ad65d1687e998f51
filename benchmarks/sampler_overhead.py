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

Run: ``python -m benchmarks.sampler_overhead [--batch 1 2] [--steps 6]``.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from benchmarks.common import (
    apply_threads,
    base_parser,
    interleaved,
    print_table,
    ratio,
    write_result,
)
from ladr_core import POLICY_PRESETS, sample

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
        self.paired_floor = paired_floor
        self.seconds = 0.0
        self.floor_seconds = 0.0
        self.calls = 0

    def __call__(self, tokens: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        t0 = time.perf_counter()
        if self.paired_floor:
            torch.softmax(self.logits, dim=-1).topk(2, dim=-1)
            self.floor_seconds += time.perf_counter() - t0
        out = self.logits
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        return out


def make_logits(batch: int, n: int, k: int, seed: int = 0, scale: float = 4.0) -> torch.Tensor:
    """Random logits N(0, scale^2): peaked enough that margins spread over [0, 1]."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, n, k, generator=g) * scale


def floor_op(logits: torch.Tensor) -> Callable[[], Any]:
    """The floor: one softmax and one top-2 over the logits."""
    return lambda: torch.softmax(logits, dim=-1).topk(2, dim=-1)


def gumbel_draw_op(logits: torch.Tensor) -> Callable[[], Any]:
    """Reference: only the official per-item Gumbel noise draw [N, K] (uniform + 2 logs)."""
    from ladr_core.noise import gumbel_

    gens = [torch.Generator().manual_seed(i) for i in range(logits.shape[0])]
    n, k = logits.shape[1:]
    return lambda: [gumbel_(torch.rand(n, k, generator=g)) for g in gens]


def inverse_cdf_op(logits: torch.Tensor) -> Callable[[], Any]:
    """Reference (a proposal, not what the sampler does): categorical sampling with ONE uniform
    per token, softmax -> cumsum -> searchsorted, instead of N x K Gumbel draws. Same
    distribution, different random stream (no bit parity with the official sampler)."""
    g = torch.Generator().manual_seed(0)

    def run() -> torch.Tensor:
        cdf = torch.softmax(logits, dim=-1).cumsum_(dim=-1)
        u = torch.rand(*logits.shape[:2], 1, generator=g) * cdf[..., -1:]
        return torch.searchsorted(cdf, u).clamp_(max=logits.shape[-1] - 1)

    return run


def sampler_case(logits: torch.Tensor, grid: tuple[int, int], steps: int, strategy: str,
                 temperature: float, log: list[tuple[float, float]],
                 paired_floor: bool = True) -> Callable[[], None]:
    """One full sample() call; appends (overhead per step, paired floor per step) in s to ``log``.
    ``strategy``: a name, or ``ladr[<preset>]`` for LADR with a policy preset."""
    b = logits.shape[0]
    name, _, preset = strategy.partition("[")
    policy = POLICY_PRESETS[preset.rstrip("]")] if preset else None

    def run() -> None:
        den = ConstantDenoiser(logits, paired_floor)
        gens = [torch.Generator().manual_seed(i) for i in range(b)]
        t0 = time.perf_counter()
        res = sample(den, shape=(b, *grid), steps=steps, strategy=name, policy=policy,
                     temperature=temperature, generator=gens)
        total = time.perf_counter() - t0
        log.append(((total - den.seconds) / res.steps, den.floor_seconds / den.calls))

    return run


def profile_top_ops(fn: Callable[[], None], top: int = 6) -> list[dict[str, Any]]:
    """Self-CPU time of the heaviest ops in one call of ``fn`` (ms and share of the total)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total = sum(e.self_cpu_time_total for e in events) or 1.0
    events.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    return [{"op": e.key, "self_cpu_ms": e.self_cpu_time_total / 1e3, "calls": e.count,
             "share": e.self_cpu_time_total / total} for e in events[:top]]


def bench_batch(batch: int, grid: tuple[int, int], k: int, steps: int, reps: int,
                temperatures: tuple[float, ...]) -> list[dict[str, Any]]:
    logits = make_logits(batch, grid[0] * grid[1], k)
    checksum = float(logits.sum())
    cases: dict[str, Callable[[], Any]] = {"floor": floor_op(logits)}
    refs = {"ref: gumbel noise draw only": gumbel_draw_op(logits),
            "ref: inverse-CDF sample (proposal)": inverse_cdf_op(logits)}
    cases.update(refs)
    logs: dict[str, list[tuple[float, float]]] = {}
    for temp in temperatures:
        for strat in STRATEGIES + (PRESET_CASES if temp == 1.0 else ()):
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
        timed = [o for o, _ in pairs[1:]]  # drop the warm-up call
        paired = statistics.median(ratio(o, f) for o, f in pairs[1:])
        row = {"batch": batch, "case": name, "per_step_ms": statistics.median(timed) * 1e3,
               "ratio_to_floor": ratio(statistics.median(timed), floor),
               "ratio_of_minima": ratio(min(timed), floor_min),
               "paired_ratio": paired, "meets_target": paired <= TARGET}
        if paired > TARGET:
            strat, temp = name.split("@T=")
            row["top_ops"] = profile_top_ops(
                sampler_case(logits, grid, steps, strat, float(temp), [], paired_floor=False))
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=None, help="sampler steps per timed run")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[1.0, 0.0])
    args = parser.parse_args(argv)
    apply_threads(args)
    grid, k = ((8, 8), 64) if args.tiny else ((64, 64), 8192)
    steps = args.steps or 4
    reps = args.reps or (2 if args.tiny else 3)
    rows: list[dict[str, Any]] = []
    for b in args.batch:
        rows += bench_batch(b, grid, k, steps, reps, tuple(args.temperatures))
    print_table(f"sampler overhead per step, {grid[0]}x{grid[1]} tokens, K={k} "
                f"(target <= {TARGET}x floor)",
                [{k2: v for k2, v in r.items() if k2 != "top_ops"} for r in rows])
    for r in rows:
        if "top_ops" in r:
            ops = ", ".join(f"{o['op']} {o['share']:.0%}" for o in r["top_ops"][:4])
            print(f"  {r['case']} B={r['batch']} misses; heaviest ops: {ops}")
    result = {"grid": list(grid), "codes": k, "steps": steps, "target_ratio": TARGET,
              "rows": rows}
    print(f"wrote {write_result('sampler_overhead', result, args.out)}")
    return result


if __name__ == "__main__":
    main()

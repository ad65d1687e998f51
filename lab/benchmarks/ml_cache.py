"""ML-Cache: token-forwards saved, alone and with LADR, and the memory the cache costs.

A *token-forward* is one real token pushed through the transformer (cond and uncond rows both
count); ``GenerationResult.token_forwards`` counts them. The reference is the official
baseline sampler without cache. For each case the script reports NFE, refresh / cached calls,
token-forwards, the fraction saved against the reference, and the wall time (interleaved
repetitions, medians). ``+cache`` runs use ``MLCacheConfig()`` (official cache_ratio 0.9,
warmup_ratio 0.3, refresh_interval 5, placed by progress; refresh_commit, see cache.py);
``+cache-ladr`` runs use the LADR preset ``MLCacheConfig.ladr()``.
``ladr-nano`` is the LADR preset tuned for nano, at the T it was tuned at (128).

Memory (``memory``): bytes of tensors allocated during a baseline run with and without the
cache (``tests.kit.live_bytes.LiveBytes``, weights excluded), against the bytes the cache
keeps (K/V, code-slot logits, index): ``extra_over_kept`` <= 1 means no second copy.
Model: the shipped nano model, or the tests' tiny fixture while it is absent (the JSON says).

Run: ``python -m lab.benchmarks.ml_cache [--steps 64]``.
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
    strategy_from,
    write_result,
)
from tests.kit.live_bytes import LiveBytes

PROMPT = "a red circle left of a blue square"


def case_table(steps: int) -> dict[str, dict[str, Any]]:
    """case name -> generate() arguments (every case with and without the cache)."""
    nano = ladr_core.PRESETS["nano"].policy
    base = {"baseline": {"strategy": "baseline", "steps": steps},
            "ladr": {"strategy": "ladr", "steps": steps},
            "ladr-nano": {"strategy": "ladr", "steps": 128,
                          "policy": nano},
            "prophet": {"strategy": "prophet", "steps": steps}}
    table: dict[str, dict[str, Any]] = {}
    for name, args in base.items():
        table[name] = args
        table[name + "+cache"] = {**args, "cache": ladr_core.MLCacheConfig()}
        if name.startswith("ladr"):  # the LADR preset of the cache (MLCacheConfig.ladr())
            table[name + "+cache-ladr"] = {**args, "cache": ladr_core.MLCacheConfig.ladr()}
    return table


def run_cases(pipe: Any, steps: int, reps: int, batch: int) -> list[dict[str, Any]]:
    results: dict[str, Any] = {}
    stats: dict[str, tuple[int, int]] = {}
    table = case_table(steps)

    def case(name: str):  # noqa: ANN202
        def run() -> None:
            args = table[name]
            den = pipe.make_denoiser(PROMPT, cache=args.get("cache"), steps=args["steps"],
                                     batch_size=batch)
            shape = (den.batch, den.layout.h, den.layout.w)
            gens = [torch.Generator().manual_seed(i) for i in range(den.batch)]
            results[name] = ladr_core.sample(den, shape=shape, steps=args["steps"],
                                             strategy=strategy_from(args["strategy"],
                                                                    args.get("policy")),
                                             generator=gens)
            stats[name] = (den.stats.refresh_steps, den.stats.cached_steps,
                           den.stats.token_forwards, den.stats.token_forwards_full)
        return run

    timings = interleaved({name: case(name) for name in table}, reps=reps, warmup=1)
    ref_fwd, ref_t = stats["baseline"][2], timings["baseline"].median
    rows = []
    for name, res in results.items():
        refresh, cached, fwd, full = stats[name]
        rows.append({
            "case": name, "strategy": table[name]["strategy"], "steps": table[name]["steps"],
            "ml_cache": "cache" in table[name], "nfe": res.nfe, "refresh_calls": refresh,
            "cached_calls": cached, "token_forwards": fwd,
            "saved_vs_baseline": 1.0 - ratio(fwd, ref_fwd),
            "saved_within_run": 1.0 - ratio(fwd, full),
            "median_s": timings[name].median, "speedup_vs_baseline": ratio(ref_t, timings[name].median),
        })
    return rows


def memory(pipe: Any, steps: int) -> dict[str, Any]:
    """Extra bytes of a cached baseline run over a plain one, against what the cache keeps."""
    peaks, kept, kv = {}, 0, 0
    for label, cache in (("plain", None), ("cache", ladr_core.MLCacheConfig(
            warmup_ratio=0.0, refresh_interval=2))):
        den = pipe.make_denoiser(PROMPT, cache=cache, steps=steps)
        with LiveBytes() as mem:
            ladr_core.sample(den, shape=(1, den.layout.h, den.layout.w), steps=steps,
                             strategy="baseline", generator=torch.Generator().manual_seed(0))
        peaks[label] = mem.peak
        if den.caches is not None:
            kept = den.caches.nbytes()
            kv = sum(t.untyped_storage().nbytes() for pair in den.item(0).kv for t in pair)
    extra = peaks["cache"] - peaks["plain"]
    return {"steps": steps, "refresh_interval": 2, "peak_plain_bytes": peaks["plain"],
            "peak_cache_bytes": peaks["cache"], "extra_bytes": extra, "kept_bytes": kept,
            "kv_bytes": kv, "extra_over_kept": ratio(extra, kept), "extra_over_kv": ratio(extra, kv)}


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
        mem = memory(pipe, 8 if args.tiny else 16)
    print_table(f"ML-Cache token-forwards on the {label} model, T={steps}, "
                f"default size {pipe.default_size}px", rows)
    print_table("ML-Cache memory (bytes allocated during a run, weights excluded)", [mem])
    result = {"model": label, "steps": steps, "batch": args.batch, "size": pipe.default_size,
              "cache_config": vars(ladr_core.MLCacheConfig()), "rows": rows, "memory": mem}
    print(f"wrote {write_result('ml_cache', result, args.out)}")
    return result


if __name__ == "__main__":
    main()

"""fp8 weights vs fp32 on the shipped DiMOO-nano: logits' relative error and GenEval-style quality.

    OMP_NUM_THREADS=1 nice -n 10 python -m benchmarks.fp8_quality --prompts 96 \
        --json benchmarks/results/fp8_quality.json

Variants: ``fp32`` (reference; every weight float32), and the block linears stored in
``fp8_e4m3fn`` / ``fp8_e5m2`` with per-output-channel scales (``channel``) or one scale per
matrix (``tensor``); compute stays float32 (``load_dimoo(..., dtype=float32, weight_dtype=...,
fp8_scale=...)``).

* logits: for the first ``--logit-prompts`` held-out prompts, the sampler's codebook logits
  (``pipe.make_denoiser``, CFG applied) at masked fractions 1.0, 0.5 and 0.1 (unmasked codes
  drawn with a fixed generator): ``||l_fp8 - l_fp32|| / ||l_fp32||`` (mean and max over calls)
  and the fraction of positions whose argmax agrees;
* quality (``--quality-variants``, default fp32 and fp8_e4m3fn/channel):
  ``benchmarks/quality.py``'s ``generate`` (through ``quant_quality.quality_row``) for
  ``baseline-64`` and ``ladr-nano`` (same prompts, seeds = prompt index), scored by
  ``testbed.evaluator``; target: within 0.02 of fp32's overall score.

The newer ``benchmarks/quant_quality.py`` covers these variants next to ComfyUI's fp8 / int8 and
GGUF, on the test prompt set with paired confidence intervals.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.quality import strategy_table
from benchmarks.quant_quality import quality_row
from ladr_core import load_dimoo, nano_model_path
from testbed.paired_stats import group_index, scores
from testbed.scenes import caption_for, group_of, heldout_specs

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {"fp32": (None, "channel"), "fp8_e4m3fn/channel": ("fp8_e4m3fn", "channel"),
            "fp8_e4m3fn/tensor": ("fp8_e4m3fn", "tensor"),
            "fp8_e5m2/channel": ("fp8_e5m2", "channel")}
STRATEGIES = ("baseline-64", "ladr-nano")
MASKED = (1.0, 0.5, 0.1)
TARGET = 0.02


def denoiser_calls(pipe: Any, captions: list[str]) -> list[torch.Tensor]:
    """Codebook logits [1, N, K] of every (caption, masked fraction), fixed inputs."""
    out = []
    for i, caption in enumerate(captions):
        denoise = pipe.make_denoiser(caption, steps=64)
        n = denoise.layout.h * denoise.layout.w
        k = pipe.ids.codebook_size
        for frac in MASKED:
            g = torch.Generator().manual_seed(1000 * i + int(frac * 100))
            tokens = torch.randint(0, k, (1, n), generator=g)
            masked = torch.rand(1, n, generator=g) < frac
            tokens = torch.where(masked, torch.zeros_like(tokens), tokens)
            with torch.no_grad():
                out.append(denoise(tokens, masked).float().cpu())
    return out


def logit_errors(ref: list[torch.Tensor], got: list[torch.Tensor]) -> dict[str, float]:
    rel = [float((g - r).norm() / r.norm()) for r, g in zip(ref, got, strict=True)]
    agree = [float((g.argmax(-1) == r.argmax(-1)).float().mean()) for r, g in zip(ref, got, strict=True)]
    return {"rel_error_mean": sum(rel) / len(rel), "rel_error_max": max(rel),
            "argmax_agreement_mean": sum(agree) / len(agree), "calls": len(rel)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--prompts", type=int, default=96)
    ap.add_argument("--logit-prompts", type=int, default=16)
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma list of " + ",".join(VARIANTS))
    ap.add_argument("--quality-variants", default="fp32,fp8_e4m3fn/channel",
                    help="variants that also run the quality benchmark (the rest: logits only)")
    ap.add_argument("--strategies", default=",".join(STRATEGIES), help="subset of " + ",".join(STRATEGIES))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "fp8_quality.json"))
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    names = a.variants.split(",")
    if names[0] != "fp32" or any(n not in VARIANTS for n in names):
        ap.error(f"--variants: start with fp32, then any of {list(VARIANTS)}")
    if any(st not in STRATEGIES for st in a.strategies.split(",")) or a.logit_prompts < 1:
        ap.error(f"--strategies: any of {list(STRATEGIES)}; --logit-prompts >= 1")
    specs = heldout_specs(a.prompts)
    captions = [caption_for(s) for s in specs]
    gidx = group_index([group_of(s) for s in specs])
    table = strategy_table(64)
    results: dict[str, Any] = {}
    ref_logits: list[torch.Tensor] = []
    for name in names:
        weight_dtype, scale = VARIANTS[name]
        pipe = load_dimoo(nano_model_path(), dtype=torch.float32, weight_dtype=weight_dtype,
                          fp8_scale=scale)
        logits = denoiser_calls(pipe, captions[:a.logit_prompts])
        row: dict[str, Any] = {"weight_dtype": weight_dtype or "float32", "fp8_scale": scale}
        if name == "fp32":
            ref_logits = logits
        else:
            row["logits"] = logit_errors(ref_logits, logits)
        for strat in a.strategies.split(",") if name in a.quality_variants.split(",") else ():
            start = time.perf_counter()
            run = quality_row(pipe, captions, specs, 0, table[strat], 35)
            sc = scores(np.array(run["passed"]), gidx)
            r = {"score": sc, "score_overall": sc["overall"], "nfe_mean": run["nfe_mean"],
                 "wall_s": run["wall_s"]}
            row[strat] = r
            if name != "fp32" and strat in results["fp32"]:
                row[strat]["delta_vs_fp32"] = r["score_overall"] - results["fp32"][strat]["score_overall"]
            print(f"{name:20s} {strat:12s} overall={r['score_overall']:.3f} nfe={r['nfe_mean']:.1f} "
                  f"({time.perf_counter() - start:.0f}s)", flush=True)
        if "logits" in row:
            print(f"{name:20s} logits rel err mean={row['logits']['rel_error_mean']:.4f} "
                  f"max={row['logits']['rel_error_max']:.4f} argmax agree="
                  f"{row['logits']['argmax_agreement_mean']:.4f}", flush=True)
        results[name] = row
    for row in results.values():
        if "logits" in row and all("delta_vs_fp32" in row.get(s, {}) for s in STRATEGIES):
            row["within_target"] = all(abs(row[s]["delta_vs_fp32"]) <= TARGET for s in STRATEGIES)
    meta = {"prompts": a.prompts, "logit_prompts": a.logit_prompts, "masked_fractions": MASKED,
            "threads": a.threads, "target_abs_delta": TARGET, "model": "dimoo_nano",
            "compute_dtype": "float32", "command": "python -m benchmarks.fp8_quality " +
            " ".join(argv if argv is not None else __import__("sys").argv[1:])}
    out = Path(a.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "variants": results}, indent=1) + "\n")
    print(f"wrote {out}")
    return results


if __name__ == "__main__":
    main()

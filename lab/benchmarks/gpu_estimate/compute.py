"""The compute floor per 1024 px image on one H100: FLOPs per image over the H100's dense bf16
peak, per strategy at its mean forwards on DiMOO-nano's test set.

Forwards are denoiser calls (NFE), as the pack counts them (ladr_core/official_cost.py): one
call runs both CFG branches packed into one pass, so its FLOPs (the 8B call measured by
measure.py) hold both; the official code runs the two branches as two passes per step (64 steps
x 2 branches), the same matrix products. The mean NFE of each strategy comes from the committed
test-set results (RESULT_FILES, 490 prompts each); where a label is in several files the first
file's is used.

Without an ML-Cache every call is a full call: FLOPs = mean NFE x full-call FLOPs. With one,
calls are refreshes (full) or cached calls of varying size, so the results' token forwards
(real tokens pushed through the transformer, per image) give the full-call equivalents E: per
prompt, token forwards over the prompt's tokens per full call (its baseline-64 token forwards /
64), averaged (without a cache E is exactly the mean NFE). On nano a cached call skips the
prompt tokens and the newline slots, which are a larger share of nano's rows (12 x 12 codes)
than of the 8B model's at 1024 px, so a cached call costs the 8B model relatively more: E is
the low end, and the high end counts the fewest refreshes the schedule allows (one per
``refresh_interval`` calls) and scales every other token by that share. The official sampler
with the official ML-Cache (no test-set result) follows its schedule: MLCacheConfig's refresh
steps at T = 64, each other call a cached call of the size measure.py measured.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from lab.benchmarks.common import RESULTS_DIR
from ladr_core.dimoo import MLCacheConfig

__all__ = ["H100_BF16_DENSE", "OFFICIAL_CACHE", "RESULT_FILES", "floors", "strategy_results"]

RESULT_FILES = ("samplers_test.json", "quality_test.json", "quality_mlcache_test.json")
#: NVIDIA H100 SXM5 (80GB HBM3, the card of the older runs): 989 TFLOPS dense bf16 tensor-core
#: peak (1979 with 2:4 sparsity, not used by the pack)
H100_BF16_DENSE = 989e12
OFFICIAL_CACHE = "baseline-64+mlcache-official"
NANO_CODES = 144  # DiMOO-nano's 48 px at VQ factor 4: 12 x 12 codes per row


def _interval(cache: str) -> int:
    found = re.search(r"refresh_interval=(\d+)", cache)
    return int(found.group(1)) if found else MLCacheConfig().refresh_interval


def _from_file(name: str) -> dict[str, dict[str, Any]]:
    doc = json.loads((RESULTS_DIR / name).read_text())
    strategies = doc["strategies"]
    full = [t / 64 for t in strategies["baseline-64"]["token_forwards"]]  # tokens per full call
    out = {}
    for label, s in strategies.items():
        per = [t / p for t, p in zip(s["token_forwards"], full, strict=True)]
        out[label] = {"file": f"lab/results/{name}", "strategy": s["strategy"],
                      "steps": s["steps"], "cache": s["cache"], "prompts": len(s["nfe"]),
                      "nfe_mean": s["nfe_mean"], "equivalents": sum(per) / len(per),
                      "_runs": list(zip(s["nfe"], full, s["token_forwards"], strict=True))}
    return out


def strategy_results() -> dict[str, dict[str, Any]]:
    """Every labelled strategy of the committed test-set results (module docstring)."""
    out: dict[str, dict[str, Any]] = {}
    for name in RESULT_FILES:
        for label, entry in _from_file(name).items():
            out.setdefault(label, entry)
    return out


def _high(entry: dict[str, Any], share: float) -> float:
    """Full-call equivalents of the 8B model at the fewest refreshes: per prompt, one refresh
    per ``refresh_interval`` calls, every other token forward a code slot of a cached call,
    which costs ``share`` = code slots / tokens of the 8B full call per slot of a row pair."""
    interval = _interval(entry["cache"])
    total = 0.0
    for nfe, per_call, forwards in entry["_runs"]:
        refresh = min(nfe, math.ceil(nfe / interval))
        cached_slots = max(0.0, forwards - refresh * per_call)
        total += min(nfe, refresh + cached_slots * share / (2 * NANO_CODES))
    return total / len(entry["_runs"])


def _official_cache(full: float, cached: float) -> dict[str, Any]:
    cfg = MLCacheConfig()
    refresh = sum(cfg.is_refresh(s, 64) for s in range(64))
    return {"file": None, "strategy": "baseline", "steps": 64, "cache": repr(cfg),
            "prompts": None, "nfe_mean": 64.0, "refresh_calls": refresh,
            "cached_calls": 64 - refresh, "equivalents": refresh + (64 - refresh) * cached / full}


def floors(labels: list[str], full: float, cached: float, share: float) -> dict[str, Any]:
    """FLOPs per image and the floor on one H100 per strategy label. full / cached: FLOPs of
    one full / cached call at 1024 px, B = 1; share: that full call's code slots over its real
    tokens (the high end with an ML-Cache, module docstring)."""
    known = strategy_results()
    out = {}
    for label in labels:
        entry = _official_cache(full, cached) if label == OFFICIAL_CACHE else dict(known[label])
        runs = entry.pop("_runs", None)
        entry["flops"] = entry["equivalents"] * full
        entry["floor_s"] = entry["flops"] / H100_BF16_DENSE
        if entry["cache"] and runs is not None:
            high = _high({**entry, "_runs": runs}, share)
            entry |= {"equivalents_high": high, "flops_high": high * full,
                      "floor_high_s": high * full / H100_BF16_DENSE}
        out[label] = entry
    return out

"""Section c: seconds per image on the 8B-shaped model (bf16, random weights), side by side in
one run at 1024 x 1024, and images per second of rolling batches at 512 x 512.

* baseline-64 and the official ML-Cache (baseline, 64 steps): measured whole runs (their
  number of calls does not depend on the weights);
* LADR ``nano`` and LADR ``nano`` + ML-Cache ``ladr``: replayed (replay.py) to stop after
  round(mean NFE) calls, the test-set mean NFE of each on DiMOO-nano read from
  lab/results/quality_test.json; seconds per image = projected_seconds(mean NFE, the
  replay's ms per call) (projection.py), labelled projected;
* rolling batches: 8 prompts, each replaying its own NFE (the first 8 per-image NFEs of LADR
  ``nano`` on the test set), with 1, 2, 4 and 8 in flight (``max_batch``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import torch

from lab.benchmarks.common import RESULTS_DIR, sync_device
from ladr_core import Baseline, MLCacheConfig
from ladr_core.calibrate import BUILTIN_PROMPTS

from .models import random_model, shaped_pipeline
from .projection import projected_seconds
from .replay import Replay
from .speed import prompt, release, shape

__all__ = ["IN_FLIGHT", "QUALITY", "nano_nfe", "section_c"]

QUALITY = RESULTS_DIR / "quality_test.json"
IN_FLIGHT = (1, 2, 4, 8)
LADR_T = 128  # LADR nano's T: where the ML-Cache places its refreshes


def nano_nfe() -> dict[str, Any]:
    """LADR nano's test-set NFE on DiMOO-nano: the means (alone, with ML-Cache ``ladr``) and
    the per-image list, with the file they come from."""
    doc = json.loads(QUALITY.read_text())["strategies"]
    return {"file": str(QUALITY.relative_to(RESULTS_DIR.parents[1])),
            "ladr-nano": doc["ladr-nano"]["nfe_mean"],
            "ladr-nano+mlcache": doc["ladr-nano+mlcache"]["nfe_mean"],
            "ladr-nano_token_forwards": doc["ladr-nano"]["token_forwards_mean"],
            "ladr-nano+mlcache_token_forwards": doc["ladr-nano+mlcache"]["token_forwards_mean"],
            "per_image": [int(v) for v in doc["ladr-nano"]["nfe"]],
            "prompts": len(doc["ladr-nano"]["nfe"])}


def _run(pipe: Any, px: int, strategy: Any, steps: int, cache: MLCacheConfig | None,
         prompts: Any = None, max_batch: int = 1) -> tuple[Any, float]:
    sync_device(pipe.device)
    start = time.perf_counter()
    res = pipe.generate(prompts or prompt(), width=px, height=px, steps=steps, seed=0,
                        strategy=strategy, cache=cache, decode=False, max_batch=max_batch)
    sync_device(pipe.device)
    return res, time.perf_counter() - start


def per_image_rows(pipe: Any, px: int, nfe: dict[str, Any], smoke: bool) -> list[dict[str, Any]]:
    """The four cases of the module docstring, one run each after a warm-up."""
    t64 = 8 if smoke else 64
    t_ladr = 16 if smoke else LADR_T
    cases: dict[str, tuple[Any, int, MLCacheConfig | None, float | None]] = {
        f"baseline-{t64}": (Baseline(), t64, None, None),
        "ml-cache-official": (Baseline(), t64, MLCacheConfig(), None),
        "ladr-nano": (None, t_ladr, None, nfe["ladr-nano"]),
        "ladr-nano+ml-cache-ladr": (None, t_ladr, MLCacheConfig.ladr(), nfe["ladr-nano+mlcache"]),
    }
    _run(pipe, px, Baseline(), 2, None)  # warm-up
    rows = []
    for name, (strategy, steps, cache, mean) in cases.items():
        if mean is not None:
            replayed = max(1, round(mean / 4)) if smoke else max(1, round(mean))
            strategy = Replay(finish=(replayed,), steps=steps)
        res, wall = _run(pipe, px, strategy, steps, cache)
        ms = wall / res.nfe * 1e3
        row = {"case": name, "steps": steps, "calls": res.nfe, "wall_s": wall, "ms_per_call": ms,
               "token_forwards": res.token_forwards, "ml_cache": repr(cache) if cache else None}
        if mean is None:
            row.update({"seconds_per_image": wall, "how": "measured"})
        else:
            row.update({"mean_nfe": mean, "replayed_nfe": res.nfe, "how": "projected",
                        "seconds_per_image": projected_seconds(mean, ms)})
        rows.append(row)
        print(f"  c: {name}: {row['seconds_per_image']:.3g} s ({row['how']})", flush=True)
    alone = next(r for r in rows if r["case"] == "ladr-nano")
    for r in rows:
        if r["case"] == "ladr-nano+ml-cache-ladr":
            r["token_forwards_vs_ladr"] = r["token_forwards"] / alone["token_forwards"]
            r["nano_token_forwards_vs_ladr"] = (nfe["ladr-nano+mlcache_token_forwards"]
                                                / nfe["ladr-nano_token_forwards"])
    return rows


def rolling_rows(pipe: Any, px: int, nfe: dict[str, Any], smoke: bool,
                 deadline: Callable[[], float], per_mode_s: float) -> list[dict[str, Any]]:
    """8 prompts replaying their own NFE, with M in flight."""
    finish = tuple(max(1, v // 4) if smoke else v for v in nfe["per_image"][:8])
    prompts = list(BUILTIN_PROMPTS[:8])
    strategy = Replay(finish=finish, steps=16 if smoke else LADR_T)
    _run(pipe, px, Replay(finish=(2,), steps=4), 4, None, prompts[:2], 2)  # warm-up
    rows = []
    for m in IN_FLIGHT:
        if deadline() < per_mode_s:
            rows.append({"in_flight": m, "status": "not measured: budget"})
            continue
        res, wall = _run(pipe, px, strategy, strategy.steps, None, prompts, m)
        rows.append({"in_flight": m, "images": len(prompts), "wall_s": wall,
                     "images_per_s": len(prompts) / wall, "calls": res.nfe,
                     "item_nfe": res.item_nfe, "token_forwards": res.token_forwards,
                     "status": "measured"})
    one = next((r for r in rows if r["in_flight"] == 1 and "wall_s" in r), None)
    for r in rows:
        if one and "wall_s" in r:
            r["speed_vs_1"] = one["wall_s"] / r["wall_s"]
    return rows


def section_c(device: torch.device, smoke: bool, deadline: Callable[[], float],
              rolling_mode_s: float) -> dict[str, Any]:
    config, ids, dtype, sizes = shape(smoke)
    nfe = nano_nfe()
    model = random_model(config, device, dtype)
    pipe = shaped_pipeline(model, config, ids, sizes[0])
    out: dict[str, Any] = {"source": {k: v for k, v in nfe.items() if k != "per_image"},
                           "rolling_finish_nfe": nfe["per_image"][:8],
                           "size": sizes[0], "rolling_size": sizes[1],
                           "dtype": str(dtype).removeprefix("torch.")}
    out["per_image"] = per_image_rows(pipe, sizes[0], nfe, smoke)
    out["rolling"] = rolling_rows(pipe, sizes[1], nfe, smoke, deadline, rolling_mode_s)
    del pipe, model
    release(device)
    return out

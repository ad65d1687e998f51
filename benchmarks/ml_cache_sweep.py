"""Sweep ML-Cache settings under LADR on DiMOO-nano: score and token-forwards per image.

Each variant is ``name=MLCacheConfig keyword arguments`` (``none`` = no cache); every held-out
prompt (``testbed.scenes.heldout_specs``) is generated at batch 1 with seed = its index and
scored by ``testbed.evaluator`` like benchmarks/quality.py. Used to pick ``MLCacheConfig.ladr()``
(docs/ML_CACHE.md). CPU heavy: run niced with one thread.

    python -m benchmarks.ml_cache_sweep --prompts 48 \\
        "none=none" "official=" "masked-w15=recompute_masked=True,warmup_ratio=0.15"
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ladr_core import MLCacheConfig, load_dimoo, nano_model_path
from ladr_core.policy import POLICY_PRESETS, PRESET_STEPS


def parse_variant(text: str) -> tuple[str, MLCacheConfig | None]:
    """``name=key=value,key=value`` -> (name, config); ``name=none`` -> no cache."""
    name, _, spec = text.partition("=")
    if spec.strip() == "none":
        return name, None
    kwargs: dict[str, Any] = {}
    for item in filter(None, spec.split(",")):
        key, _, value = item.partition("=")
        kwargs[key.strip()] = json.loads(value.strip().lower())
    return name, MLCacheConfig(**kwargs)


def run_variant(pipe: Any, captions: list[str], specs: list, cache: MLCacheConfig | None,
                policy: str) -> dict[str, Any]:
    from testbed.evaluator import score_images

    images, fwd, nfe = [], [], []
    start = time.perf_counter()
    for i, caption in enumerate(captions):
        res = pipe.generate(caption, steps=PRESET_STEPS.get(policy, 64), cfg=pipe.default_cfg,
                            seed=i, strategy="ladr", policy=POLICY_PRESETS[policy], cache=cache)
        images.append(res.images[0].float().numpy())
        fwd.append(res.token_forwards)
        nfe.append(res.nfe)
    scored = score_images(specs, images)
    return {"cache": repr(cache), "nfe_mean": float(np.mean(nfe)),
            "token_forwards_mean": float(np.mean(fwd)), "score_overall": scored["score_overall"],
            "wall_s": round(time.perf_counter() - start, 1)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from testbed.scenes import caption_for, heldout_specs

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variants", nargs="+", help="name=MLCacheConfig kwargs (or name=none)")
    ap.add_argument("--prompts", type=int, default=48)
    ap.add_argument("--policy", default="nano", choices=sorted(POLICY_PRESETS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    variants = [parse_variant(v) for v in args.variants]
    pipe = load_dimoo(nano_model_path(), dtype=torch.float32)
    specs = heldout_specs(args.prompts)
    captions = [caption_for(s) for s in specs]
    rows = {}
    for name, cache in variants:
        rows[name] = run_variant(pipe, captions, specs, cache, args.policy)
        print(json.dumps({"name": name, **rows[name]}), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"prompts": args.prompts, "policy": args.policy,
                                         "rows": rows}, indent=1) + "\n")
    return rows


if __name__ == "__main__":
    main()

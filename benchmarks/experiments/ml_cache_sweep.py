"""Sweep ML-Cache settings under LADR on DiMOO-nano: score and token-forwards per image.

Each variant is ``name=MLCacheConfig keyword arguments`` (``none`` = no cache). Every prompt
is generated at batch 1 (a user's run) with seed = its index and scored by ``testbed.evaluator``. The first variant
is the reference: each row gets its paired, stratified bootstrap 95 % interval against it
(testbed.paired_stats) and says whether its images are identical to it. Token-forwards are
exact per image; baseline-64 costs 64 x the prompt's real tokens per image.

Prompts: ``--set validation`` (the tuning set, `testbed.scenes.validation_specs`) or
``heldout`` (`heldout_specs`, the older benchmark set). Used to pick ``MLCacheConfig.ladr()``
(docs/reports/ML_CACHE.md). CPU heavy: run niced with one thread.

    python -m benchmarks.experiments.ml_cache_sweep --prompts 48 "none=none" "official=" \\
        "masked-w15=recompute_masked=True,warmup_ratio=0.15"
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ladr_core import LADR, PRESETS, MLCacheConfig, load_dimoo, nano_model_path
from testbed.paired_stats import group_index, paired_bootstrap


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


def run_variant(pipe: Any, captions: list[str], cache: MLCacheConfig | None,
                policy: str) -> dict[str, Any]:
    images, fwd, nfe = [], [], []
    start = time.perf_counter()
    for i, caption in enumerate(captions):
        res = pipe.generate(caption, cfg=pipe.default_cfg, seed=i,
                            strategy=LADR.preset(policy), cache=cache)
        images.append(res.images[0].float().numpy())
        fwd.append(res.token_forwards)
        nfe.append(res.nfe)
    return {"images": images, "token_forwards": fwd, "nfe": nfe,
            "wall_s": round(time.perf_counter() - start, 1)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from testbed import scenes
    from testbed.evaluator import score_images

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("variants", nargs="+", help="name=MLCacheConfig kwargs (or name=none)")
    ap.add_argument("--prompts", type=int, default=48)
    ap.add_argument("--set", choices=("validation", "heldout"), default="validation")
    ap.add_argument("--policy", default="nano", choices=sorted(PRESETS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    variants = [parse_variant(v) for v in args.variants]
    pipe = load_dimoo(nano_model_path(), dtype=torch.float32)
    specs = (scenes.validation_specs if args.set == "validation" else scenes.heldout_specs)(
        args.prompts)
    captions = [scenes.caption_for(s) for s in specs]
    gidx = group_index([scenes.group_of(s) for s in specs])
    base64 = float(np.mean([64 * pipe.make_denoiser(c).real_tokens for c in captions]))
    rows: dict[str, Any] = {}
    ref: dict[str, Any] | None = None
    for name, cache in variants:
        run = run_variant(pipe, captions, cache, args.policy)
        scored = score_images(specs, run["images"])
        passed = np.array(scored["passed"], dtype=bool)
        fwd = float(np.mean(run["token_forwards"]))
        row = {"cache": repr(cache), "nfe_mean": float(np.mean(run["nfe"])),
               "token_forwards_mean": fwd, "cut_vs_baseline_64": base64 / fwd,
               "score_overall": scored["score_overall"], "passed": passed.tolist(),
               "wall_s": run["wall_s"]}
        if ref is None:
            ref = {"name": name, "passed": passed, "images": run["images"]}
        else:
            row["vs_" + ref["name"]] = paired_bootstrap(passed, ref["passed"], gidx)["overall"]
            row["images_identical_to_" + ref["name"]] = all(
                np.array_equal(a, b) for a, b in zip(run["images"], ref["images"], strict=True))
        rows[name] = row
        print(json.dumps({"name": name, **{k: v for k, v in row.items() if k != "passed"}}),
              flush=True)
    if args.json:
        args.json.write_text(json.dumps({
            "prompts": args.prompts, "set": args.set, "batch": 1, "policy": args.policy,
            "baseline_64_token_forwards_per_image": base64, "threads": args.threads,
            "command": "python -m benchmarks.experiments.ml_cache_sweep " + " ".join(
                argv if argv is not None else sys.argv[1:]),
            "rows": rows}, indent=1) + "\n")
    return rows


if __name__ == "__main__":
    main()

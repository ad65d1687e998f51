"""Choose DiMOO-nano's LADR policy on validation prompts: ``python -m lab.nano.tune_policy``.

The paper's policy (tau 0.05 / 0.05 / none, alpha 0.1 / 0.3 / 1) is set for the 8B model's
1024-token natural images; on nano's 12 x 12 token scenes it breaks shapes (README, Quality).
This sweep runs a short list of candidates on the *validation* prompts
(`scenes.validation_specs`, never the benchmark's held-out prompts) with seed = prompt index,
scores the decoded images with the evaluator and picks the best overall score among the
candidates whose mean NFE is at most 64 / 3.5 (the speed target: 3.5x fewer passes than baseline-64).
`ladr_core.PRESETS["nano"]` holds the pick, and a test checks it against the
committed JSON. Per-image NFE is counted from the step records (a batch runs until its slowest
item is done; an item's NFE is the number of steps it still had masked tokens).

    python -m lab.nano.tune_policy --prompts 288 --json lab/results/nano_policy_sweep.json

``--adaptive`` runs `ADAPTIVE_CANDIDATES` instead: the few settings of the self-calibrating
rescue (`ladr_core.strategies.rescue.adaptive_rescue`) tried on validation prompts (the first three before
`PRESETS["adaptive"]` was fixed, the anchor_quantile 1.0 rows after its test-set
result), with the baseline at nearby T (`ADAPTIVE_REFERENCES`) for comparison. Its settings are meant to carry over to other models unchanged (no per-model
search); the quality benchmark (`lab/studies/quality.py --set test`) never shares an item with
these prompts.

    python -m lab.nano.tune_policy --adaptive --prompts 96 \
        --json lab/results/adaptive_validation_96.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from lab.nano import scenes
from lab.nano.evaluator import score_images
from ladr_core import LADR, AdaptiveRescue, Baseline, LADRPolicy

MAX_NFE = 64 / 3.5
_STRICT = {"alpha": (1.0, 1.0, 1.0), "selection": "gumbel", "rescue_token": "argmax"}
CANDIDATES: dict[str, tuple[str, int, LADRPolicy | None]] = {
    "baseline-16": ("baseline", 16, None),
    "baseline-20": ("baseline", 20, None),
    "paper": ("ladr", 64, LADRPolicy()),
    "paper+gumbel+argmax": ("ladr", 64, LADRPolicy(selection="gumbel", rescue_token="argmax")),
    "tau0.9+gumbel+argmax T128": ("ladr", 128, LADRPolicy(tau=(0.9,) * 3, **_STRICT)),
    "tau0.9+argmax+seen T128": ("ladr", 128, LADRPolicy(
        tau=(0.9,) * 3, alpha=(1.0, 1.0, 1.0), rescue_token="argmax", seen_only=True)),
    **{f"tau{tau}+gumbel+argmax+seen T{t}": ("ladr", t, LADRPolicy(
        tau=(tau,) * 3, seen_only=True, **_STRICT)) for tau, t in
       ((0.9, 64), (0.9, 96), (0.9, 128), (0.8, 128))},
}


_ADAPTIVE_BASE = {"selection": "gumbel", "rescue_token": "argmax", "seen_only": True}
ADAPTIVE_CANDIDATES: dict[str, tuple[str, int, LADRPolicy | None]] = {
    f"adaptive pace{pace:g} q{q:g} T64": ("ladr", 64, LADRPolicy(
        adaptive=AdaptiveRescue(pace=pace, anchor_quantile=q), **_ADAPTIVE_BASE))
    for pace, q in ((3.0, 0.5), (3.0, 0.0), (4.0, 0.5), (3.0, 1.0), (4.0, 1.0), (5.0, 1.0),
                    (6.0, 1.0))}
ADAPTIVE_REFERENCES: dict[str, tuple[str, int, LADRPolicy | None]] = {
    f"baseline-{t}": ("baseline", t, None) for t in (18, 20, 22)}
"""The official sampler at about the adaptive rows' NFE, on the same validation prompts."""


def evaluate(pipe, specs: list, strategy: str, steps: int, policy: LADRPolicy | None,
             batch: int = 32) -> dict:
    """Generate every spec's caption (seed = index) and score it; mean per-image NFE."""
    captions = [scenes.caption_for(s) for s in specs]
    images, nfe = [], []
    start = time.perf_counter()
    for s in range(0, len(specs), batch):
        live: list[torch.Tensor] = []  # per step: [B] True where the item still had masks
        res = pipe.generate(captions[s:s + batch], steps=steps,
                            strategy=Baseline() if policy is None else LADR(policy),
                            seed=s, callback=lambda r, live=live: live.append(
                                (r["masked"] | r["unmasked"]).any(dim=1)))
        nfe += torch.stack(live).sum(dim=0).tolist()
        images += [im.float().cpu().numpy() for im in res.images]
    scored = score_images(specs, images)
    return {"strategy": strategy, "steps": steps, "policy": repr(policy) if policy else None,
            "nfe_mean": round(float(np.mean(nfe)), 2),
            "score_overall": round(scored["score_overall"], 4),
            "score": {k: round(v, 4) for k, v in scored["score"].items()},
            "seconds": round(time.perf_counter() - start, 1)}


def sweep(prompts: int, names: list[str] | None = None,
          candidates: dict[str, tuple[str, int, LADRPolicy | None]] | None = None,
          batch: int = 32, max_nfe: float | None = MAX_NFE) -> dict:
    """Run the candidates on validation prompts; pick the best-scoring LADR row whose mean NFE
    is at most `max_nfe` (None: no NFE limit; the adaptive rescue's NFE follows from its pace)."""
    from ladr_core import load_dimoo, nano_model_path

    candidates = CANDIDATES if candidates is None else candidates
    pipe = load_dimoo(nano_model_path(), dtype=torch.float32)
    specs = scenes.validation_specs(prompts)
    rows = {}
    for name in names or list(candidates):
        strategy, steps, policy = candidates[name]
        rows[name] = evaluate(pipe, specs, strategy, steps, policy, batch=batch)
        print(name, json.dumps(rows[name]), flush=True)
    fast = {k: r for k, r in rows.items()
            if candidates[k][0] == "ladr" and (max_nfe is None or r["nfe_mean"] <= max_nfe)}
    pick = max(fast, key=lambda k: rows[k]["score_overall"]) if fast else None
    return {"prompts": prompts, "max_nfe": None if max_nfe is None else round(max_nfe, 2),
            "rows": rows, "pick": pick}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompts", type=int, default=288)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", type=Path, default=Path("lab/results/nano_policy_sweep.json"))
    ap.add_argument("--adaptive", action="store_true", help="run ADAPTIVE_CANDIDATES (batch 48)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    result = (sweep(args.prompts, candidates={**ADAPTIVE_CANDIDATES, **ADAPTIVE_REFERENCES},
                    batch=48, max_nfe=None)
              if args.adaptive else sweep(args.prompts))
    args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(f"pick: {result['pick']} -> {args.json}")


if __name__ == "__main__":
    main()

"""GenEval-style quality vs cost of every sampling strategy on the shipped DiMOO-nano model.

    python benchmarks/quality.py --prompts 48 --strategies all --steps 64 \
        --json benchmarks/results/quality.json

For each strategy every held-out prompt (`testbed.scenes.heldout_specs`: fixed seed, colour
attribution combinations never trained on) is generated once at batch 1 with seed = its index,
decoded, and scored by `testbed.evaluator` (colour segmentation + connected components + shape
templates). Reported per strategy: ``nfe_mean`` (denoiser calls per image), ``token_forwards_mean``
(transformer token-forwards per image, CFG branches included; ML-Cache lowers it), ``wall_s``
(sampling + decode, all prompts), ``score`` (category -> accuracy) and ``score_overall`` (mean of
categories, GenEval's overall). ``baseline@ladr`` / ``baseline@ladr-nano`` rerun the baseline
with T = that LADR run's mean NFE rounded (same budget). ``ladr-nano`` is the policy preset
picked for nano on validation prompts (``testbed.tune_policy``) at its tuned T. Writes the JSON,
a markdown table (.md) and a Pareto plot (.png) of overall score vs NFE next to it. Wall times come from a shared CPU: compare within one run only.
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

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ladr_core import LADRPolicy, MLCacheConfig, ProphetPolicy, load_dimoo, nano_model_path  # noqa: E402
from ladr_core.policy import POLICY_PRESETS, PRESET_STEPS  # noqa: E402
from testbed.evaluator import score_images  # noqa: E402
from testbed.scenes import CATEGORIES, caption_for, heldout_specs  # noqa: E402


def strategy_table(steps: int) -> dict[str, dict[str, Any]]:
    """name -> generate() arguments. Baseline sweep at T in {8, 16, 32, 64}; the rest at `steps`."""
    table: dict[str, dict[str, Any]] = {
        f"baseline-{t}": {"strategy": "baseline", "steps": t} for t in (8, 16, 32, 64)}
    table.update({
        "ladr": {"strategy": "ladr", "steps": steps, "policy": POLICY_PRESETS["paper"]},
        "ladr-delayed": {"strategy": "ladr", "steps": steps, "policy": POLICY_PRESETS["delayed"]},
        "prophet": {"strategy": "prophet", "steps": steps, "policy": ProphetPolicy()},
        "mlcache": {"strategy": "baseline", "steps": steps, "cache": MLCacheConfig()},
        "ladr+mlcache": {"strategy": "ladr", "steps": steps, "policy": LADRPolicy(),
                         "cache": MLCacheConfig()},
    })
    table["ladr-nano"] = {"strategy": "ladr", "steps": PRESET_STEPS["nano"],
                          "policy": POLICY_PRESETS["nano"]}
    table["ladr-nano+mlcache"] = {**table["ladr-nano"], "cache": MLCacheConfig.ladr()}
    table["ladr-nano+mlcache-official"] = {**table["ladr-nano"], "cache": MLCacheConfig()}
    table["ladr+mlcache-preset"] = {**table["ladr"], "cache": MLCacheConfig.ladr()}
    for name in ("ablation_non_neighbors", "ablation_random_candidates", "ablation_confidence",
                 "ablation_random_metric"):
        table["ladr-" + name.removeprefix("ablation_").replace("_", "-")] = {
            "strategy": "ladr", "steps": steps, "policy": POLICY_PRESETS[name]}
    return table


def run_strategy(pipe, captions: list[str], specs: list, args: dict[str, Any], cfg: float,
                 temperature: float) -> dict[str, Any]:
    """Generate every caption (batch 1, seed = index) and score the decoded images."""
    nfe, fwd, images = [], [], []
    start = time.perf_counter()
    for i, caption in enumerate(captions):
        res = pipe.generate(caption, steps=args["steps"], cfg=cfg, temperature=temperature, seed=i,
                            strategy=args["strategy"], policy=args.get("policy"),
                            cache=args.get("cache"))
        nfe.append(res.nfe)
        fwd.append(res.token_forwards)
        images.append(res.images[0].float().cpu().numpy())
    wall = time.perf_counter() - start
    scored = score_images(specs, images)
    return {"strategy": args["strategy"], "steps": args["steps"],
            "policy": repr(args.get("policy")) if args.get("policy") else None,
            "cache": repr(args.get("cache")) if args.get("cache") else None,
            "nfe_mean": float(np.mean(nfe)), "token_forwards_mean": float(np.mean(fwd)),
            "wall_s": round(wall, 2), "score": scored["score"],
            "score_overall": scored["score_overall"], "passed": scored["passed"],
            "_images": images}


def markdown(results: dict[str, dict], meta: dict) -> str:
    base = results.get("baseline-64")
    head = ("| strategy | T | NFE | NFE cut vs baseline-64 | token-fwd | wall s | "
            + " | ".join(c.replace("_", " ") for c in CATEGORIES) + " | overall |")
    lines = [head, "|" + "---|" * (7 + len(CATEGORIES))]
    for name, r in results.items():
        cut = f"{base['nfe_mean'] / r['nfe_mean']:.2f}x" if base else "-"
        cats = " | ".join(f"{r['score'].get(c, float('nan')):.2f}" for c in CATEGORIES)
        lines.append(f"| {name} | {r['steps']} | {r['nfe_mean']:.1f} | {cut} | "
                     f"{r['token_forwards_mean']:.0f} | {r['wall_s']:.1f} | {cats} | "
                     f"**{r['score_overall']:.3f}** |")
    lines.append("")
    lines.append(f"{meta['prompts']} held-out prompts, cfg {meta['cfg']}, temperature "
                 f"{meta['temperature']}, seed = prompt index, {meta['threads']} thread(s).")
    return "\n".join(lines) + "\n"


def plot(results: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
    sweep = [results[k] for k in results if k.startswith("baseline-")]
    ax.plot([r["nfe_mean"] for r in sweep], [r["score_overall"] for r in sweep], "o-",
            color="grey", label="baseline, T = 8/16/32/64")
    for name, r in results.items():
        if name.startswith("baseline-"):
            continue
        marker = "*" if name in ("ladr", "ladr-delayed", "ladr+mlcache", "ladr-nano",
                                 "ladr-nano+mlcache") else "s"
        ax.scatter(r["nfe_mean"], r["score_overall"], marker=marker, s=90 if marker == "*" else 40,
                   label=name, zorder=3)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("NFE per image (denoiser calls, log scale)")
    ax.set_ylabel("GenEval-style overall score")
    ax.set_title("DiMOO-nano: quality vs forward passes (held-out prompts)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def save_samples(results: dict[str, dict], captions: list[str], path: Path, n: int = 6) -> None:
    """PNG: first `n` prompts (columns) for baseline-64 and LADR (rows)."""
    from PIL import Image

    rows = [k for k in ("baseline-64", "ladr", "ladr-nano", "baseline@ladr-nano") if k in results]
    if not rows:
        return
    tiles = [np.concatenate(results[k]["_images"][:n], axis=1) for k in rows]
    arr = (np.clip(np.concatenate(tiles, axis=0), 0, 1) * 255).round().astype(np.uint8)
    Image.fromarray(arr).resize((arr.shape[1] * 3, arr.shape[0] * 3), Image.NEAREST).save(path)
    (path.with_suffix(".txt")).write_text("rows: " + ", ".join(rows) + "\ncolumns: "
                                          + " | ".join(captions[:n]) + "\n")


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--prompts", type=int, default=48, help="held-out prompts (cycles categories)")
    ap.add_argument("--strategies", default="all",
                    help="comma list of names (see --list) or 'all'; baseline@X needs X first")
    ap.add_argument("--steps", type=int, default=64, help="T for all non-sweep strategies")
    ap.add_argument("--cfg", type=float, default=None,
                    help="CFG scale (default: the model's config default_cfg, else the official 4.0)")
    ap.add_argument("--temperature", type=float, default=1.0, help="official default 1.0")
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads (1: fastest here)")
    ap.add_argument("--model", default=None, help="checkpoint folder (default: shipped nano)")
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "quality.json"))
    ap.add_argument("--list", action="store_true", help="print strategy names and exit")
    a = ap.parse_args(argv)
    table = strategy_table(a.steps)
    budget_runs = [f"baseline@{k}" for k in ("ladr", "ladr-nano")]
    if a.list:
        print("\n".join([*table, *budget_runs]))
        return {}
    names = [*table, *budget_runs] if a.strategies == "all" else a.strategies.split(",")
    unknown = [n for n in names if n not in table and n not in budget_runs]
    if unknown or a.prompts <= 0:
        ap.error(f"--strategies: unknown {unknown} (see --list)" if unknown else "--prompts must be > 0")
    torch.set_num_threads(a.threads)
    pipe = load_dimoo(a.model or nano_model_path(), dtype=torch.float32)
    a.cfg = pipe.default_cfg if a.cfg is None else a.cfg
    specs = heldout_specs(a.prompts)
    captions = [caption_for(s) for s in specs]
    results: dict[str, dict] = {}
    for name in names:
        if name in budget_runs:
            target = name.removeprefix("baseline@")
            if target not in results:
                ap.error(f"--strategies: {name} needs {target} before it")
            args = {"strategy": "baseline", "steps": max(1, round(results[target]["nfe_mean"]))}
        else:
            args = table[name]
        results[name] = run_strategy(pipe, captions, specs, args, a.cfg, a.temperature)
        r = results[name]
        print(f"{name:28s} T={r['steps']:3d} nfe={r['nfe_mean']:6.1f} overall={r['score_overall']:.3f} "
              f"wall={r['wall_s']:.1f}s", flush=True)
    out = Path(a.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"prompts": a.prompts, "cfg": a.cfg, "temperature": a.temperature, "threads": a.threads,
            "steps": a.steps, "model": str(a.model or "dimoo_nano"), "captions": captions}
    save_samples(results, captions, out.with_name(out.stem + "_samples.png"))
    clean = {k: {kk: vv for kk, vv in v.items() if kk != "_images"} for k, v in results.items()}
    out.write_text(json.dumps({"meta": meta, "strategies": clean}, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(results, meta))
    plot(results, out.with_suffix(".png"))
    print(f"wrote {out}, {out.with_suffix('.md')}, {out.with_suffix('.png')}")
    return clean


if __name__ == "__main__":
    main()

"""GenEval-style quality vs cost of the sampling strategies on the shipped DiMOO-nano model.

    nice -n 10 python -m lab.studies.quality --set test --prompts 490 \
        --strategies ladr-adaptive,baseline@ladr-adaptive,baseline-64 \
        --json lab/results/quality_test.json

Prompt sets (``lab.nano.scenes``): ``test`` = ``quality_test_specs`` (spec seed 9, item i
generated with seed 100000 + i), cycling through seven report groups: the six GenEval
categories with colour attribution split into training-distribution pairs (``color_attr_seen``)
and held-out pairs no training scene contains (``color_attr_unseen``). ``validation`` =
``validation_specs`` (spec seed 8, seed = index), the only set any policy or preset was tuned on
(``lab.nano.tune_policy``); the output states which set it is and how far the two overlap.

Every prompt is generated once per strategy in batches (``--batch``; item i of a batch equals a
single run with its own seed; strategies with an ML-Cache run one prompt at a time, because the
cache's refresh schedule is shared by a batch), decoded and scored by ``lab.nano.evaluator``
(colour segmentation, connected components, shape templates; misshapen blobs fail). Per
strategy: ``nfe_mean`` (per image: the steps in which it still had masked tokens),
``token_forwards_mean`` (per image at batch 1: NFE x the prompt's real tokens without a cache,
the measured count with one; the batch's own count would overstate LADR, whose finished items
ride along), ``wall_s``, ``score`` (group -> pass rate), ``score_overall`` (mean of the six
categories, colour attribution on seen pairs; unseen pairs reported apart) and ``passed``.
``compare`` holds paired, stratified bootstrap 95 % intervals (``lab.studies.paired_stats``) for
every strategy against baseline-64, LADR-adaptive against the baseline at its NFE, and each
ablation against its full policy. ``baseline@X`` reruns the baseline with T = X's mean NFE
rounded. Per chunk of prompts, each image's final tokens, verdict, NFE and token-forwards (and
the first prompts' images, for the sample sheet) are kept in ``--runs``, one compressed npz per
prompt set (``lab.studies.run_store``); ``--reuse yes`` takes stored chunks instead of generating
them again (same arguments only), with the verdicts stored when they were generated; ``--reuse
only`` uses the complete stored chunks of a cut-off run without generating. Writes
the JSON, a markdown table (.md) and a Pareto plot (.png). Wall times come from a shared CPU.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lab.benchmarks.common import env_info, json_text, save_figure, save_png, strategy_from
from lab.nano import scenes
from lab.nano.evaluator import score_images
from lab.nano.scenes import prompt_set, separation
from lab.studies import rivals
from lab.studies.paired_stats import group_index, paired_bootstrap, ratio_ci, scores
from lab.studies.run_store import load_chunk, save_chunk, set_file
from ladr_core import (
    PRESETS,
    AdaptiveRescue,
    LADRPolicy,
    MLCacheConfig,
    ProphetPolicy,
    load_dimoo,
    nano_model_path,
)

ROOT = Path(__file__).resolve().parents[2]

BUDGET_TARGETS = ("ladr", "ladr-nano", "ladr-adaptive", "ladr-adaptive-strict")
ABLATIONS = {"non-neighbors": {"candidates": "non_neighbors"},
             "random-candidates": {"candidates": "random"},
             "confidence": {"metric": "confidence"}, "random-metric": {"metric": "random"}}


POLICY = {name: p.policy for name, p in PRESETS.items()}
STEPS = {"nano": 128, "adaptive": 64}
"""The steps each preset was tuned at, which the committed results ran it at (a preset brings no
step count of its own since the cost contract: the run's steps are the price)."""


def strategy_table(steps: int) -> dict[str, dict[str, Any]]:
    """name -> generate() arguments. Baseline sweep at T in {8, 16, 32, 64}; presets at their T."""
    table: dict[str, dict[str, Any]] = {
        f"baseline-{t}": {"strategy": "baseline", "steps": t} for t in (8, 16, 32, 64)}
    table.update({
        "ladr": {"strategy": "ladr", "steps": steps, "policy": POLICY["paper"]},
        "ladr-delayed": {"strategy": "ladr", "steps": steps, "policy": POLICY["delayed"]},
        "prophet": {"strategy": "prophet", "steps": steps, "policy": ProphetPolicy()},
        "mlcache": {"strategy": "baseline", "steps": steps, "cache": MLCacheConfig()},
        "ladr+mlcache": {"strategy": "ladr", "steps": steps, "policy": LADRPolicy(),
                         "cache": MLCacheConfig()},
    })
    for preset in ("nano", "adaptive"):
        table[f"ladr-{preset}"] = {"strategy": "ladr", "steps": STEPS[preset],
                                   "policy": POLICY[preset]}
    for name, change in ABLATIONS.items():  # the paper's Sec. 4.3 ablations, on both policies
        table["ladr-" + name] = {"strategy": "ladr", "steps": steps,
                                 "policy": POLICY["ablation_" + name.replace("-", "_")]}
        adaptive = POLICY["adaptive"]
        table["ladr-adaptive-" + name] = {
            "strategy": "ladr", "steps": STEPS["adaptive"],
            "policy": LADRPolicy(**{**{f: getattr(adaptive, f) for f in (
                "selection", "rescue_token", "seen_only", "adaptive")}, **change})}
    # The validation pick of lab.nano.tune_policy --adaptive (lab/results/
    # adaptive_validation_96.json): anchor at the most certain standard pick, pace 4. Not a
    # preset; measured on the test set as one pre-chosen candidate.
    table["ladr-adaptive-strict"] = {
        "strategy": "ladr", "steps": STEPS["adaptive"],
        "policy": replace(adaptive, adaptive=AdaptiveRescue(pace=4.0, anchor_quantile=1.0))}
    table["ladr-nano+mlcache"] = {**table["ladr-nano"], "cache": MLCacheConfig.ladr()}
    table["ladr-nano+mlcache-official"] = {**table["ladr-nano"], "cache": MLCacheConfig()}
    table["ladr+mlcache-preset"] = {**table["ladr"], "cache": MLCacheConfig.ladr()}
    # The training-free rivals at about 12 and 18 forwards per image, `<rival>-n<budget>`:
    # the validation picks of lab/studies/samplers.py (lab/studies/rivals.PICKS).
    table.update(rivals.table())
    return table


def resolve(name: str, table: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
    """Arguments of a strategy name: a table entry, or `baseline-<T>` for any T >= 1."""
    if name in table:
        return table[name]
    t = name.removeprefix("baseline-")
    if name.startswith("baseline-") and t.isdigit() and int(t) >= 1:
        return {"strategy": "baseline", "steps": int(t)}
    return None


def generate(pipe, captions: list[str], seed0: int, args: dict[str, Any], cfg: float,
             temperature: float, batch: int) -> dict[str, Any]:
    """Images uint8 [n, S, S, 3], final tokens, per-item NFE and token-forwards, wall seconds."""
    images, tokens, nfe, fwd = [], [], [], []
    start = time.perf_counter()
    for s in range(0, len(captions), batch):
        res = pipe.generate(captions[s:s + batch], steps=args["steps"], cfg=cfg,
                            temperature=temperature, seed=seed0 + s,
                            strategy=strategy_from(args["strategy"], args.get("policy")),
                            cache=args.get("cache"))
        b = len(res.images)
        nfe += res.item_nfe  # the steps in which each image still had masked tokens
        fwd += [res.token_forwards / b] * b
        images.append((res.images.float().clamp(0, 1) * 255).round().to(torch.uint8).numpy())
        tokens.append(res.tokens.cpu().numpy().astype(np.uint16))
    return {"images": np.concatenate(images), "tokens": np.concatenate(tokens),
            "nfe": np.array(nfe, dtype=np.int64),
            "token_forwards": np.array(fwd), "wall_s": time.perf_counter() - start}


def _key(args: dict[str, Any], lo: int, hi: int, cfg: float, temperature: float) -> str:
    return repr((args["strategy"], args["steps"], repr(args.get("policy")),
                 repr(args.get("cache")), lo, hi, cfg, temperature))


def run_chunk(pipe, store: tuple[Path, str], reuse: str, specs: list, lo: int, seed0: int,
              args: dict[str, Any], cfg: float, temperature: float) -> dict[str, Any] | None:
    """Prompts lo.. of one chunk: generate, score and store in `store` (the set's file and the
    strategy's name), or load it (reuse "yes" / "only": stored chunks with equal arguments;
    "only" returns None instead of generating)."""
    path, name = store
    captions = [scenes.caption_for(s) for s in specs]
    key = _key(args, lo, lo + len(captions), cfg, temperature)
    # An ML-Cache decides refresh or cached pass once per call for the whole batch, from the
    # batch's mean progress: a cached strategy runs one prompt at a time, as a user runs it.
    batch = 1 if args.get("cache") is not None else len(captions)
    key += "|batch=1" if batch == 1 else ""
    run = load_chunk(path, name, lo, key) if reuse != "no" else None
    if run is not None:
        return run | {"reused": True}
    if reuse == "only":
        return None
    run = generate(pipe, captions, seed0 + lo, args, cfg, temperature, batch)
    run["passed"] = np.array(score_images(specs, list(run["images"]))["passed"], dtype=bool)
    save_chunk(path, name, lo, key, run)
    return run


def _merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One strategy's chunks as one run (a stored chunk keeps only the sample sheet's images)."""
    return {k: np.concatenate([p[k] for p in parts if k in p])
            for k in ("images", "passed", "nfe", "token_forwards")} | {
                "wall_s": sum(p["wall_s"] for p in parts)}


def summarise(run: dict[str, Any], args: dict[str, Any], gidx: np.ndarray,
              real_tokens: np.ndarray) -> dict[str, Any]:
    """Scores and costs of one strategy. ``real_tokens`` [n]: each prompt's tokens per full
    call (cond + uncond rows). Token-forwards per image at batch 1: without a cache every call
    is a full pass, so NFE x real tokens exactly; with one, the count measured at batch 1."""
    passed = run["passed"]
    sc = scores(passed, gidx)
    per_image = (run["token_forwards"] if args.get("cache") is not None
                 else run["nfe"] * real_tokens)
    chosen = args["strategy"]  # a name, or a strategy object (its repr is the setting)
    return {"strategy": chosen if isinstance(chosen, str) else chosen.name,
            "steps": args["steps"],
            "policy": repr(args.get("policy")) if args.get("policy") else None,
            **({} if isinstance(chosen, str) else {"setting": repr(chosen)}),
            "cache": repr(args.get("cache")) if args.get("cache") else None,
            "nfe_mean": float(run["nfe"].mean()),
            "token_forwards_mean": float(np.mean(per_image)),
            "token_forwards": np.asarray(per_image, dtype=np.float64).tolist(),
            "wall_s": round(float(run["wall_s"]), 2),
            "score": {k: v for k, v in sc.items() if k != "overall"},
            "score_overall": sc["overall"], "passed": passed.tolist(),
            "nfe": run["nfe"].tolist(), "_images": run["images"]}


def comparisons(results: dict[str, dict], gidx: np.ndarray) -> list[dict[str, Any]]:
    """(a, b) pairs worth stating, each with paired bootstrap CIs per group and overall."""
    pairs = [(k, "baseline-64") for k in results if k != "baseline-64"]
    pairs += [(t, f"baseline@{t}") for t in BUDGET_TARGETS]
    # every other strategy against the baseline at its own NFE (rounded), when that was run
    pairs += [(k, f"baseline-{round(r['nfe_mean'])}") for k, r in results.items()
              if not k.startswith("baseline") and f"baseline@{k}" not in results]
    pairs += rivals.ablation_pairs(results)  # LADR's frontier against no locality
    pairs += [(f"ladr-adaptive-{a}", "ladr-adaptive") for a in ABLATIONS]
    pairs += [(f"ladr-{a}", "ladr") for a in ABLATIONS]
    pairs += [(k, k.split("+")[0]) for k in results if "+mlcache" in k]  # the cache's own cost
    # a cache changes the work per call, not the calls: its baseline at equal forwards is the
    # one of the strategy it caches
    pairs += [(k, f"baseline@{k.split('+')[0]}") for k in results if "+mlcache" in k]
    out = []
    for a, b in pairs:
        if a in results and b in results:
            ra, rb = results[a], results[b]
            out.append({"a": a, "b": b, "diff": paired_bootstrap(
                np.array(ra["passed"]), np.array(rb["passed"]), gidx),
                "nfe_cut": ratio_ci(np.array(rb["nfe"]), np.array(ra["nfe"]))})
    return out


def _ci(d: dict[str, float]) -> str:
    return f"{d['diff']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]"


def markdown(results: dict[str, dict], compare: list[dict], meta: dict) -> str:
    groups = [g for g in scenes.TEST_GROUPS if any(g in r["score"] for r in results.values())]
    base = results.get("baseline-64")
    lines = ["| strategy | T | NFE | NFE cut vs baseline-64 | token-fwd / image | token-fwd cut "
             "| wall s | " + " | ".join(g.replace("_", " ") for g in groups) + " | overall |",
             "|" + "---|" * (8 + len(groups))]
    for name, r in results.items():
        cut = f"{base['nfe_mean'] / r['nfe_mean']:.2f}x" if base else "-"
        fcut = f"{base['token_forwards_mean'] / r['token_forwards_mean']:.2f}x" if base else "-"
        cats = " | ".join(f"{r['score'].get(g, float('nan')):.2f}" for g in groups)
        lines.append(f"| {name} | {r['steps']} | {r['nfe_mean']:.1f} | {cut} | "
                     f"{r['token_forwards_mean']:.0f} | {fcut} | {r['wall_s']:.1f} | {cats} | "
                     f"**{r['score_overall']:.3f}** |")
    lines += ["", "Paired differences a - b, 95 % bootstrap CI (stratified by group, 4000 "
              "resamples):", "", "| a | b | NFE ratio b/a | overall | color attr seen | "
              "color attr unseen |", "|---|---|---|---|---|---|"]
    for c in compare:
        d, r = c["diff"], c["nfe_cut"]
        cells = [_ci(d[g]) if g in d else "-" for g in
                 ("overall", "color_attr_seen", "color_attr_unseen")]
        lines.append(f"| {c['a']} | {c['b']} | {r['ratio']:.2f} [{r['lo']:.2f}, {r['hi']:.2f}] "
                     f"| {' | '.join(cells)} |")
    sep = meta["separation"]
    lines += ["", f"Prompt set: **{meta['set']}**, {meta['prompts']} prompts (cycling "
              f"{', '.join(scenes.TEST_GROUPS)}), cfg {meta['cfg']}, temperature "
              f"{meta['temperature']}, item i seed {meta['seed0']} + i, batch {meta['batch']} "
              "(strategies with an ML-Cache: 1), token-forwards per image at batch 1, "
              f"{meta['threads']} thread(s). Overall = mean of the six GenEval categories "
              "(colour attribution on training-distribution pairs); unseen pairs apart.",
              f"Tuning used only {sep['tuning_set']}: {sep['shared_caption_seed_items']} "
              f"(caption, seed) items shared with this set; {sep['captions_also_in_tuning_set']}"
              " of its captions also occur there (few captions exist per category, e.g. three "
              "single-object ones)."]
    return "\n".join(lines) + "\n"


def plot(results: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), dpi=110, sharey=True)
    sweep = sorted((r for k, r in results.items() if k.startswith("baseline")),
                   key=lambda r: r["nfe_mean"])
    for ax, key, label in ((axes[0], "nfe_mean", "NFE per image (denoiser calls)"),
                           (axes[1], "token_forwards_mean",
                            "token-forwards per image at batch 1 (ML-Cache counts here)")):
        ax.plot([r[key] for r in sweep], [r["score_overall"] for r in sweep], "o-",
                color="grey", label="baseline (T sweep and budget runs)")
        for i, (name, r) in enumerate(results.items()):
            if not name.startswith("baseline"):
                star = name in ("ladr", "ladr-nano", "ladr-adaptive", "ladr+mlcache",
                                "ladr-nano+mlcache")
                ax.scatter(r[key], r["score_overall"], marker="*" if star else "s",
                           s=90 if star else 40, label=name, zorder=3,
                           color=f"C{(0, 1, 2, 3, 4, 5, 6, 8, 9)[i % 9]}")  # C7 is the grey line
        ax.set_xscale("log", base=2)
        ax.set_xlabel(label + ", log scale")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("GenEval-style overall score")
    axes[1].legend(fontsize=7, loc="lower right")
    fig.suptitle("DiMOO-nano: quality vs cost")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def save_samples(results: dict[str, dict], captions: list[str], path: Path, n: int = 7) -> None:
    """PNG: the first `n` prompts (one per group; columns) for the headline strategies (rows):
    the README's table, in its order, plus the baseline cut to LADR nano's NFE."""
    from PIL import Image

    rows = [k for k in ("baseline-64", "baseline@ladr-nano", "ladr-nano", "ladr-nano+mlcache",
                        "ladr-adaptive", "ladr") if k in results]
    if len(rows) < 2:  # a run of other strategies: every one of them, in the order run
        rows = list(results)[:24]
    if not rows:
        return
    tiles = [np.concatenate(list(results[k]["_images"][:n]), axis=1) for k in rows]
    arr = np.concatenate(tiles, axis=0)
    save_png(Image.fromarray(arr).resize((arr.shape[1] * 3, arr.shape[0] * 3), Image.NEAREST), path)
    path.with_suffix(".txt").write_text("rows: " + ", ".join(rows) + "\ncolumns: "
                                        + " | ".join(captions[:n]) + "\n")


def budget_args(name: str, parts: dict[str, list[dict[str, Any]]],
                ap: argparse.ArgumentParser) -> dict[str, Any]:
    """`baseline@X`: the baseline at T = X's mean NFE on the first chunk, rounded (X must come
    before it in --strategies; for a fixed T name the strategy `baseline-<T>`)."""
    target = name.removeprefix("baseline@")
    if not parts.get(target):
        ap.error(f"--strategies: {name} needs {target} before it")
    return {"strategy": "baseline", "steps": max(1, round(float(parts[target][0]["nfe"].mean())))}


def parse(argv: list[str] | None) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--set", choices=("test", "validation"), default="test",
                    help="prompt set: test (never tuned on) or validation (tuning)")
    ap.add_argument("--prompts", type=int, default=490, help="prompts (cycle the report groups)")
    ap.add_argument("--strategies", default="all",
                    help="comma list of names (see --list) or 'all'; baseline@X needs X first")
    ap.add_argument("--steps", type=int, default=64, help="T for the non-preset strategies")
    ap.add_argument("--cfg", type=float, default=None,
                    help="CFG scale (default: the model's config default_cfg, else the official 4.0)")
    ap.add_argument("--temperature", type=float, default=1.0, help="official default 1.0")
    ap.add_argument("--batch", type=int, default=35,
                    help="prompts per generate() call; runs go chunk by chunk, every strategy "
                    "on a chunk before the next chunk, each chunk stored in --runs")
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads")
    ap.add_argument("--model", default=None, help="checkpoint folder (default: shipped nano)")
    ap.add_argument("--json", default=str(ROOT / "lab" / "results" / "quality.json"))
    ap.add_argument("--runs", default=None,
                    help="folder of the stored runs, <set>.npz in it (default: <json stem>_runs/)")
    ap.add_argument("--reuse", choices=("no", "yes", "only"), default="no",
                    help="yes: load stored chunks made with equal arguments instead of "
                    "generating them; only: use the complete stored chunks, generate nothing")
    ap.add_argument("--list", action="store_true", help="print strategy names and exit")
    return ap, ap.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    ap, a = parse(argv)
    table = strategy_table(a.steps)
    budget = [f"baseline@{k}" for k in BUDGET_TARGETS]
    if a.list:
        print("\n".join([*table, *budget]))
        return {}
    names = [*table, *budget] if a.strategies == "all" else a.strategies.split(",")
    unknown = [n for n in names if resolve(n, table) is None and n not in budget]
    if unknown or a.prompts <= 0 or a.batch <= 0:
        ap.error(f"--strategies: unknown {unknown} (see --list)" if unknown
                 else "--prompts and --batch must be > 0")
    torch.set_num_threads(a.threads)
    pipe = load_dimoo(a.model or nano_model_path(), dtype=torch.float32)
    a.cfg = pipe.default_cfg if a.cfg is None else a.cfg
    specs, seed0 = prompt_set(a.set, a.prompts)
    captions = [scenes.caption_for(s) for s in specs]
    gidx = group_index([scenes.group_of(s) for s in specs])
    out = Path(a.json)
    runs = Path(a.runs) if a.runs else out.with_name(out.stem + "_runs")
    parts: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    resolved: dict[str, dict[str, Any]] = {}
    done = 0
    for lo in range(0, a.prompts, a.batch):  # chunk-major: every strategy sees chunk k before
        hi = min(lo + a.batch, a.prompts)     # chunk k + 1, so a cut-off run stays paired
        chunk = {}
        for name in names:
            if name not in resolved:
                resolved[name] = resolve(name, table) or budget_args(name, parts, ap)
            run = run_chunk(pipe, (set_file(runs, a.set), name), a.reuse, specs[lo:hi], lo,
                            seed0, resolved[name], a.cfg, a.temperature)
            if run is None:
                break
            chunk[name] = run
            parts[name].append(run)
            print(f"[{hi}/{a.prompts}] {name:28s} T={resolved[name]['steps']:3d} "
                  f"nfe={run['nfe'].mean():6.2f} wall={run['wall_s']:.1f}s"
                  f"{' (reused)' if run.get('reused') else ''}", flush=True)
        if len(chunk) < len(names):  # --reuse only: stop at the first incomplete chunk
            for name in chunk:
                parts[name].pop()
            break
        done = hi
    if done == 0:
        ap.error("no complete chunk stored for these strategies (--reuse only)")
    specs, captions, gidx = specs[:done], captions[:done], gidx[:done]
    real = np.array([pipe.make_denoiser(c, cfg=a.cfg).real_tokens for c in captions])
    results = {name: summarise(_merge(parts[name]), resolved[name], gidx, real)
               for name in names}
    for name, r in results.items():
        print(f"{name:30s} T={r['steps']:3d} nfe={r['nfe_mean']:6.2f} "
              f"overall={r['score_overall']:.3f} wall={r['wall_s']:.1f}s", flush=True)
    meta = {"set": a.set, "prompts": done, "cfg": a.cfg, "temperature": a.temperature,
            "threads": a.threads, "batch": a.batch, "steps": a.steps, "seed0": seed0,
            "model": str(a.model or "dimoo_nano"), "groups": list(scenes.TEST_GROUPS),
            "separation": separation(specs, seed0), "captions": captions,
            "command": "python -m lab.studies.quality " + " ".join(sys.argv[1:] if argv is None
                                                                  else argv)}
    compare = comparisons(results, gidx)
    out.parent.mkdir(parents=True, exist_ok=True)
    save_samples(results, captions, out.with_name(out.stem + "_samples.png"))
    clean = {k: {kk: vv for kk, vv in v.items() if kk != "_images"} for k, v in results.items()}
    out.write_text(json_text({"meta": meta, "env": env_info(), "strategies": clean,
                              "compare": compare}))
    out.with_suffix(".md").write_text(markdown(results, compare, meta))
    plot(results, out.with_suffix(".png"))
    print(markdown(results, compare, meta))
    print(f"wrote {out}, {out.with_suffix('.md')}, {out.with_suffix('.png')}, "
          f"{set_file(runs, a.set)}")
    return clean


if __name__ == "__main__":
    main()

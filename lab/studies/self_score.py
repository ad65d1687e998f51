"""Does the model's self-score rank sampling settings the way the nano evaluator does?

    OMP_NUM_THREADS=1 nice -n 10 python -m lab.studies.self_score --set test \
        --variants b2p4 --json lab/results/self_score_test.json

Reads the final tokens and evaluator verdicts stored by ``lab.studies.self_score_runs`` (every
setting, complete chunks only), scores every image with ``DiMOOPipeline.self_score`` for each
re-masking variant (``VARIANTS``: passes, block side, fraction; cached per variant in
``<runs>/<set>/_scores/``) and reports, per variant and per self-score component
(``ladr_core.dimoo.tasks.selfscore.KINDS`` plus ``COMBOS``):

* ``spearman``: rank correlation, over settings, of the mean self-score with the evaluator's
  overall score (mean of the six GenEval categories); ``spearman_working`` the same without
  the broken settings (evaluator below ``BROKEN``);
* ``matched``: each non-baseline setting against the swept baseline nearest its NFE, the
  evaluator's and the self-score's differences and whether their signs agree;
* per setting against ``baseline-64``: the paired difference of the self-score with a 95 %
  bootstrap interval (``ladr_core.calibrate.stats.paired_mean_ci``, resampling prompts) next
  to the evaluator's paired difference (stratified bootstrap, ``lab.studies.paired_stats``);
  ``flagged`` = the self-score's interval lies below 0 ("measurably below baseline-64");
* the issue's two targets: every setting the evaluator puts >= 0.05 below baseline-64 with an
  interval excluding 0 is flagged (``missed`` lists those that are not), and no setting within
  0.02 of baseline-64 is flagged (``false_flags``);
* ``auroc``: per image, how well the self-score separates images the evaluator passes from
  those it fails, pooled over settings and the median within one setting.

Writes the JSON, a markdown table (.md) for ``--report`` (variant/component) and a scatter plot
(.png) of mean self-score against the evaluator's overall score.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lab.benchmarks.common import json_text, save_figure
from lab.nano import scenes
from lab.studies.paired_stats import group_index, paired_bootstrap, scores
from lab.studies.self_score_runs import load_chunk, save_atomic, settings
from lab.studies.self_score_study import BASE, BROKEN, DROP
from ladr_core import load_dimoo, nano_model_path
from ladr_core.calibrate import auroc, paired_mean_ci, spearman
from ladr_core.dimoo.tasks.selfscore import KINDS, SelfScoreConfig

ROOT = Path(__file__).resolve().parents[2]

VARIANTS = {
    "b1p4": SelfScoreConfig(passes=4, block=1, fraction=0.25),
    "b2p4": SelfScoreConfig(passes=4, block=2, fraction=0.25),
    "b2p2": SelfScoreConfig(passes=2, block=2, fraction=0.25),
    "b2p2h": SelfScoreConfig(passes=2, block=2, fraction=0.5),
    "b3p4": SelfScoreConfig(passes=4, block=3, fraction=0.25),
    "b4p2": SelfScoreConfig(passes=2, block=4, fraction=0.5),
    "b1p1": SelfScoreConfig(passes=1, block=1, fraction=0.1),
    "all1": SelfScoreConfig(passes=1, block=1, fraction=1.0),
}
COMBOS = {"cond+adh": ("cond", 1.0), "cond+3adh": ("cond", 3.0), "guided+adh": ("guided", 1.0)}
"""name -> (component, w): component + w * adherence."""
NEAR = 0.02  # within this of baseline-64: a setting no self-score should flag


def stored_runs(folder: Path, names: list[str], prompts: int, batch: int
                ) -> tuple[dict[str, dict[str, np.ndarray]], int]:
    """{setting: {tokens, nfe, token_forwards, passed}} over the complete chunks every setting
    has (chunk-major), and the number of prompts they cover."""
    parts: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    done = 0
    for lo in range(0, prompts, batch):
        found = {}
        for n in names:
            path = folder / n / f"{lo:05d}.npz"
            if not path.is_file():
                break
            with np.load(path) as z:
                found[n] = {k: z[k] for k in z.files if k != "key"}
        if len(found) < len(names):
            break
        for n in names:
            parts[n].append(found[n])
        done = lo + len(found[names[0]]["passed"])
    if done == 0:
        raise SystemExit(f"no complete chunk of {names} in {folder}; run lab.studies.self_score_runs")
    runs = {n: {k: np.concatenate([p[k] for p in parts[n]]) for k in
                ("tokens", "nfe", "token_forwards", "passed")} for n in names}
    return runs, done


def score_variant(pipe: Any, cache: Path, name: str, config: SelfScoreConfig,
                  runs: dict[str, dict[str, np.ndarray]], captions: list[str], seed0: int
                  ) -> dict[str, dict[str, np.ndarray]]:
    """{setting: {component: float [n]}} for one variant (cached in ``cache``)."""
    path = cache / f"{name}.npz"
    key = repr((config, len(captions), sorted(runs)))
    found = load_chunk(path, key)
    if found is not None:
        return {s: {k: found[f"{s}|{k}"] for k in KINDS} for s in runs}
    out = {}
    for setting, run in runs.items():
        res = pipe.self_score(torch.from_numpy(run["tokens"].astype(np.int64)), captions,
                              seed=seed0, config=config, chunk=35)
        out[setting] = {k: getattr(res, k).numpy() for k in KINDS}
        print(f"  {name} {setting:30s} guided={out[setting]['guided'].mean():+.4f}", flush=True)
    save_atomic(path, key=np.array(key), **{f"{s}|{k}": v for s, d in out.items()
                                            for k, v in d.items()})
    return out


def component(per: dict[str, np.ndarray], kind: str) -> np.ndarray:
    if kind in COMBOS:
        base, w = COMBOS[kind]
        return per[base] + w * per["adherence"]
    return per[kind]


def analyse(values: dict[str, np.ndarray], runs: dict[str, dict[str, np.ndarray]],
            gidx: np.ndarray, evaluator: dict[str, dict]) -> dict[str, Any]:
    """One component's verdict: Spearman, per-setting paired CIs and flags, AUROC."""
    names = list(values)
    rows = {}
    for n in names:
        ci = paired_mean_ci(values[n], values[BASE]) if n != BASE else None
        rows[n] = {"self_score": float(values[n].mean()), "vs_base": ci,
                   "flagged": bool(ci is not None and ci["hi"] < 0),
                   "evaluator": evaluator[n]["overall"], "evaluator_vs_base": evaluator[n]["diff"]}
    rho = spearman([rows[n]["self_score"] for n in names], [rows[n]["evaluator"] for n in names])
    working = [n for n in names if rows[n]["evaluator"] >= BROKEN]
    rho_working = spearman([rows[n]["self_score"] for n in working],
                           [rows[n]["evaluator"] for n in working])
    drops = [n for n in names if n != BASE and (e := rows[n]["evaluator_vs_base"])["diff"] <= -DROP
             and e["hi"] < 0]
    near = [n for n in names if n != BASE and abs(rows[n]["evaluator_vs_base"]["diff"]) <= NEAR]
    pooled = np.concatenate([values[n] for n in names])
    passed = np.concatenate([runs[n]["passed"] for n in names])
    within = [auroc(values[n], runs[n]["passed"]) for n in names]
    return {"spearman": rho, "spearman_working": rho_working, "working": working,
            "settings": rows, "evaluator_drops": drops,
            "missed": [n for n in drops if not rows[n]["flagged"]], "near": near,
            "false_flags": [n for n in near if rows[n]["flagged"]],
            "auroc_pooled": auroc(pooled, passed),
            "auroc_within_median": float(np.nanmedian(within))}


def evaluator_rows(runs: dict[str, dict[str, np.ndarray]], gidx: np.ndarray) -> dict[str, dict]:
    """Per setting: the evaluator's overall score and its paired difference to baseline-64."""
    out = {}
    for n, r in runs.items():
        d = paired_bootstrap(r["passed"], runs[BASE]["passed"], gidx)["overall"]
        out[n] = {"overall": scores(r["passed"], gidx)["overall"], "diff": d,
                  "nfe": float(r["nfe"].mean()),
                  "token_forwards": float(r["token_forwards"].mean())}
    return out


def without_evaluator(judged: dict[str, Any] | None) -> dict[str, Any] | None:
    """A judged set as written: its settings' rows without ``evaluator`` and
    ``evaluator_vs_base``, which are the file's one ``evaluator`` table (``overall``, ``diff``)
    and would otherwise repeat once per variant."""
    if not judged:
        return judged
    drop = ("evaluator", "evaluator_vs_base")
    rows = {s: {k: v for k, v in r.items() if k not in drop} for s, r in judged["settings"].items()}
    return judged | {"settings": rows}


def matched(result: dict[str, Any], evaluator: dict[str, dict]) -> list[dict[str, Any]]:
    """Each non-baseline setting against the swept baseline nearest its mean NFE: the
    evaluator's and the self-score's difference of means, and whether their signs agree."""
    bases = {int(n.split("-")[1]): n for n in evaluator if n.startswith("baseline-")}
    rows = []
    for n, e in evaluator.items():
        if n.startswith("baseline-"):
            continue
        b = bases[min(bases, key=lambda t: abs(t - e["nfe"]))]
        de = e["overall"] - evaluator[b]["overall"]
        ds = result["settings"][n]["self_score"] - result["settings"][b]["self_score"]
        rows.append({"setting": n, "nfe": e["nfe"], "baseline": b, "evaluator_diff": de,
                     "self_score_diff": ds, "agree": (de > 0) == (ds > 0)})
    return rows


def _ci(d: dict | None, digits: int = 3) -> str:
    if d is None:
        return "-"
    return f"{d['diff']:+.{digits}f} [{d['lo']:+.{digits}f}, {d['hi']:+.{digits}f}]"


def markdown(result: dict[str, Any], evaluator: dict[str, dict], label: str) -> str:
    lines = [f"Self-score `{label}`: Spearman {result['spearman']:.3f} "
             f"({result['spearman_working']:.3f} over the {len(result['working'])} settings "
             f"the evaluator scores >= {BROKEN}); AUROC pooled "
             f"{result['auroc_pooled']:.3f}, within a setting (median) "
             f"{result['auroc_within_median']:.3f}.", "",
             "| setting | NFE | evaluator overall | evaluator - baseline-64 | self-score | "
             "self-score - baseline-64 | flagged |", "|---|---|---|---|---|---|---|"]
    order = sorted(result["settings"], key=lambda n: -result["settings"][n]["evaluator"])
    for n in order:
        r = result["settings"][n]
        lines.append(f"| {n} | {evaluator[n]['nfe']:.1f} | {r['evaluator']:.3f} | "
                     f"{_ci(r['evaluator_vs_base']) if n != BASE else '-'} | "
                     f"{r['self_score']:+.4f} | {_ci(r['vs_base'], 4)} | "
                     f"{'yes' if r['flagged'] else 'no'} |")
    lines += ["", f"Evaluator drops >= {DROP} (CI excluding 0): {result['evaluator_drops']}; "
              f"not flagged: {result['missed'] or 'none'}. Within {NEAR} of baseline-64: "
              f"{result['near'] or 'none'}; flagged: {result['false_flags'] or 'none'}.", "",
              "At matched forwards (the swept baseline nearest each setting's NFE):", "",
              "| setting | NFE | baseline | evaluator diff | self-score diff | same sign |",
              "|---|---|---|---|---|---|"]
    rows = matched(result, evaluator)
    for m in rows:
        lines.append(f"| {m['setting']} | {m['nfe']:.1f} | {m['baseline']} | "
                     f"{m['evaluator_diff']:+.3f} | {m['self_score_diff']:+.4f} | "
                     f"{'yes' if m['agree'] else 'NO'} |")
    lines += ["", f"Same sign: {sum(m['agree'] for m in rows)} of {len(rows)}."]
    return "\n".join(lines) + "\n"


def summary(results: dict[str, Any]) -> str:
    """Every variant/component in one table: Spearman, the two targets, AUROC."""
    lines = ["| variant/component | Spearman | drops not flagged | near flagged | AUROC pooled | "
             "AUROC within (median) |", "|---|---|---|---|---|---|"]
    for name, r in results.items():
        lines.append(f"| {name} | {r['spearman']:+.3f} | {len(r['missed'])}/"
                     f"{len(r['evaluator_drops'])} | {len(r['false_flags'])}/{len(r['near'])} | "
                     f"{r['auroc_pooled']:.3f} | {r['auroc_within_median']:.3f} |")
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], evaluator: dict[str, dict], label: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5.5), dpi=110)
    for n, r in result["settings"].items():
        base = n.startswith("baseline")
        ax.scatter(r["evaluator"], r["self_score"], c="grey" if base else "C0",
                   marker="o" if base else "s", s=36, zorder=3)
        ax.annotate(n, (r["evaluator"], r["self_score"]), fontsize=6, xytext=(3, 3),
                    textcoords="offset points")
    ax.set_xlabel("evaluator overall score (GenEval-style)")
    ax.set_ylabel(f"mean self-score ({label})")
    ax.set_title(f"DiMOO-nano settings: Spearman {result['spearman']:.2f}")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--set", choices=("test", "validation"), default="test")
    ap.add_argument("--prompts", type=int, default=490)
    ap.add_argument("--batch", type=int, default=35)
    ap.add_argument("--weight-dtype", default=None, help="the runs' weights, e.g. fp8_e4m3fn")
    ap.add_argument("--variants", default="all", help=f"comma list of {list(VARIANTS)} or all")
    ap.add_argument("--settings", default="all", help="comma list of sweep settings, or all")
    ap.add_argument("--report", default="b2p4/guided", help="variant/component for .md/.png")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", default=str(ROOT / "lab" / "results" / "self_score_runs"))
    ap.add_argument("--json", default=str(ROOT / "lab" / "results" / "self_score.json"))
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    a = parse(argv)
    torch.set_num_threads(a.threads)
    names = list(settings()) if a.settings == "all" else a.settings.split(",")
    folder = Path(a.runs) / (a.set if a.weight_dtype is None else f"{a.set}_{a.weight_dtype}")
    runs, n = stored_runs(folder, names, a.prompts, a.batch)
    specs = (scenes.quality_test_specs(n) if a.set == "test" else scenes.validation_specs(n))
    captions = [scenes.caption_for(s) for s in specs]
    gidx = group_index([scenes.group_of(s) for s in specs])
    seed0 = scenes.TEST_IMAGE_SEED if a.set == "test" else 0
    pipe = load_dimoo(nano_model_path(), dtype=torch.float32, weight_dtype=a.weight_dtype)
    evaluator = evaluator_rows(runs, gidx)
    chosen = list(VARIANTS) if a.variants == "all" else a.variants.split(",")
    results: dict[str, Any] = {}
    for v in chosen:
        per = score_variant(pipe, folder / "_scores", v, VARIANTS[v], runs, captions, seed0)
        for kind in (*KINDS, *COMBOS):
            values = {s: component(per[s], kind) for s in names}
            if any(not np.isfinite(x).all() for x in values.values()):
                continue
            res = analyse(values, runs, gidx, evaluator)
            res["matched"] = matched(res, evaluator)
            results[f"{v}/{kind}"] = res
            print(f"{v}/{kind:12s} spearman={res['spearman']:+.3f} missed={len(res['missed'])}"
                  f"/{len(res['evaluator_drops'])} false_flags={len(res['false_flags'])}/"
                  f"{len(res['near'])} auroc={res['auroc_pooled']:.3f}/"
                  f"{res['auroc_within_median']:.3f}", flush=True)
    out = Path(a.json)
    meta = {"set": a.set, "prompts": n, "weight_dtype": a.weight_dtype or "as stored",
            "variants": {v: repr(VARIANTS[v]) for v in chosen}, "combos": COMBOS,
            "command": "python -m lab.studies.self_score " + " ".join(
                sys.argv[1:] if argv is None else argv)}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json_text({"meta": meta, "evaluator": evaluator, "results": {
        k: without_evaluator(r) for k, r in results.items()}}))
    if a.report in results:
        out.with_suffix(".md").write_text(markdown(results[a.report], evaluator, a.report)
                                          + "\n" + summary(results))
        plot(results[a.report], evaluator, a.report, out.with_suffix(".png"))
        print(markdown(results[a.report], evaluator, a.report))
    print(f"wrote {out}")
    return results


if __name__ == "__main__":
    main()

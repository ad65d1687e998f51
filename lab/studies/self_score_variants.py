"""Which self-score sees the evaluator's losses? Aggregations of the per-token maps of
``lab.studies.self_score_probe``, fitted on the validation set and judged on the test set.

    OMP_NUM_THREADS=1 nice -n 10 python -m lab.studies.self_score_variants \
        --json lab/results/self_score_variants.json

The arithmetic (aggregation, fit, verdict) is ``lab.studies.self_score_study``'s.
For each variant (``variants()``: a probe, a branch, the passes used and how the re-masked
tokens of an image become one number) and each prompt set, per setting the paired difference of
the mean self-score to baseline-64 (95 % bootstrap, prompts resampled) beside the nano
evaluator's (``lab.studies.self_score.evaluator_rows``). On the VALIDATION set only:

* ``slope``: least squares through the reference's (0, 0) of the self-score difference on the
  evaluator difference, over the settings that are not broken (evaluator >= ``BROKEN``);
* ``margin`` = slope x ``DROP`` (the self-score difference that goes with an evaluator drop of
  0.05), with a bootstrap interval (prompts resampled, the fit repeated);
* ``spread``: the sd of the per-prompt differences, median over the ``NEAREST`` settings the
  evaluator puts closest to baseline-64 (``spread_all_median``: over all of them), and
  ``prompts_needed`` (ladr_core.calibrate.margin.prompts_needed) at that spread and margin;
* ``worst_ratio``: the smallest (self-score difference) / (slope x evaluator difference) over
  the LADR settings that are not broken (1: on the line; 0: the self-score sees nothing).

On the TEST set, with the validation margin: the settings the evaluator puts >= ``DROP`` below
baseline-64 (interval excluding 0) and, among them, ``missed_mean`` (mean difference above
-margin), ``missed_lo`` (the lower interval end above -margin: the calibration rule on every test
prompt would accept it), ``missed_zero`` (interval reaching 0: the old rule), plus Spearman.
The validation set chooses; the test set only reports.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from lab.benchmarks.common import env_info, json_text
from lab.nano import scenes
from lab.studies.paired_stats import group_index
from lab.studies.self_score import evaluator_rows, stored_runs, without_evaluator
from lab.studies.self_score_runs import settings
from lab.studies.self_score_study import (
    BASE,
    BROKEN,
    DROP,
    Maps,
    fit,
    judge,
)
from lab.studies.self_score_study import mean_score as _mean
from lab.studies.self_score_study import tail_score as _tail

ROOT = Path(__file__).resolve().parents[2]

Agg = Callable[[Maps], np.ndarray]


def variants() -> dict[str, tuple[Agg, int]]:
    """name -> (aggregator, denoiser calls per image)."""
    out: dict[str, tuple[Agg, int]] = {}
    for probe, passes_all in (("b1", 4), ("b2", 4), ("b3", 4), ("b4", 4), ("b6", 2), ("all", 1)):
        for passes in sorted({min(2, passes_all), passes_all}):
            tag = f"{probe}p{passes}"
            for branch in ("guided", "cond", "uncond", "adherence"):
                out[f"{tag}/{branch}"] = (
                    lambda m, pr=probe, br=branch, ps=passes: _mean(m, pr, br, ps), passes)
            if probe == "all":
                continue
            out[f"{tag}/guided-worst"] = (
                lambda m, pr=probe, ps=passes: _tail(m, pr, "guided", ps, 0.0), passes)
            out[f"{tag}/guided-tail25"] = (
                lambda m, pr=probe, ps=passes: _tail(m, pr, "guided", ps, 0.25), passes)
    for a, b in (("b2", "b4"), ("b2", "b6"), ("b1", "b4"), ("b2", "b3")):
        pa, pb = 2, 2
        out[f"{a}p{pa}+{b}p{pb}/guided"] = (
            lambda m, a=a, b=b: 0.5 * (_mean(m, a, "guided", 2) + _mean(m, b, "guided", 2)),
            pa + pb)
    out["b2p4+b4p4/guided"] = (
        lambda m: 0.5 * (_mean(m, "b2", "guided", 4) + _mean(m, "b4", "guided", 4)), 8)
    out["b2p4x2/guided"] = (lambda m: _mean(m, "b2r2", "guided", 8), 8)
    out["b2p4+b3p4/guided"] = (
        lambda m: 0.5 * (_mean(m, "b2", "guided", 4) + _mean(m, "b3", "guided", 4)), 8)
    out["b2p4+b3p4+b4p4/guided"] = (
        lambda m: (_mean(m, "b2", "guided", 4) + _mean(m, "b3", "guided", 4)
                   + _mean(m, "b4", "guided", 4)) / 3, 12)
    out["r4p2/agree"] = (lambda m: _mean(m, "r4", "agree", 2), 16)
    out["r4p2/agree-worst"] = (lambda m: _tail(m, "r4", "agree", 2, 0.0), 16)
    out["b2p2+all/guided"] = (
        lambda m: 0.5 * (_mean(m, "b2", "guided", 2) + _mean(m, "all", "guided", 1)), 3)
    return out


def load_set(runs_dir: Path, which: str, prompts: int, batch: int
             ) -> tuple[dict[str, Maps], dict[str, dict], np.ndarray, dict]:
    """({setting: maps}, evaluator rows, group index, stored runs) of one prompt set."""
    names = list(settings())
    folder = runs_dir / which
    runs, n = stored_runs(folder, names, prompts, batch)
    specs = scenes.quality_test_specs(n) if which == "test" else scenes.validation_specs(n)
    gidx = group_index([scenes.group_of(s) for s in specs])
    maps: dict[str, Maps] = {s: {} for s in names}
    for path in sorted((folder / "_probe").glob("*.npz")):
        with np.load(path) as z:
            for k in z.files:
                if k == "key":
                    continue
                if len(z[k]) < n:  # a probe run on fewer prompts: left out of this set
                    break
                s, branch = k.split("|")
                maps[s].setdefault(path.stem, {})[branch] = z[k][:n]
    return maps, evaluator_rows(runs, gidx), gidx, runs


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--validation-prompts", type=int, default=210)
    ap.add_argument("--test-prompts", type=int, default=490)
    ap.add_argument("--batch", type=int, default=35)
    ap.add_argument("--only", default="", help="comma list of variant names (default: all)")
    ap.add_argument("--runs", default=str(ROOT / "lab" / "results" / "self_score_runs"))
    ap.add_argument("--json", default=str(ROOT / "lab" / "results"
                                          / "self_score_variants.json"))
    a = ap.parse_args(argv)
    runs_dir = Path(a.runs)
    val_maps, val_eval, _, _ = load_set(runs_dir, "validation", a.validation_prompts, a.batch)
    test_maps, test_eval, test_runs = {}, {}, {}  # --test-prompts 0: validation only
    if a.test_prompts:
        test_maps, test_eval, _, test_runs = load_set(runs_dir, "test", a.test_prompts, a.batch)
    table = variants()
    chosen = a.only.split(",") if a.only else list(table)
    results: dict[str, Any] = {}
    for name in chosen:
        agg, calls = table[name]
        try:
            val = {s: agg(m) for s, m in val_maps.items()}
        except KeyError:  # a probe not computed on the validation set
            continue
        try:
            test = {s: agg(m) for s, m in test_maps.items()}
        except KeyError:  # not probed on the test set: its validation fit alone
            test = {}
        f = fit(val, val_eval)
        results[name] = {"calls_per_image": calls, "validation_fit": f,
                         "validation": judge(val, val_eval, f["margin"]),
                         "test": judge(test, test_eval, f["margin"]) if test else None}
        t, v = results[name]["test"], results[name]["validation"]
        line = (f"{name:26s} calls={calls} margin={f['margin']:+.4f} need="
                f"{f['prompts_needed']} worst={f['worst_ratio']:+.2f} val_miss="
                f"{len(v['missed_mean'])} rho_w(val)={v['spearman_working']:+.3f}")
        if t:
            line += (f" test miss mean/lo/zero={len(t['missed_mean'])}/{len(t['missed_lo'])}/"
                     f"{len(t['missed_zero'])} of {len(t['evaluator_drops'])} "
                     f"rho_w={t['spearman_working']:+.3f}")
        print(line, flush=True)
    meta = {"validation_prompts": a.validation_prompts, "test_prompts": a.test_prompts,
            "drop": DROP, "broken": BROKEN, "reference": BASE,
            "test_settings": list(test_runs),
            "command": "python -m lab.studies.self_score_variants " + " ".join(
                sys.argv[1:] if argv is None else argv)}
    out = Path(a.json)
    evaluator = {part: {s: {"overall": e["overall"], "diff": e["diff"]} for s, e in rows.items()}
                 for part, rows in (("validation", val_eval), ("test", test_eval)) if rows}
    written = {k: r | {p: without_evaluator(r[p]) for p in ("validation", "test")}
               for k, r in results.items()}
    out.write_text(json_text({"env": env_info(), "meta": meta, "evaluator": evaluator,
                              "results": written}))
    print(f"wrote {out}")
    return results


if __name__ == "__main__":
    main()

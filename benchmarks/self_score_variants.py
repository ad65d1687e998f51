"""Which self-score sees the evaluator's losses? Aggregations of the per-token maps of
``benchmarks.self_score_probe``, fitted on the validation set and judged on the test set.

    OMP_NUM_THREADS=1 nice -n 10 python -m benchmarks.self_score_variants \
        --json benchmarks/results/self_score_variants.json

For each variant (``variants()``: a probe, a branch, the passes used and how the re-masked
tokens of an image become one number) and each prompt set, per setting the paired difference of
the mean self-score to baseline-64 (95 % bootstrap, prompts resampled) beside the nano
evaluator's (``benchmarks.self_score.evaluator_rows``). On the VALIDATION set only:

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
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import env_info  # noqa: E402
from benchmarks.paired_stats import group_index  # noqa: E402
from benchmarks.self_score import BASE, BROKEN, DROP, evaluator_rows, stored_runs  # noqa: E402
from benchmarks.self_score_runs import settings  # noqa: E402
from ladr_core.calibrate.margin import prompts_needed  # noqa: E402
from ladr_core.calibrate.stats import paired_mean_ci, paired_spread, spearman  # noqa: E402
from testbed import scenes  # noqa: E402

NEAREST = 3
"""The spread that plans the prompts is the median over the ``NEAREST`` settings the evaluator
puts closest to baseline-64: the spread grows with the loss (on validation from 0.13 at an
evaluator drop of 0.15 to 0.24 at 0.44), and the settings a calibration hopes to accept are
the near ones."""
Maps = dict[str, dict[str, np.ndarray]]  # probe -> {branch or "block": array}
Agg = Callable[[Maps], np.ndarray]


def _mean(maps: Maps, probe: str, branch: str, passes: int | None) -> np.ndarray:
    x = maps[probe][branch][:, :passes]
    if branch == "adherence":
        x = maps[probe]["cond"][:, :passes] - maps[probe]["uncond"][:, :passes]
    return np.nansum(x, axis=(1, 2)) / np.isfinite(x).sum(axis=(1, 2))


def _block_means(maps: Maps, probe: str, branch: str, passes: int | None) -> list[np.ndarray]:
    """Per image: the mean log p of every re-masked block (one entry per pass and block)."""
    x = maps[probe][branch][:, :passes]
    blocks = maps[probe]["block"].astype(np.int64)
    out = []
    for i in range(x.shape[0]):
        vals = []
        for p in range(x.shape[1]):
            m = np.isfinite(x[i, p])
            if not m.any():
                continue
            b = blocks[i][m]
            sums = np.bincount(b, weights=x[i, p][m])
            counts = np.bincount(b)
            vals.append(sums[counts > 0] / counts[counts > 0])
        out.append(np.concatenate(vals))
    return out


def _tail(maps: Maps, probe: str, branch: str, passes: int | None, q: float) -> np.ndarray:
    """Mean of the lowest share ``q`` of an image's block means (q -> 0: the worst block)."""
    out = []
    for v in _block_means(maps, probe, branch, passes):
        k = max(1, int(round(q * v.size)))
        out.append(np.sort(v)[:k].mean())
    return np.array(out)


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


def fit(values: dict[str, np.ndarray], evaluator: dict[str, dict]) -> dict[str, Any]:
    """Slope through the origin, margin, spread, prompts needed, worst LADR ratio."""
    ok = [s for s in values if s != BASE and evaluator[s]["overall"] >= BROKEN]
    ss = np.array([float((values[s] - values[BASE]).mean()) for s in ok])
    ev = np.array([evaluator[s]["diff"]["diff"] for s in ok])
    slope = float((ss * ev).sum() / (ev * ev).sum())
    margin = slope * DROP
    spreads = [paired_spread(values[s], values[BASE]) for s in ok]
    nearest = np.argsort(-ev)[:NEAREST]  # the settings the evaluator puts closest to 64 steps
    spread = float(np.median([spreads[i] for i in nearest]))
    ladr = [i for i, s in enumerate(ok) if not s.startswith("baseline") and ev[i] < 0]
    ratios = {ok[i]: float(ss[i] / (slope * ev[i])) for i in ladr}
    return {"slope": slope, "margin": margin, "spread": spread,
            "spread_nearest_settings": [ok[i] for i in nearest],
            "spread_all_median": float(np.median(spreads)), "settings": ok,
            "prompts_needed": prompts_needed(spread, margin) if margin > 0 else None,
            "worst_ratio": min(ratios.values()) if ratios else None, "ratios": ratios}


def margin_interval(values: dict[str, np.ndarray], passed: dict[str, np.ndarray],
                    gidx: np.ndarray, settings_ok: list[str], n_boot: int = 1000,
                    seed: int = 0) -> list[float]:
    """95 % percentile interval of the margin: prompts resampled within their category (as
    the evaluator's intervals), the evaluator's overall and the self-score's mean recomputed
    on the same draw, the fit repeated."""
    from benchmarks.paired_stats import _boot_scores, _resample

    draws = _resample(gidx, n_boot, np.random.default_rng(seed))
    idx = np.concatenate(list(draws.values()), axis=1)  # [n_boot, n]
    base_eval = _boot_scores(passed[BASE].astype(np.float64), draws)["overall"]
    ss = np.stack([(values[s][idx] - values[BASE][idx]).mean(axis=1) for s in settings_ok])
    ev = np.stack([_boot_scores(passed[s].astype(np.float64), draws)["overall"] - base_eval
                   for s in settings_ok])
    out = (ss * ev).sum(axis=0) / (ev * ev).sum(axis=0) * DROP
    return [float(np.percentile(out, 2.5)), float(np.percentile(out, 97.5))]


def judge(values: dict[str, np.ndarray], evaluator: dict[str, dict], margin: float
          ) -> dict[str, Any]:
    """Per setting: self-score difference with its interval, the evaluator's; the misses."""
    rows = {}
    for s in values:
        ci = None if s == BASE else paired_mean_ci(values[s], values[BASE])
        rows[s] = {"self_score": float(values[s].mean()), "vs_base": ci,
                   "evaluator": evaluator[s]["overall"],
                   "evaluator_vs_base": None if s == BASE else evaluator[s]["diff"]}
    drops = [s for s in values if s != BASE and evaluator[s]["diff"]["diff"] <= -DROP
             and evaluator[s]["diff"]["hi"] < 0]
    names = list(values)
    working = [s for s in names if evaluator[s]["overall"] >= BROKEN]
    return {
        "settings": rows, "evaluator_drops": drops,
        "missed_mean": [s for s in drops if rows[s]["vs_base"]["diff"] > -margin],
        "missed_lo": [s for s in drops if rows[s]["vs_base"]["lo"] > -margin],
        "missed_zero": [s for s in drops if rows[s]["vs_base"]["hi"] >= 0],
        "spearman": spearman([rows[s]["self_score"] for s in names],
                             [rows[s]["evaluator"] for s in names]),
        "spearman_working": spearman([rows[s]["self_score"] for s in working],
                                     [rows[s]["evaluator"] for s in working])}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--validation-prompts", type=int, default=210)
    ap.add_argument("--test-prompts", type=int, default=490)
    ap.add_argument("--batch", type=int, default=35)
    ap.add_argument("--only", default="", help="comma list of variant names (default: all)")
    ap.add_argument("--runs", default=str(ROOT / "benchmarks" / "results" / "self_score_runs"))
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results"
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
            test = {s: agg(m) for s, m in test_maps.items()}
        except KeyError:  # a probe not computed for one of the sets
            continue
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
            "command": "python -m benchmarks.self_score_variants " + " ".join(
                sys.argv[1:] if argv is None else argv)}
    out = Path(a.json)
    out.write_text(json.dumps({"env": env_info(), "meta": meta, "results": results},
                              indent=1) + "\n")
    print(f"wrote {out}")
    return results


if __name__ == "__main__":
    main()

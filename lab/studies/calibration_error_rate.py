"""How often does the calibration recommend a setting the nano evaluator puts 0.05 or more below
baseline-64, on few prompts? And how skewed are the self-score differences the rule reads?

    OMP_NUM_THREADS=1 nice -n 10 python -m lab.studies.calibration_error_rate --collect
    OMP_NUM_THREADS=1 nice -n 10 python -m lab.studies.calibration_error_rate

``--collect`` scores the sweep of ``lab.studies.self_score_runs`` (its final tokens, outside
git) with the calibration's own self-score (``runner.CALIBRATION_SELF_SCORE``, seeded as
``lab.studies.self_score`` does) and writes every image's self-score, NFE, token-forwards and the
evaluator's pass / fail to ``lab/results/calibration_selfscores_nano.json``: the test
set (every setting whose chunks cover ``--test-prompts``) and the validation set (the settings
there, at least baseline-64 and the three the spread floor comes from). Its ``checks`` compare
the means with the committed figures they must reproduce (``self_score_variants.json``'s
b2p4/guided test differences, ``calibration_margin.json``'s validation points).

Without ``--collect`` it reads that file only (no model, no generation) and writes
``lab/results/calibration_error_rate.json``:

* ``skew``: per validation setting, the per-prompt differences to baseline-64: mean, sd,
  skewness, excess kurtosis, the share near 0, the share below -sd floor, how much of the sum
  the worst 5 % of prompts carry, and the sd seen on random 6-prompt subsets;
* ``error_rates``: for each size in ``--sizes``, ``--draws`` random subsets of the test prompts
  (without replacement, one image per prompt), each calibrated by the rule
  (``ladr_core.calibrate.report.judge``; reference baseline-64, margin and floor as shipped,
  and the rule without the floor for comparison) over two candidate lists: every sweep setting,
  and the sweep settings the calibration itself runs on nano. An error is a recommended setting
  the evaluator's test set (``self_score_test.json``, 105 prompts) puts 0.05 or more below
  baseline-64; the rate has a Wilson 95 % interval. Per draw only the intervals that can decide
  are bootstrapped (a Student-t lower end at or below -margin already fails the rule, the
  bootstrap can only lower it); the first ``--check`` draws of each size and list are also run
  through ``build_report`` whole and must give the same recommendation (``checked``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from lab.benchmarks.common import RESULTS_DIR, env_info, write_result
from ladr_core import Baseline
from ladr_core.calibrate import (
    DEFAULT_MARGIN,
    SPREAD_FLOOR,
    Candidate,
    build_report,
    judge,
    paired_mean_ci,
    t_interval,
)

ROOT = Path(__file__).resolve().parents[2]

BASE = "baseline-64"
DROP = 0.05
SCORES = RESULTS_DIR / "calibration_selfscores_nano.json"
CALIBRATION_RUNS = ("ladr-paper", "ladr-paper-gumbel", "ladr-adaptive", "ladr-nano",
                    "ladr-tau0.5", "ladr-tau0.7", "ladr-tau0.9", "baseline-12", "baseline-18")
"""The sweep settings the calibration runs on nano (its LADR candidates, and the two of its
baselines at a candidate's NFE that the sweep has; lab/studies/calibration_nano.SWEEP_NAME)."""
NEAREST = ("baseline-32", "ladr-nano", "ladr-nano+mlcache")
"""The settings the spread floor is the median sd of (calibration_margin.json)."""


def _score_set(pipe: Any, folder: Path, which: str, n: int, batch: int,
               have: dict[str, Any] | None = None) -> dict[str, Any]:
    """{setting: per-image lists} for every setting whose stored chunks cover ``n`` prompts;
    settings ``have`` (the file's set, same prompts) already holds are kept, not scored again."""
    import torch

    from lab.nano import scenes
    from lab.studies.self_score import stored_runs
    from lab.studies.self_score_runs import settings
    from ladr_core.calibrate import CALIBRATION_SELF_SCORE

    specs = scenes.quality_test_specs(n) if which == "test" else scenes.validation_specs(n)
    captions = [scenes.caption_for(s) for s in specs]
    seed0 = scenes.TEST_IMAGE_SEED if which == "test" else 0
    kept = (have or {}).get("settings", {}) if (have or {}).get("prompts") == n else {}
    out = {}
    for name in settings():
        if name in kept:
            out[name] = kept[name]
            continue
        try:
            runs, done = stored_runs(folder / which, [name], n, batch)
        except SystemExit:
            continue
        if done < n:
            continue
        r = runs[name]
        res = pipe.self_score(torch.from_numpy(r["tokens"].astype(np.int64)), captions,
                              seed=seed0, config=CALIBRATION_SELF_SCORE, chunk=batch)
        out[name] = {"self_score": [round(float(v), 7) for v in res.score],
                     "nfe": [int(v) for v in r["nfe"]],
                     "token_forwards": [float(v) for v in r["token_forwards"]],
                     "passed": [int(v) for v in r["passed"]]}
        print(f"  {which} {name:32s} {np.mean(out[name]['self_score']):+.4f}", flush=True)
    env = env_info()
    return {"prompts": n, "seed0": seed0, "collected": {k: env[k] for k in ("utc", "git_commit")},
            "settings": out}


def _committed_means(which: str, n: int) -> tuple[dict[str, float], dict[str, float], str]:
    """({setting: mean difference to baseline-64}, {setting: sd}, the file) committed for this
    set and prompt count with the calibration's self-score (b2p4/guided), or empty dicts."""
    if which == "validation" and n == 210:
        fit = json.loads((RESULTS_DIR / "calibration_margin.json").read_text())
        return ({p["setting"]: p["self_score_diff"] for p in fit["points"]},
                {p["setting"]: p["spread"] for p in fit["points"]}, "calibration_margin.json")
    name, part = (("self_score_variants.json", "test") if which == "test" and n == 105 else
                  ("self_score_regeneration.json", "validation")
                  if which == "validation" and n == 105 else (None, None))
    if name is None:
        return {}, {}, "-"
    rows = json.loads((RESULTS_DIR / name).read_text())["results"]["b2p4/guided"][part]
    return ({s: r["vs_base"]["diff"] for s, r in rows["settings"].items() if r["vs_base"]}, {},
            name)


def _checks(sets: dict[str, Any]) -> dict[str, Any]:
    """Largest gaps between these self-scores and the committed figures they reproduce."""
    out: dict[str, Any] = {}
    for which, data in sets.items():
        means, sds, source = _committed_means(which, data["prompts"])
        got = data["settings"]
        base = np.array(got[BASE]["self_score"])
        gaps: dict[str, float] = {}
        spread_gaps = []
        for name, r in got.items():
            d = np.array(r["self_score"]) - base
            if name in means:
                gaps[name] = float(abs(d.mean() - means[name]))
            if name in sds:
                spread_gaps.append(abs(d.std(ddof=1) - sds[name]))
        out[which] = {"against": source, "mean_gaps": gaps,
                      "max_mean_gap": max(gaps.values(), default=None),
                      "max_spread_gap": max(spread_gaps, default=None)}
    return out


def collect(a: argparse.Namespace) -> dict[str, Any]:
    import torch

    from ladr_core import load_dimoo, nano_model_path

    torch.set_num_threads(1)
    pipe = load_dimoo(nano_model_path(), dtype=torch.float32)
    runs = Path(a.runs)
    target = Path(a.out) / SCORES.name
    # a set given 0 prompts keeps what the file already holds (the sets are collected apart)
    sets = json.loads(target.read_text())["sets"] if target.is_file() else {}
    sets.update({which: _score_set(pipe, runs, which, n, a.batch, sets.get(which)) for which, n
                 in (("test", a.test_prompts), ("validation", a.validation_prompts)) if n > 0})
    payload = {"self_score": "runner.CALIBRATION_SELF_SCORE (b2p4/guided), seed0 + image "
               "index as lab.studies.self_score", "reference": BASE, "sets": sets,
               "checks": _checks(sets),
               "command": "python -m lab.studies.calibration_error_rate --collect"}
    path = write_result(SCORES.stem, payload, Path(a.out))
    print(json.dumps(payload["checks"]), f"\nwrote {path}")
    return payload


def skew_row(d: np.ndarray, floor: float, rng: np.random.Generator) -> dict[str, float]:
    """Shape of one setting's per-prompt differences ``d`` [n] (module docstring)."""
    m, sd = float(d.mean()), float(d.std(ddof=1))
    z = (d - d.mean()) / d.std(ddof=0)
    worst = np.sort(d)[:max(1, round(0.05 * d.size))]
    subsets = np.array([d[rng.choice(d.size, 6, replace=False)].std(ddof=1) for _ in range(2000)])
    return {"n": int(d.size), "mean": m, "sd": sd, "skewness": float((z ** 3).mean()),
            "excess_kurtosis": float((z ** 4).mean() - 3), "median": float(np.median(d)),
            "share_within_0.05": float((np.abs(d) < 0.05).mean()),
            "share_below_minus_floor": float((d < -floor).mean()),
            "worst_5pct_share_of_sum": float(worst.sum() / d.sum()) if d.sum() < 0 else None,
            "six_prompt_sd_median": float(np.median(subsets)),
            "six_prompt_sd_below_0.05": float((subsets < 0.05).mean()),
            "six_prompt_sd_below_floor": float((subsets < floor).mean())}


def skew(val: dict[str, Any], floor: float) -> dict[str, Any]:
    base = np.array(val["settings"][BASE]["self_score"])
    rng = np.random.default_rng(0)
    return {name: skew_row(np.array(r["self_score"]) - base, floor, rng)
            for name, r in val["settings"].items() if name != BASE}


def _candidate(name: str, x: np.ndarray, ref: np.ndarray, fwd: float, margin: float,
               floor: float) -> dict[str, Any]:
    """A measured setting (self-scores ``x`` against ``ref``, same prompts) as ``judge`` reads
    it; the bootstrap only where it can decide."""
    d = x - ref
    t = t_interval(float(d.mean()), float(d.std(ddof=1)), d.size, floor)
    boot = ({"diff": t["diff"], "lo": t["diff"], "hi": t["diff"], "n": d.size}
            if t["lo"] <= -margin else paired_mean_ci(x, ref))
    return {"name": name, "token_forwards": fwd, "self_score": float(x.mean()),
            "vs_reference": boot, "vs_reference_t": t, "spread": float(d.std(ddof=1))}


def calibrate_draw(test: dict[str, Any], names: list[str], idx: np.ndarray, margin: float,
                   floor: float) -> dict[str, Any]:
    """The rule's verdict on the prompts ``idx`` of the test set."""
    ss = test["settings"]
    ref = np.array(ss[BASE]["self_score"])[idx]
    cands = [{"name": BASE, "token_forwards": float(np.mean(np.array(
        ss[BASE]["token_forwards"])[idx])), "self_score": float(ref.mean()),
        "vs_reference": None, "vs_reference_t": None, "spread": None}]
    for n in names:
        x = np.array(ss[n]["self_score"])[idx]
        cands.append(_candidate(n, x, ref, float(np.mean(np.array(ss[n]["token_forwards"])[idx])),
                                margin, floor))
    return judge(cands, BASE, margin, idx.size, 1, floor)


def full_report(test: dict[str, Any], names: list[str], idx: np.ndarray, margin: float,
                floor: float) -> dict[str, Any]:
    """The same draw through ``build_report`` whole (every bootstrap, the real entry)."""
    runs = {}
    for n in [BASE, *names]:
        r = test["settings"][n]
        fwd = [r["token_forwards"][i] for i in idx]
        runs[n] = {"candidate": Candidate(n, Baseline(), 64, "reference" if n == BASE else
                                          "candidate"),
                   "nfe": [r["nfe"][i] for i in idx], "nfe_mean": float(np.mean(
                       [r["nfe"][i] for i in idx])), "token_forwards": fwd, "seconds": 0.0,
                   "row_calls": 0, "score_seconds": 0.0, "scores": {},
                   "self_score": [r["self_score"][i] for i in idx]}
    return build_report(runs, list(range(idx.size)), BASE, margin, floor)


def wilson(k: int, n: int) -> list[float]:
    z = 1.959964
    p = k / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [max(0.0, mid - half), min(1.0, mid + half)]


def rates(test: dict[str, Any], names: list[str], bad: set[str], size: int, a: Any,
          floor: float) -> dict[str, Any]:
    """One size, one candidate list, one floor: error rate and what was recommended."""
    rng = np.random.default_rng([a.seed, size])
    n_all = test["prompts"]
    picked: dict[str, int] = {}
    tried: dict[str, int] = {}
    errors = contradictions = checked = 0
    for k in range(a.draws):
        idx = rng.choice(n_all, size, replace=False)
        v = calibrate_draw(test, names, idx, a.margin, floor)
        picked[v["recommended"]] = picked.get(v["recommended"], 0) + 1
        for t in v["to_try"]:
            tried[t] = tried.get(t, 0) + 1
        errors += v["recommended"] in bad
        contradictions += bool(v["recommended"] != BASE and v["warnings"])
        if k < a.check:
            whole = full_report(test, names, idx, a.margin, floor)
            if (whole["recommended"], whole["to_try"]) != (v["recommended"], v["to_try"]):
                raise SystemExit(f"size {size} draw {k}: build_report recommends "
                                 f"{whole['recommended']}, the fast path {v['recommended']}")
            checked += 1
    return {"draws": a.draws, "errors": errors, "error_rate": errors / a.draws,
            "error_rate_ci95": wilson(errors, a.draws),
            "recommended": dict(sorted(picked.items(), key=lambda kv: -kv[1])),
            "to_try": dict(sorted(tried.items(), key=lambda kv: -kv[1])),
            "recommended_and_warned": contradictions, "checked": checked}


def analyse(a: argparse.Namespace) -> dict[str, Any]:
    data = json.loads(Path(a.scores).read_text())
    test = data["sets"]["test"]
    verdicts = json.loads((RESULTS_DIR / "self_score_test.json").read_text())["evaluator"]
    bad = {s for s, v in verdicts.items() if s != BASE and v["diff"]["diff"] <= -DROP}
    every = [s for s in test["settings"] if s != BASE]
    lists = {"sweep": every, "calibration": [s for s in CALIBRATION_RUNS if s in every]}
    sizes = [int(v) for v in a.sizes.split(",")]
    out: dict[str, Any] = {}
    rules = {"floor": SPREAD_FLOOR, "no_floor": 0.0}
    for floor_name in a.rules.split(","):
        floor = rules[floor_name]
        for list_name, names in lists.items():
            for size in sizes:
                r = rates(test, names, bad, size, a, floor)
                out.setdefault(floor_name, {}).setdefault(list_name, {})[str(size)] = r
                print(f"{floor_name:8s} {list_name:11s} {size:3d} prompts: error "
                      f"{r['error_rate']:.4f} {r['error_rate_ci95']} {r['recommended']}",
                      flush=True)
    payload = {
        "scores": {"file": str(Path(a.scores).relative_to(ROOT)) if Path(a.scores).is_relative_to(
            ROOT) else a.scores, "git_commit": data["env"]["git_commit"]},
        "margin": a.margin, "spread_floor": SPREAD_FLOOR, "reference": BASE, "drop": DROP,
        "test_prompts": test["prompts"], "sizes": sizes, "draws": a.draws, "seed": a.seed,
        "evaluator": {s: verdicts[s]["diff"] for s in every},
        "bad": sorted(bad & set(every)), "candidate_lists": lists,
        "skew": skew(data["sets"]["validation"], SPREAD_FLOOR),
        "error_rates": out, "command": "python -m lab.studies.calibration_error_rate " + " ".join(
            sys.argv[1:] if a.argv is None else a.argv)}
    path = write_result("calibration_error_rate", payload, Path(a.out))
    md = path.with_suffix(".md")
    md.write_text("\n".join(skew_table(payload) + [""] + rate_table(payload)) + "\n")
    print(f"wrote {path}, {md}")
    return payload


def skew_table(payload: dict[str, Any]) -> list[str]:
    """The skew of the validation differences as markdown rows (CALIBRATION.md Sec. 3)."""
    rows = ["| setting | prompts | mean | sd | skewness | excess kurtosis | within +-0.05 | "
            "below -0.135 | worst 5 % carry of the sum | sd of 6-prompt subsets: median | "
            "6-prompt subsets with sd < 0.05 |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in payload["skew"].items():
        carry = r["worst_5pct_share_of_sum"]
        rows.append(f"| {name} | {r['n']} | {r['mean']:+.4f} | {r['sd']:.3f} | "
                    f"{r['skewness']:+.2f} | {r['excess_kurtosis']:.1f} | "
                    f"{r['share_within_0.05']:.0%} | {r['share_below_minus_floor']:.0%} | "
                    f"{'-' if carry is None else f'{carry:.0%}'} | "
                    f"{r['six_prompt_sd_median']:.3f} | {r['six_prompt_sd_below_0.05']:.0%} |")
    return rows


def rate_table(payload: dict[str, Any]) -> list[str]:
    """The error rates as markdown rows (CALIBRATION.md Sec. 3)."""
    rows = ["| prompts | rule | candidates | draws | recommends a setting >= 0.05 below "
            "(95 %) | recommends the reference | named most often to try |",
            "|---|---|---|---|---|---|---|"]
    for rule, lists in payload["error_rates"].items():
        for cands, sizes in lists.items():
            for size, r in sizes.items():
                lo, hi = r["error_rate_ci95"]
                ref = r["recommended"].get(payload["reference"], 0) / r["draws"]
                tried = ", ".join(f"{k} {v / r['draws']:.0%}" for k, v in
                                  list(r["to_try"].items())[:2]) or "-"
                rows.append(f"| {size} | {rule.replace('_', ' ')} | {cands} "
                            f"({len(payload['candidate_lists'][cands])}) | {r['draws']} | "
                            f"{r['error_rate']:.2%} [{lo:.2%}, {hi:.2%}] | {ref:.1%} | {tried} |")
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--collect", action="store_true", help="score the stored sweep (model)")
    ap.add_argument("--runs", default=str(RESULTS_DIR / "self_score_runs"))
    ap.add_argument("--test-prompts", type=int, default=105)
    ap.add_argument("--validation-prompts", type=int, default=210)
    ap.add_argument("--batch", type=int, default=35)
    ap.add_argument("--scores", default=str(SCORES))
    ap.add_argument("--sizes", default="6,12,24,48")
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--check", type=int, default=50, help="draws per size and list also run "
                    "through build_report whole")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rules", default="floor,no_floor", help="floor: the rule as shipped; "
                    "no_floor: without the spread floor (the rule before the spread floor)")
    ap.add_argument("--margin", type=float, default=DEFAULT_MARGIN)
    ap.add_argument("--out", default=str(RESULTS_DIR))
    a = ap.parse_args(argv)
    a.argv = argv
    return collect(a) if a.collect else analyse(a)


if __name__ == "__main__":
    main()

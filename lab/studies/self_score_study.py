"""The self-score study's arithmetic: how per-token self-scores become one number per image, the
calibration margin fitted against the nano evaluator, the verdict on a prompt set, and the kind
of error behind an evaluator loss.

Shared by ``lab/studies/self_score*.py`` and ``lab/studies/calibration_*.py`` and tested on data
where the answer is known (``lab/tests/studies/test_self_score_study.py``).

Shapes: a probe's maps are ``{branch: float32 [images, passes, h * w]}`` (log p of the true
token where a pass re-masked it, NaN elsewhere) plus ``"block": int [images, h * w]`` (each
token's block id); a setting's values are ``float [images]`` (one self-score per image, same
prompts and seeds in every setting).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lab.nano import scenes
from lab.nano.evaluator import check, detect
from lab.studies.paired_stats import _boot_scores, _resample
from ladr_core.calibrate import paired_mean_ci, paired_spread, prompts_needed, spearman

BASE = "baseline-64"
"""The reference every setting is compared with (same prompts and seeds)."""
DROP = 0.05
"""An evaluator drop that matters: the margin is the self-score difference that goes with it."""
BROKEN = 0.35
"""Evaluator overall below this: a broken setting, left out of fits and of ``spearman_working``."""
NEAREST = 3
"""The spread that plans the prompts is the median over the ``NEAREST`` settings the evaluator
puts closest to baseline-64: the spread grows with the loss (on validation from 0.13 at an
evaluator drop of 0.15 to 0.24 at 0.44), and the settings a calibration hopes to accept are
the near ones."""
KINDS = ("malformed", "count", "shape", "colour", "relation", "other")
"""Kinds of error behind an evaluator loss, in the order ``error_kind`` tries them."""
Maps = dict[str, dict[str, np.ndarray]]  # probe -> {branch or "block": array}


def mean_score(maps: Maps, probe: str, branch: str, passes: int | None) -> np.ndarray:
    """Per image: the mean log p over every token its first ``passes`` passes re-masked
    (``adherence``: cond minus uncond)."""
    x = maps[probe][branch][:, :passes] if branch != "adherence" else (
        maps[probe]["cond"][:, :passes] - maps[probe]["uncond"][:, :passes])
    return np.nansum(x, axis=(1, 2)) / np.isfinite(x).sum(axis=(1, 2))


def block_means(maps: Maps, probe: str, branch: str, passes: int | None) -> list[np.ndarray]:
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


def tail_score(maps: Maps, probe: str, branch: str, passes: int | None, q: float) -> np.ndarray:
    """Mean of the lowest share ``q`` of an image's block means (q -> 0: the worst block)."""
    out = []
    for v in block_means(maps, probe, branch, passes):
        k = max(1, int(round(q * v.size)))
        out.append(np.sort(v)[:k].mean())
    return np.array(out)


def fit(values: dict[str, np.ndarray], evaluator: dict[str, dict]) -> dict[str, Any]:
    """Slope through the origin of the self-score difference on the evaluator difference (the
    settings that are not broken), margin = slope x ``DROP``, the spread of the per-prompt
    differences (median over the ``NEAREST`` settings), the prompts that spread and margin
    need, and each LADR setting's ratio to the line (``worst_ratio``: the smallest)."""
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
    """Per setting: self-score difference with its interval, the evaluator's. The settings the
    evaluator puts >= ``DROP`` below the reference (interval excluding 0) and, among them,
    those the self-score misses: ``missed_mean`` (mean difference above -margin),
    ``missed_lo`` (lower interval end above -margin: the calibration rule would accept it),
    ``missed_zero`` (interval reaching 0: the old rule); Spearman over settings."""
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


def error_kind(spec: scenes.Spec, image: np.ndarray) -> str:
    """The first kind of error that explains why ``image`` (uint8 [H, W, 3]) fails ``spec``,
    read from the evaluator's own detections:

      malformed  a detected component fits no shape (a broken, bitten or merged shape);
      count      the number of well-formed objects differs from the prompt's;
      shape      as many objects as asked, some of the wrong shape;
      colour     the right shapes, some of the wrong colour;
      relation   the right objects, the spatial relation does not hold.
    """
    dets = detect(image)
    if any(d.shape == "blob" for d in dets):
        return "malformed"
    if len(dets) != len(spec.objects):
        return "count"
    if sorted(o[0] for o in spec.objects) != sorted(d.shape for d in dets):
        return "shape"
    if not check(scenes.Spec(spec.category, spec.objects), dets):
        return "colour"
    return "relation" if spec.relation is not None else "other"

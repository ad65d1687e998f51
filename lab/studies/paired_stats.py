"""Paired, stratified bootstrap for quality differences between two strategies on the same prompts.

Every strategy generates the same prompts with the same seeds, so a difference is measured on
pairs: a resample draws prompt indices (with replacement, within each report group so every
group keeps its size) and applies the SAME indices to both strategies. The 95 % interval is the
2.5 / 97.5 percentile of the resampled differences (Efron & Tibshirani, percentile method).

Scores: per group the pass rate; `overall` = mean over `OVERALL_GROUPS` (GenEval's six
categories, colour attribution on training-distribution pairs); unseen pairs are a group of their
own, outside `overall`.
"""

from __future__ import annotations

import numpy as np

from lab.nano.scenes import TEST_GROUPS

OVERALL_GROUPS = TEST_GROUPS[:6]


def group_index(groups: list[str]) -> np.ndarray:
    """Group names -> int array [n] of indices into TEST_GROUPS."""
    unknown = sorted(set(groups) - set(TEST_GROUPS))
    if unknown:
        raise ValueError(f"unknown report groups {unknown}; expected names from {TEST_GROUPS}")
    return np.array([TEST_GROUPS.index(g) for g in groups], dtype=np.int64)


def scores(passed: np.ndarray, gidx: np.ndarray) -> dict[str, float]:
    """Pass rate per present group and `overall` (mean of the present OVERALL_GROUPS)."""
    passed = np.asarray(passed, dtype=np.float64)
    out = {g: float(passed[gidx == i].mean()) for i, g in enumerate(TEST_GROUPS)
           if (gidx == i).any()}
    core = [out[g] for g in OVERALL_GROUPS if g in out]
    out["overall"] = float(np.mean(core)) if core else float("nan")
    return out


def _resample(gidx: np.ndarray, n_boot: int, rng: np.random.Generator) -> dict[int, np.ndarray]:
    """Per group: index matrix [n_boot, n_g] of prompts drawn with replacement inside it."""
    out = {}
    for g in np.unique(gidx):
        members = np.flatnonzero(gidx == g)
        out[int(g)] = members[rng.integers(0, len(members), (n_boot, len(members)))]
    return out


def _boot_scores(values: np.ndarray, draws: dict[int, np.ndarray]) -> dict[str, np.ndarray]:
    """Resampled group means [n_boot] of `values` [n] and the resampled overall."""
    per = {TEST_GROUPS[g]: values[idx].mean(axis=1) for g, idx in draws.items()}
    core = [per[g] for g in OVERALL_GROUPS if g in per]
    per["overall"] = np.mean(core, axis=0) if core else np.full(len(next(iter(per.values()))),
                                                                np.nan)
    return per


def paired_bootstrap(passed_a: np.ndarray, passed_b: np.ndarray, gidx: np.ndarray,
                     n_boot: int = 4000, seed: int = 0) -> dict[str, dict[str, float]]:
    """Difference a - b per group and overall: {name: {"diff", "lo", "hi"}} (95 % percentile CI).

    passed_a / passed_b: bool [n] for the same prompts in the same order; gidx: groups [n].
    """
    a = np.asarray(passed_a, dtype=np.float64)
    b = np.asarray(passed_b, dtype=np.float64)
    if a.shape != b.shape or a.shape != gidx.shape:
        raise ValueError(f"paired samples must have equal shapes; got {a.shape}, {b.shape}, "
                         f"{gidx.shape}")
    draws = _resample(gidx, n_boot, np.random.default_rng(seed))
    boot_a, boot_b = _boot_scores(a, draws), _boot_scores(b, draws)
    point_a, point_b = scores(a, gidx), scores(b, gidx)
    out = {}
    for name in point_a:
        d = boot_a[name] - boot_b[name]
        out[name] = {"diff": point_a[name] - point_b[name],
                     "lo": float(np.percentile(d, 2.5)), "hi": float(np.percentile(d, 97.5))}
    return out


def ratio_ci(nfe_ref: np.ndarray, nfe: np.ndarray, n_boot: int = 4000,
             seed: int = 0) -> dict[str, float]:
    """mean(nfe_ref) / mean(nfe) over the same prompts, with a paired 95 % percentile CI."""
    ref, x = np.asarray(nfe_ref, np.float64), np.asarray(nfe, np.float64)
    idx = np.random.default_rng(seed).integers(0, len(x), (n_boot, len(x)))
    r = ref[idx].mean(axis=1) / x[idx].mean(axis=1)
    return {"ratio": float(ref.mean() / x.mean()), "lo": float(np.percentile(r, 2.5)),
            "hi": float(np.percentile(r, 97.5))}

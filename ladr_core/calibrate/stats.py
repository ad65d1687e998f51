"""Paired statistics for self-scores: bootstrap intervals, rank correlation, AUROC, the Pareto
front and the recommendation rule. numpy only (no scipy in a ComfyUI install).

A difference between two settings is measured on pairs: both ran the same prompts with the same
seeds, so a resample draws prompt indices with replacement and applies the SAME indices to both
(percentile method, 95 %). With several seeds per prompt, the seeds of a prompt are averaged
first and prompts are resampled (the prompt is the unit a user varies).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["auroc", "paired_mean_ci", "paired_spread", "paired_t_interval", "pareto_front",
           "rankdata", "spearman", "t_interval", "t_quantile_975"]


def paired_mean_ci(a: Sequence[float], b: Sequence[float], groups: Sequence[int] | None = None,
                   n_boot: int = 4000, seed: int = 0) -> dict[str, float]:
    """mean(a) - mean(b) over paired items [n] with a 95 % percentile bootstrap interval:
    {"diff", "lo", "hi", "n"}. groups: a cluster id per item (its prompt), averaged first and
    resampled. ValueError on unequal lengths, fewer than 2 units or non-finite values.
    """
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired values must be two 1-D arrays of equal length; got {x.shape} "
                         f"and {y.shape}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("paired values must be finite (a self-score is NaN: cfg 0 has no "
                         "unconditional row)")
    d = x - y
    if groups is not None:
        g = np.asarray(groups)
        if g.shape != d.shape:
            raise ValueError(f"groups must have one id per item; got {g.shape} for {d.shape}")
        _, inverse = np.unique(g, return_inverse=True)
        d = np.bincount(inverse, weights=d) / np.bincount(inverse)
    if d.size < 2:
        raise ValueError(f"a paired interval needs at least 2 prompts; got {d.size}")
    idx = np.random.default_rng(seed).integers(0, d.size, (n_boot, d.size))
    boot = d[idx].mean(axis=1)
    return {"diff": float(d.mean()), "lo": float(np.percentile(boot, 2.5)),
            "hi": float(np.percentile(boot, 97.5)), "n": int(d.size)}


def paired_spread(a: Sequence[float], b: Sequence[float],
                  groups: Sequence[int] | None = None) -> float:
    """Standard deviation (n - 1) of the per-prompt differences a - b (items of a group averaged
    first, as ``paired_mean_ci``); 0.0 for fewer than 2 prompts."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if groups is not None:
        _, inverse = np.unique(np.asarray(groups), return_inverse=True)
        d = np.bincount(inverse, weights=d) / np.bincount(inverse)
    return float(d.std(ddof=1)) if d.size > 1 else 0.0


_T975 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
         2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
         2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423)


def t_quantile_975(df: int) -> float:
    """The 97.5 % quantile of Student's t with ``df`` degrees of freedom (>= 1): the usual
    table to 30, then the Cornish-Fisher expansion in 1 / df (Abramowitz & Stegun 26.7.5)."""
    if df < 1:
        raise ValueError(f"df must be >= 1; got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = 1.959964
    g = ((z ** 3 + z) / 4, (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96,
         (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384,
         (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / 92160)
    return z + sum(gk / df ** (k + 1) for k, gk in enumerate(g))


def paired_t_interval(a: Sequence[float], b: Sequence[float],
                      groups: Sequence[int] | None = None, min_sd: float = 0.0
                      ) -> dict[str, float]:
    """mean(a) - mean(b) with Student's 95 % interval over the per-prompt differences:
    {"diff", "lo", "hi", "n", "sd"}; wider than the bootstrap's on few prompts, where that one
    is too narrow. ``min_sd`` floors the spread, so a few prompts that happen to agree cannot
    narrow it (margin.SPREAD_FLOOR)."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if groups is not None:
        _, inverse = np.unique(np.asarray(groups), return_inverse=True)
        d = np.bincount(inverse, weights=d) / np.bincount(inverse)
    if d.size < 2:
        raise ValueError(f"a paired interval needs at least 2 prompts; got {d.size}")
    return t_interval(float(d.mean()), float(d.std(ddof=1)), int(d.size), min_sd)


def t_interval(mean: float, sd: float, n: int, min_sd: float = 0.0) -> dict[str, float]:
    """Student's 95 % interval of a mean of ``n`` >= 2 values with standard deviation ``sd``
    (n - 1), computed with max(sd, min_sd): {"diff", "lo", "hi", "n", "sd"} (``sd``: the one
    used)."""
    used = max(float(sd), float(min_sd))
    half = t_quantile_975(n - 1) * used / math.sqrt(n)
    return {"diff": mean, "lo": mean - half, "hi": mean + half, "n": int(n), "sd": used}


def rankdata(x: Sequence[float]) -> np.ndarray:
    """Ranks 1..n of ``x`` with ties given their average rank (scipy's 'average')."""
    v = np.asarray(x, dtype=np.float64)
    order = np.argsort(v, kind="stable")
    ranks = np.empty(v.size, dtype=np.float64)
    ranks[order] = np.arange(1, v.size + 1)
    uniq, inverse = np.unique(v, return_inverse=True)
    sums = np.bincount(inverse, weights=ranks)
    return (sums / np.bincount(inverse))[inverse] if uniq.size < v.size else ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman rank correlation: Pearson's r of the average ranks (NaN if a side is constant)."""
    rx, ry = rankdata(x), rankdata(y)
    if rx.size != ry.size or rx.size < 2:
        raise ValueError("spearman needs two sequences of equal length >= 2")
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denom = float(np.sqrt((rx ** 2).sum() * (ry ** 2).sum()))
    return float((rx * ry).sum() / denom) if denom > 0 else float("nan")


def auroc(score: Sequence[float], positive: Sequence[bool]) -> float:
    """Area under the ROC curve of ``score`` for the labels (Mann-Whitney U / (n+ n-)), ties
    counted half; NaN when one class is empty."""
    s = np.asarray(score, dtype=np.float64)
    pos = np.asarray(positive, dtype=bool)
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(s)
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def pareto_front(cost: Sequence[float], value: Sequence[float]) -> list[int]:
    """Indices of the points no other point dominates (lower or equal cost AND higher or equal
    value, one of them strictly), sorted by cost."""
    c, v = np.asarray(cost, np.float64), np.asarray(value, np.float64)
    out = []
    for i in range(c.size):
        better = (c <= c[i]) & (v >= v[i]) & ((c < c[i]) | (v > v[i]))
        if not better.any():
            out.append(i)
    return sorted(out, key=lambda i: (c[i], -v[i]))

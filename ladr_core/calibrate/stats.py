"""Paired statistics for self-scores: bootstrap intervals, rank correlation, AUROC, the Pareto
front and the recommendation rule. numpy only (no scipy in a ComfyUI install).

A difference between two settings is measured on pairs: both ran the same prompts with the same
seeds, so a resample draws prompt indices with replacement and applies the SAME indices to both
(percentile method, 95 %). With several seeds per prompt, the seeds of a prompt are averaged
first and prompts are resampled (the prompt is the unit a user varies).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["auroc", "pareto_front", "paired_mean_ci", "rankdata", "spearman"]


def paired_mean_ci(a: Sequence[float], b: Sequence[float], groups: Sequence[int] | None = None,
                   n_boot: int = 4000, seed: int = 0) -> dict[str, float]:
    """mean(a) - mean(b) over paired items with a 95 % percentile bootstrap interval.

    a, b: per-item values [n] (item i of a and b: same prompt, same seed). groups: optional
    [n] cluster id per item (e.g. the prompt of each (prompt, seed) item): items of a cluster
    are averaged and clusters resampled. Returns {"diff", "lo", "hi", "n"}. Raises ValueError
    on unequal lengths, fewer than 2 units, or non-finite values.
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

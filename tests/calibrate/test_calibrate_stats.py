"""ladr_core.calibrate.stats against hand-computed values (numpy only, no scipy)."""

from __future__ import annotations

import numpy as np
import pytest

from ladr_core.calibrate.stats import auroc, paired_mean_ci, pareto_front, rankdata, spearman


def test_ranks_average_ties() -> None:
    assert rankdata([10, 20, 20, 5]).tolist() == [2.0, 3.5, 3.5, 1.0]
    assert rankdata([3, 1, 2]).tolist() == [3.0, 1.0, 2.0]


def test_spearman_known_values() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    # one swap among 5: 1 - 6 * 2 / (5 * 24) = 0.9
    assert spearman([1, 2, 3, 4, 5], [1, 2, 3, 5, 4]) == pytest.approx(0.9)
    assert np.isnan(spearman([1, 1, 1], [1, 2, 3]))


def test_auroc_counts_pairs_and_half_ties() -> None:
    assert auroc([0.9, 0.8, 0.1, 0.2], [True, True, False, False]) == 1.0
    assert auroc([0.1, 0.2, 0.9, 0.8], [True, True, False, False]) == 0.0
    # pos {0.5, 0.7}, neg {0.5, 0.1}: pairs (0.5>0.5 tie .5)+(0.5>0.1)+(0.7>0.5)+(0.7>0.1)=3.5/4
    assert auroc([0.5, 0.7, 0.5, 0.1], [True, True, False, False]) == pytest.approx(0.875)
    assert np.isnan(auroc([1, 2], [True, True]))


def test_paired_interval_covers_the_mean_difference_and_clusters() -> None:
    rng = np.random.default_rng(0)
    b = rng.normal(size=200)
    a = b - 0.3 + rng.normal(scale=0.1, size=200)
    ci = paired_mean_ci(a, b)
    assert ci["diff"] == pytest.approx(float((a - b).mean()))
    assert ci["lo"] < ci["diff"] < ci["hi"] < 0 and ci["n"] == 200
    assert paired_mean_ci(a, b) == ci  # seeded
    same = paired_mean_ci(b, b)
    assert same["lo"] == same["hi"] == 0.0
    # two seeds per prompt: 100 prompts are resampled, not 200 images
    grouped = paired_mean_ci(a, b, groups=np.repeat(np.arange(100), 2))
    assert grouped["n"] == 100 and grouped["diff"] == pytest.approx(ci["diff"])


@pytest.mark.parametrize("a, b, match", [
    ([1.0, 2.0], [1.0], "equal length"), ([1.0], [2.0], "at least 2"),
    ([1.0, float("nan")], [1.0, 2.0], "finite")])
def test_paired_interval_refuses_bad_input(a, b, match) -> None:
    with pytest.raises(ValueError, match=match):
        paired_mean_ci(a, b)


def test_pareto_front() -> None:
    cost = [64, 18, 20, 14, 30]
    value = [0.0, -0.1, -0.2, -0.3, -0.05]
    assert pareto_front(cost, value) == [3, 1, 4, 0]

"""LADRPolicy / ProphetPolicy: the paper's defaults, frozen, exact alpha budgets, presets."""

from __future__ import annotations

import dataclasses
import math

import pytest

from ladr_core import PRESETS, LADRPolicy, ProphetPolicy


def test_defaults_are_the_papers() -> None:
    p = LADRPolicy()
    assert p.phase_bounds == (0.2, 0.7)
    assert p.tau == (0.05, 0.05, None)
    assert p.alpha == (0.1, 0.3, 1.0)
    assert (p.kernel_size, p.metric, p.candidates, p.delayed) == (3, "margin", "neighbors", False)
    q = ProphetPolicy()
    assert q.thresholds == (7.5, 5.0, 2.5) and q.progress_bounds == (0.33, 0.67)


def test_frozen_and_lists_become_tuples() -> None:
    p = LADRPolicy(tau=[0.1, 0.1, None], alpha=[0.2, 0.4, 1], phase_bounds=[0.1, 0.9])
    assert p.tau == (0.1, 0.1, None) and p.alpha == (0.2, 0.4, 1.0)
    assert p.phase_bounds == (0.1, 0.9)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.kernel_size = 5  # type: ignore[misc]
    assert hash(p) == hash(LADRPolicy(tau=(0.1, 0.1, None), alpha=(0.2, 0.4, 1.0),
                                      phase_bounds=(0.1, 0.9)))


def test_alpha_budget_is_exact_decimal() -> None:
    p = LADRPolicy(alpha=(0.29, 0.3, 1.0))
    (n0, d0), (n1, d1), (n2, d2) = p.alpha_fractions()
    assert math.floor(100 * 0.29) == 28  # what float rounding would give
    assert 100 * n0 // d0 == 29
    assert 10 * n1 // d1 == 3 and 7 * n2 // d2 == 7


def test_delayed_zeroes_the_exploration_budget_only() -> None:
    assert LADRPolicy(delayed=True).alpha_fractions()[0] == (0, 1)
    assert LADRPolicy(delayed=True).alpha_fractions()[1:] == LADRPolicy().alpha_fractions()[1:]


def test_prophet_threshold_by_progress() -> None:
    q = ProphetPolicy(thresholds=(3.0, 2.0, 1.0), progress_bounds=(0.25, 0.5))
    assert [q.threshold(x) for x in (0.0, 0.24, 0.25, 0.49, 0.5, 0.99)] == [3, 3, 2, 2, 1, 1]


def test_presets() -> None:
    assert PRESETS["paper"].policy == LADRPolicy()
    assert PRESETS["delayed"].policy == LADRPolicy(delayed=True)
    assert all(isinstance(p, LADRPolicy) for p in (q.policy for q in PRESETS.values()))
    assert {p.candidates for p in (q.policy for q in PRESETS.values())} == {"neighbors", "non_neighbors",
                                                               "random"}
    assert {p.metric for p in (q.policy for q in PRESETS.values())} == {"margin", "confidence", "random"}

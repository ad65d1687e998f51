"""Mask schedules: endpoints, monotonicity, clamping, and gamma^-1 as the inverse of gamma."""

from __future__ import annotations

import math

import pytest
import torch

from ladr_core import get_schedule
from ladr_core.schedules import SCHEDULES, Schedule


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_endpoints_and_monotone(name: str) -> None:
    s = get_schedule(name)
    assert s.gamma(0.0) == pytest.approx(1.0) and s.gamma(1.0) == pytest.approx(0.0, abs=1e-12)
    t = torch.linspace(0, 1, 101, dtype=torch.float64)
    g = s.gamma(t)
    assert (g[1:] < g[:-1]).all()


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_inverse_both_ways_float_and_tensor(name: str) -> None:
    s = get_schedule(name)
    t = torch.linspace(0, 1, 257, dtype=torch.float64)
    assert torch.allclose(s.gamma_inv(s.gamma(t)), t, atol=1e-7)
    r = torch.linspace(0, 1, 257, dtype=torch.float64)
    assert torch.allclose(s.gamma(s.gamma_inv(r)), r, atol=1e-12)
    for x in (0.0, 0.13, 0.5, 0.77, 1.0):
        assert s.gamma_inv(s.gamma(x)) == pytest.approx(x, abs=1e-7)
        assert s.gamma(s.gamma_inv(x)) == pytest.approx(x, abs=1e-12)


def test_cosine_formula_matches_paper_and_official() -> None:
    s = get_schedule()
    assert s.name == "cosine"
    assert s.gamma(0.3) == pytest.approx(math.cos(math.pi * 0.3 / 2))
    assert s.gamma_inv(0.5) == pytest.approx(2 / math.pi * math.acos(0.5))
    t = torch.tensor([0.25], dtype=torch.float32)
    assert torch.equal(s.gamma(t), torch.cos(0.5 * math.pi * t))  # official cosine_schedule
    assert get_schedule("linear").gamma(0.3) == pytest.approx(0.7)


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_inputs_are_clamped(name: str) -> None:
    s = get_schedule(name)
    assert s.gamma(-0.5) == s.gamma(0.0) and s.gamma(1.5) == s.gamma(1.0)
    assert s.gamma_inv(1.2) == s.gamma_inv(1.0) and s.gamma_inv(-0.1) == s.gamma_inv(0.0)
    out = s.gamma_inv(torch.tensor([1.0000001, -1e-7], dtype=torch.float32))
    assert torch.isfinite(out).all() and out.dtype == torch.float32


def test_get_schedule_passthrough_and_errors() -> None:
    custom = Schedule("half", lambda t: 1 - t, lambda r: 1 - r)
    assert get_schedule(custom) is custom
    with pytest.raises(ValueError, match=r"schedule must be one of \['cosine', 'linear'\]"):
        get_schedule("exp")
    with pytest.raises(ValueError, match="schedule must be one of"):
        get_schedule(None)  # type: ignore[arg-type]

"""Baseline strategy == a plain port of the official DiMOO loop (tests/support/official.py)."""

from __future__ import annotations

import pytest
import torch
from support.official import reference_generate

from ladr_core import sample
from tests.kit.fakes import LocalityDenoiser, make_table


@pytest.mark.parametrize(
    ("grid", "steps", "seed"), [((4, 4), 8, 0), ((6, 5), 12, 1), ((8, 8), 16, 2), ((3, 7), 1, 3)]
)
def test_baseline_equals_official_at_temperature_zero(grid, steps, seed) -> None:
    n = grid[0] * grid[1]
    table = make_table(1, n, 12, seed=seed)
    ref_tokens, ref_nfe = reference_generate(LocalityDenoiser(table, grid), n, steps, 0.0, None)
    res = sample(LocalityDenoiser(table, grid), (1, *grid), steps, strategy="baseline",
                 temperature=0.0)
    assert torch.equal(res.tokens, ref_tokens)
    assert res.nfe == ref_nfe == res.steps


@pytest.mark.parametrize("temperature", [1.0, 0.7, 2.5])
@pytest.mark.parametrize("seed", [0, 5])
def test_baseline_equals_official_with_fixed_noise(temperature, seed) -> None:
    grid, steps, n = (6, 6), 10, 36
    table = make_table(1, n, 10, seed=seed + 11)
    g_ref = torch.Generator().manual_seed(seed)
    ref_tokens, ref_nfe = reference_generate(
        LocalityDenoiser(table, grid), n, steps, temperature, g_ref
    )
    g = torch.Generator().manual_seed(seed)
    res = sample(LocalityDenoiser(table, grid), (1, *grid), steps, strategy="baseline",
                 temperature=temperature, generator=g)
    assert torch.equal(res.tokens, ref_tokens)
    assert res.nfe == ref_nfe
    # Both consumed exactly the same random numbers in the same order.
    assert torch.equal(g.get_state(), g_ref.get_state())


def test_baseline_mask_counts_follow_official_schedule() -> None:
    """Masked count after step s is keep_n(s) = floor(N cos(pi/2 (s+1)/T)) >= 1, 0 at the end."""
    import math

    grid, steps, n = (8, 8), 10, 64
    counts: list[int] = []
    sample(LocalityDenoiser(make_table(1, n, 9, seed=4), grid), (1, *grid), steps,
           strategy="baseline", temperature=0.0,
           callback=lambda r: counts.append(int(r["masked"].sum())))
    expected = [max(1, math.floor(n * math.cos(math.pi / 2 * (s + 1) / steps)))
                for s in range(steps - 1)] + [0]
    assert counts == expected

"""official_passes: the official sampler's forward passes for a job, as the stats line quotes
them, equal the passes a real Baseline run makes (text-to-image, and with known tokens the
count to generate), for holes smaller and larger than T."""

from __future__ import annotations

import pytest
import torch

from ladr_core import Baseline, KnownTokens, official_passes, sample
from tests.kit.fakes import LocalityDenoiser, make_table

K = 12


def _baseline_nfe(grid: tuple[int, int], steps: int, hole: int | None, seed: int) -> int:
    """NFE of one Baseline run on a fake denoiser; `hole`: generate only the first `hole`
    tokens (row-major), the rest known."""
    n = grid[0] * grid[1]
    den = LocalityDenoiser(make_table(1, n, K, seed=seed), grid)
    known = None
    if hole is not None:
        generate = torch.zeros(1, n, dtype=torch.bool)
        generate[0, :hole] = True
        known = KnownTokens(torch.randint(0, K, (1, n), generator=torch.Generator()
                                          .manual_seed(seed)), generate)
    res = sample(den, (1, *grid), steps, strategy=Baseline(), temperature=1.0,
                 generator=[torch.Generator().manual_seed(seed)], known=known)
    return int(res.nfe)


@pytest.mark.parametrize(("grid", "steps", "hole"), [
    ((12, 12), 64, None),  # nano text-to-image: 144 tokens > T
    ((6, 6), 64, None),  # 36 tokens < T: one per step at the end
    ((12, 12), 64, 36),  # an inpainting hole
    ((12, 12), 64, 72),  # outpainting half the image
    ((12, 12), 16, 5),
    ((4, 4), 8, 3),
])
def test_official_passes_equal_a_real_baseline_run(grid, steps, hole) -> None:
    n = grid[0] * grid[1] if hole is None else hole
    predicted = official_passes(n, steps)
    for seed in (0, 1, 2):
        assert _baseline_nfe(grid, steps, hole, seed) == predicted, (seed, n, steps)
    assert predicted <= min(n, steps)


def test_known_values_and_bad_input() -> None:
    assert official_passes(144) == 64 and official_passes(0) == 0 and official_passes(1) == 1
    for bad in (-1, 2.5, True, "3"):
        with pytest.raises(ValueError, match="to_generate"):
            official_passes(bad)
    with pytest.raises(ValueError, match="steps"):
        official_passes(10, 0)

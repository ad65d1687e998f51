"""Eq. 9 frontier by max-pool dilation == the paper's Definition evaluated by brute force."""

from __future__ import annotations

import pytest
import torch

from ladr_core.strategies.rescue import dilate, frontier


def brute(masked: list[bool], h: int, w: int, k: int) -> list[bool]:
    r = k // 2
    out = []
    for i, m in enumerate(masked):
        y, x = divmod(i, w)
        near = any(
            not masked[yy * w + xx]
            for yy in range(max(0, y - r), min(h, y + r + 1))
            for xx in range(max(0, x - r), min(w, x + r + 1))
        )
        out.append(m and near)
    return out


def test_single_decoded_token_center_and_corner() -> None:
    masked = torch.ones(1, 25, dtype=torch.bool)
    masked[0, 12] = False  # centre of 5 x 5
    f = frontier(masked, (5, 5), 3).view(5, 5)
    expect = torch.zeros(5, 5, dtype=torch.bool)
    expect[1:4, 1:4] = True
    expect[2, 2] = False
    assert torch.equal(f, expect)
    masked = torch.ones(1, 25, dtype=torch.bool)
    masked[0, 0] = False
    assert frontier(masked, (5, 5), 3).sum() == 3
    assert frontier(masked, (5, 5), 5).sum() == 8


@pytest.mark.parametrize(("h", "w"), [(1, 1), (1, 6), (4, 5), (7, 7)])
@pytest.mark.parametrize("k", [1, 3, 5])
def test_matches_definition_on_random_masks(h: int, w: int, k: int) -> None:
    g = torch.Generator().manual_seed(h * 31 + w * 7 + k)
    masked = torch.rand(4, h * w, generator=g) < torch.tensor([[0.1], [0.5], [0.9], [1.0]])
    f = frontier(masked, (h, w), k)
    for b in range(4):
        assert f[b].tolist() == brute(masked[b].tolist(), h, w, k)


def test_dilate_includes_the_set_and_kernel_one_is_identity() -> None:
    x = torch.rand(2, 20, generator=torch.Generator().manual_seed(0)) < 0.3
    assert torch.equal(dilate(x, (4, 5), 1), x)
    assert (dilate(x, (4, 5), 3) | ~x).all()
    assert not frontier(~x, (4, 5), 1).any()


def test_grid_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"grid \(4, 4\) does not match N=20"):
        dilate(torch.zeros(1, 20, dtype=torch.bool), (4, 4), 3)

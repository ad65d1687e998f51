"""The Halton unmasking order (Besnier et al. 2025, arXiv 2503.17076, valeoai/Halton-MaskGIT):
`Halton()` keeps the official sampler's count per step and takes positions in a fixed
low-discrepancy order over the token grid instead of by confidence.

The order: points i = 1, 2, ... of the 2D Halton sequence (radical inverse base 2 for the row,
base 3 for the column, as `build_halton_mask`) scaled to the H x W grid; each cell takes the
rank of the first point in it. The first P = 2^a 3^b points with 2^a >= 2H and 3^b >= 2W
(P < 24 N) order any grid: any P consecutive points put one point into each box of 2^-a by
3^-b, and a cell holds a whole box. Every prefix spreads over the grid: on a 2^a x 3^b grid the
first 2^i 3^j positions fall one into each block of (H / 2^i) x (W / 3^j) cells
(tests/core/test_strategies_rivals.py). `halton_order` builds the order once per run on the
device in integers; the per-step rule is the official one (baseline.py) ranking by it. Known
tokens (painting) are not masked, so they are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, ClassVar

import torch

from ..registry import register_strategy
from ..step import Commit, Needs, Strategy
from .baseline import baseline_keep, baseline_remask
from .select import plain_commit

if TYPE_CHECKING:  # annotations only
    from ..noise import StepNoise
    from ..step import RunInfo, Stats, StepRule


def check_grid(grid: object) -> tuple[int, int]:
    """The token grid (H, W) a Halton order is built for: two ints >= 1 (ValueError naming
    `grid` otherwise)."""
    ok = isinstance(grid, (tuple, list)) and len(grid) == 2
    ok = ok and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in grid)
    if not ok:
        raise ValueError(f"halton: grid must be (H, W), two ints >= 1 (the token grid, N = H * W "
                         f"tokens in row-major order); got {grid!r}")
    return int(grid[0]), int(grid[1])


def _power(base: int, above: int) -> int:
    """The exponent e of the smallest base^e >= above."""
    e = 0
    while base**e < above:
        e += 1
    return e


def _cell(index: torch.Tensor, base: int, digits: int, cells: int) -> torch.Tensor:
    """floor(phi_base(index) * cells) for LongTensor index [P], exactly: the radical inverse
    phi = sum_k d_k base^-(k+1) (d_k the k-th digit, least significant first) as the integer
    numerator over base^digits."""
    num = torch.zeros_like(index)
    rest = index.clone()
    for _ in range(digits):
        num = num * base + rest % base
        rest = rest // base
    return num * cells // base**digits


def halton_order(grid: tuple[int, int], device: torch.device | str = "cpu") -> torch.Tensor:
    """Positions 0..N-1 of an H x W grid (row-major) in Halton order: LongTensor [N] on
    `device`, a permutation (module docstring)."""
    h, w = check_grid(grid)
    points = 2 ** _power(2, 2 * h) * 3 ** _power(3, 2 * w)
    index = torch.arange(1, points + 1, device=device)
    # every digit of every index <= points (base^e > points)
    rows = _cell(index, 2, _power(2, points + 1), h)
    cols = _cell(index, 3, _power(3, points + 1), w)
    first = torch.full((h * w,), points + 1, dtype=torch.long, device=device)
    first.scatter_reduce_(0, rows * w + cols, index, reduce="amin")
    return torch.argsort(first, stable=True)


def halton_score(grid: tuple[int, int], device: torch.device) -> torch.Tensor:
    """A ranking score [1, N] (float32, higher = unmasked first): minus each position's rank in
    the Halton order."""
    order = halton_order(grid, device)
    rank = torch.empty_like(order).scatter_(0, order, torch.arange(order.numel(), device=device))
    return rank.neg().to(torch.float32).unsqueeze(0)


@register_strategy
@dataclass(frozen=True)
class Halton(Strategy):
    """The official keep count per step (`baseline_keep`) with positions taken in Halton order,
    committing the temperature sample: one forward per step, as the official sampler
    (docs/reports/SAMPLERS.md)."""

    name: ClassVar[str] = "halton"
    step_invariant: ClassVar[bool] = True  # `step` is read only as a tensor

    def needs(self) -> Needs:
        return Needs(frozenset())

    def begin(self, run: RunInfo) -> StepRule:
        return partial(self.commit, run, halton_score(run.grid, run.device))

    def commit(self, run: RunInfo, score: torch.Tensor, step: torch.Tensor, masked: torch.Tensor,
               stats: Stats, noise: StepNoise) -> Commit:
        """One step: the `baseline_keep` count of item b's step step[b] stays masked, the
        positions latest in the order (score [1, N]); the rest of the mask is committed."""
        keep = baseline_keep(run.generated(), step, run.steps, run.schedule)
        chosen = masked & ~baseline_remask(masked, score.expand_as(masked), keep)
        return plain_commit(run, masked, chosen, stats.sampled)


__all__ = ["Halton", "check_grid", "halton_order", "halton_score"]

"""Deterministic fakes shared by the tests and the benchmarks: denoisers with no network and no
host sync, a step record, and a pipeline that only previews.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ladr_core.dimoo.model.vq import preview_from_table


class LocalityDenoiser:
    """Deterministic fake denoiser whose logits depend on decoded neighbours.

    logits[b, i] = table[b, i] + coupling * (one-hot counts of the decoded tokens in the 3 x 3
    window around i), so decoded regions make their neighbours confident (the locality LADR
    exploits). table: FloatTensor [B, N, K]. Sync-free (scatter + avg-pool), so it does not
    disturb host-sync counting. Records every call's inputs and output in `calls`.
    """

    def __init__(self, table: torch.Tensor, grid: tuple[int, int], coupling: float = 1.5) -> None:
        self.table, self.grid, self.coupling = table, grid, coupling
        self.calls: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def __call__(self, tokens: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        b, n = tokens.shape
        k = self.table.shape[-1]
        h, w = self.grid
        onehot = torch.zeros(b, n, k).scatter_(-1, tokens.unsqueeze(-1), 1.0)
        onehot = onehot * (~masked).unsqueeze(-1)
        img = onehot.transpose(1, 2).reshape(b, k, h, w)
        counts = F.avg_pool2d(img, 3, stride=1, padding=1, count_include_pad=True) * 9.0
        logits = self.table + self.coupling * counts.reshape(b, k, n).transpose(1, 2)
        self.calls.append((tokens.clone(), masked.clone(), logits.clone()))
        return logits

    def item(self, i: int) -> LocalityDenoiser:
        """The same denoiser restricted to batch item i (for batch-vs-single comparisons)."""
        return LocalityDenoiser(self.table[i : i + 1], self.grid, self.coupling)


def make_table(batch: int, n: int, k: int, seed: int = 0, scale: float = 2.0) -> torch.Tensor:
    """Fixed random logit table [B, N, K] from its own generator."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, n, k, generator=g) * scale


def varied_denoiser(b: int, n: int, k: int, seed: int = 0,  # noqa: ANN201
                    device: torch.device | None = None):
    """Fake denoiser: fixed random logits plus a token-dependent shift (no host syncs)."""
    g = torch.Generator().manual_seed(seed)
    base = (torch.randn(b, n, k, generator=g) * 4.0).to(device)
    shift = torch.randn(k, generator=g).to(device)

    def denoise(tokens: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        return base + shift[tokens].unsqueeze(-1) * (~masked).unsqueeze(-1)

    return denoise


def fake_record(b: int, grid: tuple[int, int], k: int, seed: int = 0) -> dict[str, Any]:
    """A step record with half of the tokens masked and a few rescued."""
    g = torch.Generator().manual_seed(seed)
    n = grid[0] * grid[1]
    masked = torch.rand(b, n, generator=g) < 0.5
    return {"step": 3, "steps": 16, "strategy": "ladr", "nfe": 4, "grid": grid,
            "tokens": torch.randint(0, k, (b, n), generator=g), "masked": masked,
            "rescued": torch.rand(b, n, generator=g) < 0.05, "unmasked": ~masked,
            "phase": torch.ones(b, dtype=torch.long), "t_eff": torch.full((b,), 0.4)}


class TablePipe:
    """The one method of DiMOOPipeline the node callback uses, over a given preview table."""

    def __init__(self, table: torch.Tensor) -> None:
        self.table = table

    def preview(self, tokens: torch.Tensor, masked: torch.Tensor | None,
                grid: tuple[int, int]) -> torch.Tensor:
        return preview_from_table(self.table, tokens, masked, grid)

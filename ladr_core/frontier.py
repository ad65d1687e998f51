"""Morphological neighbour identification: the generation frontier of paper Eq. 9.

    M_grid     = Phi(M)                        (row-major reshape [B, N] -> [B, H, W])
    M_frontier = M_grid AND (NOT M_grid (+) K)  ((+) = dilation by the k x k kernel K)
    C_t        = { i | Phi^-1(M_frontier)[i] = 1 }

Algorithm 1 (lines 22-24) applies it to M_std, the mask left by the standard selection.
Dilation is a stride-1 max-pool with padding k // 2 (borders pad with "not decoded"), so it is one
batched kernel on the mask's device with no host synchronisation.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def dilate(decoded: torch.Tensor, grid: tuple[int, int], kernel_size: int = 3) -> torch.Tensor:
    """Dilate a token set by a k x k square kernel on the H x W grid.

    decoded: BoolTensor [B, N] with N = H * W (row-major). Returns BoolTensor [B, N]: positions
    within Chebyshev distance k // 2 of any True position (including the positions themselves).
    """
    h, w = grid
    b, n = decoded.shape
    if n != h * w:
        raise ValueError(f"grid {grid} does not match N={n} tokens (need H * W == N)")
    if kernel_size == 1:
        return decoded.clone()
    x = decoded.view(b, 1, h, w).to(torch.float32)
    pooled = F.max_pool2d(x, kernel_size=kernel_size, stride=1, padding=kernel_size // 2)
    return pooled.view(b, n) > 0


def frontier(masked: torch.Tensor, grid: tuple[int, int], kernel_size: int = 3) -> torch.Tensor:
    """Generation frontier (Eq. 9): masked positions with a decoded position in their k x k window.

    masked: BoolTensor [B, N] (True = still masked). Returns BoolTensor [B, N].
    """
    return masked & dilate(~masked, grid, kernel_size)


def rescue_candidates(m_std: torch.Tensor, masked_before: torch.Tensor, grid: tuple[int, int],
                      kernel_size: int, seen_only: bool) -> torch.Tensor:
    """Frontier candidates C_t [B, N]: Eq. 9 on M_std, or with `seen_only` neighbours of tokens
    decoded before this step (the ones the prediction was conditioned on), away from this
    step's standard picks, which the prediction could not know."""
    if not seen_only:
        return frontier(m_std, grid, kernel_size)
    fresh = masked_before & ~m_std
    return m_std & frontier(masked_before, grid, kernel_size) & ~dilate(fresh, grid, kernel_size)

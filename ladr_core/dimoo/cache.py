"""ML-Cache (Lumina-DiMOO's "max-logit cache") configuration and per-branch state.

Official semantics (``generators/image_generation_generator.py`` + the caching code of
``model/modeling_llada.py``), with T = planned steps and ``warmup_step = int(T * warmup_ratio)``:

* step ``s`` (0-based) is a *refresh* step when ``s <= warmup_step`` or
  ``(s - warmup_step) % refresh_interval == 0``: a full forward that stores every layer's K/V and
  the logits, per branch (cond / uncond);
* on any other step only the positions whose max logit (over the codebook slice) was lowest at
  the previous step are recomputed, a fraction ``1 - cache_ratio``; their fresh K/V overwrite the
  cached ones layer by layer (in place), their queries attend over the full cached K/V, and
  their logits overwrite the cached logits; every other position reuses its cached logits.

Difference from the official code (documented choice): the official ranks *every* sequence
position, text included, by a quantile threshold; here the ranking is over the image code
slots of each row, with a fixed count ``ceil((1 - cache_ratio) * N)`` so rows batch together.
The denoiser counts its own calls as steps, so the cache works with every sampling strategy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .model import LayerKV

__all__ = ["MLCacheConfig", "BranchCache"]


@dataclass(frozen=True)
class MLCacheConfig:
    """Official ML-Cache knobs (inference_t2i.py defaults)."""

    cache_ratio: float = 0.9
    warmup_ratio: float = 0.3
    refresh_interval: int = 5

    def __post_init__(self) -> None:
        if isinstance(self.cache_ratio, bool) or not 0.0 < float(self.cache_ratio) < 1.0:
            raise ValueError(f"cache_ratio must be in (0, 1) (got {self.cache_ratio!r}); "
                             "0.9 reuses 90% of the image tokens on cached steps")
        if isinstance(self.warmup_ratio, bool) or not 0.0 <= float(self.warmup_ratio) < 1.0:
            raise ValueError(f"warmup_ratio must be in [0, 1) (got {self.warmup_ratio!r}); "
                             "0.3 runs the first 30% of the steps without cache")
        if (not isinstance(self.refresh_interval, int) or isinstance(self.refresh_interval, bool)
                or self.refresh_interval < 1):
            raise ValueError(f"refresh_interval must be an int >= 1 (got {self.refresh_interval!r})")

    def warmup_step(self, steps: int) -> int:
        return int(steps * self.warmup_ratio)

    def is_refresh(self, step: int, steps: int) -> bool:
        """Official rule: step <= warmup_step or (step - warmup_step) % refresh_interval == 0."""
        warm = self.warmup_step(steps)
        return step <= warm or (step - warm) % self.refresh_interval == 0

    def n_recompute(self, n_positions: int) -> int:
        """Positions recomputed per row on a cached step: ceil((1 - cache_ratio) * N), >= 1."""
        return max(1, min(n_positions, math.ceil((1.0 - self.cache_ratio) * n_positions - 1e-9)))


class BranchCache:
    """Cached per-layer K/V [R, Hkv, L, hd] and code-slot logits [R, N, K] of all rows.

    Rows are the cond rows followed by the uncond rows; each row (= one branch of one item)
    ranks its own positions, so cond and uncond keep separate caches as in the official code.
    """

    def __init__(self, config: MLCacheConfig) -> None:
        self.config = config
        self.kv: LayerKV | None = None
        self.logits: torch.Tensor | None = None
        self.next_index: torch.Tensor | None = None  # [R, M] code-slot indices to recompute

    @property
    def ready(self) -> bool:
        return self.kv is not None and self.logits is not None and self.next_index is not None

    def store(self, kv: LayerKV, logits: torch.Tensor) -> None:
        """After a refresh step: keep the full K/V and logits."""
        self.kv, self.logits = kv, logits

    def update(self, index: torch.Tensor, fresh: torch.Tensor) -> torch.Tensor:
        """Write recomputed logits [R, M, K] at code slots ``index`` [R, M]; return all [R, N, K]."""
        assert self.logits is not None
        self.logits.scatter_(1, index[..., None].expand(-1, -1, fresh.shape[-1]), fresh)
        return self.logits

    def plan_next(self, logits: torch.Tensor) -> torch.Tensor:
        """Pick the lowest-max-logit code slots of each row for the next cached step: [R, M]."""
        m = self.config.n_recompute(logits.shape[1])
        self.next_index = logits.amax(dim=-1).topk(m, dim=1, largest=False).indices
        return self.next_index

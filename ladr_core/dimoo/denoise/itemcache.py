"""The ML-Cache of a batch, item by item: each item keeps its own cache and refresh schedule.

Items progress at their own pace (LADR finishes some in 10 steps, others in 28; a rolling
batch starts them at different times), so each item decides for itself whether a call is a
refresh (`CacheSchedule` over its own count, fed its own masked count) and keeps its own K/V
and logits (`BranchCache`): it computes exactly what it would alone. An item a call does not
run has finished, so each call first releases those caches, before a joining item's first
refresh: a queue of any length holds the caches of the images in flight only
(tests/emulation/test_queue_memory.py, 24 prompts on an emulated 24 GB card at the 8B shape).
The counts come from the previous call without a host sync (hostlag.py): each call posts the
masked count and "stale slot" flag of every item it ran in one small copy.
"""

from __future__ import annotations

import torch

from .cache import BranchCache, CacheSchedule, MLCacheConfig
from .hostlag import HostLag

__all__ = ["ItemCaches"]


class ItemCaches:
    """Per item: (BranchCache, CacheSchedule), made at its first call; one HostLag for all."""

    def __init__(self, config: MLCacheConfig, steps: int, counts: list[int]) -> None:
        self.config, self.steps, self.counts = config, steps, counts
        self.entries: dict[int, tuple[BranchCache, CacheSchedule]] = {}
        self.lag = HostLag()
        self.posted: tuple[int, ...] = ()  # the items of the last post, in order

    def __getitem__(self, item: int) -> BranchCache:
        return self.entry(item)[0]

    def entry(self, item: int) -> tuple[BranchCache, CacheSchedule]:
        if item not in self.entries:
            self.entries[item] = (BranchCache(self.config),
                                  CacheSchedule(self.config, self.steps, self.counts[item]))
        return self.entries[item]

    def release_others(self, items: tuple[int, ...]) -> None:
        """Drop the cache of every item a call does not run (module docstring); an item sent
        again later would start a new cache."""
        for item in [i for i in self.entries if i not in items]:
            del self.entries[item]

    def previous(self) -> dict[int, int]:
        """Each item's masked count at the previous call (items it did not run are absent).
        RuntimeError when that call had to reuse stale logits (the sampler re-masked or
        rewrote a committed token, which a cache with recompute_masked cannot serve)."""
        values = self.lag.read()
        if values is None:
            return {}
        count = len(self.posted)
        if any(values[count:]):
            raise RuntimeError(
                "ML-Cache with recompute_masked reused stale logits: the sampler re-masked or "
                "changed tokens it had committed, which this cache does not support; run "
                "without an ML-Cache or with recompute_masked=False")
        return dict(zip(self.posted, values[:count], strict=True))

    def plan(self, items: tuple[int, ...], previous: dict[int, int]) -> tuple[list, list]:
        """(items to refresh, items to serve from their cache) for this call, each item by
        its own schedule (then advanced)."""
        refresh, cached = [], []
        for item in items:
            cache, schedule = self.entry(item)
            masked = previous.get(item)
            full = schedule.refresh(None if masked is None else float(masked), cache.ready)
            (refresh if full else cached).append(item)
        return refresh, cached

    def post(self, items: tuple[int, ...], masked: torch.Tensor, skipped: torch.Tensor) -> None:
        """Start copying this call's per-item masked counts [A] and stale flags [A] to the host."""
        self.posted = items
        self.lag.post(torch.cat([masked.sum(dim=1), skipped]))

    @property
    def waits(self) -> int:
        return self.lag.waits

    def nbytes(self) -> int:
        return sum(cache.nbytes() for cache, _ in self.entries.values())

"""Device memory of an emulated run: bytes allocated (live tensors) and reserved (a model of
PyTorch's CUDA caching allocator), current and peak.

Allocated follows the caching allocator's accounting: each storage rounded up to 512 bytes.
Reserved replays the allocator's segment rules (c10/cuda/CUDACachingAllocator.cpp, default
settings): requests of at most 1 MiB come from 2 MiB segments (the small pool), larger ones from
20 MiB segments when under 10 MiB, else from a segment of their own size rounded up to 2 MiB
(the large pool); a request takes the smallest cached free block of its pool that fits, split
when the rest is at least 512 bytes (small) or over 1 MiB (large); freed blocks merge with free
neighbours in their segment and stay reserved until ``empty_cache``. Not modelled: per-stream
pools (a block freed on one stream and used on another), expandable segments, and fragmentation
limits (``max_split_size_mb``): reserved is the allocator's figure for a single-stream run.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

KIB, MIB = 1024, 1024 * 1024
SMALL, SMALL_SEGMENT, LARGE_SEGMENT, MIN_LARGE_ALLOC = MIB, 2 * MIB, 20 * MIB, 10 * MIB


def round_size(nbytes: int) -> int:
    """The allocator's block size for a request: at least 512 bytes, a multiple of 512."""
    return max(512, (nbytes + 511) // 512 * 512)


def segment_size(size: int) -> int:
    if size <= SMALL:
        return SMALL_SEGMENT
    if size < MIN_LARGE_ALLOC:
        return LARGE_SEGMENT
    return (size + 2 * MIB - 1) // (2 * MIB) * (2 * MIB)


@dataclass
class _Segment:
    size: int
    small: bool
    # free blocks: offset -> size; used blocks: offset -> size
    free: dict[int, int] = field(default_factory=dict)
    used: dict[int, int] = field(default_factory=dict)


class Allocator:
    """Current and peak bytes allocated and reserved for a sequence of allocations and frees."""

    def __init__(self) -> None:
        self.allocated = self.reserved = 0
        self.peak_allocated = self.peak_reserved = 0
        self._segments: list[_Segment] = []
        self._blocks: dict[int, tuple[_Segment, int]] = {}  # handle -> (segment, offset)
        self._next = 0

    def malloc(self, nbytes: int) -> int:
        """Allocate; returns a handle for ``free``."""
        size = round_size(nbytes)
        small = size <= SMALL
        fit = self._best_fit(size, small)
        if fit is None:
            seg = _Segment(segment_size(size), small)
            seg.free[0] = seg.size
            self._segments.append(seg)
            self.reserved += seg.size
            fit = (seg, 0)
        seg, offset = fit
        block = seg.free.pop(offset)
        rest = block - size
        if (rest >= 512) if small else (rest > MIB):  # CUDACachingAllocator should_split
            seg.free[offset + size] = rest
        else:
            size = block
        seg.used[offset] = size
        self.allocated += size
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        self._next += 1
        self._blocks[self._next] = (seg, offset)
        return self._next

    def _best_fit(self, size: int, small: bool) -> tuple[_Segment, int] | None:
        best = None
        for seg in self._segments:
            if seg.small != small:
                continue
            for offset, free in seg.free.items():
                if free >= size and (best is None or free < best[2]):
                    best = (seg, offset, free)
        return None if best is None else (best[0], best[1])

    def free(self, handle: int) -> None:
        seg, offset = self._blocks.pop(handle)
        size = seg.used.pop(offset)
        self.allocated -= size
        seg.free[offset] = size
        self._merge(seg)

    @staticmethod
    def _merge(seg: _Segment) -> None:
        offsets = sorted(seg.free)
        merged: dict[int, int] = {}
        for off in offsets:
            starts = sorted(merged)
            i = bisect.bisect_right(starts, off) - 1
            if i >= 0 and starts[i] + merged[starts[i]] == off:
                merged[starts[i]] += seg.free[off]
            else:
                merged[off] = seg.free[off]
        seg.free = merged

    def empty_cache(self) -> None:
        """Release every segment with no block in use (torch.cuda.empty_cache)."""
        keep = [s for s in self._segments if s.used]
        self.reserved -= sum(s.size for s in self._segments if not s.used)
        self._segments = keep

    def reset_peak(self) -> None:
        self.peak_allocated, self.peak_reserved = self.allocated, self.reserved

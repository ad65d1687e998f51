"""Device memory of an emulated run: bytes allocated (live tensors) and reserved (a model of
PyTorch's CUDA caching allocator), current and peak.

Allocated follows the caching allocator's accounting: each storage rounded up to 512 bytes.
Reserved replays the allocator's segment rules (c10/cuda/CUDACachingAllocator.cpp, default
settings): requests of at most 1 MiB come from 2 MiB segments (the small pool), larger ones from
20 MiB segments when under 10 MiB, else from a segment of their own size rounded up to 2 MiB
(the large pool); a request takes the smallest cached free block of its pool that fits, split
when the rest is at least 512 bytes (small) or over 1 MiB (large); freed blocks merge with free
neighbours in their segment and stay reserved until ``empty_cache``. With a card's capacity
(``limit``), a new segment that does not fit empties the cache (every segment without a block
in use) and tries again, then raises ``torch.OutOfMemoryError`` with CUDA's message (oom.py), as
the allocator does after ``cudaMalloc`` fails. Each segment belongs to the stream that was
current when it was made (``stream_of``), and a request reuses only free blocks of its own
stream's segments, as the allocator's per-stream pools do: memory a side stream (block
streaming's copies, a graph's capture stream) frees stays reserved for that stream until
``empty_cache`` or the retry releases it. Not modelled: a block freed after
``record_stream`` waiting for the other stream's work, expandable segments, and fragmentation
limits (``max_split_size_mb``).
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
    stream: int = 0  # the pool: the stream current when the segment was made
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
        self.total = self.outside = 0  # the card's bytes, those outside the allocator
        self.capacity: int | None = None  # bytes cudaMalloc can give; None: no limit
        self.capturing = False  # during a graph capture the allocator frees nothing
        self.stream_of = lambda: 0  # the current stream's pool (torch_cuda.api sets it)

    def limit(self, total: int, outside: int) -> None:
        """A card of ``total`` bytes of which ``outside`` (the CUDA context) are taken."""
        self.total, self.outside, self.capacity = total, outside, total - outside

    @property
    def free_bytes(self) -> int:
        """What ``cudaMemGetInfo`` reports free (no limit: the card minus reserved)."""
        return self.total - self.outside - self.reserved

    def _new_segment(self, size: int, small: bool, stream: int) -> tuple[_Segment, int]:
        want = segment_size(size)
        if self.capacity is not None and self.reserved + want > self.capacity:
            if not self.capturing:  # the retry: release cached blocks, cudaMalloc again
                self.empty_cache()
            if self.reserved + want > self.capacity:
                from .oom import out_of_memory

                raise out_of_memory(want, self.total, max(0, self.free_bytes),
                                    self.allocated, self.reserved)
        seg = _Segment(want, small, stream)
        seg.free[0] = seg.size
        self._segments.append(seg)
        self.reserved += seg.size
        return seg, 0

    def malloc(self, nbytes: int) -> int:
        """Allocate; returns a handle for ``free``."""
        size, stream = round_size(nbytes), self.stream_of()
        small = size <= SMALL
        fit = self._best_fit(size, small, stream)
        if fit is None:
            fit = self._new_segment(size, small, stream)
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

    def _best_fit(self, size: int, small: bool, stream: int) -> tuple[_Segment, int] | None:
        best = None
        for seg in self._segments:
            if seg.small != small or seg.stream != stream:
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

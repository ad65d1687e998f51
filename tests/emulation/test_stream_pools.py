"""The emulated allocator's per-stream pools and the page-locked host memory limit
(tests/kit/cuda_emu memory.py, state.py ``pin``): memory freed on one stream is not reused by
another, so an arrangement that fits the card on one stream runs out of it when its last
request comes from a side stream; and pinning past a profile's ``pinned_bytes`` fails as
CUDA's host allocation does, here in block streaming's pinned arenas."""

from __future__ import annotations

import gc

import pytest
import torch

from ladr_core.dimoo import load_dimoo
from tests.kit.cuda_emu import card, emulated_cuda

GIB = 2 ** 30
KW = dict(width=32, height=32, steps=4, seed=7, strategy="baseline")


def _arrangement(side: bool) -> None:
    """A 6 GiB block freed and cached, 3 GiB of it taken again (the segment now in use, so
    emptying the cache cannot return it), then 3 GiB more: from the cached rest on the same
    stream, or, asked on a side stream, from a new segment the 8 GB card (7.5 GiB for the
    allocator) cannot give."""
    big = torch.empty(6 * GIB, dtype=torch.uint8, device="cuda")
    del big
    held = torch.empty(3 * GIB, dtype=torch.uint8, device="cuda")
    with torch.cuda.stream(torch.cuda.Stream() if side else None):
        more = torch.empty(3 * GIB, dtype=torch.uint8, device="cuda")
    del held, more


def test_memory_freed_on_one_stream_is_not_reused_by_another() -> None:
    with emulated_cuda(card="rtx2080", storage="meta") as emu:
        _arrangement(side=False)
        assert emu.memory.peak_reserved == 6 * GIB  # the second 3 GiB reused the cached rest
    with emulated_cuda(card="rtx2080", storage="meta"), \
            pytest.raises(torch.OutOfMemoryError) as err:
        _arrangement(side=True)
    assert str(err.value).startswith("CUDA out of memory. Tried to allocate 3.00 GiB.")
    assert "tests/emulation/test_stream_pools.py" in "".join(err.value.__notes__)


def test_pinning_past_the_hosts_limit_fails_as_cuda_does_and_freeing_gives_it_back() -> None:
    with emulated_cuda(card=card("rtx4090", pinned_bytes=1024)) as emu:
        a = torch.empty(768, dtype=torch.uint8).pin_memory()
        with pytest.raises(RuntimeError) as err:
            torch.empty(512, dtype=torch.uint8, pin_memory=True)
        assert str(err.value) == "CUDA error: out of memory"
        assert "768 bytes already pinned" in "".join(err.value.__notes__)
        del a
        gc.collect()
        assert emu.pinned_bytes == 0
        torch.empty(512, dtype=torch.uint8, pin_memory=True)


def test_block_streaming_pins_its_arenas_and_its_side_stream_reserves_nothing(
        dimoo_checkpoint) -> None:  # noqa: ANN001
    with emulated_cuda() as emu:
        pipe = load_dimoo(dimoo_checkpoint, device="cuda", dtype=torch.float32,
                          offload_blocks=True)
        pinned = emu.pinned_bytes
        pipe.generate("a red circle", **KW)
        pools = {seg.stream for seg in emu.memory._segments}
    assert pinned > 0
    assert pools == {0}  # its copies land in the two slots made on the default stream
    with emulated_cuda(card=card("h100", pinned_bytes=pinned - 1)), \
            pytest.raises(RuntimeError) as err:
        load_dimoo(dimoo_checkpoint, device="cuda", dtype=torch.float32, offload_blocks=True)
    assert str(err.value) == "CUDA error: out of memory"
    assert "ladr_core/dimoo/model/offload.py" in "".join(err.value.__notes__)

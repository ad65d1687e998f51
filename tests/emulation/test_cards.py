"""Cards as profiles (tests/kit/cuda_emu/cards.py): torch.cuda answers as the named card, memory
runs out where the card's does with CUDA's own error, and the caching allocator's rounding,
splitting and retry-after-emptying decide which layouts fit (memory.py, oom.py)."""

from __future__ import annotations

import inspect

import pytest
import torch

from tests.kit.cuda_emu import CARDS, UnknownCardError, card, emulated_cuda
from tests.kit.cuda_emu.memory import SMALL_SEGMENT, Allocator, segment_size
from tests.kit.cuda_emu.oom import format_size

MIB, GIB = 2 ** 20, 2 ** 30
HERE = "tests/emulation/test_cards.py"


def line_of(fn, text: str) -> int:  # noqa: ANN001
    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_the_issue_s_five_cards_are_profiles() -> None:
    want = {(8, (7, 5), False), (12, (8, 6), True), (16, (8, 9), True), (24, (8, 9), True),
            (80, (9, 0), True)}
    have = {(c.nominal_gb, c.capability, c.bf16) for c in CARDS.values()}
    assert want <= have
    for c in CARDS.values():  # fp8 tensor cores from sm 8.9, flash attention from sm 8.0
        assert c.fp8 == (c.capability >= (8, 9)) and ("flash" in c.sdpa) == (c.capability >= (8, 0))


@pytest.mark.parametrize("bad", [{"which": "rtx5090"}, {"which": "rtx3060", "vram": 1},
                                 {"which": "h100", "sdpa": ("flash", "xformers")}])
def test_an_unknown_card_or_field_names_every_profile(bad: dict) -> None:
    which = bad.pop("which")
    with pytest.raises(UnknownCardError) as err:
        card(which, **bad)
    message = str(err.value)
    assert all(f"{c.name} ({c.nominal_gb} GB" in message for c in CARDS.values())
    assert repr(which if not bad else next(iter(bad))) in message
    with pytest.raises(UnknownCardError, match="rtx2080 \\(8 GB"), emulated_cuda(card="gtx"):
        pass


@pytest.mark.parametrize("name", sorted(CARDS))
def test_torch_cuda_answers_as_the_card(name: str) -> None:
    c = CARDS[name]
    with emulated_cuda(card=name, storage="meta"):
        props = torch.cuda.get_device_properties(0)
        assert (props.major, props.minor) == torch.cuda.get_device_capability() == c.capability
        assert props.total_memory == c.total_memory
        # as torch: True by default (bf16 can be emulated), the tensor cores' answer without
        assert torch.cuda.is_bf16_supported()
        assert torch.cuda.is_bf16_supported(including_emulation=False) == c.bf16
        free, total = torch.cuda.mem_get_info()
        assert total == c.total_memory and free == c.total_memory - c.context_bytes
        x = torch.ones(64, 64, device="cuda")
        x @ x  # the first matrix product takes cuBLAS's workspace from the allocator
        assert torch.cuda.memory_allocated() >= c.workspace_bytes + x.nbytes
        assert torch.cuda.mem_get_info()[0] == free - torch.cuda.memory_reserved()


def test_beyond_the_card_is_cuda_s_out_of_memory_error_named_where() -> None:
    c = CARDS["rtx2080"]
    with emulated_cuda(card="rtx2080", storage="meta"), \
            pytest.raises(torch.OutOfMemoryError) as err:
        keep = torch.empty(6 * GIB, dtype=torch.uint8, device="cuda")
        more = torch.empty(2 * GIB, dtype=torch.uint8, device="cuda")
        del keep, more
    message = str(err.value)
    free = c.total_memory - c.context_bytes - 6 * GIB
    assert message.startswith(f"CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
                              f"total capacity of {format_size(c.total_memory)} of which "
                              f"{format_size(free)} is free. Including non-PyTorch memory, "
                              f"this process has {format_size(c.total_memory - free)} memory")
    assert "Of the allocated memory 6.00 GiB is allocated by PyTorch, and 0 bytes is reserved" \
        in message and "expandable_segments:True" in message
    line = line_of(test_beyond_the_card_is_cuda_s_out_of_memory_error_named_where, "more = ")
    assert err.value.__notes__ == [f"[cuda-emulation:oom] at {HERE}:{line} "
                                   f"(test_beyond_the_card_is_cuda_s_out_of_memory_error_named_where)"]


def test_the_retry_empties_the_cache_before_it_gives_up() -> None:
    mem = Allocator()
    mem.limit(12 * GIB, GIB // 2)
    h = mem.malloc(6 * GIB)
    mem.free(h)  # cached: still reserved
    assert mem.reserved == 6 * GIB
    mem.malloc(8 * GIB)  # 6 + 8 > 11.5: the cached 6 GiB go back, then 8 fit
    assert mem.reserved == 8 * GIB
    with pytest.raises(torch.OutOfMemoryError, match="Tried to allocate 4.00 GiB"):
        mem.malloc(4 * GIB)  # a live block is never released


def _fits(sizes: list[int], frees: list[int], capacity: int) -> bool:
    """Allocate ``sizes`` in order, freeing the handles at positions ``frees`` right after
    they are made; True when nothing ran out."""
    mem = Allocator()
    mem.limit(capacity, 0)
    try:
        for i, size in enumerate(sizes):
            h = mem.malloc(size)
            if i in frees:
                mem.free(h)
    except torch.OutOfMemoryError:
        return False
    return True


def test_rounding_and_splitting_decide_which_layouts_fit() -> None:
    # 4 MiB requests sit in 20 MiB segments (under 10 MiB: the large pool's 20 MiB segment),
    # split 5 ways: 25 of them need 5 segments = 100 MiB
    assert segment_size(4 * MIB) == 20 * MIB and _fits([4 * MIB] * 25, [], 100 * MIB)
    assert not _fits([4 * MIB] * 26, [], 100 * MIB)
    # a 10 MiB request takes its own 10 MiB segment: 10 of them fit 100 MiB exactly
    assert _fits([10 * MIB] * 10, [], 100 * MIB) and not _fits([10 * MIB + 1] * 10, [], 100 * MIB)
    # small requests share 2 MiB segments in 512-byte blocks: 4096 of 512 B fill one
    assert _fits([500] * 4096, [], SMALL_SEGMENT) and not _fits([513] * 4096, [], SMALL_SEGMENT)
    # a freed 60 MiB block is split for two 24 MiB ones (no new segment)
    assert _fits([60 * MIB, 24 * MIB, 24 * MIB], [0], 60 * MIB)
    # fragmentation: a 16 MiB block split from a cached 40 MiB segment leaves 24 MiB free in
    # it; 30 MiB need a new segment, and the retry cannot release a segment in use, so 46 MiB
    # of tensors do not fit 64 MiB, while a cached segment alone is released for the request
    assert _fits([40 * MIB, 16 * MIB, 24 * MIB], [0], 64 * MIB)
    assert not _fits([40 * MIB, 16 * MIB, 30 * MIB], [0], 64 * MIB)
    assert _fits([40 * MIB, 30 * MIB], [0], 64 * MIB)

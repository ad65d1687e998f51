"""Out-of-order completion (``emulated_cuda(completion="late")``, tests/kit/cuda_emu/ordering.py):
an asynchronous copy lands only when a wait demands it. Block streaming and the ML-Cache still
give the CPU's tokens; a copy used on another stream before its wait is named, or, when
violations are only recorded, gives wrong tokens; a pinned host buffer holds its values only
once the host waits."""

from __future__ import annotations

import pytest
import torch

from ladr_core.dimoo import MLCacheConfig, load_dimoo
from ladr_core.dimoo.model import offload
from tests.kit.cuda_emu import CudaEmulationError, emulated_cuda

KW = dict(width=32, height=32, steps=8, seed=7, strategy="ladr")


@pytest.fixture(scope="module")
def want(dimoo_checkpoint):  # noqa: ANN001, ANN201
    return load_dimoo(dimoo_checkpoint, device="cpu", dtype=torch.float32).generate(
        "a red circle", **KW).tokens


@pytest.mark.parametrize("cache", [None, "ladr"])
def test_block_streaming_and_the_cache_give_the_cpu_tokens_when_copies_land_late(
        dimoo_checkpoint, want, cache) -> None:  # noqa: ANN001
    with emulated_cuda(completion="late") as emu:
        pipe = load_dimoo(dimoo_checkpoint, device="cuda", dtype=torch.float32,
                          offload_blocks=True)
        got = pipe.generate("a red circle", cache=MLCacheConfig.ladr() if cache else None, **KW)
        if cache is None:
            assert torch.equal(got.tokens.cpu(), want)
    assert not emu.violations


def test_a_missing_wait_is_named_or_gives_wrong_tokens(dimoo_checkpoint, want,
                                                       monkeypatch) -> None:  # noqa: ANN001
    def activate(self, i: int) -> None:  # BlockStream._activate without its wait_event
        views = offload._views(self.loaded[i % offload.SLOTS], self.stored[i], self.offsets[i])
        for slot, tensor in zip(self.slots[i], views, strict=True):
            offload._set(slot, tensor)
        self.active.add(i)

    monkeypatch.setattr(offload.BlockStream, "_activate", activate)
    with emulated_cuda(completion="late"), pytest.raises(CudaEmulationError) as err:
        load_dimoo(dimoo_checkpoint, device="cuda", dtype=torch.float32,
                   offload_blocks=True).generate("a red circle", **KW)
    assert err.value.kind == "order"  # named where the unwaited slot is first used:
    assert err.value.where.startswith("ladr_core/dimoo/model/offload.py:")  # _views
    with emulated_cuda(completion="late", raise_on_violation=False) as emu:
        got = load_dimoo(dimoo_checkpoint, device="cuda", dtype=torch.float32,
                         offload_blocks=True).generate("a red circle", **KW)
        assert not torch.equal(got.tokens.cpu(), want)  # blocks ran on weights not yet there
    assert {v.kind for v in emu.violations} == {"order"}


def test_a_pinned_host_buffer_holds_its_values_once_the_host_waits() -> None:
    with emulated_cuda(completion="late"):
        d = torch.arange(4, device="cuda")
        host = torch.empty(4, dtype=torch.long, pin_memory=True)
        host.copy_(d, non_blocking=True)
        event = torch.cuda.Event()
        event.record()
        assert not event.query() and host.tolist() != [0, 1, 2, 3]  # not landed yet
        event.synchronize()
        assert event.query() and host.tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("wait", [None, "event", "stream", "host"])
def test_a_copy_over_memory_another_stream_used_waits_for_that_stream(wait) -> None:  # noqa: ANN001
    """A copy on a side stream may overwrite memory only once the stream that used it last is
    waited for (an event recorded after the use, the stream itself, or the host); else it is
    named at the copy (a block streamed over a slot its last block still reads)."""
    with emulated_cuda(completion="late", raise_on_violation=False) as emu:
        d = torch.zeros(4, device="cuda")
        host = torch.ones(4).pin_memory()
        (d * 2).sum()  # a use on the default stream
        side = torch.cuda.Stream()
        if wait == "event":
            event = torch.cuda.Event()
            event.record()
            side.wait_event(event)
        elif wait == "stream":
            side.wait_stream(torch.cuda.current_stream())
        elif wait == "host":
            torch.cuda.synchronize()
        with torch.cuda.stream(side):
            d.copy_(host, non_blocking=True)
    found = [(v.kind, v.where.split(":")[0]) for v in emu.violations]
    assert found == ([] if wait else [("order", "tests/emulation/test_late_completion.py")])

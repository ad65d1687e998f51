"""The host-sync counter (tests.kit.syncs) that the tests and the benchmarks share: it sees the
syncs it claims to, and only those."""

from __future__ import annotations

import torch

from tests.kit.syncs import SyncCounter


def test_sync_counter_sees_dispatch_and_host_copies() -> None:
    x = torch.rand(8)
    with SyncCounter() as c:
        x.sum().item()
        x[x > 0.5]
        x.tolist()
        x.cpu()
        x[torch.tensor([0, 2])]  # integer indexing: not a sync
        x.repeat_interleave(2)  # int repeats: not a sync
    assert c.total == 4, c.counts


def test_sync_counter_work_on_host_copies_is_free() -> None:
    x = torch.rand(8)
    with SyncCounter() as c:
        y = x.cpu()  # the one transfer
        y.sum().item()
        y[y > 0.5]
        y.to("cpu", torch.bool).numpy()
        bool(x.any())  # the device tensor again: a second sync
    assert c.total == 2, c.counts
    assert y is not x  # on a CPU run the counter hands out a copy, as a GPU would


def test_sync_counter_knows_host_buffers_and_async_copies() -> None:
    x = torch.rand(8)
    dev = x.device  # a device object: what the project passes for its compute device
    with SyncCounter() as c:
        ids = torch.tensor([1, 2, 3])  # host data
        ids.sum().tolist()  # free
        torch.zeros(3, device=dev).sum().item()  # a device tensor: a sync
        pinned = torch.empty(2, dtype=torch.long, device="cpu")
        pinned.copy_(x[:2].long(), non_blocking=True)  # async into a host buffer: free
        pinned.tolist()  # free
        pinned.copy_(x[:2].long())  # a blocking copy to the host: a sync
    assert c.total == 2, c.counts
    assert c.counts["aten.copy_(to host)"] == 1

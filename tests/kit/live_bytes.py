"""Count the bytes of tensor storages alive on the CPU while a region runs (current and peak).

``LiveBytes`` is a ``TorchDispatchMode``: every op's output tensor whose storage is new (not the
storage of one of the op's inputs: views and in-place results share it) is counted with its
storage's size until the last tracked tensor on that storage dies (weak-reference finalizers).
Storages that existed before the region (weights, inputs) are not counted, so ``peak`` is the
region's extra memory high-water mark; allocations hidden inside one aten kernel (a fused
attention's scratch) are not seen, which is the same for the runs it compares.

    with LiveBytes() as mem:
        run()
    mem.peak, mem.current  # bytes
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def _key(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


class LiveBytes(TorchDispatchMode):
    """Live (``current``) and high-water (``peak``) bytes of storages allocated in the region."""

    def __init__(self) -> None:
        super().__init__()
        self.current = 0
        self.peak = 0
        self._live: dict[int, list[int]] = {}  # storage data_ptr -> [nbytes, tracked tensors]

    def _release(self, key: int) -> None:
        entry = self._live.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self.current -= entry[0]
            del self._live[key]

    def _track(self, t: torch.Tensor, shared: set[int]) -> None:
        if t.device.type != "cpu" or t.is_meta:
            return
        key = _key(t)
        if key == 0:
            return
        entry = self._live.get(key)
        if entry is None:
            if key in shared:  # a view / in-place result of a storage from before the region
                return
            entry = self._live[key] = [t.untyped_storage().nbytes(), 0]
            self.current += entry[0]
            self.peak = max(self.peak, self.current)
        entry[1] += 1
        weakref.finalize(t, self._release, key)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        shared = {_key(t) for t in _tensors((args, kwargs)) if t.device.type == "cpu"}
        for t in _tensors(out):
            self._track(t, shared)
        return out

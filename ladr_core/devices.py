"""Moving small host data to the device without waiting, and waiting for the device on purpose.

A CUDA device runs queued work asynchronously, and two things silently break that: a host ->
device copy from pageable memory blocks the host until it is done (from pinned memory with
``non_blocking=True`` it is queued like a kernel: ``to_device``, ``index``); a clock read
right after queueing work times the queueing (``synchronize`` first). On a CPU these are the
plain copy and nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["index", "synchronize", "to_device"]


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on ``device``, to CUDA from pinned memory without waiting (the caching
    host allocator keeps the pinned source until the copy's stream is done)."""
    if tensor.device == device:
        return tensor
    if device.type == "cuda" and tensor.device.type == "cpu":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def index(values: Sequence[int], device: torch.device) -> torch.Tensor:
    """Host ints -> an index LongTensor on ``device``, copied without waiting (``to_device``)."""
    return to_device(torch.tensor(list(values), dtype=torch.long), device)


def synchronize(device: torch.device | str) -> None:
    """Wait until ``device`` has finished the work queued so far (CUDA); nothing elsewhere.
    Call it before reading a clock that times device work."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)

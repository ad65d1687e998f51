"""Low-VRAM without a host: blocks rest on the CPU and are streamed to the GPU one block ahead.

``stream_blocks(model, device)`` moves everything but the blocks (embedding, final norm, output
head) to ``device``, keeps every block's weights on the CPU (pinned when CUDA is present) and
sets ``model.device``. Iterating ``model.blocks`` then yields block i with its weights on
``device`` while block i + 1 is being copied on a side CUDA stream, and gives block i back
after it ran: at most two blocks are resident. ``unstream_blocks`` undoes it.

Why our own and not accelerate's ``cpu_offload`` / diffusers' sequential offload: those hook a
module's ``forward``, but the DiMOO passes call ``block.qkv`` / ``block.finish`` (the ML-Cache
splits a block in two), so forward hooks would never fire; and they move one module at a
time without prefetch. Here one block = one batch of copies on one side stream.

With ``device`` = CPU the same logic runs (copies are clones, no stream), which is how the tests
check it: identical logits, the load/run/free order and the two-block bound (``trace``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

__all__ = ["BlockStream", "stream_blocks", "unstream_blocks"]


def _slots(block: nn.Module) -> list[tuple[nn.Module, str, bool]]:
    """(module, name, is_parameter) of every tensor the block owns."""
    out: list[tuple[nn.Module, str, bool]] = []
    for module in block.modules():
        out += [(module, n, True) for n, p in module._parameters.items() if p is not None]
        out += [(module, n, False) for n, b in module._buffers.items() if b is not None]
    return out


def _get(slot: tuple[nn.Module, str, bool]) -> torch.Tensor:
    module, name, is_param = slot
    return (module._parameters if is_param else module._buffers)[name].data  # type: ignore[union-attr]


def _set(slot: tuple[nn.Module, str, bool], tensor: torch.Tensor) -> None:
    module, name, is_param = slot
    if is_param:
        module._parameters[name].data = tensor  # type: ignore[union-attr]
    else:
        module._buffers[name] = tensor


@dataclass
class _Copy:
    tensors: list[torch.Tensor]
    event: Any  # torch.cuda.Event or None


class BlockStream:
    """Per-block CPU storage and the copy-ahead iteration (see module docstring)."""

    def __init__(self, blocks: Sequence[nn.Module], device: torch.device) -> None:
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.slots = [_slots(b) for b in blocks]
        self.stored: list[list[torch.Tensor]] = []
        for slots in self.slots:
            cpu = [_get(s).to("cpu") for s in slots]
            cpu = [t.pin_memory() for t in cpu] if self.cuda else cpu
            for slot, tensor in zip(slots, cpu, strict=True):
                _set(slot, tensor)
            self.stored.append(cpu)
        self.stream = torch.cuda.Stream(self.device) if self.cuda else None
        self.active: set[int] = set()
        self.trace: list[tuple[str, int]] = []

    def _copy(self, i: int) -> _Copy:
        """Start copying block i to the device (side stream on CUDA, a clone on the CPU)."""
        self.trace.append(("load", i))
        if self.stream is None:
            return _Copy([t.to(self.device, copy=True) for t in self.stored[i]], None)
        with torch.cuda.stream(self.stream):
            tensors = [t.to(self.device, non_blocking=True) for t in self.stored[i]]
            event = torch.cuda.Event()
            event.record(self.stream)
        return _Copy(tensors, event)

    def _activate(self, i: int, copy: _Copy) -> None:
        if copy.event is not None:
            current = torch.cuda.current_stream(self.device)
            current.wait_event(copy.event)
            for t in copy.tensors:
                t.record_stream(current)  # freed only after the compute stream used it
        for slot, tensor in zip(self.slots[i], copy.tensors, strict=True):
            _set(slot, tensor)
        self.active.add(i)
        self.trace.append(("run", i))

    def _release(self, i: int) -> None:
        for slot, tensor in zip(self.slots[i], self.stored[i], strict=True):
            _set(slot, tensor)
        self.active.discard(i)
        self.trace.append(("free", i))

    def release_all(self) -> None:
        """Give every resident block back (after an interrupted pass)."""
        for i in sorted(self.active):
            self._release(i)

    def iterate(self, blocks: Sequence[nn.Module]) -> Iterator[nn.Module]:
        """Yield block i resident on the device; block i + 1 is copied while i runs."""
        self.release_all()
        n = len(blocks)
        pending = self._copy(0) if n else None
        try:
            for i in range(n):
                upcoming = self._copy(i + 1) if i + 1 < n else None
                self._activate(i, pending)  # type: ignore[arg-type]
                yield blocks[i]
                self._release(i)
                pending = upcoming
        finally:
            self.release_all()

    def view(self, blocks: Sequence[nn.Module]) -> _StreamedBlocks:
        return _StreamedBlocks(self, blocks)


class _StreamedBlocks(Sequence):
    """``model.blocks`` while streamed: iteration streams; len / indexing see CPU weights."""

    def __init__(self, stream: BlockStream, blocks: Sequence[nn.Module]) -> None:
        self._stream, self._blocks = stream, blocks

    def __iter__(self) -> Iterator[nn.Module]:
        return self._stream.iterate(self._blocks)

    def __len__(self) -> int:
        return len(self._blocks)

    def __getitem__(self, i: Any) -> Any:
        return self._blocks[i]


def stream_blocks(model: nn.Module, device: str | torch.device) -> BlockStream:
    """Stream ``model``'s blocks from the CPU to ``device`` (everything else moves there)."""
    device = torch.device(device)
    t = model.model.transformer
    for name, module in t.named_children():
        if name != "blocks":
            module.to(device)
    stream = BlockStream(t.blocks, device)
    model._block_stream = stream
    model.device = device
    return stream


def unstream_blocks(model: nn.Module) -> None:
    """Stop streaming: blocks stay where their storage is (the CPU) and ``model.device`` resets."""
    stream = getattr(model, "_block_stream", None)
    if stream is not None:
        stream.release_all()
    model._block_stream = None
    model.device = None

"""Low-VRAM without a host: blocks rest on the CPU and are streamed to the GPU one block ahead.

`stream_blocks(model, device)` moves everything but the blocks to `device` and keeps the
blocks' weights on the CPU; iterating `model.blocks` then yields block i with its weights on
`device` while block i + 1 is copied, and gives block i back after it ran. `unstream_blocks`
undoes it. Memory is bounded by construction, not by the allocator:

* Device: two slots, flat byte buffers as large as the largest block, allocated once; block i
  runs from slot `i % 2` as views (offsets aligned to `ALIGN`). No copy allocates, so reserved
  memory stays at two blocks (8B in bf16: 2 x 416 MiB) however far the CPU runs ahead.
* Order on CUDA: block i + 1's copy runs on a side stream after the event recorded when block
  i - 1 (the slot's last user) was given back; the compute stream waits on the copy's event.
  So a copy never overwrites a slot a queued kernel reads. The slots are `record_stream`-ed on
  the side stream, so freed memory is reused only after every queued copy (an interrupted pass
  included). With autograd on a block is copied into a buffer of its own (a backward pass may
  keep its weights); inference runs under no_grad.
* Host: each block's tensors lie end to end, one copy per block, in arenas of power-of-two
  sizes (`arena_plan`), pinned for CUDA. Torch's pinned allocator rounds every request up to
  a power of two and caches it, so pinning tensor by tensor took 16 GiB for the 8B model's 13
  GiB of blocks; arenas lose only their unfilled tails (14 GiB).

Not accelerate's `cpu_offload` or diffusers' sequential offload: they hook `forward`, but the
DiMOO passes call `block.qkv` / `block.finish` (the ML-Cache splits a block), and they move one
module at a time without prefetch. With `device` = CPU the same slots and copies run without
streams (the tests check identical logits, the load/run/free order and the two-block bound with
`trace`); `use_streams=True` on the CPU runs the CUDA ordering against stand-in streams.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import nn

__all__ = ["BlockStream", "stream_blocks", "unstream_blocks", "arena_plan", "ALIGN", "SLOTS"]

ALIGN = 512  # bytes: every tensor starts at a multiple (dtype views, vectorized loads)
SLOTS = 2  # blocks on the device: the one computing and the one copied ahead

Slot = tuple[nn.Module, str, bool]


def _slots(block: nn.Module) -> list[Slot]:
    """(module, name, is_parameter) of every tensor the block owns."""
    out: list[Slot] = []
    for module in block.modules():
        out += [(module, n, True) for n, p in module._parameters.items() if p is not None]
        out += [(module, n, False) for n, b in module._buffers.items() if b is not None]
    return out


def _get(slot: Slot) -> torch.Tensor:
    module, name, is_param = slot
    return (module._parameters if is_param else module._buffers)[name].data  # type: ignore[union-attr]


def _set(slot: Slot, tensor: torch.Tensor) -> None:
    module, name, is_param = slot
    if is_param:
        module._parameters[name].data = tensor  # type: ignore[union-attr]
    else:
        module._buffers[name] = tensor


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _layout(tensors: Sequence[torch.Tensor]) -> tuple[list[int], int]:
    """Byte offset of each tensor laid end to end (each aligned to ALIGN) and the total."""
    offsets, at = [], 0
    for t in tensors:
        offsets.append(at)
        at += -(-_nbytes(t) // ALIGN) * ALIGN
    return offsets, at


def _views(flat: torch.Tensor, like: Sequence[torch.Tensor], offsets: Sequence[int]
           ) -> list[torch.Tensor]:
    """Tensors shaped and typed as ``like``, viewing the bytes of ``flat`` at ``offsets``."""
    return [flat[o:o + _nbytes(t)].view(t.dtype).view(t.shape)
            for t, o in zip(like, offsets, strict=True)]


def _pow2_ceil(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def arena_plan(sizes: Sequence[int]) -> list[tuple[int, list[int]]]:
    """(arena bytes, block indices): blocks of ``sizes`` in order, in arenas of the largest
    power of two not above the bytes left, or the smallest that holds the next block."""
    plan: list[tuple[int, list[int]]] = []
    i = 0
    while i < len(sizes):
        left = max(sum(sizes[i:]), 1)
        cap = max(1 << (left.bit_length() - 1), _pow2_ceil(max(sizes[i], ALIGN)))
        group: list[int] = []
        used = 0
        while i < len(sizes) and used + sizes[i] <= cap:
            group.append(i)
            used += sizes[i]
            i += 1
        plan.append((cap, group))
    return plan


class BlockStream:
    """Per-block CPU storage, the two device slots and the copy-ahead iteration (module
    docstring); ``use_streams`` None: streams and events when ``device`` is CUDA."""

    def __init__(self, blocks: Sequence[nn.Module], device: torch.device,
                 use_streams: bool | None = None) -> None:
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self.slots = [_slots(b) for b in blocks]
        self.stored: list[list[torch.Tensor]] = []  # block i's tensors in its arena
        self.flats: list[torch.Tensor] = []  # block i's bytes in its arena (one range)
        self.offsets: list[list[int]] = []
        self._store(pin=self.cuda)
        size = max((f.numel() for f in self.flats), default=0)
        self.device_slots = [torch.empty(size, dtype=torch.uint8, device=self.device)
                             for _ in range(SLOTS)]
        streams = self.cuda if use_streams is None else use_streams
        self.stream = torch.cuda.Stream(self.device) if streams else None
        self.loaded: list[Any] = [None] * SLOTS  # the bytes of the block copied for each slot
        self.copied: list[Any] = [None] * SLOTS  # event after the last copy into each slot
        self.freed: list[Any] = [None] * SLOTS  # event after the last block run from it
        if self.stream is not None:
            for slot in self.device_slots:
                slot.record_stream(self.stream)  # freed only after the copies into it
        self.active: set[int] = set()
        self.passes = 0  # iterations started; only the latest may give blocks back
        self.trace: list[tuple[Any, ...]] = []

    def _store(self, pin: bool) -> None:
        """Lay every block's tensors end to end in power-of-two arenas on the CPU (pinned for
        CUDA) and point the modules at them."""
        tensors = [[_get(s) for s in slots] for slots in self.slots]
        layouts = [_layout(ts) for ts in tensors]
        self.offsets = [offsets for offsets, _ in layouts]
        self.stored = [[] for _ in tensors]
        self.flats = [torch.empty(0, dtype=torch.uint8) for _ in tensors]
        for cap, group in arena_plan([total for _, total in layouts]):
            arena = torch.empty(cap, dtype=torch.uint8, pin_memory=pin)
            at = 0
            for i in group:
                self.flats[i] = arena[at:at + layouts[i][1]]
                self.stored[i] = _views(self.flats[i], tensors[i], self.offsets[i])
                for slot, dst, src in zip(self.slots[i], self.stored[i], tensors[i], strict=True):
                    dst.copy_(src)
                    _set(slot, dst)
                at += layouts[i][1]

    def _copy(self, i: int) -> None:
        """Issue block i's copy into slot i % SLOTS, after the slot's last block ran."""
        s = i % SLOTS
        self.trace.append(("load", i))
        src = self.flats[i]
        if torch.is_grad_enabled():  # autograd may keep the weights: a buffer of their own
            dst = torch.empty(src.numel(), dtype=torch.uint8, device=self.device)
            if self.stream is not None:
                dst.record_stream(self.stream)
        else:
            dst = self.device_slots[s][:src.numel()]
        self.loaded[s] = dst
        if self.stream is None:
            dst.copy_(src)
            return
        if self.freed[s] is not None:
            self.stream.wait_event(self.freed[s])
        with torch.cuda.stream(self.stream):
            dst.copy_(src, non_blocking=True)
        self.copied[s] = torch.cuda.Event()
        self.copied[s].record(self.stream)

    def _activate(self, i: int) -> None:
        s = i % SLOTS
        if self.stream is not None:
            torch.cuda.current_stream(self.device).wait_event(self.copied[s])
        views = _views(self.loaded[s], self.stored[i], self.offsets[i])
        for slot, tensor in zip(self.slots[i], views, strict=True):
            _set(slot, tensor)
        self.active.add(i)
        self.trace.append(("run", i))

    def _release(self, i: int) -> None:
        for slot, tensor in zip(self.slots[i], self.stored[i], strict=True):
            _set(slot, tensor)
        self.loaded[i % SLOTS] = None  # a grad-mode buffer is now autograd's alone
        if self.stream is not None:
            self.freed[i % SLOTS] = torch.cuda.Event()
            self.freed[i % SLOTS].record(torch.cuda.current_stream(self.device))
        self.active.discard(i)
        self.trace.append(("free", i))

    def release_all(self) -> None:
        """Give every resident block back (after an interrupted pass)."""
        for i in sorted(self.active):
            self._release(i)

    def iterate(self, blocks: Sequence[nn.Module]) -> Iterator[nn.Module]:
        """Yield block i resident while block i + 1 is copied (``trace``: the order). A pass
        left unfinished is closed by the next one, so its generator, finalised later, gives
        back nothing."""
        self.release_all()
        self.passes += 1
        me = self.passes
        del self.trace[:]
        n = len(blocks)
        if n:
            self._copy(0)
        try:
            for i in range(n):
                if i + 1 < n:
                    self._copy(i + 1)
                self._activate(i)
                yield blocks[i]
                self._release(i)
        finally:
            if self.passes == me:
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

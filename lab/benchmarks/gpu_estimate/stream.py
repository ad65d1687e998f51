"""Block streaming (``layout="low_vram"``, ladr_core/dimoo/model/offload.py), composed from its
parts rather than run: the emulation cannot run ``BlockStream`` with shape-only weights yet (it
rests the blocks in pinned host arenas and points each parameter at the host or the device with
``param.data = ...``, which a meta-stored emulated tensor cannot take).

offload.py bounds the device memory by construction: resident are everything but the blocks
(embedding, final norm, output head) and ``SLOTS`` flat byte buffers as large as the largest
block laid out tensor after tensor at ``ALIGN`` bytes, allocated once; a block runs as views
into a slot, so it allocates nothing. The computation is the bf16 model's, op for op. So a
streamed case's peak is the bf16 case's peak with the bf16 weights replaced by those resident
parts; the parts' allocated and reserved bytes come from the emulation's allocator model
(tests/kit/cuda_emu/memory.py), fed the same requests in the same order.
"""

from __future__ import annotations

from typing import Any

from ladr_core.dimoo.model.offload import ALIGN, SLOTS
from tests.kit.cuda_emu.memory import Allocator

from .measure import CUBLAS_WORKSPACE

__all__ = ["stream_parts", "streamed_row"]


def _laid_out(tensors: list[Any]) -> int:
    return sum(-(-t.numel() * t.element_size() // ALIGN) * ALIGN for t in tensors)


def stream_parts(model: Any) -> dict[str, int]:
    """The streamed layout's resident requests, from the bf16 model: bytes of every non-block
    tensor, of one slot, and what the allocator model makes of them (with the workspace)."""
    t = model.model.transformer
    others = [p for name, p in t.named_parameters() if not name.startswith("blocks.")]
    others += [b for name, b in t.named_buffers() if not name.startswith("blocks.")]
    slot = max(_laid_out(list(b.parameters()) + list(b.buffers())) for b in t.blocks)
    alloc = Allocator()
    for size in [CUBLAS_WORKSPACE] + [p.numel() * p.element_size() for p in others]:
        alloc.malloc(size)
    weights_before = alloc.allocated
    for _ in range(SLOTS):
        alloc.malloc(slot)
    return {"non_block_bytes": weights_before - CUBLAS_WORKSPACE, "slot_bytes": slot,
            "slots": SLOTS, "resident_allocated": alloc.allocated,
            "resident_reserved": alloc.reserved}


def streamed_row(bf16: dict[str, Any], parts: dict[str, int]) -> dict[str, Any]:
    """The bf16 row's cases with the resident weights swapped for the streamed parts."""
    d_alloc = parts["resident_allocated"] - bf16["resident_allocated"]
    d_res = parts["resident_reserved"] - bf16["resident_reserved"]
    cases = {}
    for key, case in bf16["cases"].items():
        cases[key] = {**{k: v for k, v in case.items() if k != "steps"},
                      "peak_allocated": case["peak_allocated"] + d_alloc,
                      "peak_reserved": case["peak_reserved"] + d_res,
                      "steps": [{**s, **{k: s[k] + (d_res if "reserved" in k else d_alloc)
                                         for k in ("peak_allocated", "peak_reserved")}}
                                for s in case["steps"]]}
    return {"composed": True, "parts": parts,
            "weights_bytes": parts["resident_allocated"] - CUBLAS_WORKSPACE,
            "resident_allocated": parts["resident_allocated"],
            "resident_reserved": parts["resident_reserved"], "cases": cases}

"""The out-of-memory error a card raises: ``torch.OutOfMemoryError`` with the caching
allocator's message (c10/cuda/CUDACachingAllocator.cpp, ``malloc`` after the retry that empties
the cache), its sizes written as its ``format_size`` writes them. The emulation adds, as a note
after CUDA's text, the file and line of the repository code that asked for the memory.
"""

from __future__ import annotations

import torch

from .where import trail

__all__ = ["format_size", "out_of_memory", "pinned_out_of_memory"]

KIB, MIB, GIB = 1024, 1024 ** 2, 1024 ** 3


def format_size(nbytes: int) -> str:
    """c10's format_size: bytes up to 1 KiB, then KiB, MiB, GiB with two decimals."""
    if nbytes <= KIB:
        return f"{nbytes} bytes"
    if nbytes <= MIB:
        return f"{nbytes / KIB:.2f} KiB"
    if nbytes <= GIB:
        return f"{nbytes / MIB:.2f} MiB"
    return f"{nbytes / GIB:.2f} GiB"


def out_of_memory(request: int, total: int, free: int, allocated: int,
                  reserved: int) -> torch.OutOfMemoryError:
    """The error for a segment of ``request`` bytes that the card (``total`` bytes, ``free``
    of them free) cannot give after the cache was emptied."""
    message = (
        f"CUDA out of memory. Tried to allocate {format_size(request)}. GPU 0 has a total "
        f"capacity of {format_size(total)} of which {format_size(free)} is free. Including "
        f"non-PyTorch memory, this process has {format_size(total - free)} memory in use. Of "
        f"the allocated memory {format_size(allocated)} is allocated by PyTorch, and "
        f"{format_size(reserved - allocated)} is reserved by PyTorch but unallocated. If "
        "reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
        "documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")
    error = torch.OutOfMemoryError(message)
    error.add_note(f"[cuda-emulation:oom] at {trail()}")
    return error


def pinned_out_of_memory(request: int, pinned: int, limit: int) -> RuntimeError:
    """The error of a page-locked host allocation (``cudaHostAlloc``, behind ``pin_memory()``
    and ``pin_memory=True``) the host cannot give: CUDA's error text, then the emulation's
    note with the sizes and the repository line that asked."""
    error = RuntimeError("CUDA error: out of memory")
    error.add_note(f"[cuda-emulation:pinned-oom] {format_size(request)} of page-locked host "
                   f"memory asked with {format_size(pinned)} already pinned, of the profile's "
                   f"{format_size(limit)} (pinned_bytes), at {trail()}")
    return error

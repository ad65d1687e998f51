"""``LADR_NUM_THREADS``: torch's intra-op thread count while the pack samples and decodes.

On a CPU busy with other work torch's one thread per core wait for each other at every small
matmul, and the tiny DiMOO-nano forward gets slower with more of them (docs/THREADS.md).
``LADR_NUM_THREADS=n`` runs the pack's work with n threads and restores the count afterwards, so
other nodes keep ComfyUI's setting; unset or empty leaves torch alone.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

ENV = "LADR_NUM_THREADS"


def requested_threads() -> int | None:
    """The thread count asked for in the environment, None when unset; ValueError if bad."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{ENV}={raw!r} must be a whole number >= 1 (e.g. 1), or unset")
    return int(raw)


@contextlib.contextmanager
def torch_threads() -> Iterator[None]:
    """Run the block with ``LADR_NUM_THREADS`` torch threads (if set), then restore."""
    wanted = requested_threads()
    if wanted is None or wanted == torch.get_num_threads():
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(wanted)
    try:
        yield
    finally:
        torch.set_num_threads(before)

"""What CUDA refuses while a graph is being captured, beyond the host reads state.py already
refuses (``.item()``, synchronisations, blocking copies), and the reads of memory a replay
would find freed. Each is a violation of kind ``capture`` named with its file and line (and the
repository frames that called it).

- Pinned host memory allocated during a capture (``pin_memory()``, ``pin_memory=True``):
  ``cudaHostAlloc`` is prohibited in a global-mode capture ("operation not permitted when stream
  is capturing"); newer torch relaxes the mode for it, but the buffer is then read by address at
  every replay, which code that pins per call does not expect.
- Memory released during a capture: ``torch.cuda.empty_cache()`` is ``cudaFree``, which CUDA
  prohibits during a capture; the caching allocator itself never frees then, so a request that
  does not fit raises ``torch.OutOfMemoryError`` at once instead of emptying the cache first
  (memory.py). Device allocations through the caching allocator are legal during a capture
  (torch captures ``cudaMalloc`` in relaxed mode into the graph's private pool) and are not
  refused.
- Lazy initialisation: the first matrix product of the process (cuBLAS creating its handle and
  workspace) or the first convolution (cuDNN's handle) inside a capture; real code warms up
  by running the captured function once before capturing it.
- Freed-memory reads: a tensor made before the capture that the capture reads is held by the
  graph only by address; if the program lets it die, a replay reads memory the allocator may
  have handed to another tensor. ``EmuGraph.replay`` checks each such input is still alive.
"""

from __future__ import annotations

from typing import Any

import torch

from .where import trail

aten = torch.ops.aten
#: op families whose first use initialises a library (cuBLAS, cuDNN)
LAZY = {"cuBLAS": {aten.mm, aten.addmm, aten.bmm, aten.baddbmm, aten._scaled_mm, aten._int_mm},
        "cuDNN": {aten.convolution, aten._convolution, aten.cudnn_convolution}}
_FAMILY = {op: family for family, ops in LAZY.items() for op in ops}


def refuse(state: Any, what: str) -> None:
    state.violate("capture", f"{what} while a CUDA graph is being captured (repository "
                             f"frames: {trail(4)})")


def on_pin(state: Any) -> None:
    if state.capture is not None:
        refuse(state, "pinned host memory allocated (cudaHostAlloc: operation not permitted "
                      "when stream is capturing)")


def on_empty_cache(state: Any) -> None:
    if state.capture is not None:
        refuse(state, "torch.cuda.empty_cache() (cudaFree: operation not permitted when "
                      "stream is capturing)")


def on_op(state: Any, func: Any) -> None:
    """Before an op runs: a library's first use, refused inside a capture."""
    family = _FAMILY.get(func.overloadpacket)
    if family is None or family in state.initialised:
        return
    if state.capture is not None:
        refuse(state, f"{family} initialised by its first call ({func}); run the captured "
                      "function once before capturing it (warm-up)")
    state.initialised.add(family)


WATCHED = frozenset(_FAMILY)

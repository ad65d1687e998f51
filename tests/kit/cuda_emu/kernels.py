"""Kernels for the CUDA dispatch key of a CPU-only torch, for the tensors torch creates in C++ on
a tensor's device without going through Python (a Python scalar in ``torch.where(c, 0, x)``
becomes a 0-dim tensor on ``c``'s device; ``torch.tensor(data, device=...)`` allocates before it
copies). Each allocates an EmuTensor in the active emulation; outside one they refuse, as a
CPU-only torch does. Registered once per process."""

from __future__ import annotations

from typing import Any

import torch

from .state import _ACTIVE
from .tensor import wrap

_LIBRARY: list[Any] = []


def _state() -> Any:
    if not _ACTIVE:
        raise RuntimeError("a CUDA tensor was requested outside emulated_cuda() on a CPU-only "
                           "torch")
    return _ACTIVE[-1]


def _empty(size: Any, dtype: Any = None, layout: Any = None, device: Any = None,
           pin_memory: Any = None, memory_format: Any = None) -> torch.Tensor:
    state = _state()
    inner = torch.empty(size, dtype=dtype, device=state.inner_device,
                        memory_format=memory_format or torch.contiguous_format)
    return wrap(state, inner)


def _empty_strided(size: Any, stride: Any, dtype: Any = None, layout: Any = None,
                   device: Any = None, pin_memory: Any = None) -> torch.Tensor:
    state = _state()
    return wrap(state, torch.empty_strided(size, stride, dtype=dtype,
                                           device=state.inner_device))


def register() -> None:
    if _LIBRARY:
        return
    lib = torch.library.Library("aten", "IMPL")
    lib.impl("empty.memory_format", _empty, "CUDA")
    lib.impl("empty_strided", _empty_strided, "CUDA")
    _LIBRARY.append(lib)

"""The Python-level half of the emulation (a ``TorchFunctionMode``): what happens before any
emulated tensor exists or where torch would call CUDA itself.

- factories given a CUDA device (``torch.zeros(..., device="cuda")``) make an EmuTensor; made
  from Python or host data (``torch.tensor``, ``as_tensor``) they count as a pageable
  host-to-device copy;
- ``.to("cuda")`` / ``.cuda()`` of a host tensor is a host-to-device copy: non-blocking only
  from pinned memory with ``non_blocking=True``;
- ``pin_memory()`` / ``pin_memory=True`` / ``is_pinned()`` are emulated (a CPU-only torch
  refuses them);
- a CUDA generator used for host tensors is a mismatch.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode, resolve_name

from . import attention, capture
from .state import EmulationState
from .tensor import EmuTensor, unwrap, wrap
from .tree import leaves

_FROM_HOST_DATA = {"torch.tensor", "torch.as_tensor", "torch.asarray", "torch.from_numpy",
                   "torch.Tensor.new_tensor"}
_T = torch.Tensor
_DATA_SET = torch.Tensor.data.__set__


def _set_data(old: torch.Tensor, new: torch.Tensor) -> None:
    """``old.data = new`` across devices (a module's parameter given a device view, and back).

    On a real GPU the tensor object keeps its identity and takes ``new``'s storage. Here the
    wrapper class must change with it (a plain CPU tensor cannot hold an emulated one's data),
    so ``old``'s contents are swapped (torch.utils.swap_tensors, identity kept) with a fresh
    tensor sharing ``new``'s storage; ``new`` itself is left as it was."""
    if not (isinstance(old, EmuTensor) or isinstance(new, EmuTensor)):
        with torch._C.DisableTorchFunction():
            _DATA_SET(old, new)
        return
    twin = new.detach()
    if isinstance(old, torch.nn.Parameter) or getattr(old, "_is_param", False):
        twin = torch.nn.Parameter(twin, requires_grad=old.requires_grad)
    torch.utils.swap_tensors(old, twin)


def _is_cuda(device: Any) -> bool:
    if device is None:
        return False
    if isinstance(device, int):
        return True
    return torch.device(device).type == "cuda"


class EmulatedFunctions(TorchFunctionMode):
    def __init__(self, state: EmulationState) -> None:
        super().__init__()
        self.state = state

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        kwargs = kwargs or {}
        if func is torch.device and args and isinstance(args[0], int):
            return torch.device("cuda", args[0])  # an index means the accelerator
        if func is _T.pin_memory:
            return self._pin(args[0])
        if func == _DATA_SET:  # a method-wrapper: equal, not identical, each time
            return _set_data(args[0], args[1])
        if func is _T.record_stream:
            return None  # streams run in issue order here: nothing to keep alive
        if func is _T.is_pinned:
            return self.state.is_pinned(args[0])
        if func in (_T.to, _T.cuda):
            moved = self._to(func, args, kwargs)
            if moved is not None:
                return moved
        flat = leaves((args, kwargs))
        has_emu = any(isinstance(x, EmuTensor) for x in flat)
        if func is F.scaled_dot_product_attention and has_emu:  # the card's backend
            return attention.run(self.state, func, args, kwargs, unwrap, wrap)
        if func is _T.new_tensor and has_emu and "device" not in kwargs:
            kwargs = {**kwargs, "device": args[0].device}
        on_device = has_emu or _is_cuda(kwargs.get("device"))
        gens = [g for g in flat if isinstance(g, torch._C.Generator)]
        if any((g.device.type == "cuda") != on_device for g in gens):
            where = "device" if on_device else "host"
            self.state.violate("mismatch", f"{resolve_name(func) or func} drew from a generator "
                                           f"of the other device for a {where} tensor")
        if not has_emu and on_device:
            return self._factory(func, args, kwargs)
        pinned = kwargs.pop("pin_memory", False) if "pin_memory" in kwargs else False
        if pinned:
            capture.on_pin(self.state)
        out = func(*args, **kwargs)
        if pinned and isinstance(out, torch.Tensor):
            self.state.pin(out)
        return out

    def _pin(self, t: torch.Tensor) -> torch.Tensor:
        if isinstance(t, EmuTensor):
            self.state.violate("mismatch", "pin_memory() of a device tensor")
        if self.state.is_pinned(t):
            return t
        capture.on_pin(self.state)
        out = t.clone()
        self.state.pin(out)
        return out

    def _factory(self, func: Any, args: tuple, kwargs: dict) -> Any:
        name = resolve_name(func) or str(func)
        kwargs = {**kwargs, "device": "cpu"}
        kwargs.pop("pin_memory", None)
        out = func(*args, **kwargs)
        if name in _FROM_HOST_DATA:
            self.state.host_to_device(f"{name}(...) on the device: a pageable host-to-device "
                                      "copy of host data")
        return self._upload(out)

    def _upload(self, out: Any) -> Any:
        if not isinstance(out, torch.Tensor):
            return out
        inner = out.detach().to(self.state.inner_device)
        if inner.requires_grad != out.requires_grad:
            inner.requires_grad_(out.requires_grad)
        return wrap(self.state, inner)

    def _to(self, func: Any, args: tuple, kwargs: dict) -> EmuTensor | None:
        """A host tensor to the device; None when this is no such move."""
        src = args[0]
        if isinstance(src, EmuTensor) or not isinstance(src, torch.Tensor):
            return None
        if func is _T.cuda:
            device, dtype = torch.device("cuda"), None
            non_blocking = kwargs.get("non_blocking", args[2] if len(args) > 2 else False)
        else:
            device, dtype, non_blocking, _ = torch._C._nn._parse_to(*args[1:], **kwargs)
        if not _is_cuda(device):
            return None
        if not (non_blocking and self.state.is_pinned(src)):
            self.state.host_to_device("a host-to-device .to() from pageable memory or with "
                                      "non_blocking=False")
        data = src.detach().to(dtype=dtype or src.dtype, copy=True)
        return self._upload(data) if not src.requires_grad else self._upload(
            data.requires_grad_(True))

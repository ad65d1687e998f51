"""The emulation's state for one ``emulated_cuda()`` region: its settings, what it saw (host
reads, host-to-device copies, violations), device memory and pinned host buffers.

A violation is something a real GPU run would fail on or that breaks the sampler's contract:

- ``mismatch``: a host tensor (other than a 0-dim scalar, which CUDA accepts) meets a device
  tensor in one op, or a generator of the other device is used;
- ``read``: a device-to-host read (``.item()``, ``bool()``, ``.tolist()``, ``.cpu()``, a blocking
  copy into host memory, an op whose output shape depends on the data) inside one of the loops
  the device runs alone (where.py LOOPS: the sampler's step loop, the answer loop, the VQ encode
  and decode loops), beyond the documented reads (where.py DOCUMENTED); or any read while a
  CUDA graph is being captured;
- ``h2d``: a blocking host-to-device copy (pageable memory, or ``non_blocking=False``), a tensor
  made from Python data on the device, or a host tensor used to index a device tensor, inside
  one of those loops or a graph capture;
- ``float64``: a float64 tensor on the device;
- ``estimate``: a data-dependent read while tensors hold no data (``storage="meta"``);
- ``kernel``: with ``fallbacks="raise"``, a kernel the card refuses or a fallback (rules.py);
- ``capture``: what CUDA refuses during a graph capture (capture.py);
- ``order``: with ``completion="late"``, a copy used on another stream before it was waited
  for (ordering.py).
"""

from __future__ import annotations

import contextlib
import sys
import weakref
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from .memory import Allocator
from .where import current_loop, in_step_loop, site

KINDS = ("mismatch", "read", "h2d", "float64", "estimate", "kernel", "capture", "order")


class CudaEmulationError(BaseException):
    """A violation (module docstring), raised where it happened. A BaseException so that no
    ``except Exception`` in the code under test hides it; ``where`` names file and line."""

    def __init__(self, kind: str, message: str, where: str) -> None:
        super().__init__(f"[cuda-emulation:{kind}] {message} at {where}")
        self.kind, self.where = kind, where


@dataclass
class Violation:
    kind: str
    message: str
    where: str


@dataclass
class EmulationState:
    storage: str = "cpu"  # "cpu": real values; "meta": shapes only (estimates)
    raise_on_violation: bool = True
    violations: list[Violation] = field(default_factory=list)
    reads: Counter = field(default_factory=Counter)  # where -> blocking device-to-host reads
    loop_reads: Counter = field(default_factory=Counter)  # the documented reads in the loop
    h2d: Counter = field(default_factory=Counter)  # where -> blocking host-to-device copies
    memory: Allocator = field(default_factory=Allocator)
    capture: Any = None  # the graph being captured (torch_cuda.EmuGraph) or None
    _pinned: dict[int, weakref.ref] = field(default_factory=dict)
    pinned_bytes: int = 0  # page-locked host bytes alive
    _live: dict[int, list[int]] = field(default_factory=dict)  # storage -> [handle, refs]
    syncs: int = 0  # explicit torch.cuda.synchronize / event waits
    host_copies: Counter = field(default_factory=Counter)  # a host's own weight streaming
    _streaming: int = 0
    card: Any = None  # the profile the device runs as (cards.Card)
    fallback_mode: str = "report"  # "raise": refusals and fallbacks raise (rules.py)
    fallbacks: Counter = field(default_factory=Counter)  # (what, where) -> calls
    kernels: Counter = field(default_factory=Counter)  # (fast path, where) -> calls
    workspace: int | None = None  # the cuBLAS workspace's allocator handle
    initialised: set = field(default_factory=set)  # libraries already used (capture.py)
    ordering: Any = None  # completion="late": the copies not yet landed (ordering.py)

    @contextlib.contextmanager
    def host_streaming(self) -> Iterator[None]:
        """Copies made inside are the host's (comfy_host.py's partial load), not the pack's."""
        self._streaming += 1
        try:
            yield
        finally:
            self._streaming -= 1

    @property
    def inner_device(self) -> torch.device:
        return torch.device(self.storage)

    # -- events ---------------------------------------------------------------------------
    def violate(self, kind: str, message: str) -> None:
        where = site()
        self.violations.append(Violation(kind, message, where))
        if self.raise_on_violation:
            raise CudaEmulationError(kind, message, where)

    def read(self, what: str) -> None:
        """A blocking device-to-host read."""
        if self.ordering is not None:  # it waits for the current stream's work
            self.ordering.land_stream(self.ordering.current())
        if self._streaming:
            self.host_copies[site()] += 1
            return
        if self.storage == "meta":
            self.violate("estimate", f"{what} needs the data, which a shape-only run lacks")
        if self.capture is not None:
            self.violate("read", f"{what} while a CUDA graph is being captured")
        loop, documented = in_step_loop()
        if loop and documented:
            self.loop_reads[site()] += 1
            return
        if loop:
            self.violate("read", f"{what}: a host read inside {current_loop()} (its documented "
                                 "reads: where.py DOCUMENTED)")
        self.reads[site()] += 1

    def wait(self, what: str) -> None:
        """An explicit host wait for the device (synchronize, an event's synchronize)."""
        if self.ordering is not None:
            self.ordering.land_all()
        if self.capture is not None:
            self.violate("read", f"{what} while a CUDA graph is being captured")
        loop, documented = in_step_loop()
        if loop and not documented:
            self.violate("read", f"{what}: the host waits for the device inside "
                                 f"{current_loop()}")
        self.syncs += 1

    def host_to_device(self, what: str) -> None:
        """A blocking host-to-device copy."""
        if self._streaming:
            self.host_copies[site()] += 1
            return
        if self.capture is not None:
            self.violate("h2d", f"{what} while a CUDA graph is being captured")
        if in_step_loop()[0]:
            self.violate("h2d", f"{what}: a blocking host-to-device copy inside "
                                f"{current_loop()}")
        self.h2d[site()] += 1

    # -- pinned host memory ---------------------------------------------------------------
    @staticmethod
    def _key(t: torch.Tensor) -> int:
        return t.untyped_storage()._cdata

    def pin(self, t: torch.Tensor) -> None:
        """Count ``t`` as page-locked while it lives; past the card profile's ``pinned_bytes``
        CUDA's host allocation fails (oom.py)."""
        key, nbytes = self._key(t), t.untyped_storage().nbytes()
        limit = getattr(self.card, "pinned_bytes", None)
        if key not in self._pinned and limit is not None and self.pinned_bytes + nbytes > limit:
            from .oom import pinned_out_of_memory

            raise pinned_out_of_memory(nbytes, self.pinned_bytes, limit)
        if key not in self._pinned:
            self.pinned_bytes += nbytes
        self._pinned[key] = weakref.ref(t, lambda _r, k=key, n=nbytes: self._unpin(k, n))

    def _unpin(self, key: int, nbytes: int) -> None:
        if self._pinned.pop(key, None) is not None:
            self.pinned_bytes -= nbytes

    def is_pinned(self, t: torch.Tensor) -> bool:
        return t.device.type == "cpu" and self._key(t) in self._pinned

    # -- device memory --------------------------------------------------------------------
    def track(self, wrapper: torch.Tensor, inner: torch.Tensor) -> None:
        """Count ``inner``'s storage as device memory while any wrapper of it lives."""
        key = self._key(inner)
        entry = self._live.get(key)
        if entry is None:
            nbytes = inner.untyped_storage().nbytes()
            entry = self._live[key] = [self.memory.malloc(nbytes), 0]
        entry[1] += 1
        # a token in the wrapper's __dict__ rather than a weak reference: Module.to swaps
        # parameters with torch.utils.swap_tensors, which refuses weakly referenced tensors and
        # moves __dict__ along with the data
        wrapper._emu_alloc = _Allocation(self, key)

    def _release(self, key: int) -> None:
        entry = self._live.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self.memory.free(entry[0])
            del self._live[key]
            if self.ordering is not None:
                self.ordering.forget(key)

    def summary(self) -> dict[str, Any]:
        m = self.memory
        return {"violations": [v.__dict__ for v in self.violations],
                "reads": dict(self.reads), "loop_reads": dict(self.loop_reads),
                "h2d": dict(self.h2d), "allocated": m.allocated, "reserved": m.reserved,
                "peak_allocated": m.peak_allocated, "peak_reserved": m.peak_reserved}


class _Allocation:
    """Releases one reference to a device storage when the wrapper holding it dies."""

    __slots__ = ("key", "state")
    # bound here: at interpreter exit module globals (sys among them) are already None
    _finalizing = staticmethod(sys.is_finalizing)

    def __init__(self, state: EmulationState, key: int) -> None:
        self.state, self.key = state, key

    def __del__(self) -> None:
        if self._finalizing():  # wrappers outliving the run die at exit: nothing to count
            return
        self.state._release(self.key)


_ACTIVE: list[EmulationState] = []


def active() -> EmulationState:
    if not _ACTIVE:
        raise RuntimeError("an emulated CUDA tensor was used outside emulated_cuda()")
    return _ACTIVE[-1]

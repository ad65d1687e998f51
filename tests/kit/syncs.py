"""Counting host synchronisations: what the sampler's "at most one host sync per step" is
checked against, by the tests and the benchmarks alike (one definition).

``SyncCounter`` counts, on any device, the operations that would make the host wait for a GPU;
``cuda_syncs`` asks CUDA itself (``torch.cuda.set_sync_debug_mode``) on a GPU; ``count_syncs``
picks the one that applies; ``sampler_reads`` is the number of host reads ``sample()`` makes.
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

REPO_ROOT = Path(__file__).resolve().parents[2]

__all__ = ["SYNC_ATEN_OPS", "SYNC_TENSOR_METHODS", "HostData", "SyncCounter", "count_syncs",
           "cuda_syncs", "sampler_reads"]


# aten ops whose result (value or output shape) must be known on the host: on a GPU each one
# blocks the CPU until the device has caught up.
SYNC_ATEN_OPS = frozenset({
    "aten._local_scalar_dense",  # .item(), bool(t), int(t), float(t), `if t:`
    "aten.nonzero", "aten.argwhere", "aten.masked_select", "aten.unique_dim",
    "aten._unique", "aten._unique2", "aten.unique_consecutive", "aten.bincount",
    "aten.equal", "aten.is_nonzero", "aten.histc",
})
# Tensor methods that copy to host memory (free on a CPU tensor, a sync on a GPU tensor).
SYNC_TENSOR_METHODS = frozenset({"tolist", "numpy", "__array__", "cpu"})
# torch factories that make a host tensor when given no device (the default device is the CPU)
HOST_FACTORIES = frozenset({"tensor", "as_tensor", "zeros", "ones", "empty", "full", "arange",
                            "linspace", "rand", "randn", "randint", "randperm", "eye"})


def _op_name(func: Any) -> str:
    return str(getattr(func, "overloadpacket", func))


class _HostTensors:
    """Tensors known to live in host memory: results of ``.cpu()`` / ``.to("cpu")`` and of ops
    whose tensor inputs are all such tensors. Work on them costs no device sync on a GPU."""

    def __init__(self) -> None:
        self._refs: dict[int, weakref.ref] = {}

    def add(self, value: Any) -> None:
        for t in _tensors(value):
            self._refs[id(t)] = weakref.ref(t, self._forget(id(t)))

    def _forget(self, key: int) -> Callable[[Any], None]:
        return lambda _ref: self._refs.pop(key, None)

    def __contains__(self, t: torch.Tensor) -> bool:
        ref = self._refs.get(id(t))
        return ref is not None and ref() is t

    def all_host(self, args: Any) -> bool:
        tensors = list(_tensors(args))
        return bool(tensors) and all(t in self for t in tensors)


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)


class _DispatchCounter(TorchDispatchMode):
    def __init__(self, sink: Counter, host: _HostTensors) -> None:
        super().__init__()
        self.sink, self.host = sink, host

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        if self.host.all_host((args, kwargs)):  # pure host work: no device involved
            out = func(*args, **kwargs)
            self.host.add(out)
            return out
        name = _op_name(func)
        if name == "aten.copy_" and args[0] in self.host and args[1] not in self.host:
            # device -> host buffer: a blocking copy waits; a non-blocking one into a pinned
            # buffer (hostlag.HostLag) does not, and its reader checks an event instead
            if not kwargs.get("non_blocking", args[2] if len(args) > 2 else False):
                self.sink["aten.copy_(to host)"] += 1
            return func(*args, **kwargs)
        if name in SYNC_ATEN_OPS:
            self.sink[name] += 1
        elif name in ("aten.index", "aten.index_put", "aten.index_put_"):
            # boolean-mask indexing computes nonzero() internally: output shape is data-dependent
            indices = args[1] if len(args) > 1 else ()
            if any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices):
                self.sink[f"{name}[bool mask]"] += 1
        elif name == "aten.repeat_interleave" and "Tensor" in str(func) \
                and kwargs.get("output_size") is None:
            self.sink[name] += 1  # tensor repeats: output length is data-dependent
        return func(*args, **kwargs)


class _FunctionCounter(TorchFunctionMode):
    def __init__(self, sink: Counter, host: _HostTensors) -> None:
        super().__init__()
        self.sink, self.host = sink, host

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        to_host = name == "cpu" or (name == "to" and any(
            isinstance(a, str) and a.startswith("cpu") for a in (*args[1:], kwargs.get("device"))))
        if name in SYNC_TENSOR_METHODS or to_host:
            source = args[0] if args else None
            if not (isinstance(source, torch.Tensor) and source in self.host):
                self.sink[f"Tensor.{name}" + ("(cpu)" if name == "to" else "")] += 1
        out = func(*args, **kwargs)
        if name in HOST_FACTORIES and func is getattr(torch, name) \
                and kwargs.get("device") in (None, "cpu"):
            self.host.add(out)  # host memory on a GPU run too
        if to_host and isinstance(out, torch.Tensor):
            if args and out is args[0]:  # a CPU run returns the tensor itself; on a GPU the
                out = out.clone()  # host copy is a new tensor (this mode is off in here)
            self.host.add(out)
        return out


def sampler_reads(steps_run: int, steps: int) -> int:
    """Host reads ``sample()`` makes in a run of ``steps_run`` of ``steps`` planned steps: one per
    step, none after step T (the loop ends there without an exit check)."""
    return steps_run - (steps_run == steps)


class SyncCounter:
    """Count operations that would force a host<->device sync on a GPU, on any device.

    Combines a ``TorchDispatchMode`` (aten ops with data-dependent results such as
    ``_local_scalar_dense`` behind ``.item()``/``bool()``, ``nonzero``, boolean-mask indexing)
    and a ``TorchFunctionMode`` (``.tolist()``, ``.numpy()``, ``.cpu()``, ``.to("cpu")``, which
    never reach the dispatcher for CPU tensors). Tensors already copied to the host (and
    everything computed only from them) are tracked and cost nothing further, as on a GPU; to
    keep that tracking right on a CPU run, ``.cpu()`` of a CPU tensor returns a copy inside the
    counter. ``.to(device)`` with a device object is not counted: on a CPU run it cannot be told
    apart from a harmless ``.to(x.device)``. A torch factory called with no ``device`` or with the
    string ``"cpu"`` (``torch.tensor(ids)``) makes a host tensor, as on a GPU run. Copying a
    device tensor into a host tensor is a sync unless ``non_blocking=True``: the asynchronous
    copy into a pinned buffer that ``ladr_core.dimoo.denoise.hostlag.HostLag`` makes (into pageable
    memory it would wait; nothing in the project does that). Use as a context manager; ``counts`` maps op name ->
    number of calls, ``total`` is their sum.
    """

    def __init__(self) -> None:
        self.counts: Counter = Counter()
        self._modes: list[Any] = []

    def __enter__(self) -> SyncCounter:
        host = _HostTensors()
        self._modes = [_FunctionCounter(self.counts, host), _DispatchCounter(self.counts, host)]
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(*exc)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def snapshot(self) -> Counter:
        """A copy of the counts so far (to difference before/after a region)."""
        return Counter(self.counts)


def cuda_syncs(run: Callable[[], Any], sites: Counter | None = None) -> int:
    """CUDA host syncs of ``run``, counted by ``torch.cuda.set_sync_debug_mode("warn")`` (one
    warning per synchronizing call). A wait on a CUDA event is not reported by that mode; the
    ML-Cache counts its own (``DenoiserStats.host_waits``). ``sites``, when given, counts the
    Python lines that made them (``path:line`` relative to the repository)."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            run()
        finally:
            torch.cuda.set_sync_debug_mode(0)
    syncs = [w for w in caught if "synchroniz" in str(w.message).lower()]
    if sites is not None:
        for w in syncs:
            path = Path(w.filename)
            where = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
            sites[f"{where}:{w.lineno}"] += 1
    return len(syncs)


def count_syncs(run: Callable[[], Any], device: torch.device) -> tuple[int, dict[str, int]]:
    """(host syncs of ``run``, where they came from): on a GPU CUDA's own count and the Python
    lines behind it (``cuda_syncs``), elsewhere ``SyncCounter`` and its op names."""
    if device.type == "cuda":
        sites: Counter = Counter()
        return cuda_syncs(run, sites), dict(sites)
    with SyncCounter() as counter:
        run()
    return counter.total, dict(counter.counts)


class HostData(TorchDispatchMode):
    """Records the tensors made from host (Python) data (torch.tensor / new_tensor:
    aten.lift_fresh): on an accelerator each becomes a host -> device copy from pageable memory,
    which waits for the host (a fixed sync per run that ``SyncCounter`` cannot see on a CPU).
    ``made``: the ops, in order; ``count``: how many."""

    def __init__(self) -> None:
        super().__init__()
        self.made: list[str] = []

    @property
    def count(self) -> int:
        return len(self.made)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        if func.overloadpacket in (torch.ops.aten.lift_fresh, torch.ops.aten.lift_fresh_copy):
            self.made.append(str(func))
        return func(*args, **(kwargs or {}))

"""The ``torch.cuda`` API for an emulated device: availability and properties, memory figures
from the emulation's allocator model, streams and events (no concurrency: work runs when
issued, so waits only count as host waits), CUDA generators (CPU generators that say ``cuda``)
and CUDA graphs (a tape of the aten ops issued during capture, replayed into the captured
outputs, as a real graph writes into its fixed addresses)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import torch

from .capture import on_empty_cache
from .state import EmulationState, active
from .tensor import EmuTensor
from .tree import leaves, tree_map
from .where import trail

GIB = 1024 ** 3


class EmuGenerator(torch._C.Generator):
    """A CPU generator whose ``device`` is ``cuda:0``: draws for emulated tensors come from it."""

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return torch.device("cuda", 0)


class _GeneratorMeta(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, torch._C.Generator)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, torch._C.Generator)

    def __call__(cls, device: Any = "cpu") -> torch._C.Generator:
        if torch.device(device).type == "cuda":
            return EmuGenerator()
        return torch._C.Generator(device)


class Generator(metaclass=_GeneratorMeta):
    """Stands for ``torch.Generator`` inside the emulation: ``torch.Generator(device="cuda")``
    gives an EmuGenerator; isinstance checks accept every generator."""


class EmuEvent:
    def __init__(self, enable_timing: bool = False, blocking: bool = False,
                 interprocess: bool = False) -> None:
        self.state, self.when = active(), None
        self.copies: set[int] = set()  # completion="late": the copies it stands for
        self.mark: tuple[int, int] | None = None  # and the ops (Ordering.mark)

    def record(self, stream: Any = None) -> None:
        self.when = time.perf_counter()
        order = self.state.ordering
        if order is not None:
            self.copies = order.recorded(stream or order.current())
            self.mark = order.mark(stream)

    def wait(self, stream: Any = None) -> None:
        if self.state.ordering is not None:  # a device-side wait: the copies land for it
            self.state.ordering.land_ids(self.copies)
            self.state.ordering.wait_for(stream, self.mark)

    def query(self) -> bool:
        return self.state.ordering is None or self.state.ordering.done(self.copies)

    def synchronize(self) -> None:
        self.state.wait("torch.cuda.Event.synchronize()")

    def elapsed_time(self, end: EmuEvent) -> float:
        return (end.when - self.when) * 1e3


class EmuStream(torch.Stream):
    """A CUDA stream object torch's bindings accept (``tensor.record_stream(s)``); work runs
    when issued, so every wait is already satisfied."""

    _count = 0

    def __new__(cls, device: Any = None, priority: int = 0) -> EmuStream:
        EmuStream._count += 1
        return super().__new__(cls, stream_id=EmuStream._count, device_index=0,
                               device_type=1)  # 1: c10::DeviceType::CUDA

    def __init__(self, device: Any = None, priority: int = 0) -> None:
        self.state = active()

    @property
    def device(self) -> torch.device:  # type: ignore[override]
        return torch.device("cuda", 0)

    def wait_stream(self, other: Any) -> None:
        if self.state.ordering is not None:
            self.state.ordering.land_stream(other)
            self.state.ordering.wait_for(self, self.state.ordering.mark(other))

    def wait_event(self, event: Any) -> None:
        event.wait(self)

    def record_event(self, event: EmuEvent | None = None) -> EmuEvent:
        event = event or EmuEvent()
        event.record(self)
        return event

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        self.state.wait("torch.cuda.Stream.synchronize()")  # (lands every copy: lenient)


class _Input:
    """A tensor made before the capture that the capture reads: the graph holds its data (the
    address, on a GPU) but not the program's tensor, so replay checks it is still alive."""

    __slots__ = ("inner", "key", "shape", "where")

    def __init__(self, t: EmuTensor) -> None:
        self.inner, self.key, self.shape = t.inner, t.inner.untyped_storage()._cdata, t.shape
        self.where = trail(2)  # the captured line that reads it


class EmuGraph:
    """torch.cuda.CUDAGraph: capture records the ops, replay reruns them into the outputs."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.state = active()
        self.tape: list[tuple[Any, tuple, dict, Any]] = []
        self._made: set[int] = set()  # ids of the tensors the capture made

    def capture_begin(self, pool: Any = None, capture_error_mode: str = "global") -> None:
        self.tape, self._made = [], set()
        self.state.capture = self
        self.state.memory.capturing = True

    def capture_end(self) -> None:
        self.state.capture = None
        self.state.memory.capturing = False

    def record(self, func: Any, args: tuple, kwargs: dict, result: Any) -> None:
        def held(x: Any) -> Any:
            # counted by this emulation (a tensor an earlier emulated_cuda() made and a cache
            # kept, as functools.cache does, has no count here to go to zero)
            if isinstance(x, EmuTensor) and id(x) not in self._made and \
                    x.inner.untyped_storage()._cdata in self.state._live:
                return _Input(x)
            return x

        self.tape.append((func, tree_map(held, args), tree_map(held, kwargs), result))

    def made(self, t: EmuTensor) -> None:
        """``t`` was made during the capture (an op's output or a factory's tensor)."""
        self._made.add(id(t))

    def _inner(self, x: Any) -> Any:
        if isinstance(x, _Input):
            if x.key not in self.state._live:
                from .capture import refuse

                self.state.capture, saved = self, self.state.capture
                try:
                    refuse(self.state, f"replay reads a {tuple(x.shape)} tensor made before the "
                                       "capture and freed since (its memory may hold another "
                                       f"tensor now), read at {x.where}; keep the graph's "
                                       "inputs alive")
                finally:
                    self.state.capture = saved
            return x.inner
        return x.inner if isinstance(x, EmuTensor) else x

    def replay(self) -> None:
        for func, args, kwargs, result in self.tape:
            inner = tree_map(self._inner, (args, kwargs))
            fresh = func(*inner[0], **inner[1])
            inputs = {a.inner.untyped_storage()._cdata for a in leaves(args)
                      if isinstance(a, (EmuTensor, _Input))}
            for old, new in zip(leaves(result), leaves(fresh), strict=True):
                if isinstance(old, EmuTensor) and \
                        old.inner.untyped_storage()._cdata not in inputs:
                    old.inner.copy_(new)

    def reset(self) -> None:
        self.tape = []

    def pool(self) -> object:
        return object()


def api(state: EmulationState) -> dict[str, Any]:
    """The torch.cuda attributes the emulation replaces, by name, answering as ``state.card``."""
    mem, card = state.memory, state.card
    default = EmuStream()
    current = [default]
    state.current_stream = lambda: current[0]  # type: ignore[attr-defined]
    # the allocator's pool per stream (memory.py); the default stream's is 0
    mem.stream_of = lambda: 0 if current[0] is default else current[0].stream_id

    @contextlib.contextmanager
    def stream(s: EmuStream | None) -> Iterator[None]:
        before = current[0]
        current[0] = s or before
        try:
            yield
        finally:
            current[0] = before

    @contextlib.contextmanager
    def graph(g: EmuGraph, pool: Any = None, stream: Any = None,
              capture_error_mode: str = "global") -> Iterator[None]:
        state.wait("torch.cuda.graph() (it synchronises before capture)")
        g.capture_begin()
        try:
            yield
        finally:
            g.capture_end()

    props = SimpleNamespace(name=card.label, total_memory=card.total_memory,
                            major=card.capability[0], minor=card.capability[1],
                            multi_processor_count=card.multi_processor_count)
    stats = lambda: {"allocated_bytes.all.current": mem.allocated,  # noqa: E731
                     "allocated_bytes.all.peak": mem.peak_allocated,
                     "reserved_bytes.all.current": mem.reserved,
                     "reserved_bytes.all.peak": mem.peak_reserved}
    return {
        "is_available": lambda: True, "is_initialized": lambda: True, "init": lambda: None,
        "_lazy_init": lambda: None, "device_count": lambda: 1,
        "current_device": lambda: 0, "set_device": lambda d: None,
        "get_device_name": lambda d=None: props.name,
        "get_device_properties": lambda d=None: props,
        "get_device_capability": lambda d=None: card.capability,
        # torch answers True for an emulated bf16 unless including_emulation=False
        "is_bf16_supported": lambda including_emulation=True: card.bf16 or including_emulation,
        "synchronize": lambda d=None: state.wait("torch.cuda.synchronize()"),
        "mem_get_info": lambda d=None: (mem.free_bytes, card.total_memory),
        "memory_allocated": lambda d=None: mem.allocated,
        "max_memory_allocated": lambda d=None: mem.peak_allocated,
        "memory_reserved": lambda d=None: mem.reserved,
        "max_memory_reserved": lambda d=None: mem.peak_reserved,
        "memory_stats": lambda d=None: stats(),
        "reset_peak_memory_stats": lambda d=None: mem.reset_peak(),
        "reset_max_memory_allocated": lambda d=None: mem.reset_peak(),
        "empty_cache": lambda: (on_empty_cache(state), mem.empty_cache())[1],
        "Stream": EmuStream, "Event": EmuEvent,
        "current_stream": lambda d=None: current[0], "default_stream": lambda d=None: default,
        "stream": stream, "set_stream": lambda s: current.__setitem__(0, s),
        "CUDAGraph": EmuGraph, "graph": graph,
        "graph_pool_handle": lambda: object(),
        "manual_seed": lambda s: None, "manual_seed_all": lambda s: None,
        "set_sync_debug_mode": lambda m: None, "get_sync_debug_mode": lambda: 0,
        "default_generators": (EmuGenerator(),),
    }

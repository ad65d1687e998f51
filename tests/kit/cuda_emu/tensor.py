"""EmuTensor: a tensor whose device is ``cuda:0`` while its data lives in an ordinary CPU tensor
(or a meta tensor, for shape-only estimates). Every aten op on it runs on that inner tensor,
after the checks of ``state.py``: device mismatches, host reads, blocking copies, float64.

Built with ``torch.Tensor._make_wrapper_subclass`` (the pattern of torch's own subclass tests):
the wrapper owns no storage; ``inner`` does. Ops reach ``__torch_dispatch__`` as aten calls, so
every Python-level spelling (``x[i]``, ``x.cpu()``, ``torch.where``) is seen once, as the op the
device would run.
"""

from __future__ import annotations

from typing import Any

import torch

from ..syncs import SYNC_ATEN_OPS
from . import capture, rules
from .state import EmulationState, active
from .tree import leaves, tree_map

DEVICE = torch.device("cuda", 0)
aten = torch.ops.aten

# ops that move data between devices (checked as copies, not as mismatches)
_COPIES = {aten.copy_, aten._to_copy, aten._copy_from, aten._copy_from_and_resize}
_INDEXING = {aten.index, aten.index_put, aten.index_put_, aten._index_put_impl_}
_NO_OUTPUT_CHECK = {aten.record_stream}
_HOOKED = rules.WATCHED | capture.WATCHED
# float64 is refused on the device except for per-item schedule scalars: the sampler computes
# gamma^-1 and the official keep counts on [B]-sized tensors in float64 on purpose (Python's
# float arithmetic of the official loop, ladr_core/step.py RunInfo.sched_dtype); a batch never
# reaches this many items in one pass, and any real float64 workload (a matmul, a [N, K] table)
# is far larger.
FLOAT64_SCALARS = 64


class EmuTensor(torch.Tensor):
    inner: torch.Tensor

    @staticmethod
    def __new__(cls, inner: torch.Tensor) -> EmuTensor:
        out = torch.Tensor._make_wrapper_subclass(
            cls, inner.shape, strides=inner.stride(), storage_offset=inner.storage_offset(),
            dtype=inner.dtype, layout=inner.layout, device=DEVICE,
            requires_grad=inner.requires_grad)
        out.inner = inner
        return out

    def __repr__(self, *, tensor_contents: Any = None) -> str:  # noqa: ARG002
        return f"EmuTensor(cuda:0, {self.inner!r})"

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN206
        kwargs = kwargs or {}
        if func in _HOST_METHODS:
            state = active()
            state.read(f"Tensor.{func.__name__}()")
            return func(unwrap(args[0]), *args[1:], **kwargs)
        if func in _INDEX_METHODS and len(args) > 1:
            args = (args[0], _device_index(active(), args[1]), *args[2:])
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN206
        return dispatch(active(), func, args, kwargs or {})


_HOST_METHODS = {torch.Tensor.tolist, torch.Tensor.numpy, torch.Tensor.__array__}
_INDEX_METHODS = {torch.Tensor.__getitem__, torch.Tensor.__setitem__}


def _device_index(state: EmulationState, index: Any) -> Any:
    """A Python list in an index becomes a tensor on the device, as CUDA makes it: a blocking
    host-to-device copy (torch builds it outside Python's dispatch, so it is done here)."""
    if isinstance(index, tuple):
        return tuple(_device_index(state, i) for i in index)
    if isinstance(index, list):
        state.host_to_device("a Python list used as an index of a device tensor (a host "
                             "copy of the list)")
        return wrap(state, torch.tensor(index).to(state.inner_device))
    return index


def wrap(state: EmulationState, inner: torch.Tensor) -> EmuTensor:
    out = EmuTensor(inner)
    state.track(out, inner)
    if state.capture is not None:  # made during a capture: the graph's own (capture.py)
        state.capture.made(out)
    if inner.dtype == torch.float64 and inner.numel() > FLOAT64_SCALARS:
        state.violate("float64", f"a float64 tensor of {inner.numel()} elements on the device "
                                 "(consumer GPUs run float64 at 1/64 of float32 speed)")
    return out


def unwrap(x: Any) -> Any:
    return x.inner if isinstance(x, EmuTensor) else x


def _rewrite_device(state: EmulationState, x: Any) -> Any:
    if isinstance(x, torch.device) and x.type == "cuda":
        return state.inner_device
    return x


def _check_operands(state: EmulationState, func: Any, flat: list[Any]) -> None:
    hollow = [t for t in flat if isinstance(t, torch.Tensor) and not isinstance(t, EmuTensor)
              and t.device.type == "cuda"]
    if hollow:
        state.violate("mismatch", f"{func} got a tensor that says cuda but holds no emulated "
                                  "data (made by `t.data = device_tensor`; use Module.to or "
                                  "torch.utils.swap_tensors)")
    host = [t for t in flat if isinstance(t, torch.Tensor) and not isinstance(t, EmuTensor)
            and t.dim() > 0]
    if host and func.overloadpacket in _INDEXING:
        state.host_to_device(f"{func}: a host tensor indexes a device tensor (a hidden "
                             "host-to-device copy; a Python list index is one too)")
    elif host:
        state.violate("mismatch", f"{func} got a host tensor {tuple(host[0].shape)} with device "
                                  "tensors (on a GPU: 'Expected all tensors to be on the same "
                                  "device')")
    if str(func.overloadpacket) in SYNC_ATEN_OPS:  # the sync counter's list (tests.kit.syncs)
        state.read(f"{func} (its value or output size must reach the host: .item(), bool(), "
                   "nonzero and the like)")
    elif func.overloadpacket in _INDEXING and any(isinstance(t, torch.Tensor) and t.dtype == torch.bool
                                   for t in flat[1:]):
        state.read(f"{func} with a boolean mask (its size depends on the data)")


def _copy(state: EmulationState, func: Any, args: tuple, kwargs: dict) -> Any:
    """Copies between host and device; everything else with the inner tensors.

    With ``storage="meta"`` a non-blocking copy into (pinned) host memory hands the host zeros:
    the device holds no values, and such a copy is no read (the caller reads it a call later,
    e.g. the ML-Cache's lagged counts, hostlag.py), so a shape-only run goes on with counts of
    0; a blocking one is a read, refused as ``estimate``."""
    if func.overloadpacket is aten._to_copy:
        src, dev = args[0], kwargs.get("device")
        if dev is not None and dev.type == "cpu":  # device -> host
            if kwargs.get("non_blocking"):
                # a pinned host copy the caller must wait for: values are right at once here
                kw = {**kwargs, "device": torch.device("cpu")}
                if state.storage == "meta":  # no values: the host receives zeros (_copy doc)
                    return torch.zeros(src.shape, dtype=kw.get("dtype") or src.dtype)
            else:
                state.read("a device-to-host copy (.cpu() / .to('cpu'))")
                kw = kwargs
            out = func(unwrap(src), **kw)
            if kwargs.get("non_blocking") and state.ordering is not None:
                state.ordering.defer(out)  # lands when the host waits (ordering.py)
            return out
    if func.overloadpacket is aten.copy_:
        dst, src = args[0], args[1]
        non_blocking = args[2] if len(args) > 2 else kwargs.get("non_blocking", False)
        if not isinstance(dst, EmuTensor) and isinstance(src, EmuTensor):
            if not (non_blocking and state.is_pinned(dst)):
                state.read("a blocking device-to-host copy_")
            if state.storage == "meta":  # no values: the host receives zeros (_copy doc)
                return dst.zero_()
            dst.copy_(src.inner)
            if non_blocking and state.ordering is not None and state.is_pinned(dst):
                state.ordering.defer(dst)  # lands when the host waits (ordering.py)
            return dst
        if isinstance(dst, EmuTensor) and not isinstance(src, EmuTensor):
            if not (non_blocking and state.is_pinned(src)):
                state.host_to_device("a blocking host-to-device copy_ (pageable memory or "
                                     "non_blocking=False)")
            dst.inner.copy_(src.to(state.inner_device) if state.storage == "meta" else src)
            if non_blocking and state.ordering is not None and state.is_pinned(src):
                state.ordering.defer(dst.inner)  # lands when demanded (ordering.py)
            return dst
    return None


def dispatch(state: EmulationState, func: Any, args: tuple, kwargs: dict) -> Any:
    if state.ordering is None:
        return _dispatch(state, func, args, kwargs)
    inners = [x.inner for x in leaves((args, kwargs)) if isinstance(x, EmuTensor)]
    if state.ordering.pending:  # completion="late" (ordering.py)
        state.ordering.before_op(state, inners)
    out = _dispatch(state, func, args, kwargs)
    if not func.is_view and func.overloadpacket is not aten.record_stream:  # no data touched
        state.ordering.used(inners)
    return out


def _dispatch(state: EmulationState, func: Any, args: tuple, kwargs: dict) -> Any:
    flat = leaves((args, kwargs))
    if func.overloadpacket is aten.record_stream:
        return None  # work runs in issue order here: nothing to keep alive
    if func.overloadpacket in _COPIES:
        done = _copy(state, func, args, kwargs)
        if done is not None:
            return done
    else:
        _check_operands(state, func, flat)
    if func.overloadpacket in _HOOKED:  # the card's kernels (rules.py), capture.py
        capture.on_op(state, func)
        rules.on_op(state, func, args, kwargs)
    inner_args = tree_map(lambda x: _rewrite_device(state, unwrap(x)), args)
    inner_kwargs = tree_map(lambda x: _rewrite_device(state, unwrap(x)), kwargs)
    out = func(*inner_args, **inner_kwargs)
    if func.overloadpacket in _NO_OUTPUT_CHECK:
        return out
    return _wrap_outputs(state, func, args, kwargs, out)


def _wrap_outputs(state: EmulationState, func: Any, args: tuple, kwargs: dict,
                  out: Any) -> Any:
    # in-place and out= ops return their (wrapped) argument itself
    by_inner = {id(a.inner): a for a in leaves(args) if isinstance(a, EmuTensor)}

    def rewrap(x: Any) -> Any:
        if not isinstance(x, torch.Tensor) or isinstance(x, EmuTensor):
            return x
        if id(x) in by_inner:
            return by_inner[id(x)]
        return wrap(state, x)

    result = tree_map(rewrap, out)
    if state.capture is not None:
        state.capture.record(func, args, kwargs, result)
    return result

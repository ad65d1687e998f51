"""The kernels an emulated device runs, as the roofline needs them: per op its kind (the
operand kind that sets its compute peak), FLOPs and bytes moved.

``OpLog`` is a ``TorchDispatchMode`` entered inside ``emulated_cuda`` (tests/kit/cuda_emu): it
sees each aten op on the emulated tensors once, as the device would run it, before the
emulation runs it on the inner tensors (whose own ops it does not see: it is off the mode stack
while it handles an op). An op counts as one kernel when it touches an emulated tensor and is
no view, alias or bare allocation (those launch nothing). Its bytes are the bytes of its tensor
operands read (for a gather, the rows it takes) plus the bytes of its outputs written; its
FLOPs come from torch's FLOP counter formulas (matrix products, convolutions, attention) and
gpu_estimate's additions (kernels.py ``FLOP_FORMULAS``); elementwise work counts 0 FLOPs (it
is bound by its bytes).

``F.scaled_dot_product_attention`` never reaches aten as a kernel here (the emulation's
attention.py runs it on the inner tensors after choosing the card's backend), so ``_Attention``
records it at the Python level with the backend the card would take (attention.py ``choose``):
the fused backends read q, k, v and write the output and a float32 log-sum-exp; math also
writes and reads the float32 scores twice (scores, softmax).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry, sdpa_flop_count, shape_wrapper

from lab.benchmarks.gpu_estimate.kernels import FLOP_FORMULAS
from tests.kit.cuda_emu import EmuTensor
from tests.kit.cuda_emu.attention import choose
from tests.kit.cuda_emu.state import active
from tests.kit.cuda_emu.tree import leaves

__all__ = ["Kernel", "OpLog", "kind_of", "recording"]

aten = torch.ops.aten
_FORMULAS = {**flop_registry, **{k: shape_wrapper(v) for k, v in FLOP_FORMULAS.items()}}
#: ops that allocate or re-describe memory and launch no kernel
_NO_KERNEL = {aten.empty, aten.empty_like, aten.empty_strided, aten.detach, aten.alias,
              aten.lift_fresh, aten.set_, aten.resize_, aten.record_stream,
              aten._local_scalar_dense, aten._unsafe_view}
#: gathers read the rows they take, not their whole table
_GATHERS = {aten.embedding, aten.index_select}
_KINDS = {torch.bfloat16: "bfloat16", torch.float16: "float16", torch.float32: "float32",
          torch.int8: "int8", torch.float8_e4m3fn: "float8", torch.float8_e5m2: "float8"}


@dataclass(frozen=True)
class Kernel:
    op: str
    kind: str  # the operand kind whose peak bounds its FLOPs (Card.peak)
    flops: int
    nbytes: int


def kind_of(func: Any, tensors: list[torch.Tensor]) -> str:
    """The operand kind of an op's FLOPs: fp8 for ``_scaled_mm``, int8 for ``_int_mm``, else
    the first floating operand's dtype."""
    packet = getattr(func, "overloadpacket", None)
    if packet is aten._scaled_mm:
        return "float8"
    if packet is aten._int_mm:
        return "int8"
    floats = [t.dtype for t in tensors if t.dtype.is_floating_point]
    return _KINDS.get(floats[0], "float32") if floats else "float32"


def _nbytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


class OpLog(TorchDispatchMode):
    """Records every kernel of the emulated device in ``kernels`` while entered."""

    def __init__(self) -> None:
        super().__init__()
        self.kernels: list[Kernel] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        ins = [t for t in leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        outs = [t for t in leaves(out) if isinstance(t, torch.Tensor)]
        if func.is_view or func.overloadpacket in _NO_KERNEL or \
                not any(isinstance(t, EmuTensor) for t in ins + outs):
            return out
        formula = _FORMULAS.get(func.overloadpacket)
        flops = int(formula(*args, **kwargs, out_val=out)) if formula is not None else 0
        read = _nbytes(ins[1:] + outs) if func.overloadpacket in _GATHERS else _nbytes(ins)
        self.kernels.append(Kernel(str(func.overloadpacket), kind_of(func, ins), flops,
                                   read + _nbytes(outs)))
        return out


def _op_by_op(*qkv: Any) -> bool:
    """Whether the emulation runs this attention as its aten ops (attention.py ``run``: during
    a capture or with gradients), which OpLog records itself."""
    return active().capture is not None or (torch.is_grad_enabled() and any(
        isinstance(t, torch.Tensor) and t.requires_grad for t in qkv))


class _Attention(TorchFunctionMode):
    """SDPA on the emulated device as one kernel of the card's backend (module docstring)."""

    def __init__(self, log: OpLog) -> None:
        super().__init__()
        self.log = log

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        q = args[0] if args else None
        if func is F.scaled_dot_product_attention and isinstance(q, EmuTensor) and \
                not _op_by_op(*args[:3]):
            k, v = args[1:3]
            backend, _ = choose(active().card, q, k, v, kwargs.get("attn_mask"),
                                kwargs.get("enable_gqa", False))
            rows = q.numel() // q.shape[-1]
            moved = _nbytes([q, k, v, out]) + rows * 4
            if backend == "math":
                moved += 4 * rows * k.shape[-2] * 4  # float32 scores and softmax, out and back
            self.log.kernels.append(Kernel(f"attention:{backend}", kind_of(func, [q]),
                                           int(sdpa_flop_count(q.shape, k.shape, v.shape)),
                                           moved))
        return out


@contextlib.contextmanager
def recording() -> Iterator[list[Kernel]]:
    """The kernels the emulated device runs while the block runs (appended as they run)."""
    log = OpLog()
    with _Attention(log), log:
        yield log.kernels

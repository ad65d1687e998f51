"""The kernels a card takes (cards.py), checked on each call the emulation sees.

- ``torch._scaled_mm`` (fp8): refused, with torch's message, on a card without fp8 (sm < 8.9),
  when mat1's K or mat2's K or N is not a multiple of 16, when mat2 is not column-major
  (cuBLASLt multiplies a row-major by a column-major matrix only) and for e5m2 x e5m2;
- ``torch._int_mm`` (int8): refused when M <= 16 or K or N is not a multiple of 8;
- attention (``F.scaled_dot_product_attention``): the backend torch would pick on the card
  (``choose``: flash, memory-efficient, cuDNN, else math, by dtype, head size, mask,
  architecture and grouped heads); the math path is reported with its site and its
  [B, H, L, S] float32 scores counted in the allocator while the call runs;
- bf16 matrix products on a card without bf16 tensor cores are reported, and so is an fp8
  matrix cast to a wider float on the device (fp8 weights or activations multiplied by a float
  matmul: the fallback of a card without fp8, or of a refused ``_scaled_mm``).

A refusal is the ``RuntimeError`` the real kernel raises, so code that catches it falls back as
it would on the card; every refusal and every fallback is counted in ``state.fallbacks`` by
message and site, and each fast path taken in ``state.kernels`` (name, site). With
``fallbacks="raise"`` a refusal or fallback raises CudaEmulationError("kernel") at its site
instead, which no ``except`` in the code under test catches.

The attention choice follows the checks of torch's sdp_utils (torch 2.x) as far as the pack's
calls can meet them; what the emulation computes is the CPU's own attention of the same
inputs (the tokens stay those of a CPU run), only the memory and the report follow the card.
"""

from __future__ import annotations

from typing import Any

import torch

from .where import site

aten = torch.ops.aten
FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
HALF = (torch.float16, torch.bfloat16)
_MATMULS = {aten.mm, aten.addmm, aten.bmm, aten.baddbmm, aten._scaled_mm, aten._int_mm}
WATCHED = frozenset({*_MATMULS, aten._to_copy})


def report(state: Any, kind: str, message: str) -> None:
    """A fallback or refusal: counted by message and site, raised with fallbacks="raise"."""
    state.fallbacks[(f"{kind}: {message}", site())] += 1
    if state.fallback_mode == "raise":
        state.violate("kernel", f"{kind}: {message}")


def _refuse(state: Any, name: str, message: str) -> None:
    report(state, f"{name} refused", message)
    raise RuntimeError(message)


def _scaled_mm(state: Any, a: torch.Tensor, b: torch.Tensor) -> None:
    card = state.card
    if not card.fp8:
        _refuse(state, "_scaled_mm", "torch._scaled_mm is only supported on CUDA devices with "
                "compute capability >= 9.0 or 8.9, or ROCm MI300+")
    if a.shape[1] % 16:
        _refuse(state, "_scaled_mm", "Expected trailing dimension of mat1 to be divisible by 16 "
                f"but got mat1 shape: ({a.shape[0]}x{a.shape[1]}).")
    if b.shape[0] % 16 or b.shape[1] % 16:
        _refuse(state, "_scaled_mm", f"mat2 shape ({b.shape[0]}x{b.shape[1]}) must be "
                "divisible by 16")
    if a.dtype == b.dtype == torch.float8_e5m2:
        _refuse(state, "_scaled_mm", "Multiplication of two Float8_e5m2 matrices is not "
                "supported")
    if b.stride(0) != 1 or a.stride(1) != 1:
        _refuse(state, "_scaled_mm", "Only multiplication of row-major and column-major "
                "matrices is supported by cuBLASLt")


def _int_mm(state: Any, a: torch.Tensor, b: torch.Tensor) -> None:
    if not state.card.int8:
        _refuse(state, "_int_mm", "_int_mm is not supported on this device")
    if a.shape[0] <= 16:
        _refuse(state, "_int_mm", f"self.size(0) needs to be greater than 16, but got "
                f"{a.shape[0]}")
    if a.shape[1] <= 0 or a.shape[1] % 8:
        _refuse(state, "_int_mm", "self.size(1) needs to be greater than 0 and a multiple of "
                f"8, but got {a.shape[1]}")
    if b.shape[1] <= 0 or b.shape[1] % 8:
        _refuse(state, "_int_mm", "mat2.size(1) needs to be greater than 0 and a multiple of "
                f"8, but got {b.shape[1]}")


def _workspace(state: Any) -> None:
    """cuBLAS's workspace, taken from the caching allocator at the first matrix product."""
    if state.workspace is None and state.card.workspace_bytes:
        state.workspace = state.memory.malloc(state.card.workspace_bytes)


def _upcast(state: Any, src: Any, dtype: Any) -> None:
    if src.dtype in FP8 and src.dim() >= 2 and dtype is not None and dtype not in FP8 and dtype.is_floating_point:
        report(state, "fp8", f"a {tuple(src.shape)} {src.dtype} tensor cast to {dtype} for a "
               f"float matmul on {state.card.name} (sm {state.card.capability[0]}."
               f"{state.card.capability[1]}): the fp8 fast path is not taken")


def on_op(state: Any, func: Any, args: tuple, kwargs: dict) -> None:
    """Before a matrix product or a cast runs: its rules (module docstring)."""
    packet = func.overloadpacket
    if packet not in WATCHED:
        return
    if packet is aten._to_copy:
        if isinstance(args[0], torch.Tensor) and args[0].is_cuda:
            _upcast(state, args[0], kwargs.get("dtype"))
        return
    _workspace(state)
    name = str(packet).split(".")[-1]
    if packet is aten._scaled_mm:
        _scaled_mm(state, args[0], args[1])
    elif packet is aten._int_mm:
        _int_mm(state, args[0], args[1])
    elif not state.card.bf16 and any(isinstance(t, torch.Tensor) and t.dtype == torch.bfloat16
                                     for t in args[:3]):
        report(state, "bf16", f"a bf16 {name} on a card without bf16 tensor cores (sm "
               f"{state.card.capability[0]}.{state.card.capability[1]}): emulated, many times "
               "slower; choose float16 or float32 on this card")
        return
    else:
        return
    state.kernels[(name, site())] += 1

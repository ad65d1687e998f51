"""What a CUDA device runs where the emulation (tests/kit/cuda_emu) would run the CPU's choice.

The emulation runs every aten op on its inner tensors, so an op that torch decomposes before
dispatch follows the CPU's (or the meta device's) choice, not CUDA's. One such op matters for
memory: ``F.scaled_dot_product_attention``. On an H100 with bf16, no mask, no dropout and head
dim 128, PyTorch picks FlashAttention-2 (``_scaled_dot_product_flash_attention``): it allocates
its output and a float32 log-sum-exp [B, H, L]. Under the emulation SDPA would take the math
path, which materialises the [B, H, L, L] scores in float32 (9 GiB at 1024 px). ``cuda_sdpa``
sends SDPA to the flash kernel of the CPU (``_scaled_dot_product_flash_attention_for_cpu``),
which has the same outputs (output and a float32 log-sum-exp [B, H, L]) and a meta kernel, so the
allocations equal the CUDA kernel's; the FLOPs are the same two matrix products (FLOP_FORMULAS).

``fp8_probe_passes``: the fp8 layouts probe the device once (store and read back two values,
weights/fp8.py ``round_trip_problem``); a shape-only run cannot read values back, and an H100
stores fp8, so the probe is taken to pass.

Not modelled (each below 0.1 GiB at these shapes, or a constant): cuBLAS / cuBLASLt workspaces
(tens of MiB, allocated once through the caching allocator), cuDNN convolution workspaces of the
VQ decoder (chosen per algorithm), the CUDA context itself (outside the allocator: the headroom
of the card table).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils.flop_counter import sdpa_flop_count

__all__ = ["FLOP_FORMULAS", "cuda_kernels", "fp8_probe_passes"]

aten = torch.ops.aten
_FLASH = aten._scaled_dot_product_flash_attention_for_cpu.default

#: FlopCounterMode formulas for ops it has none for: the CPU flash kernel (the same formula as
#: the CUDA one) and the int8 matmul of ComfyUI's int8 layout (a matmul like any other)
def _sdpa_flops(q: Any, k: Any, v: Any, *_args: Any, out_shape: Any = None, **_kw: Any) -> int:
    return sdpa_flop_count(q, k, v)


def _mm_flops(a: Any, b: Any, *_args: Any, out_shape: Any = None, **_kw: Any) -> int:
    return 2 * a[0] * a[1] * b[1]


FLOP_FORMULAS: dict[Any, Any] = {aten._scaled_dot_product_flash_attention_for_cpu: _sdpa_flops,
                                 aten._int_mm: _mm_flops}


class _CudaSDPA(TorchFunctionMode):
    """``F.scaled_dot_product_attention`` -> the flash kernel, where CUDA would take it."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        kwargs = kwargs or {}
        if func is F.scaled_dot_product_attention and _flash_eligible(*args, **kwargs):
            q, k, v = args[:3]
            return _FLASH(q, k, v, scale=kwargs.get("scale"))[0]
        return func(*args, **kwargs)


def _flash_eligible(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    attn_mask: Any = None, dropout_p: float = 0.0, is_causal: bool = False,
                    scale: float | None = None, enable_gqa: bool = False) -> bool:
    """CUDA's flash conditions that the DiMOO passes can meet: no mask, no dropout, not
    causal, 4-D half-precision or bf16 inputs of one dtype, head dim <= 256, equal heads
    (grouped-query attention is left to the op itself)."""
    return (attn_mask is None and dropout_p == 0.0 and not is_causal and q.dim() == 4
            and q.dtype in (torch.bfloat16, torch.float16, torch.float32)
            and q.dtype == k.dtype == v.dtype and q.shape[-1] <= 256
            and q.shape[1] == k.shape[1] == v.shape[1])


@contextlib.contextmanager
def fp8_probe_passes() -> Iterator[None]:
    from ladr_core.dimoo.weights import fp8

    saved = fp8.round_trip_problem
    fp8.round_trip_problem = lambda *_args: None  # type: ignore[assignment]
    try:
        yield
    finally:
        fp8.round_trip_problem = saved  # type: ignore[assignment]


@contextlib.contextmanager
def cuda_kernels() -> Iterator[None]:
    """Both substitutions of the module docstring while the block runs."""
    with fp8_probe_passes(), _CudaSDPA():
        yield

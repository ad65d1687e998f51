"""Which attention backend a card runs ``F.scaled_dot_product_attention`` with, and what that
costs in device memory (rules.py's module docstring has the reporting).

``choose`` walks flash, memory-efficient, cuDNN, math and takes the first the card builds
(cards.py ``sdpa``) whose checks the call passes; each refused backend gets its reason. The
checks (torch 2.x sdp_utils, as far as a dense 4-D call meets them):

- flash: float16 / bfloat16, head size <= 256 and equal for q, k, v, no attention mask (a
  causal flag is fine), grouped heads allowed;
- memory-efficient: float16 / bfloat16 (bf16 only with bf16 tensor cores) or float32, head size
  a multiple of 8 (4 in float32), a mask allowed, no grouped heads;
- cuDNN: float16 / bfloat16, head size <= 128 and a multiple of 8, no mask, no grouped heads;
- math: anything. It materialises the scores: float32 [B, H, L, S] twice (scores and their
  softmax) and float32 copies of q, k, v for half-precision inputs.

``run`` computes the CPU's own attention of the inner tensors (the values a CPU run gives),
wraps the output, and holds the backend's temporaries in the allocator model for the call: the
fused kernels their float32 log-sum-exp [B, H, L], math the buffers above.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .rules import HALF, report
from .where import site

__all__ = ["choose", "run"]


def _checks(card: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Any,
            grouped: bool) -> dict[str, str | None]:
    """backend -> why the card refuses it (None: it takes the call)."""
    hd, dt = q.shape[-1], q.dtype
    same = hd == k.shape[-1] == v.shape[-1]
    cap = f"sm {card.capability[0]}.{card.capability[1]}"
    return {
        "flash": (f"not built for {cap}" if "flash" not in card.sdpa else
                  f"{dt} (flash takes float16 / bfloat16)" if dt not in HALF else
                  f"head size {hd} (flash takes <= 256, equal for q, k, v)"
                  if hd > 256 or not same else
                  "an attention mask (flash takes none)" if mask is not None else None),
        "efficient": (f"not built for {cap}" if "efficient" not in card.sdpa else
                      f"bf16 without bf16 tensor cores ({cap})"
                      if dt == torch.bfloat16 and not card.bf16 else
                      f"head size {hd} (a multiple of {4 if dt == torch.float32 else 8})"
                      if hd % (4 if dt == torch.float32 else 8) or not same else
                      "grouped heads (enable_gqa)" if grouped else None),
        "cudnn": (f"not built for {cap}" if "cudnn" not in card.sdpa else
                  f"{dt} (cuDNN takes float16 / bfloat16)" if dt not in HALF else
                  f"head size {hd} (cuDNN takes <= 128, a multiple of 8)"
                  if hd > 128 or hd % 8 or not same else
                  "an attention mask" if mask is not None else
                  "grouped heads (enable_gqa)" if grouped else None),
        "math": None,
    }


def choose(card: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask: Any = None,
           enable_gqa: bool = False) -> tuple[str, dict[str, str]]:
    """(backend, {refused backend: reason})."""
    grouped = bool(enable_gqa) and q.shape[-3] != k.shape[-3]
    refused: dict[str, str] = {}
    for name, why in _checks(card, q, k, v, attn_mask, grouped).items():
        if why is None:
            return name, refused
        refused[name] = why
    raise AssertionError("math takes every call")


def _temporaries(backend: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> list[int]:
    b, h, m = (q.shape[0] if q.dim() == 4 else 1), q.shape[-3], q.shape[-2]
    if backend != "math":
        return [b * h * m * 4]  # the float32 log-sum-exp
    s = k.shape[-2]
    out = [b * h * m * s * 4, b * h * m * s * 4]
    if q.dtype in HALF:
        out = [t.numel() * 4 for t in (q, k, v)] + out
    return out


def run(state: Any, func: Any, args: tuple, kwargs: dict, unwrap: Any,
        wrap: Any) -> torch.Tensor:
    """The call on the card: choice, report, temporaries, the CPU's values. During a graph
    capture, with autograd on or with a host tensor among the operands, the call runs op by op
    through the emulation as before (the capture tape and the gradients need its aten ops, and
    there a host operand is refused as a device mismatch), its memory that of the ops."""
    q, k, v = args[:3]
    mask = kwargs.get("attn_mask", args[3] if len(args) > 3 else None)
    backend, refused = choose(state.card, q, k, v, mask, kwargs.get("enable_gqa", False))
    if backend == "math":
        why = "; ".join(f"{n}: {r}" for n, r in refused.items())
        report(state, "attention", f"falls back to math on {state.card.name}, materialising "
               f"[B, H, L, S] = {[*q.shape[:-1], k.shape[-2]]} float32 scores ({why})")
    state.kernels[(f"attention:{backend}", site())] += 1
    host = [t for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor)
            and getattr(t, "inner", None) is None and t.dim() > 0]  # not emulated
    if host or state.capture is not None or (torch.is_grad_enabled() and any(
            isinstance(t, torch.Tensor) and t.requires_grad for t in (q, k, v))):
        return func(*args, **kwargs)  # op by op: a host operand is refused there (mismatch)
    handles = [state.memory.malloc(n) for n in _temporaries(backend, q, k, v)]
    try:
        inner = [unwrap(a) for a in args]
        out = F.scaled_dot_product_attention(*inner, **{n: unwrap(x) for n, x in kwargs.items()})
        return wrap(state, out)
    finally:
        for h in reversed(handles):
            state.memory.free(h)

"""The kernels of one step of the 8B model on an emulated card, per weight layout and size, and
the roofline's seconds per step and per image (cost.py) from them.

The model is card_fit's: the 8B shape at full width and depth with shape-only weights
(``storage="meta"``), built on the emulated device in the layout (gpu_check's
``build_layout``), gpu_check's prompt, one image (B = 1) with its CFG rows packed into one
pass. Under the card's profile (its kernel rules: fp8 falls back to a float matmul where the
card has no fp8, attention takes the card's backend), two traces per size:

* ``first``: ``pipe.generate(strategy="baseline")`` through its first step (prompt rows, the
  first denoiser call, the sampler's statistics and decision), stopped at the step loop's one
  host read (gpu_estimate's ``_first_step``);
* ``call``: one more full denoiser call with the run's tokens and masks.

A step is ``call``; an image of a strategy with N forwards (mean NFE on DiMOO-nano's test set,
lab/results/quality_test.json) is ``first`` + (N - 1) x ``call``: the sampler's own kernels of
later steps are not counted (the first step's share, ``first`` - ``call``, shows their size,
with the prompt rows). The VQ decode is not counted (the H100's per-image figure has none).
Memory is not limited here: which cases fit is card_fit's answer (lab/results/card_fit.json).
Cards alike in what the code and the emulation's kernel rules branch on run the same kernels,
so they share one trace (``rules_key``): bf16 and int8 units, the flash backend, and for the
fp8 layouts fp8 units and the capability of fp8 matmuls (ladr_core quant.py
``fp8_matmul_available``: sm 8.9 and up).
"""

from __future__ import annotations

import time
from typing import Any

import torch

from lab.benchmarks.gpu_check.models import shaped_pipeline
from lab.benchmarks.gpu_check.speed import build_layout, prompt
from lab.benchmarks.gpu_estimate.kernels import fp8_probe_passes
from lab.benchmarks.gpu_estimate.measure import _first_step, model_shape, settle
from tests.kit.cuda_emu import CARDS, card, emulated_cuda

from .cost import table
from .ops import recording

__all__ = ["FP8_LAYOUTS", "rules_key", "trace_layout"]

UNLIMITED = 2 ** 50  # bytes: memory is card_fit's question, not this one's


FP8_LAYOUTS = ("fp8", "comfy_fp8")  # the layouts whose matmuls follow the card's fp8 units


def rules_key(name: str, layout: str) -> tuple[Any, ...]:
    """What decides the kernels ``layout`` runs on card ``name`` (module docstring)."""
    c = CARDS[name]
    fp8 = (c.fp8, c.capability >= (8, 9)) if layout in FP8_LAYOUTS else ()
    return (layout, c.bf16, c.int8, "flash" in c.sdpa, *fp8)


def _traces(pipe: Any, px: int, text: str) -> dict[str, Any]:
    with recording() as first:
        run, stop = _first_step(pipe, text, px, 1, 2, None)
    den = run.args.denoiser
    with recording() as call:
        den(run.tokens, run.masked)
    out = {"real_tokens": den.real_tokens, "first": table(first), "call": table(call)}
    del run, stop, den
    settle()
    return out


def trace_layout(name: str, layout: str, sizes: list[int],
                 again: tuple[int, int] | None = None) -> dict[str, Any]:
    """The kernel tables of ``layout`` on card ``name`` at each size (module docstring);
    ``again`` = (px, tokens): also trace that size with the prompt lengthened to that many real
    tokens (``"old_tokens"``: the H100 run's prompt length, as gpu_estimate's h100.py does)."""
    start = time.perf_counter()
    config, ids, dtype = model_shape("8b")
    profile = card(name, total_memory=UNLIMITED, context_bytes=0)
    out: dict[str, Any] = {}
    with emulated_cuda(card=profile, storage="meta"), fp8_probe_passes():
        model = build_layout(layout, config, torch.device("cuda"), dtype)
        settle()
        for px in sizes:
            out[str(px)] = _traces(shaped_pipeline(model, config, ids, px), px, prompt())
        if again is not None:
            px, tokens = again
            pipe = shaped_pipeline(model, config, ids, px)
            now = pipe.make_denoiser(prompt(), width=px, height=px).real_tokens
            text = prompt() + " word" * max(0, tokens - now)
            out["old_tokens"] = {"px": px, **_traces(pipe, px, text)}
        del model
        settle()
    out["seconds"] = round(time.perf_counter() - start, 1)
    return out

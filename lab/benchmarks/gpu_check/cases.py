"""Section a's runs: each a whole pipeline run on the device under test against the same run on
the CPU in float32, greedy (temperature 0: no random draw, so the two runs differ only by
float32 rounding). Same stored weights on both sides (a copy, byte for byte).

The list is derived, not written out: every registered strategy by name and every LADR preset
(``ladr_core.registry``), both ML-Cache presets, inpaint, outpaint, edit (a checkpoint that can
edit), a rolling batch (2 of 4 in flight, against four single runs on the CPU, and its agreement
with the four single runs on the device measured), every weight
format (``tests.kit.variants``, built from the checkpoint's own float32 weights on the CPU and
copied), block streaming, ``pipe.compile()``. Painting and editing take their known codes from
the palette stand-in for the VQ (models.py). One float32 path rounds differently on a GPU:
ComfyUI fp8 through ``torch._scaled_mm``, whose fp8 tensor-core sums keep fewer bits than
float32; its tokens are reported, and its check is the bf16 bound (bounds.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ladr_core import LADR, MLCacheConfig, preset_names, strategy_names
from ladr_core.dimoo import PaintOptions
from ladr_core.dimoo.model.offload import stream_blocks
from ladr_core.dimoo.weights import quant

from .models import CodesPipeline, palette_image, to_device

__all__ = ["Case", "FORMATS", "PROMPT", "build_cases", "format_model"]

PROMPT = "a red circle to the left of a blue square"
#: why a rolling batch's tokens are measured, not required equal, on a GPU
ROLLING_ROUNDS = ("a GPU's matrix kernels follow the packed pass's row count, so the last bits "
                  "of an item's logits can move with its batch and flip a near tie; the share "
                  "of items equal to their single run is measured")
EDIT = "make the circle green"
#: the weight formats besides float (tests.kit.variants), each checked in float32 and in bf16
FORMATS = ("fp8", "comfy_fp8", "int8", "q8_0", "q4_k_m")
Run = Callable[[CodesPipeline], Any]


@dataclass
class Case:
    """One run: ``run(pipe)`` on the reference pipeline (CPU, float32; ``reference_pipe`` when
    the case has its own weights) and on ``device_pipe()`` (default: the checkpoint copied to
    the device). ``reference`` replaces the reference run (the rolling batch is held against
    single runs); ``steps``: the planned T (0: not applicable, ``note`` says why)."""

    name: str
    run: Run
    steps: int
    device_pipe: Callable[[], CodesPipeline] | None = None
    reference_pipe: CodesPipeline | None = None
    reference: Callable[[], Any] | None = None
    note: str = ""
    rounds: str = ""  # why the device's float32 run may round differently (then not required)
    singles: list[Run] | None = None  # each item alone: agreement measured on the device


def _text(strategy: Any, steps: int, cache: MLCacheConfig | None = None,
          prompt: str | list[str] = PROMPT, max_batch: int | None = None) -> Run:
    from ladr_core import resolve_strategy

    at = resolve_strategy(strategy)
    return lambda pipe: pipe.generate(prompt, steps=steps, temperature=0.0, seed=0,
                                      strategy=at, cache=cache, decode=False,
                                      max_batch=max_batch)


def _steps(strategy: Any, cap: int | None) -> int:
    """64 (no strategy brings a step count of its own), or ``cap`` below it."""
    return 64 if cap is None else min(64, cap)


def _masks(size: tuple[int, int], factor: int) -> dict[str, torch.Tensor]:
    """Inpaint: a centred square of half the side (on the token grid); outpaint: the rest."""
    h, w = size
    m = torch.zeros(1, h, w)
    m[:, h // 4 // factor * factor: (3 * h // 4) // factor * factor,
      w // 4 // factor * factor: (3 * w // 4) // factor * factor] = 1.0
    return {"inpaint": m, "outpaint": 1.0 - m}


def format_model(ref: CodesPipeline, fmt: str, dtype: torch.dtype) -> Any:
    """The checkpoint's float32 weights in weight format ``fmt`` on the CPU, computed in
    ``dtype`` (tests.kit.variants; quantized from float32, so both dtypes store the same
    bytes). ComfyUI fp8 multiplies fp8 inputs on every device (W8A8, as on a GPU with fp8
    matmuls), so the CPU and the GPU compute the same products."""
    from tests.kit.variants import build_variant

    model = build_variant(ref.config, "cpu", fmt, dtype, source=ref.transformer.state_dict())
    for module in model.modules():
        if isinstance(module, quant.QuantLinear):
            module.quantize_input = True
    model.device = None
    return model


def build_cases(ref: CodesPipeline, dev: CodesPipeline, device: torch.device, cap: int | None,
                compile_backend: str) -> list[Case]:
    """Every case for one checkpoint (module docstring); ``cap`` limits T (the smoke run)."""
    cases = [Case(f"text/{name}", _text(name, _steps(name, cap)), _steps(name, cap))
             for name in (*strategy_names(), *preset_names())]
    nano = LADR.preset("nano")
    t_nano, t64 = _steps(nano, cap), _steps("baseline", cap)
    cases.append(Case("cache/official+baseline", _text("baseline", t64, MLCacheConfig()), t64))
    cases.append(Case("cache/ladr+ladr-nano", _text(nano, t_nano, MLCacheConfig.ladr()),
                      t_nano))
    cases += _image_cases(ref, nano, t_nano)
    prompts = [PROMPT, "a green triangle", "two blue circles", "a purple square below a circle"]
    singles = [_text(nano, t_nano, prompt=p) for p in prompts]
    cases.append(Case("rolling/2-of-4", _text(nano, t_nano, prompt=prompts, max_batch=2),
                      t_nano, reference=lambda: _concat([s(ref) for s in singles]),
                      note="4 prompts, 2 in flight, against 4 single runs on the CPU; "
                           "agreement: the share of items whose tokens equal their single "
                           "run on the device",
                      rounds=ROLLING_ROUNDS if device.type != "cpu" else "",
                      singles=singles))
    for fmt in FORMATS:
        cpu_model = format_model(ref, fmt, torch.float32)
        rounds = ("the GPU's fp8 matmul sums with fewer bits than float32 (torch._scaled_mm); "
                  "bounded in bf16 instead" if fmt == "comfy_fp8" and
                  quant.fp8_matmul_available(device) else "")
        cases.append(Case(f"format/{fmt}", _text(nano, t_nano), t_nano,
                          device_pipe=lambda m=cpu_model: ref.with_transformer(to_device(m, device)),
                          reference_pipe=ref.with_transformer(cpu_model), rounds=rounds))
    cases.append(Case("stream/blocks", _text(nano, t_nano), t_nano,
                      device_pipe=lambda: _streamed(ref, device)))
    official = MLCacheConfig()
    cases.append(Case(f"compile/{compile_backend}+official-cache",
                      _text(nano, t_nano, official), t_nano,
                      device_pipe=lambda: dev.compile(backend=compile_backend),
                      note="full and cached (partial) passes compiled, one shape each"))
    return cases


def _image_cases(ref: CodesPipeline, nano: Any, steps: int) -> list[Case]:
    """Inpaint and outpaint a palette image of the checkpoint's own text-to-image codes; edit
    one (when the checkpoint can edit)."""
    base = ref.generate(PROMPT, steps=steps, temperature=0.0, strategy=nano, decode=False)
    size = ref.default_size
    image = palette_image(base.tokens, base.grid, ref.vq_factor, ref.ids.codebook_size)
    out = []
    for kind, mask in _masks((size, size), ref.vq_factor).items():
        out.append(Case(f"paint/{kind}", lambda p, m=mask: p.paint(
            PROMPT, image, m, PaintOptions(), steps=steps, temperature=0.0, strategy=nano,
            decode=False), steps))
    if ref.can_edit:
        out.append(Case("edit/edit", lambda p: p.edit(
            EDIT, image, size="as is", steps=steps, temperature=0.0, strategy=nano,
            decode=False), steps))
    else:
        out.append(Case("edit/edit", lambda p: None, 0,
                        note="not applicable: config.json says ladr_can_edit false"))
    return out


def _streamed(ref: CodesPipeline, device: torch.device) -> CodesPipeline:
    model = to_device(ref.transformer, torch.device("cpu"))
    stream_blocks(model, device)
    return ref.with_transformer(model)


class _Joined:
    """The tokens and counts of several single runs, as one result."""

    def __init__(self, results: list[Any]) -> None:
        self.tokens = torch.cat([r.tokens for r in results])
        self.nfe = max(r.nfe for r in results)
        self.steps = max(r.steps for r in results)
        self.item_nfe = [n for r in results for n in r.item_nfe]


def _concat(results: list[Any]) -> _Joined:
    return _Joined(results)

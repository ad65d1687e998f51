"""DiMOO Caption / Ask on many images: is a pass of the answer loop within the memory the
estimator grants on a card? Measured on the emulated CUDA device (tests/kit/cuda_emu, shapes only),
through the pack's own answer loop, at the 8B model's shape.

    python -m lab.benchmarks.answer_memory [--layout bf16|q4_k_m] [--card-gib 24] [--images 64]
                                           [--layers 32] [--in-flight N] [--out DIR]

1. The layout's random weights are built on an emulated card of ``--card-gib`` GiB
   (tests/kit/variants.py, as gpu_estimate does); the memory left is the card's minus what the
   allocator model reserved.
2. The answers in flight are the library's choice for that free memory
   (``DiMOOPipeline.answers_in_flight``: what 80 % of it holds by ``answer_memory``, at
   most GPU_IN_FLIGHT), or ``--in-flight``; the grant is ``answer_memory`` at that many answers.
3. ``decode_answers`` runs on ``--images`` rows of the official understanding length (a question
   of QUESTION_TOKENS tokens, a 1024 x 1024 px image: 64 rows of 65 tokens and its BOI / EOI,
   BOA, 1,024 answer tokens, EOA) with the answer as one block of 1,024: its first pass has the
   official run's widest window (the last block's, 1,024 rows), so it is the run's peak pass. A
   shape-only run stops at the loop's first host read (after that pass); every later pass holds
   no more answers (tests/dimoo/test_dimoo_understand.py: the rolling batch).
4. Attention runs as CUDA's flash kernel would (lab/benchmarks/gpu_estimate/kernels.py).

Prints JSON (``--out``: also a results file): the weights, the free memory, the answers in flight, the grant and the measured
peak beyond the weights (allocated, the allocator model's count), and where it peaked. When the
peak passes the grant, it prints ``[cuda-emulation:memory] ...`` naming the pack's lines on the
stack at the peak and exits with status 1 (tests/emulation/test_put_back.py puts findings 1 and
2 of tests/emulation/test_put_back.py back and expects that). ``--layers`` below 32 keeps the 8B widths with fewer
blocks (a quicker build; the head and the answer's widths are the 8B model's).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from lab.benchmarks.common import write_result
from lab.benchmarks.gpu_check.models import SHAPE_8B, random_model
from lab.benchmarks.gpu_estimate.kernels import cuda_kernels
from lab.benchmarks.gpu_estimate.measure import peak_site
from ladr_core.dimoo.denoise.prompt import ImageLayout
from ladr_core.dimoo.model.config import DiMOOIds, LLaDAConfig
from ladr_core.dimoo.pipeline import DiMOOPipeline
from ladr_core.dimoo.tasks.answer_rules import resolve_answer_rule
from ladr_core.dimoo.tasks.answering import AnswerShape, decode_answers
from ladr_core.dimoo.tasks.understanding import UnderstandJob
from tests.kit.cuda_emu import emulated_cuda
from tests.kit.cuda_emu.torch_cuda import GIB
from tests.kit.variants import build_variant

QUESTION_TOKENS = 64  # the system text and a short question, tokenized
GRID = 64  # a 1024 x 1024 px image at VQ factor 16
ANSWER = 1024  # the official answer length
LAYOUTS = ("bf16", "q4_k_m")


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m lab.benchmarks.answer_memory",
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layout", default="bf16", choices=LAYOUTS)
    ap.add_argument("--card-gib", type=float, default=24.0)
    ap.add_argument("--images", type=int, default=64)
    ap.add_argument("--layers", type=int, default=SHAPE_8B["n_layers"])
    ap.add_argument("--in-flight", type=int, default=None)
    ap.add_argument("--out", default=None, help="also write answer_memory_<layout>.json "
                    "(with the commit and machine) into this folder, e.g. lab/results")
    a = ap.parse_args(argv)
    if a.images < 1 or a.layers < 1 or a.card_gib <= 0:
        ap.error("--images and --layers must be >= 1, --card-gib > 0")
    return a


def _build(layout: str, config: LLaDAConfig) -> Any:
    device = torch.device("cuda")
    if layout == "bf16":
        return random_model(config, device, torch.bfloat16)
    return build_variant(config, device, layout, torch.bfloat16)


def _job(images: int) -> UnderstandJob:
    """The request's shape: ``images`` questions, one 1024 px image each (the pixels are not
    used: the rows below stand for their codes)."""
    return UnderstandJob(["q"] * images, torch.zeros(1, 1, 1, 3), [0] * images,
                         ImageLayout(GRID, GRID), AnswerShape(), resolve_answer_rule("official"),
                         0.0)


def _estimator(model: Any, config: LLaDAConfig) -> Any:
    """The pipeline's understanding estimates on this model (its methods, unchanged)."""
    pipe = SimpleNamespace(config=config, transformer=model, device=model.compute_device(),
                           encode=lambda _text: [0] * QUESTION_TOKENS,
                           _compute_dtype=lambda: torch.bfloat16)
    pipe.answering_bytes = lambda job, k: DiMOOPipeline.answering_bytes(pipe, job, k)
    return pipe


def _one_pass(model: Any, ids: DiMOOIds, images: int, in_flight: int) -> None:
    """decode_answers on ``images`` rows until its first host read (module docstring, 3)."""
    image = ImageLayout(GRID, GRID).length  # BOI, 64 rows of 64 codes and a NEWLINE, EOI
    prompt = [ids.boi] + [ids.image_offset] * (image - 2) + [ids.eoi] + \
        [ids.boa - 1] * QUESTION_TOKENS  # answering.answer_row's lengths
    rows = [prompt + [ids.boa] + [ids.mask] * ANSWER + [ids.eoa]] * images
    try:
        decode_answers(model, rows, [len(prompt) + 1] * images, AnswerShape(ANSWER, ANSWER, 1),
                       resolve_answer_rule("official"), 0.0, [None] * images, ids.mask, None,
                       in_flight=in_flight)
    except NotImplementedError:  # the first host read of a shape-only run: the pass is done
        return


def run(argv: list[str] | None = None) -> dict[str, Any]:
    a = _args(argv)
    config = LLaDAConfig(**{**SHAPE_8B, "n_layers": a.layers})
    total = int(a.card_gib * GIB)
    with emulated_cuda(storage="meta", raise_on_violation=False) as emu, cuda_kernels():
        emu.memory.total = total  # the card's size, no limit: a peak past the grant is reported
        model = _build(a.layout, config)
        weights = emu.memory.allocated
        free = total - emu.memory.reserved
        pipe, job = _estimator(model, config), _job(a.images)
        flying = a.in_flight or DiMOOPipeline.answers_in_flight(pipe, job, free)
        grant = pipe.answering_bytes(job, flying)
        emu.memory.reset_peak()
        where: dict[str, Any] = {}
        with peak_site(where, depth=4):
            _one_pass(model, DiMOOIds(), a.images, flying)
        peak = emu.memory.peak_allocated - weights
    return {"layout": a.layout, "layers": a.layers, "card_gib": a.card_gib,
            "images": a.images, "weights_gib": weights / GIB, "free_gib": free / GIB,
            "in_flight": flying, "granted_gib": grant / GIB, "peak_beyond_weights_gib": peak / GIB,
            "within": peak <= grant, **where,
            "note": "shapes only (tests/kit/cuda_emu, storage='meta'); allocated bytes of the "
                    "allocator model; one pass of the answer loop at the official widest window"}


def main(argv: list[str] | None = None) -> int:
    out = run(argv)
    print(json.dumps(out, indent=2))
    folder = _args(argv).out
    if folder:
        write_result(f"answer_memory_{out['layout']}", out, Path(folder))
    if not out["within"]:
        print(f"[cuda-emulation:memory] a pass of the answer loop peaked at "
              f"{out['peak_beyond_weights_gib']:.2f} GiB beyond the weights, past the "
              f"{out['granted_gib']:.2f} GiB the estimator granted for {out['in_flight']} "
              f"answers in flight, at {' < '.join(out.get('peak_site', []))}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Images in flight at the 8B model's shape: what the memory plan grants on a card and what a
run of that many images holds, on the emulated CUDA device (tests/kit/cuda_emu, shapes only).

    python -m lab.benchmarks.queue_memory [--px 1024] [--card-gib 24] [--batches 1,4]
                                          [--layers 2] [--out DIR] [--label NAME]

1. The plan: ``pipe.image_bytes`` (model/memory.py ``working_memory``) of one image at
   ``--px`` with CFG, without and with the ML-Cache, in bf16, and ``images_in_flight`` for a card of ``--card-gib``
   GiB holding the bf16 weights of the 32-layer model (its parameter bytes) beside 0.5 GiB of
   CUDA context.
2. The run: ``pipe.generate`` of ``b`` images (each of ``--batches``) at ``--px``, all in
   flight, without a cache, each image finishing after two denoiser calls
   (tests/kit/shaped_8b.py), on an emulated device without a limit; the peak bytes allocated
   beyond the weights (the allocator model's count). ``--layers`` below 32 keeps every width
   with fewer blocks: a pass peaks inside one layer, so the peak is the 32-layer one's.

Prints JSON; ``--out``: also ``queue_memory_<label>.json`` with the commit and machine (run it
on an older ``ladr_core`` by putting that copy first on PYTHONPATH, ``--label before``).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch

import ladr_core
from lab.benchmarks.common import write_result
from ladr_core.dimoo import images_in_flight
from tests.kit.cuda_emu import emulated_cuda
from tests.kit.shaped_8b import finish_after, pipeline_8b

GIB = 2 ** 30
CONTEXT = GIB // 2


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m lab.benchmarks.queue_memory",
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--px", type=int, default=1024, choices=(512, 1024))
    ap.add_argument("--card-gib", type=float, default=24.0)
    ap.add_argument("--batches", default="1,4")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--out", default=None)
    ap.add_argument("--label", default="after")
    return ap.parse_args(argv)


def _peak(px: int, batch: int, layers: int) -> int:
    with emulated_cuda(storage="meta") as emu:
        pipe = pipeline_8b(layers)
        weights = emu.memory.allocated
        emu.memory.reset_peak()
        with finish_after(2):
            pipe.generate(["a red circle"] * batch, width=px, height=px, steps=8,
                          strategy="baseline", decode=False, max_batch=batch)
        return emu.memory.peak_allocated - weights


def run(argv: list[str] | None = None) -> dict[str, Any]:
    a = _args(argv)
    pipe = pipeline_8b(device="meta")  # the 32-layer model, shapes only
    weights = sum(p.numel() * p.element_size() for p in pipe.transformer.parameters())
    free = int(a.card_gib * GIB) - CONTEXT - weights
    plan = {}
    for cache in (False, True):
        per = pipe.image_bytes(a.px, a.px, cache)
        plan["ml-cache" if cache else "none"] = {
            "per_image_gib": per / GIB,
            "images_in_flight": images_in_flight(torch.device("cuda"), 64, per, free)}
    runs = {str(b): _peak(a.px, b, a.layers) / GIB for b in map(int, a.batches.split(","))}
    return {"label": a.label, "ladr_core": str(Path(ladr_core.__file__).parent), "px": a.px,
            "card_gib": a.card_gib, "weights_gib": weights / GIB, "free_gib": free / GIB,
            "plan": plan, "layers": a.layers, "peak_beyond_weights_gib": runs,
            "note": "plan: model/memory.py working_memory and runs.images_in_flight (at most "
                    "GPU_IN_FLIGHT); run: shapes only (tests/kit/cuda_emu, storage='meta'), "
                    "allocated bytes of the allocator model, no cache, CFG rows packed"}


def main(argv: list[str] | None = None) -> int:
    out = run(argv)
    print(json.dumps(out, indent=2))
    a = _args(argv)
    if a.out:
        write_result(f"queue_memory_{a.label}", out, Path(a.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

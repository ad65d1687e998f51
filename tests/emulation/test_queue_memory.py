"""A queue of prompts on an emulated 24 GB card at the 8B model's shape (tests/kit/shaped_8b.py,
shapes only): the images in flight are the library's choice for the card's free memory, the
rest roll through them, and the device memory does not grow with the queue, with or without an
ML-Cache (each kind: the official settings and the LADR preset). Each image runs two denoiser
calls (a refresh and a cached call under an ML-Cache) and finishes; the run's peak beyond the
weights is the allocator model's count of live bytes."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from ladr_core.dimoo import MLCacheConfig
from ladr_core.dimoo.model.memory import working_memory
from tests.kit.cuda_emu import emulated_cuda
from tests.kit.shaped_8b import finish_after, pipeline_8b

CACHES = {"none": None, "ml-cache": MLCacheConfig(), "ml-cache-ladr": MLCacheConfig.ladr()}
PX = 512


def queue(prompts: int, cache: MLCacheConfig | None, callback: Any = None) -> dict[str, Any]:
    """``prompts`` images of the 8B shape on the emulated RTX 4090 (24 GB): images in flight,
    peak bytes beyond the weights, and what the memory plan grants that many images."""
    with emulated_cuda(card="rtx4090", storage="meta") as emu:
        pipe = pipeline_8b()
        weights = emu.memory.allocated
        emu.memory.reset_peak()
        with finish_after(2):
            res = pipe.generate(["a red circle"] * prompts, width=PX, height=PX, steps=8,
                                strategy="baseline", cache=cache, decode=False,
                                callback=callback)
        job = pipe.prepare_text(["a red circle"], width=PX, height=PX)
        branches, length = job.rows(pipe.encode)
        grant = working_memory(pipe.config, res.in_flight, length, job.layout.n_codes,
                               pipe.ids.codebook_size, branches=branches,
                               cache=cache is not None, dtype=torch.bfloat16)
        return {"in_flight": res.in_flight, "peak": emu.memory.peak_allocated - weights,
                "grant": grant}


@pytest.mark.parametrize("kind", list(CACHES))
def test_a_long_queue_rolls_through_the_images_in_flight_and_never_grows(kind: str) -> None:
    short, long = queue(8, CACHES[kind]), queue(24, CACHES[kind])
    assert short["in_flight"] == long["in_flight"] < 24  # a queue longer than fits rolls
    assert long["peak"] <= 1.1 * short["peak"], (short, long)
    assert long["peak"] <= long["grant"], long  # the memory plan covers what the run holds



def test_a_checkpoint_without_a_preview_table_fits_its_first_step() -> None:
    """The real repository ships no preview table, so the first preview builds one (the 8B
    checkpoint's VQ decoding PREVIEW_CHUNK codes per call, each a 48 px image; 1,024 of its
    8,192 codes here: the same calls, fewer of them). On a card with room for the weights and
    what ``run_memory`` asks a host to keep free, the first step and its preview run with an
    ML-Cache: the table is made before the step and counted in the plan."""
    with emulated_cuda(storage="meta") as emu:
        pipe = pipeline_8b(layers=2, vq=True, vq_codes=1024)
        job = pipe.prepare_text(["a red circle"], width=PX, height=PX)
        need = pipe.run_memory(job, 1, CACHES["ml-cache"])
        emu.memory.limit(emu.memory.reserved + need + 64 * 2 ** 20, 0)  # 64 MiB for segments

        def preview(record: dict[str, Any]) -> None:
            pipe.preview(record["tokens"][:1], record["masked"][:1], record["grid"])

        with finish_after(1):
            res = pipe.generate("a red circle", width=PX, height=PX, steps=8,
                                strategy="baseline", cache=CACHES["ml-cache"], decode=False,
                                callback=preview)
        assert res.nfe == 1
        assert pipe.preview_bytes() == 0 < need  # built, and no longer asked for

"""The working-memory estimates (model/memory.py) against what a run really allocates, counted by
tests/kit/live_bytes.py on the shipped nano checkpoint: never below the measured peak, at most
1.5 x above it; and the rows they are computed from are the rows the denoiser builds."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ladr_core import nano_mmu_model_path, nano_model_path, sample
from ladr_core.dimoo import DiMOOPipeline, MLCacheConfig, load_dimoo, understand
from ladr_core.dimoo.model.memory import decode_memory, working_memory
from tests.kit.live_bytes import LiveBytes

PROMPTS = ["a red circle left of a blue square", "green",
           "a small yellow triangle above a big blue circle"]
BOUND = 1.5  # estimate / measured peak, at most


@pytest.fixture(scope="module", params=[torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def nano(request: pytest.FixtureRequest) -> DiMOOPipeline:
    return load_dimoo(nano_model_path(), dtype=request.param)


@pytest.mark.parametrize("cache", [False, True], ids=["plain", "ml-cache"])
@pytest.mark.parametrize(("size", "batch"), [(48, 1), (80, 3)])
def test_sampling_estimate_bounds_the_measured_peak(nano: DiMOOPipeline, size: int, batch: int,
                                                    cache: bool) -> None:
    """A whole sampling run (refreshing the ML-Cache every other call), CFG on."""
    config = MLCacheConfig(warmup_ratio=0.0, refresh_interval=2) if cache else None
    job = nano.prepare_text(PROMPTS[:batch], width=size, height=size, cfg=2.0)
    den = job.build(nano.runtime(), 4, config).denoiser
    grid = den.layout
    with LiveBytes() as mem:
        sample(den, shape=(batch, grid.h, grid.w), steps=4, strategy="ladr",
               generator=[torch.Generator().manual_seed(i) for i in range(batch)])
    branches, length = job.rows(nano.encode)
    dtype = next(nano.transformer.parameters()).dtype
    est = working_memory(nano.config, batch, length, grid.n_codes, nano.ids.codebook_size,
                         branches=branches, cache=cache, dtype=dtype)
    assert mem.peak <= est <= BOUND * mem.peak, (mem.peak, est)
    assert nano.run_memory(job, batch, config) >= est  # the node's figure covers it


@pytest.fixture(scope="module", params=[torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def answering_nano(request: pytest.FixtureRequest) -> DiMOOPipeline:
    return load_dimoo(nano_mmu_model_path(), dtype=request.param)


@pytest.mark.skipif(not (nano_mmu_model_path() / "config.json").is_file(),
                    reason="the built-in nano that answers is not in this checkout")
@pytest.mark.parametrize(("rule", "temperature", "chunk"),
                         [("official", 0.0, 256), ("official", 1.0, 64), ("entropy", 0.0, 256),
                          ("entropy", 1.0, 96)])
@pytest.mark.parametrize("batch", [1, 3])
def test_answering_estimate_bounds_the_measured_peak(answering_nano: DiMOOPipeline, batch: int,
                                                     rule: str, temperature: float, chunk: int,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Caption / Ask's request (``understand_memory``): the nano's default answer (one block
    of 256), every item in one pass, float64 sampling ``chunk`` rows at a time."""
    from ladr_core.dimoo.tasks import answering

    monkeypatch.setattr(answering, "SAMPLE_CHUNK", chunk)
    monkeypatch.setattr(understand, "SAMPLE_CHUNK", chunk)
    images = torch.rand(batch, 48, 48, 3, generator=torch.Generator().manual_seed(batch))
    job = answering_nano.prepare_understand(images, "what color is the circle?", rule=rule,
                                            temperature=temperature)
    with LiveBytes() as mem:
        answering_nano.understand(images, "what color is the circle?", rule=rule,
                                  temperature=temperature, seed=1)
    est = answering_nano.understand_memory(job)
    assert mem.peak <= est <= BOUND * mem.peak, (mem.peak, est)


@pytest.mark.parametrize("size", [48, 96])
def test_decode_estimate_bounds_the_measured_peak(nano: DiMOOPipeline, size: int) -> None:
    grid = size // nano.vq_factor
    codes = torch.randint(0, nano.ids.codebook_size, (3, grid * grid),
                          generator=torch.Generator().manual_seed(0))
    with LiveBytes() as mem:
        nano.decode(codes, (grid, grid))  # three images, one at a time, kept as they finish
    est = nano.decode_bytes(size, size, 3)
    assert est == decode_memory(nano.vq.config, size, size, torch.float32) + 3 * size * size * 12
    assert mem.peak <= est <= BOUND * mem.peak, (mem.peak, est)


def test_the_estimate_grows_with_what_a_run_holds(nano: DiMOOPipeline) -> None:
    """Images in flight, the ML-Cache and the size each raise it; the 8B model's shape at
    1024 px in bf16 needs about a gigabyte and its ML-Cache about 4.4 GiB more (the H100
    figures of docs/reports/GPU.md: 16.44 GiB, 20.82 GiB with the cache)."""
    from ladr_core.dimoo.model.config import LLaDAConfig

    job = nano.prepare_text(PROMPTS[:1], cfg=2.0)
    one, two = nano.run_memory(job, 1), nano.run_memory(job, 2)
    assert one < two < nano.run_memory(job, 2, MLCacheConfig())
    big = LLaDAConfig(d_model=4096, n_heads=32, n_layers=32, mlp_hidden_size=12288,
                      vocab_size=126464 + 8192)
    plain = working_memory(big, 1, 64 * 65 + 4 + 100, 64 * 64, 8192)
    cached = working_memory(big, 1, 64 * 65 + 4 + 100, 64 * 64, 8192, cache=True)
    assert 0.5 * 2**30 < plain < 2 * 2**30
    assert 4.0 * 2**30 < cached - plain < 4.8 * 2**30


def test_rows_are_the_rows_the_denoiser_builds(dimoo_checkpoint: Path) -> None:
    """job.rows: (rows per image, longest row) of text, negative-prompt, unguided and edit
    jobs, style transfer included, equal to the denoiser's padded prompt batch."""
    pipe = load_dimoo(dimoo_checkpoint, dtype=torch.float32)
    images = torch.rand(1, 16, 16, 3), torch.rand(1, 8, 12, 3)
    jobs = [pipe.prepare_text(PROMPTS[:2], width=16, height=12),
            pipe.prepare_text("a", negative_prompt=PROMPTS[0], width=16, height=16),
            pipe.prepare_text("a", negative_prompt=PROMPTS[0], width=16, height=16, cfg=0.0),
            pipe.prepare_edit(["make it red"], image=images[0], size="as is"),
            pipe.prepare_edit(["red", "blue"], image=images[0], size="as is", cfg=0.0,
                              image_cfg=0.0),
            pipe.prepare_edit(["x"], image=images[0], edit_type="style", style=images[1],
                              size="as is")]
    for job in jobs:
        den = job.build(pipe.runtime(), 4, None).denoiser
        assert job.rows(pipe.encode) == (den.table.branches, den.input_ids.shape[1])

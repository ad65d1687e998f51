"""The GPU code paths, run end to end on the emulated CUDA device (tests/kit/cuda_emu): every
registered strategy for text to image, painting and editing, both ML-Cache presets, a rolling
batch, block streaming and the self-score, each giving the CPU run's tokens (float32, same seed)
with no violation: no host tensor meets a device tensor, no host read or blocking host-to-device
copy in sample()'s step loop beyond its one documented read per step (SampleRun.sync_counts), no
float64 on the device. What is checked is derived from the registry and the code, not listed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ladr_core import strategy_names
from ladr_core.dimoo import DiMOOPipeline, MLCacheConfig, load_dimoo
from tests.kit.syncs import sampler_reads

PROMPT = "a red circle"
STRATEGIES = strategy_names()
CACHES = {"official": MLCacheConfig(), "ladr": MLCacheConfig.ladr()}


@pytest.fixture(scope="module")
def cpu_pipe(dimoo_checkpoint: Path) -> DiMOOPipeline:
    return load_dimoo(dimoo_checkpoint, device="cpu", dtype=torch.float32)


def device_pipe(folder: Path, **kw) -> DiMOOPipeline:
    pipe = load_dimoo(folder, device="cuda", dtype=torch.float32, **kw)
    assert pipe.device.type == "cuda"
    return pipe


def image(seed: int, size: int = 32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(1, size, size, 3, generator=g)


def box_mask(size: int = 32) -> torch.Tensor:
    mask = torch.zeros(1, size, size)
    mask[:, size // 4: 3 * size // 4, size // 4: 3 * size // 4] = 1.0
    return mask


def same(device_result, cpu_result, emu) -> None:  # noqa: ANN001
    """Equal tokens and steps, the tokens on the device, at most one read per step run."""
    assert device_result.tokens.device.type == "cuda"
    assert torch.equal(device_result.tokens.cpu(), cpu_result.tokens)
    assert device_result.steps == cpu_result.steps and device_result.nfe == cpu_result.nfe
    assert sum(emu.loop_reads.values()) <= device_result.steps
    assert not emu.violations


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_generate(strategy: str, cpu_pipe, dimoo_checkpoint, emu) -> None:
    kw = dict(width=32, height=32, steps=12, seed=1, strategy=strategy)
    want = cpu_pipe.generate(PROMPT, **kw)
    got = device_pipe(dimoo_checkpoint).generate(PROMPT, **kw)
    same(got, want, emu)
    assert got.images.device.type == "cuda"
    assert sum(emu.loop_reads.values()) == sampler_reads(got.steps, 12)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_paint(strategy: str, cpu_pipe, dimoo_checkpoint, emu) -> None:
    kw = dict(steps=10, seed=2, strategy=strategy, image=image(3), mask=box_mask())
    want = cpu_pipe.paint(PROMPT, **kw)
    got = device_pipe(dimoo_checkpoint).paint(PROMPT, **kw)
    same(got, want, emu)


@pytest.mark.parametrize("masked", [False, True], ids=["whole", "mask"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_image_to_image(strategy: str, masked: bool, cpu_pipe, dimoo_checkpoint, emu) -> None:
    """denoise 0.5: a late start over the whole picture or the mask's count."""
    kw = dict(steps=10, seed=4, strategy=strategy, image=image(5),
              mask=box_mask() if masked else None, denoise=0.5)
    want = cpu_pipe.paint(PROMPT, **kw)
    got = device_pipe(dimoo_checkpoint).paint(PROMPT, **kw)
    same(got, want, emu)


def test_image_to_image_from_tokens(cpu_pipe, dimoo_checkpoint, emu) -> None:
    """The token route: the codes as given (CPU LongTensor) on a device pipeline."""
    codes = cpu_pipe.encode_image(image(5))
    kw = dict(steps=10, seed=4, strategy="ladr", tokens=codes, denoise=0.5)
    same(device_pipe(dimoo_checkpoint).generate(PROMPT, **kw), cpu_pipe.generate(PROMPT, **kw),
         emu)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_edit(strategy: str, cpu_pipe, dimoo_checkpoint, emu) -> None:
    kw = dict(image=image(4), steps=8, seed=3, strategy=strategy, size="as is")
    want = cpu_pipe.edit("make it blue", **kw)
    got = device_pipe(dimoo_checkpoint).edit("make it blue", **kw)
    same(got, want, emu)


@pytest.mark.parametrize("cache", sorted(CACHES))
@pytest.mark.parametrize("strategy", ["baseline", "ladr"])
def test_ml_cache(cache: str, strategy: str, cpu_pipe, dimoo_checkpoint, emu) -> None:
    kw = dict(width=32, height=32, steps=16, seed=5, strategy=strategy, cache=CACHES[cache],
              batch_size=2)
    same(device_pipe(dimoo_checkpoint).generate(PROMPT, **kw), cpu_pipe.generate(PROMPT, **kw),
         emu)


@pytest.mark.parametrize("cache", [None, "ladr"])
def test_rolling_batch(cache: str | None, cpu_pipe, dimoo_checkpoint, emu) -> None:
    prompts = ["a red circle", "a blue square", "two green triangles"]
    kw = dict(width=32, height=32, steps=12, seed=6, strategy="ladr", max_batch=2,
              cache=CACHES.get(cache))
    same(device_pipe(dimoo_checkpoint).generate(prompts, **kw),
         cpu_pipe.generate(prompts, **kw), emu)


def test_image_to_image_rolling_batch(cpu_pipe, dimoo_checkpoint, emu) -> None:
    """Each slot's region count follows its item in place (a late start under a rolling batch)."""
    prompts = ["a red circle", "a blue square", "two green triangles"]
    masks = torch.cat([box_mask(), torch.ones(1, 32, 32), box_mask().roll(8, dims=2)])
    kw = dict(steps=12, seed=6, strategy="ladr", max_batch=2, image=image(7).expand(3, -1, -1, -1),
              mask=masks, denoise=0.6, cache=CACHES["ladr"])
    same(device_pipe(dimoo_checkpoint).paint(prompts, **kw), cpu_pipe.paint(prompts, **kw), emu)


def test_block_streaming(cpu_pipe, dimoo_checkpoint, emu) -> None:
    kw = dict(width=32, height=32, steps=8, seed=7, strategy="ladr")
    pipe = device_pipe(dimoo_checkpoint, offload_blocks=True)
    same(pipe.generate(PROMPT, **kw), cpu_pipe.generate(PROMPT, **kw), emu)


def test_self_score(cpu_pipe, dimoo_checkpoint, emu) -> None:
    from ladr_core.dimoo.tasks.selfscore import SelfScoreConfig

    kw = dict(width=32, height=32, steps=8, seed=8, strategy="ladr",
              self_score=SelfScoreConfig(passes=2, block=2))
    want = cpu_pipe.generate(PROMPT, **kw)
    got = device_pipe(dimoo_checkpoint).generate(PROMPT, **kw)
    same(got, want, emu)
    # the self-score's passes run in chunks of the device's images in flight (4 on a CPU, by
    # free memory on CUDA), and a float32 matmul over another batch rounds differently: equal to
    # float32 rounding of the mean log-probability, not bit for bit
    assert torch.allclose(got.self_score.score.cpu(), want.self_score.score, rtol=1e-5, atol=0)


@pytest.mark.parametrize("strategy", ["baseline", "ladr"])
def test_bf16_runs_clean(strategy: str, dimoo_checkpoint, emu) -> None:
    """bf16 weights and activations (the GPU's default dtype): no violation; tokens are not
    compared, bf16 rounds differently from the CPU's float32 reference."""
    pipe = load_dimoo(dimoo_checkpoint, device="cuda", dtype=torch.bfloat16)
    got = pipe.generate(PROMPT, width=32, height=32, steps=8, seed=9, strategy=strategy)
    assert got.tokens.device.type == "cuda" and not emu.violations
    assert sum(emu.loop_reads.values()) == sampler_reads(got.steps, 8)

"""load_dimoo -> generate end to end on the tiny official-layout checkpoint."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import ladr_core
from ladr_core.dimoo import DiMOOPipeline, GenerationResult, MLCacheConfig
from tests.kit.tiny_checkpoint import MARKER


def _gen(pipe: DiMOOPipeline, **kw: object) -> GenerationResult:
    args = dict(width=16, height=16, steps=6, cfg=2.0, seed=0, strategy="baseline")
    return pipe.generate(**{"prompt": "a red circle", **args, **kw})


def test_end_to_end_contract(pipe: DiMOOPipeline, dimoo_checkpoint: Path) -> None:
    records: list[dict] = []
    res = _gen(pipe, prompt=["a red circle", "blue square"], batch_size=2, strategy="ladr",
               callback=records.append)
    assert res.tokens.shape == (4, 16) and res.tokens.dtype == torch.long
    assert int(res.tokens.min()) >= 0 and int(res.tokens.max()) < 32
    assert res.images.shape == (4, 16, 16, 3) and res.images.min() >= 0 and res.images.max() <= 1
    assert res.grid == (4, 4) and 1 <= res.nfe == res.steps <= 6 and res.seconds > 0
    assert res.token_forwards == res.token_forwards_full > 0
    assert len(records) == res.steps and records[-1]["masked"].sum() == 0
    torch.testing.assert_close(res.images, pipe.decode(res.tokens, res.grid))
    assert pipe.default_size == 32 and pipe.vq_factor == 4
    assert pipe.transformer(torch.tensor([[1, 2, 3]])).shape == (1, 3, pipe.config.vocab_size)
    assert not (dimoo_checkpoint / MARKER).exists()
    assert not any("evil" in name for name in sys.modules)


def test_seeds_per_item_and_seed_zero(pipe: DiMOOPipeline) -> None:
    batch = _gen(pipe, prompt=["a red circle"], batch_size=3, seed=0)
    again = _gen(pipe, prompt=["a red circle"], batch_size=3, seed=0)
    assert torch.equal(batch.tokens, again.tokens)  # seed 0 is a real, reproducible seed
    for i in range(3):
        single = _gen(pipe, seed=i)
        assert torch.equal(single.tokens[0], batch.tokens[i])  # item i uses seed + i
    assert not torch.equal(batch.tokens[0], batch.tokens[1])


def test_cache_negative_prompt_and_no_decode(pipe: DiMOOPipeline) -> None:
    plain = _gen(pipe, steps=12)
    cached = _gen(pipe, steps=12, cache=MLCacheConfig(warmup_ratio=0.2, refresh_interval=4))
    assert cached.token_forwards < cached.token_forwards_full == plain.token_forwards_full
    negative = _gen(pipe, negative_prompt="blue square", decode=False)
    assert negative.images is None and negative.tokens.shape == (1, 16)
    default = pipe.generate("a", steps=2, cfg=0.0, seed=5, strategy="baseline", decode=False)
    assert default.grid == (8, 8)  # config.json default_image_size 32 / VQ factor 4


def test_generate_rejects_bad_arguments(pipe: DiMOOPipeline) -> None:
    with pytest.raises(ValueError, match="seed"):
        _gen(pipe, seed=-1)
    with pytest.raises(ValueError, match="prompt"):
        _gen(pipe, prompt=[])
    with pytest.raises(ValueError, match="batch_size"):
        _gen(pipe, batch_size=0)
    with pytest.raises(ValueError, match="width=10"):
        _gen(pipe, width=10)


@pytest.mark.parametrize("strategy", ["ladr", "prophet"])
def test_ml_cache_works_with_every_strategy(pipe: DiMOOPipeline, strategy: str) -> None:
    cache = MLCacheConfig(cache_ratio=0.5, warmup_ratio=0.0, refresh_interval=3)
    res = _gen(pipe, strategy=strategy, steps=10, cache=cache, prompt=["a red circle", "blue"])
    assert res.tokens.shape == (2, 16) and res.images is not None
    assert res.nfe == res.steps >= 3  # steps 1 and 2 are cached (refresh at 0, 3, 6, 9)
    assert res.token_forwards < res.token_forwards_full


def test_default_cfg_comes_from_config_json(tmp_path: Path) -> None:
    import json

    from ladr_core.dimoo import CheckpointError
    from tests.kit.tiny_checkpoint import write_tiny_checkpoint

    folder = write_tiny_checkpoint(tmp_path / "ckpt")
    plain = ladr_core.load_dimoo(folder, dtype=torch.float32)
    assert plain.default_cfg == 4.0  # absent key: the official scale
    raw = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**raw, "default_cfg": 0.5}))
    tuned = ladr_core.load_dimoo(folder, dtype=torch.float32)
    assert tuned.default_cfg == 0.5
    kw = dict(prompt="a red circle", width=16, height=16, steps=6, seed=1, strategy="baseline",
              decode=False)
    default = tuned.generate(**kw)
    assert torch.equal(default.tokens, tuned.generate(**kw, cfg=0.5).tokens)
    assert torch.equal(plain.generate(**kw).tokens, plain.generate(**kw, cfg=4.0).tokens)
    for bad in (-1, "high", True, float("nan")):
        (folder / "config.json").write_text(json.dumps({**raw, "default_cfg": bad}))
        with pytest.raises(CheckpointError, match="default_cfg must be a finite number >= 0"):
            ladr_core.load_dimoo(folder, dtype=torch.float32)

"""The DiMOO denoiser with items leaving and joining: every image equals its own single run
(float32), costs what its single run costs, and keeps its own ML-Cache."""

from __future__ import annotations

import pytest
import torch

from ladr_core import (
    LADR,
    PRESETS,
    Baseline,
    MLCacheConfig,
    Prophet,
    resolve_strategy,
    strategy_names,
)
from ladr_core.dimoo import DiMOOPipeline

PROMPTS = ["a red circle", "two blue squares left of a green circle", "the circle",
           "a red square on the left", "blue"]
CASES = {
    "baseline": (Baseline(), None),
    "ladr-nano": (LADR(PRESETS["nano"].policy), None),
    "ladr-adaptive": (LADR(PRESETS["adaptive"].policy), None),
    "prophet": (Prophet(), None),
    "ladr-nano+cache": (LADR(PRESETS["nano"].policy), MLCacheConfig.ladr()),
    "baseline+cache": (Baseline(), MLCacheConfig(warmup_ratio=0.2, refresh_interval=3)),
    # every other registered strategy, alone and with each cache (a new one joins by registering)
    **{f"{name}{tag}": (resolve_strategy(name), cache)
       for name in strategy_names() if name not in ("baseline", "ladr", "prophet")
       for tag, cache in (("", None), ("+cache", MLCacheConfig.ladr()),
                          ("+official-cache", MLCacheConfig(warmup_ratio=0.2,
                                                            refresh_interval=3)))},
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("max_batch", [None, 2])
def test_each_image_equals_its_single_run(pipe: DiMOOPipeline, name: str,
                                          max_batch: int | None) -> None:
    strategy, cache = CASES[name]
    kw = dict(width=16, height=16, cfg=2.0, steps=16, strategy=strategy,
              cache=cache, decode=False)
    batch = pipe.generate(PROMPTS, seed=40, max_batch=max_batch, **kw)
    singles = [pipe.generate(p, seed=40 + i, **kw) for i, p in enumerate(PROMPTS)]
    for i, one in enumerate(singles):
        assert torch.equal(batch.tokens[i], one.tokens[0]), f"image {i}"
        assert batch.item_nfe[i] == one.nfe, f"image {i}"
        assert batch.item_token_forwards[i] == one.token_forwards, f"image {i}"
    # the batch pushes exactly its images' own tokens: nothing for finished images
    assert batch.token_forwards == sum(one.token_forwards for one in singles)


def test_a_rolling_batch_reports_per_image_costs_in_prompt_order(pipe: DiMOOPipeline) -> None:
    res = pipe.generate(PROMPTS, width=16, height=16, cfg=2.0, seed=3, decode=False, steps=24,
                        strategy=LADR(PRESETS["nano"].policy), max_batch=2, batch_size=2)
    assert res.tokens.shape[0] == 2 * len(PROMPTS)
    assert len(res.item_nfe) == len(res.item_token_forwards) == 2 * len(PROMPTS)
    assert res.nfe < sum(res.item_nfe)  # two images in flight share each call
    one = pipe.generate(PROMPTS[1], width=16, height=16, cfg=2.0, seed=3 + 3, decode=False,
                        steps=24, strategy=LADR(PRESETS["nano"].policy))
    assert torch.equal(res.tokens[3], one.tokens[0])  # prompt 1, second image: seed + 3

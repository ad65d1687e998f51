"""The cost contract: for the same prompt, size, steps and denoise, no registered strategy and no
LADR preset spends more forward passes per image than the official sampler would
(``official_passes``), and the official sampler (``baseline``) spends exactly that. Checked on
both built-in models at steps 12 and 64, for every name of the registry and of ``PRESETS``
(read from the code, no hand list), in a rolling batch (one image in flight: each image's own
passes count). The pictures are 16 px (4 x 4 = 16 tokens), so the official sampler runs all 12
steps at 12 and ends early, one token a step, at 64: both ways a setting could cost more."""

from __future__ import annotations

import pytest
import torch

from ladr_core import (
    StepSchedule,
    emoji_model_path,
    load_dimoo,
    nano_model_path,
    official_passes,
    preset_names,
    strategy_names,
)

SETTINGS = [*strategy_names(), *preset_names()]
MODELS = {"nano": nano_model_path, "emoji": emoji_model_path}
PROMPTS = ["a red circle", "a blue square on the left"]
SIZE = 16


@pytest.fixture(scope="module", params=sorted(MODELS))
def built_in(request):
    path = MODELS[request.param]()
    if not (path / "config.json").is_file():
        pytest.skip(f"dimoo-{request.param} is not shipped in this checkout")
    return load_dimoo(path, device="cpu", dtype=torch.float32)


@pytest.mark.slow
@pytest.mark.parametrize("steps", [12, 64])
def test_no_setting_costs_more_forwards_than_the_official_sampler(built_in, steps: int) -> None:
    costs = {}
    for name in SETTINGS:
        res = built_in.generate(PROMPTS, width=SIZE, height=SIZE, steps=steps, seed=3,
                                strategy=name, max_batch=1, decode=False)
        tokens = res.tokens.shape[1]
        costs[name] = list(res.item_nfe)
    official = official_passes(tokens, StepSchedule(steps))
    assert official == min(tokens, steps)
    assert costs["baseline"] == [official] * len(PROMPTS)
    over = {name: c for name, c in costs.items() if max(c) > official}
    assert not over, f"more than the official sampler's {official} passes: {over}"

"""Image to image by a denoise strength on the tiny official-layout checkpoint (float32, CPU):
``pipe.generate(image=, denoise=)`` and ``pipe.paint(..., denoise=)``.

denoise 1.0 is text to image token for token (every registered strategy); a strength below
half a step returns the picture's own codes; in between the run starts from the picture's codes
with the official share re-masked (the keep formula), keeps everything else, and costs the
official sampler what official_passes(StepSchedule(T, denoise)) says; a rolling batch's item equals its own run; bad input gets one
error naming it.
"""

from __future__ import annotations

import pytest
import torch

from ladr_core import InputError, MLCacheConfig, StepSchedule, official_passes
from ladr_core.dimoo import DiMOOPipeline, PaintOptions
from ladr_core.registry import resolve_strategy, strategy_names
from ladr_core.strength import remask_count

PROMPT = "a red circle left of a blue square"


def _picture(seed: int = 0, b: int = 1, size: int = 32) -> torch.Tensor:
    return torch.rand(b, size, size, 3, generator=torch.Generator().manual_seed(seed))


def _hole(size: int = 32) -> torch.Tensor:
    mask = torch.zeros(1, size, size)
    mask[:, 8:24, 4:20] = 1.0
    return mask


@pytest.mark.parametrize("name", strategy_names())
def test_denoise_1_with_a_picture_is_text_to_image(pipe: DiMOOPipeline, name: str) -> None:
    steps, strategy = 12, resolve_strategy(name)
    text = pipe.generate(PROMPT, width=32, height=32, steps=steps, seed=3, strategy=strategy,
                         decode=False)
    image = pipe.generate(PROMPT, image=_picture(), denoise=1.0, steps=steps, seed=3,
                          strategy=strategy, decode=False)
    assert torch.equal(text.tokens, image.tokens) and text.nfe == image.nfe
    assert "the image only sets the size" in image.note


def test_a_denoise_below_half_a_step_returns_the_pictures_own_codes(pipe: DiMOOPipeline
                                                                    ) -> None:
    picture = _picture(1)
    codes = pipe.encode_image(picture)
    for denoise, steps in ((0.007, 64), (0.05, 8)):  # 0.007 x 64 < half a step
        res = pipe.generate(PROMPT, image=picture, denoise=denoise, steps=steps, seed=0)
        assert torch.equal(res.tokens, codes) and res.nfe == 0
        assert torch.equal(res.images, picture)  # the input itself, no VQ round trip
        assert f"redraws no step of the {steps}-step schedule" in res.note


@pytest.mark.parametrize("denoise", [0.25, 0.5, 0.75])
@pytest.mark.parametrize("name", ["baseline", "ladr", "nano", "ladr-global"])
def test_the_picture_keeps_all_but_the_official_share(pipe: DiMOOPipeline, denoise: float,
                                                      name: str) -> None:
    picture = _picture(2)
    codes = pipe.encode_image(picture)
    steps = 64
    records: list[dict] = []
    res = pipe.generate(PROMPT, image=picture, denoise=denoise, seed=5, strategy=name,
                        decode=False, callback=records.append)
    start, n = StepSchedule(steps, denoise).start, codes.shape[1]
    masked = res.paint.generate
    assert int(masked.sum()) == remask_count(n, start, steps)
    assert int(records[0]["total"][0]) == remask_count(n, start, steps)
    assert torch.equal(res.tokens[~masked], codes[~masked])
    assert res.steps <= steps - start and records[0]["steps"] == steps - start
    assert not records[-1]["masked"].any()


@pytest.mark.parametrize("denoise", [0.25, 0.5, 0.9])
def test_the_official_sampler_costs_what_official_passes_says(pipe: DiMOOPipeline,
                                                               denoise: float) -> None:
    for mask in (None, _hole()):
        res = pipe.paint(PROMPT, _picture(3), mask, denoise=denoise, steps=64, seed=1,
                         strategy="baseline", decode=False)
        n = int(res.paint.region.sum())
        assert res.nfe == official_passes(n, StepSchedule(64, denoise))


@pytest.mark.parametrize("name", ["baseline", "ladr", "halton", "threshold", "prophet"])
def test_a_mask_with_denoise_keeps_every_token_outside_it(pipe: DiMOOPipeline,
                                                          name: str) -> None:
    picture = _picture(4)
    codes = pipe.encode_image(picture)
    strategy = resolve_strategy(name)
    res = pipe.paint(PROMPT, picture, _hole(), denoise=0.5, steps=16, seed=2, strategy=strategy)
    plan = res.paint
    region = plan.region[0]
    assert 0 < int(plan.generate.sum()) < int(region.sum()) and not (plan.generate & ~region).any()
    kept = ~plan.generate[0]
    assert torch.equal(res.tokens[0, kept], codes[0, kept])
    assert plan.options.paste  # painting pastes back outside the mask, as at denoise 1.0
    whole = pipe.generate(PROMPT, image=picture, denoise=0.5, steps=16, seed=2,
                          strategy=strategy)
    assert not whole.paint.options.paste  # every token may change: nothing to paste back


def test_in_a_rolling_batch_each_image_equals_its_own_run(pipe: DiMOOPipeline) -> None:
    prompts = [PROMPT, "a green triangle", "two blue squares"]
    picture = _picture(5)
    both = pipe.generate(prompts, image=picture, denoise=0.5, steps=12, seed=7, max_batch=2,
                         strategy="ladr", decode=False)
    assert both.in_flight == 2
    for i, p in enumerate(prompts):
        one = pipe.generate(p, image=picture, denoise=0.5, steps=12, seed=7 + i,
                            strategy="ladr", decode=False)
        assert torch.equal(both.tokens[i], one.tokens[0]), i


@pytest.mark.parametrize("cache", [MLCacheConfig(), MLCacheConfig.ladr()],
                         ids=["official", "ladr"])
@pytest.mark.parametrize("name", ["baseline", "nano"])
def test_either_ml_cache_preset_redraws_a_picture(pipe: DiMOOPipeline, cache: MLCacheConfig,
                                                  name: str) -> None:
    picture = _picture(6)
    codes = pipe.encode_image(picture)
    steps = 64
    res = pipe.generate(PROMPT, image=picture, denoise=0.6, seed=4, strategy=name, cache=cache,
                        decode=False)
    kept = ~res.paint.generate
    assert torch.equal(res.tokens[kept], codes[kept])
    assert 0 < res.nfe <= steps - StepSchedule(steps, 0.6).start
    assert res.token_forwards < res.token_forwards_full  # the cache reused K/V


def test_bad_input_is_one_error_naming_it(pipe: DiMOOPipeline) -> None:
    picture = _picture()
    cases = [
        ({"image": picture, "denoise": float("nan")}, r"^denoise is nan; give a number"),
        ({"image": picture, "denoise": "0.5"}, r"^denoise is '0.5'; give a number"),
        ({"image": picture, "denoise": 1.5}, r"^denoise is 1.5; give a number"),
        ({"denoise": 0.5}, r"^denoise is 0.5 but there is no image to redraw; give an image"),
        ({"image": picture, "denoise": 0.5, "width": 32},
         r"^width and height are set, but the image sets the size"),
        ({"image": torch.rand(1, 30, 32, 3), "denoise": 0.5},
         r"^image height is 30 px, not a multiple of 4 px .*pipe\.paint\(prompt, image, None, "
         r"options=PaintOptions\(fit='crop' or 'resize'\).*nearest valid height: 28 or 32"),
    ]
    for kw, message in cases:
        with pytest.raises(InputError, match=message):
            pipe.generate(PROMPT, steps=2, **kw)
    for bad in (-0.1, 0.0, 1.5):
        with pytest.raises(InputError, match=rf"^denoise is {bad}; give a number above 0"):
            pipe.paint(PROMPT, picture, _hole(), denoise=bad, steps=2)
    for bad in (0, 1001):
        with pytest.raises(InputError, match=rf"^steps is {bad}; give a whole number of steps"):
            pipe.generate(PROMPT, image=picture, denoise=0.5, steps=bad)
    fitted = pipe.paint(PROMPT, torch.rand(1, 30, 32, 3), None, PaintOptions(fit="crop"),
                        denoise=0.5, steps=2, decode=False)
    assert fitted.grid == (7, 8) and "cropped" in fitted.note


# ---- image to image from tokens (pipe.generate(tokens=), pipe.prepare_tokens) ---------------
@pytest.mark.parametrize("denoise", [0.25, 0.5, 0.75, 1.0])
@pytest.mark.parametrize("name", ["baseline", "ladr"])
def test_tokens_redraw_as_the_picture_they_encode(pipe: DiMOOPipeline, denoise: float,
                                                  name: str) -> None:
    """A picture's codes given as tokens run exactly as the picture: the same re-masked
    positions and the same tokens, batch items and prompts paired the same way."""
    picture = _picture(7, size=32)[:, :, :24]  # 32 x 24 px: not square
    codes = pipe.encode_image(picture)
    prompts = [PROMPT, "a green triangle"]
    kw = {"denoise": denoise, "steps": 12, "seed": 5, "strategy": name, "batch_size": 2,
          "decode": False}
    by_picture = pipe.generate(prompts, image=picture, **kw)
    by_tokens = pipe.generate(prompts, tokens=codes, width=24, height=32, **kw)
    assert torch.equal(by_tokens.tokens, by_picture.tokens) and by_tokens.grid == (8, 6)
    assert by_tokens.nfe == by_picture.nfe and by_tokens.paint.source is None
    if denoise < 1.0:
        assert torch.equal(by_tokens.paint.generate, by_picture.paint.generate)
    else:
        assert "the tokens only set the size" in by_tokens.note


def test_a_runs_own_tokens_redrawn_keep_all_but_the_official_share(pipe: DiMOOPipeline
                                                                   ) -> None:
    first = pipe.generate(PROMPT, width=32, height=32, steps=12, seed=1, decode=False)
    res = pipe.generate(PROMPT, tokens=first.tokens, denoise=0.5, steps=12, seed=2)
    masked = res.paint.generate
    start = StepSchedule(12, 0.5).start
    assert int(masked.sum()) == remask_count(first.tokens.shape[1], start, 12)
    assert torch.equal(res.tokens[~masked], first.tokens[~masked])
    assert res.images.shape == (1, 32, 32, 3)  # a square grid: the size from the count


def test_tokens_below_half_a_step_are_returned_and_decoded(pipe: DiMOOPipeline) -> None:
    codes = pipe.encode_image(_picture(8))
    res = pipe.generate(PROMPT, tokens=codes, denoise=0.05, steps=8)
    assert torch.equal(res.tokens, codes) and res.nfe == 0
    assert torch.equal(res.images, pipe.decode(codes, res.grid))


def test_bad_tokens_are_one_error_naming_them(pipe: DiMOOPipeline) -> None:
    codes = pipe.encode_image(_picture())  # 8 x 8 grid
    k = pipe.ids.codebook_size
    cases = [
        ({"tokens": codes.float()}, r"^tokens is a torch.float32, not image codes; give the "),
        ({"tokens": codes[:, :60]}, r"^tokens has 60 codes per picture, not a square grid; "
         r"give the width and height"),
        ({"tokens": codes, "width": 32, "height": 16},
         r"^tokens has shape \(1, 64\), but a 4 x 8 token grid has \[B, 32\]; give the width"),
        ({"tokens": codes + k}, rf"^tokens holds codes \d+ to \d+, outside this model's "
         rf"codebook \[0, {k}\); give tokens this model made"),
        ({"tokens": codes - k}, r"^tokens holds codes -\d+ to -?\d+, outside"),
        ({"tokens": codes, "image": _picture()}, r"^tokens and image are both given; give one"),
        ({"tokens": codes, "denoise": 2.0}, r"^denoise is 2.0; give a number"),
    ]
    for kw, message in cases:
        with pytest.raises(InputError, match=message):
            pipe.generate(PROMPT, steps=2, **{"denoise": 0.5, **kw})

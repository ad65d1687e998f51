"""Inpainting and outpainting on the tiny official-layout checkpoint (float32, CPU).

Parity: for the official centred rectangle the pipeline's tokens equal a transcription of the
official painting mode (tests/support/official_i2i.py) at temperature 0 and 1, at batch 1 and
item by item in a batch. Invariants: known tokens never change (every strategy, with and without
ML-Cache); bad input gets one clear error naming the input.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from support.official_i2i import paint_generate, paint_tokens, to_pil

from ladr_core import LADR, Baseline, InputError, MLCacheConfig, Prophet, sample
from ladr_core.dimoo import DiMOOPipeline, PaintOptions, fit_image
from ladr_core.dimoo.tasks.painting import plan_painting, token_mask
from ladr_core.registry import preset_names, resolve_strategy, strategy_names

PROMPT = "a red circle left of a blue square"


def _image(seed: int, h: int = 32, w: int = 32) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def _float(img: np.ndarray) -> torch.Tensor:
    """uint8 [H, W, 3] -> ComfyUI IMAGE [1, H, W, 3] (Load Image divides by 255 the same way)."""
    return torch.from_numpy(img).float().div(255.0)[None]


def rectangle(h: int, w: int, h_ratio: float, w_ratio: float, mode: str) -> torch.Tensor:
    """The official centred rectangle as a ComfyUI MASK [1, H, W] (1 = regenerate)."""
    mh, mw = int(round(h * h_ratio)), int(round(w * w_ratio))
    top, left = (h - mh) // 2, (w - mw) // 2
    mask = torch.zeros(1, h, w)
    mask[:, top:top + mh, left:left + mw] = 1.0
    return 1.0 - mask if mode == "outpainting" else mask


# h 0.6 / w 0.45 of 32 px cut tokens at coverage 0.25, 0.5 (strictly above 0.5 is needed) and 0.75
CASES = [("inpainting", 0.6, 0.45), ("outpainting", 1.0, 0.45), ("outpainting", 0.5, 0.7)]


@pytest.mark.parametrize(("mode", "h_ratio", "w_ratio"), CASES)
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_painting_equals_the_official_script(pipe: DiMOOPipeline, mode: str, h_ratio: float,
                                             w_ratio: float, temperature: float) -> None:
    img = _image(1)
    toks = paint_tokens(to_pil(img), pipe.vq, pipe.ids, h_ratio, w_ratio, mode)
    ref = paint_generate(pipe.transformer, pipe.encode, pipe.ids, PROMPT, toks, 10, 4.0,
                         temperature, torch.Generator().manual_seed(5))
    res = pipe.paint(PROMPT, steps=10, cfg=4.0, temperature=temperature, seed=5,
                        strategy="baseline", image=_float(img),
                        mask=rectangle(32, 32, h_ratio, w_ratio, mode))
    slots = torch.tensor([t for t in toks if t != pipe.ids.newline])
    painted = slots == pipe.ids.mask
    assert 0 < int(painted.sum()) < 64  # a real hole, with known tokens around it
    assert torch.equal(res.tokens, ref)
    assert torch.equal(res.tokens[0, ~painted], slots[~painted] - pipe.ids.image_offset)
    assert res.nfe == res.steps <= 10 and res.images.shape == (1, 32, 32, 3) and not res.note


def test_batch_items_equal_the_official_script_one_by_one(pipe: DiMOOPipeline) -> None:
    imgs = [_image(2), _image(3)]
    masks = torch.cat([rectangle(32, 32, 0.5, 0.5, "inpainting"),
                       rectangle(32, 32, 1.0, 0.5, "outpainting")])
    res = pipe.paint(PROMPT, steps=8, cfg=4.0, seed=11, strategy="baseline",
                        image=torch.cat([_float(i) for i in imgs]), mask=masks)
    for i, (img, mode) in enumerate(zip(imgs, ("inpainting", "outpainting"), strict=True)):
        toks = paint_tokens(to_pil(img), pipe.vq, pipe.ids, 0.5 if i == 0 else 1.0, 0.5, mode)
        ref = paint_generate(pipe.transformer, pipe.encode, pipe.ids, PROMPT, toks, 8, 4.0, 1.0,
                             torch.Generator().manual_seed(11 + i))
        assert torch.equal(res.tokens[i:i + 1], ref)


# every strategy and every LADR preset of the registry (a new one is covered automatically)
STRATEGIES = {"baseline": Baseline(), "prophet": Prophet(),
              **{f"ladr-{name}": LADR.preset(name) for name in preset_names()},
              **{name: resolve_strategy(name) for name in strategy_names()
                 if name not in ("baseline", "ladr", "prophet")}}
CACHES = {"none": None, "official": MLCacheConfig(warmup_ratio=0.1, refresh_interval=2),
          "ladr": MLCacheConfig.ladr()}


@pytest.mark.parametrize("strategy", list(STRATEGIES))
@pytest.mark.parametrize("cache", list(CACHES))
@pytest.mark.parametrize("max_batch", [None, 2])  # 2 of 3 in flight: the third rolls in
def test_known_tokens_never_change(pipe: DiMOOPipeline, strategy: str, cache: str,
                                   max_batch: int | None) -> None:
    image = torch.cat([_float(_image(4)), _float(_image(5)), _float(_image(6))])
    mask = torch.cat([rectangle(32, 32, 0.5, 0.5, "inpainting"),
                      rectangle(32, 32, 1.0, 0.25, "outpainting"),
                      rectangle(32, 32, 0.5, 1.0, "outpainting")])
    plan = plan_painting([PROMPT], image, mask, None, 1, pipe.vq_factor)
    plan = plan.with_codes(pipe.encode_image(plan.source))
    res = pipe.paint(PROMPT, steps=12, seed=2, strategy=STRATEGIES[strategy],
                        cache=CACHES[cache], image=image, mask=mask, decode=False,
                        max_batch=max_batch)
    known = ~plan.region
    assert torch.equal(res.tokens[known], plan.codes[known])
    assert res.nfe >= 1 and res.images is None


def test_ml_cache_refreshes_on_the_official_steps_under_the_baseline(pipe: DiMOOPipeline) -> None:
    """The cache's progress runs over the hole, so the painting baseline refreshes exactly where
    the official code does (steps <= warm-up, then every refresh_interval)."""
    cfg = MLCacheConfig()
    plan = plan_painting([PROMPT], _float(_image(6)),
                         rectangle(32, 32, 1.0, 0.25, "outpainting"), None, 1, pipe.vq_factor)
    plan = plan.with_codes(pipe.encode_image(plan.source))
    den = pipe.make_denoiser([PROMPT], None, 32, 32, 4.0, cfg, 20, 1, plan.n_generate())
    res = sample(den, (1, 8, 8), 20, strategy="baseline", known=plan.known,
                 generator=torch.Generator().manual_seed(0))
    assert plan.n_generate() == [48] and res.steps == 20
    assert den.stats.refresh_at == [s for s in range(20) if cfg.is_refresh(s, 20)]
    assert den.stats.cached_steps > 0


def test_full_mask_is_text_to_image_and_empty_mask_returns_the_input(pipe: DiMOOPipeline) -> None:
    image = _float(_image(7))
    t2i = pipe.generate(PROMPT, width=32, height=32, steps=6, seed=3, strategy="ladr")
    full = pipe.paint(PROMPT, steps=6, seed=3, strategy="ladr", image=image,
                         mask=torch.ones(1, 32, 32))
    assert torch.equal(full.tokens, t2i.tokens) and torch.equal(full.images, t2i.images)
    empty = pipe.paint(PROMPT, steps=6, seed=3, image=image, mask=torch.zeros(1, 32, 32))
    assert empty.nfe == empty.steps == 0 and torch.equal(empty.images, image)
    assert torch.equal(empty.tokens, pipe.encode_image(image))
    assert "the mask is empty" in empty.note and "returned unchanged" in empty.note
    faint = pipe.paint(PROMPT, steps=6, image=image, mask=torch.full((1, 32, 32), 0.3))
    assert faint.nfe == 0 and "largest token coverage 0.30" in faint.note


def test_paste_keeps_the_generated_hole_and_feathers_into_the_known_side(
        pipe: DiMOOPipeline) -> None:
    image = _float(_image(8))
    mask = rectangle(32, 32, 0.5, 0.5, "inpainting")  # tokens 2..5 of 8 in both directions
    kw = dict(steps=6, seed=4, strategy="baseline", image=image, mask=mask)
    raw = pipe.paint(PROMPT, options=PaintOptions(paste=False), **kw)
    hard = pipe.paint(PROMPT, options=PaintOptions(feather=0), **kw)
    soft = pipe.paint(PROMPT, options=PaintOptions(feather=3), **kw)
    inside = mask[0].bool()
    assert torch.equal(hard.images[0, ~inside], image[0, ~inside])
    assert torch.equal(hard.images[0, inside], raw.images[0, inside])
    assert torch.equal(soft.images[0, inside], raw.images[0, inside])  # the hole: all generated
    far = torch.ones(32, 32, dtype=torch.bool)
    far[5:27, 5:27] = False  # > 3 px away from the hole (rows / columns 8..23): the original
    assert torch.equal(soft.images[0, far], image[0, far])
    near = 3.0 / 4.0  # 1 px outside: weight (feather + 1 - 1) / (feather + 1)
    expect = raw.images[0, 7, 16] * near + image[0, 7, 16] * (1 - near)
    torch.testing.assert_close(soft.images[0, 7, 16], expect)
    assert not torch.equal(raw.images[0, 7, 16], image[0, 7, 16])  # the blend is visible


def test_token_mask_follows_the_official_threshold_and_grow() -> None:
    mask = torch.zeros(1, 8, 8)
    mask[0, 0:4, 0:2] = 1.0  # token (0, 0) fully covered, token (0, 1) not at all
    mask[0, 4:8, 0:1] = 1.0  # token (1, 0): coverage 0.25
    chosen, coverage = token_mask(mask, 4)
    assert coverage.view(2, 2).tolist() == [[0.5, 0.0], [0.25, 0.0]]
    assert not chosen.any()  # strictly above 0.5, as official
    chosen, _ = token_mask(mask, 4, threshold=0.2)
    assert chosen.view(2, 2).tolist() == [[True, False], [True, False]]
    grown, _ = token_mask(mask, 4, threshold=0.4, grow=1)
    assert grown.all()


def test_encode_image_is_the_official_encoding(pipe: DiMOOPipeline) -> None:
    from support.official_i2i import image_tokens

    img = _image(9, h=24, w=32)
    codes = pipe.encode_image(_float(img))
    ref = image_tokens(to_pil(img), pipe.vq, pipe.ids)
    rows = [t - pipe.ids.image_offset for t in ref[1:-1] if t != pipe.ids.newline]
    assert codes.shape == (1, 48) and codes[0].tolist() == rows
    batch = pipe.encode_image(torch.cat([_float(img), _float(_image(10, h=24, w=32))]))
    assert torch.equal(batch[:1], codes)


def test_fit_image_crops_or_resizes_to_the_vq_grid() -> None:
    image = torch.rand(2, 30, 23, 3)
    assert fit_image(image, 4, "crop").shape == (2, 28, 20, 3)
    assert torch.equal(fit_image(image, 4, "crop"), image[:, 1:29, 1:21])
    resized = fit_image(image, 4, "resize")
    assert resized.shape == (2, 32, 24, 3) and 0 <= float(resized.min()) <= float(resized.max()) <= 1
    assert fit_image(image, 4, "exact") is image
    with pytest.raises(ValueError, match="fit must be one of"):
        fit_image(image, 4, "stretch")


def test_bad_painting_input_gets_one_clear_error(pipe: DiMOOPipeline) -> None:
    image, mask = _float(_image(11)), rectangle(32, 32, 0.5, 0.5, "inpainting")

    def run(**kw: object) -> None:
        pipe.paint(PROMPT, steps=2, **{"image": image, "mask": mask, **kw})

    cases = [
        ({"image": torch.rand(1, 30, 32, 3), "mask": torch.ones(1, 30, 32)},
         r"image height is 30 px, not a multiple of 4 px .*nearest valid height: 28 or 32"),
        ({"mask": torch.ones(1, 32, 28)}, r"mask is 28x32 px but the image is 32x32 px"),
        ({"image": image.expand(3, -1, -1, -1), "mask": mask.expand(2, -1, -1)},
         "a batch of 2 masks for a batch of 3 images"),
        ({"mask": mask * 1.5}, r"mask has values outside \[0, 1\] .*Threshold Mask"),
        ({"mask": mask - 0.5}, r"mask has values outside \[0, 1\]"),
        ({"image": image * 2}, r"image has values outside \[0, 1\]"),
        ({"image": torch.rand(1, 32, 32, 4)}, r"image has 4 channels \(RGBA\).*alpha"),
        ({"image": None}, "image is missing, but a mask needs the image it masks"),
        ({"denoise": 1.5}, r"denoise is 1.5; give a number above 0 and at most 1"),
        ({"prompt": ["a", "b"], "image": image.expand(3, -1, -1, -1)},
         "prompt has 2 prompts for a batch of 3 images"),
    ]
    for kw, message in cases:
        with pytest.raises(InputError, match=message):
            if "prompt" in kw:
                pipe.paint(kw.pop("prompt"), steps=2, mask=mask, **kw)
            else:
                run(**kw)
    for bad in ({"threshold": 1.0}, {"threshold": -0.1}, {"grow": -1}, {"feather": 1.5},
                {"paste": 1}, {"fit": "stretch"}):
        with pytest.raises(ValueError, match="mask_threshold|mask_grow|feather|paste|fit"):
            PaintOptions(**bad)


@pytest.mark.parametrize("fit", ["crop", "resize"])
def test_an_off_grid_image_is_fitted_with_its_mask(pipe: DiMOOPipeline, fit: str) -> None:
    """fit= crops (or resizes) the image and its mask together: the run equals one given the
    fitted pair, known tokens are the fitted image's, and the note says what happened."""
    image = _float(_image(13, h=34, w=31))
    mask = torch.zeros(1, 34, 31)
    mask[:, 9:25, 9:25] = 1.0
    res = pipe.paint(PROMPT, steps=4, seed=5, image=image, mask=mask,
                        options=PaintOptions(fit=fit), decode=False)
    fitted_image = fit_image(image, 4, fit)
    fitted_mask = fit_image(mask[..., None].expand(1, 34, 31, 3), 4, fit)[..., 0].clamp(0, 1)
    same = pipe.paint(PROMPT, steps=4, seed=5, image=fitted_image, mask=fitted_mask,
                         decode=False)
    assert torch.equal(res.tokens, same.tokens) and res.grid == same.grid
    assert res.grid == ((8, 7) if fit == "crop" else (8, 8))
    region, _ = token_mask(fitted_mask, 4)
    known = pipe.encode_image(fitted_image)
    assert torch.equal(res.tokens[~region], known[~region]) and region.any()
    done = "cropped to 28x32" if fit == "crop" else "resized to 32x32"
    assert f"image 31x34 px {done} (fit={fit})" in res.note and not same.note
    # values and sizes are still checked on the inputs as given
    with pytest.raises(ValueError, match=r"mask is 30x34 px but the image is 31x34 px"):
        pipe.paint(PROMPT, steps=2, image=image, mask=mask[..., :30],
                      options=PaintOptions(fit=fit))
    with pytest.raises(ValueError, match=r"mask has values outside \[0, 1\]"):
        pipe.paint(PROMPT, steps=2, image=image, mask=mask * 3,
                      options=PaintOptions(fit=fit))
    with pytest.raises(ValueError, match=r"image width is 31 px, not a multiple .*options=PaintOptions"):
        pipe.paint(PROMPT, steps=2, image=image, mask=mask)


def test_one_image_serves_every_prompt_and_batch_item(pipe: DiMOOPipeline) -> None:
    image, mask = _float(_image(12)), rectangle(32, 32, 0.5, 0.5, "inpainting")
    res = pipe.paint([PROMPT, "green"], steps=4, seed=0, batch_size=2, image=image,
                        mask=mask, decode=False)
    assert res.tokens.shape == (4, 64)
    one = pipe.paint("green", steps=4, seed=3, image=image, mask=mask, decode=False)
    assert torch.equal(res.tokens[3], one.tokens[0])  # item i uses seed + i, prompt-major


def test_default_feather_is_half_a_token(pipe: DiMOOPipeline) -> None:
    image = _float(_image(8))
    mask = rectangle(32, 32, 0.5, 0.5, "inpainting")
    kw = dict(steps=6, seed=4, strategy="baseline", image=image, mask=mask)
    half = pipe.vq_factor // 2
    default = pipe.paint(PROMPT, **kw)
    explicit = pipe.paint(PROMPT, options=PaintOptions(feather=half), **kw)
    hard = pipe.paint(PROMPT, options=PaintOptions(feather=0), **kw)
    assert torch.equal(default.images, explicit.images)
    assert half > 1 and not torch.equal(default.images, hard.images)

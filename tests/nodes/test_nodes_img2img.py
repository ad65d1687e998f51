"""Image to image in the nodes on the shipped DiMOO-nano model: DiMOO Paint Canvas without a
mask -> DiMOO Sampler with `denoise` (nodes/canvas.py, nodes/sampler.py).

The widget is optional and last, so a sampler queued without it runs at 1.0 as before; at 1.0
a picture only sets the size (the stats line says so) and the tokens are text to image's; below
1.0 the run takes the last steps of the schedule from the picture's codes and the stats line
sets it against the official sampler at the same strength; a text canvas has no picture, so a
denoise below 1 is refused naming denoise; bad values get one message naming denoise.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
import torch

from ladr_core import InputError, StepSchedule, official_passes
from nodes.canvas import IMG2IMG, VARIATIONS, CanvasNode, PaintCanvasNode, TokenCanvasNode
from nodes.sampler import DiMOOSampler

PAINT = dict(mask_threshold=0.5, mask_grow=0, paste_back=True, feather=-1, fit="exact")
PROMPT = "a red circle to the left of a blue square"


def _defaults() -> dict:
    return {i.id: i.default for i in DiMOOSampler.define_schema().inputs
            if getattr(i, "default", None) is not None}


def sample(model, canvas=None, **kw) -> tuple:
    args = {**_defaults(), "prompt": PROMPT, "cfg": 0.75, "steps": 16, "seed": 3, **kw}
    return DiMOOSampler.execute(model=model, canvas=canvas, **args).args


def picture_canvas(mask=None, batch_size: int = 1) -> object:
    image = torch.rand(1, 48, 48, 3, generator=torch.Generator().manual_seed(0))
    return PaintCanvasNode.execute(image=image, mask=mask, batch_size=batch_size,
                                   **PAINT).args[0]


def test_denoise_is_an_optional_last_widget_within_what_the_core_takes() -> None:
    """The widget offers only strengths the run accepts: the host refuses the rest on the
    denoise input itself, before anything runs (0 would redraw nothing)."""
    from ladr_core.schedules import check_denoise

    inputs = DiMOOSampler.define_schema().inputs
    spec = inputs[-1]
    assert spec.id == "denoise" and spec.optional and spec.default == 1.0
    assert check_denoise(spec.min) == spec.min and check_denoise(spec.max) == spec.max == 1.0
    with pytest.raises(InputError, match="denoise"):
        check_denoise(spec.min - spec.step)
    mask = next(i for i in PaintCanvasNode.define_schema().inputs if i.id == "mask")
    assert mask.optional and "denoise" in mask.tooltip
    assert IMG2IMG in spec.tooltip


def test_a_picture_at_denoise_1_is_text_to_image_at_its_size(fake_model, sent) -> None:
    text_canvas = asyncio.run(CanvasNode.execute(width=48, height=48, batch_size=1)).args[0]
    plain, _ = sample(fake_model, text_canvas)
    redrawn, line = sample(fake_model, picture_canvas())
    assert torch.equal(plain.tokens, redrawn.tokens)
    assert "the image only sets the size" in line


@pytest.mark.parametrize("denoise", [0.3, 0.6])
def test_below_1_the_picture_is_redrawn_and_set_against_the_official_sampler(
        fake_model, sent, denoise: float) -> None:
    tokens, line = sample(fake_model, picture_canvas(), denoise=denoise, steps=64,
                          cfg=0.75)
    st = tokens.stats
    planned = 64 - StepSchedule(64, denoise).start
    assert st["denoise"] == denoise and st["schedule_steps"] == 64
    assert st["steps_planned"] == planned and st["steps"] <= planned
    assert st["official_nfe_per_image"] == official_passes(144, StepSchedule(64, denoise))
    assert f"(denoise {denoise:g}: the last {planned} of 64)" in line
    assert f"144 tokens, denoise {denoise:g})" in line
    assert tokens.paint is not None and not tokens.paint.options.paste


def test_a_mask_with_denoise_redraws_inside_it_only(fake_model, sent) -> None:
    mask = torch.zeros(1, 48, 48)
    mask[:, 12:36, 12:36] = 1.0
    canvas = picture_canvas(mask)
    tokens, _ = sample(fake_model, canvas, denoise=0.5)
    codes = fake_model.pipe.encode_image(canvas.image)
    plan = tokens.paint
    kept = ~plan.generate[0]
    assert not (plan.generate & ~plan.region).any() and plan.options.paste
    assert torch.equal(tokens.tokens[0, kept], codes[0, kept])


def test_a_denoise_below_half_a_step_returns_the_pictures_codes(fake_model, sent) -> None:
    canvas = picture_canvas()
    tokens, line = sample(fake_model, canvas, denoise=0.005)  # 0.005 x 16 < half a step
    assert torch.equal(tokens.tokens, fake_model.pipe.encode_image(canvas.image))
    assert tokens.stats["nfe"] == 0 and "redraws nothing" in line


def test_denoise_0_is_refused_naming_it(fake_model, seen) -> None:
    """The widget reaches 0 (ComfyUI's range), a strength that redraws nothing: one message."""
    with pytest.raises(ValueError, match=r"^DiMOO Sampler: denoise is 0.0; give a number above "
                                         r"0 and at most 1"):
        sample(fake_model, picture_canvas(), denoise=0.0)
    assert seen == []


def test_a_text_canvas_below_denoise_1_is_refused_naming_denoise(fake_model, seen) -> None:
    text = asyncio.run(CanvasNode.execute(width=48, height=48, batch_size=1)).args[0]
    for canvas in (None, text):
        with pytest.raises(ValueError, match=r"^DiMOO Sampler: denoise is 0.5 but the canvas "
                                             r"has no picture to redraw; set denoise to 1.0 .*"
                                             r"DiMOO Paint Canvas \(no mask\)"):
            sample(fake_model, canvas, denoise=0.5)
    assert seen == []  # refused before anything ran


@pytest.mark.parametrize("bad", [float("nan"), 1.5, -0.25])
def test_a_bad_denoise_is_one_message_naming_it(fake_model, seen, bad: float) -> None:
    for canvas in (None, picture_canvas()):
        with pytest.raises(ValueError, match=r"^DiMOO Sampler: denoise is .*; give a number "
                                             r"above 0 and at most 1"):
            sample(fake_model, canvas, denoise=bad)
    assert seen == []


def test_an_unpainted_load_image_mask_names_the_image_to_image_way(fake_model) -> None:
    with pytest.raises(ValueError, match=r"^DiMOO Paint Canvas: mask is empty .*disconnect the "
                                         r"mask to redraw the whole picture"):
        picture_canvas(torch.zeros(1, 64, 64))


# ---- DiMOO Token Canvas: a sampler's tokens redrawn (variations, no VQ round trip) ---------
def token_canvas(tokens, batch_size: int = 1) -> object:
    return TokenCanvasNode.execute(tokens=tokens, batch_size=batch_size).args[0]


def test_a_token_canvas_redraws_the_tokens_as_the_library_does(fake_model, sent) -> None:
    """Sampler -> Token Canvas -> Sampler at denoise 0.5 equals pipe.generate(tokens=) with
    the same seed and rule; the tokens set the size and no paste-back happens."""
    canvas = asyncio.run(CanvasNode.execute(width=48, height=48, batch_size=1)).args[0]
    first, _ = sample(fake_model, canvas)
    again, line = sample(fake_model, token_canvas(first, batch_size=2), denoise=0.5, steps=64)
    want = fake_model.pipe.generate(PROMPT, tokens=first.tokens, denoise=0.5, steps=64, seed=3,
                                    cfg=0.75, batch_size=2, decode=False)
    assert torch.equal(again.tokens, want.tokens) and again.tokens.shape == (2, 144)
    assert (again.width, again.height) == (48, 48) and not again.paint.options.paste
    kept = ~again.paint.generate
    assert torch.equal(again.tokens[kept], first.tokens.expand(2, -1)[kept])
    assert "denoise 0.5" in line and again.stats["denoise"] == 0.5


def test_a_token_canvas_is_an_optional_canvas_named_by_the_sampler() -> None:
    spec = next(i for i in DiMOOSampler.define_schema().inputs if i.id == "canvas")
    assert "DiMOO Token Canvas" in spec.tooltip and spec.optional
    assert VARIATIONS in next(i for i in DiMOOSampler.define_schema().inputs
                              if i.id == "denoise").tooltip
    assert [i.id for i in TokenCanvasNode.define_schema().inputs] == ["tokens", "batch_size"]


def test_tokens_of_another_checkpoint_are_one_message(fake_model, seen) -> None:
    first, _ = sample(fake_model)
    seen.clear()
    alien = replace(first, model_key=("other",))
    with pytest.raises(ValueError, match=r"^DiMOO Sampler: canvas's tokens were made with "
                                         r"another checkpoint"):
        sample(fake_model, token_canvas(alien), denoise=0.5)
    bad = replace(first, tokens=first.tokens[:, :100])
    with pytest.raises(ValueError, match=r"^DiMOO Sampler: canvas's tokens has shape \(1, 100\)"):
        sample(fake_model, token_canvas(bad), denoise=0.5)
    with pytest.raises(ValueError, match=r"^tokens: got a builtins.str, not this version"):
        token_canvas("not tokens")
    assert seen == []

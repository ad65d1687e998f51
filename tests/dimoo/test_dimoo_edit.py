"""Image-to-image editing on the tiny official-layout checkpoint (float32, CPU).

Parity: the pipeline's tokens equal a transcription of the official image-to-image generator
(tests/support/official_i2i.py `edit_generate`) at temperature 0 and 1, at batch 1 and item by
item in a batch. Every strategy runs editing through the same loop; bad input gets one clear
error naming the input.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from support.official_i2i import edit_generate, multiturn_generate, to_pil

import ladr_core
from ladr_core import LADR, Baseline, MLCacheConfig, Prophet, resolve_strategy, strategy_names
from ladr_core.dimoo import EDIT_TYPES, DiMOOPipeline
from ladr_core.dimoo.tasks.editing import MULTI_VIEWS, build_edit_batch, edit_texts

INSTRUCTION = "make the circle green"
# our edit type -> an official edit-type string that selects the same template
OFFICIAL = {"edit": "image_edit", "control": "canny_control", "subject": "subject_driven",
            "dense_depth": "depth_dense", "pred": "canny_pred",
            # the official multi-view types are ours, the view their last word
            **{t: t for t in EDIT_TYPES if t.startswith("multi_view_")}}


@pytest.fixture(scope="module")
def pipe(dimoo_checkpoint: Path) -> DiMOOPipeline:
    return ladr_core.load_dimoo(dimoo_checkpoint, device="cpu", dtype=torch.float32)


def _image(seed: int, h: int = 32, w: int = 32) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def _float(img: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(img).float().div(255.0)[None]


def _official(pipe: DiMOOPipeline, img: np.ndarray, edit_type: str, steps: int, cfg: float,
              image_cfg: float, temperature: float, seed: int,
              instruction: str = INSTRUCTION) -> torch.Tensor:
    return edit_generate(pipe.transformer, pipe.encode, pipe.vq, pipe.ids, instruction,
                         OFFICIAL[edit_type], to_pil(img), None, steps, cfg, image_cfg,
                         temperature, torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("edit_type", list(OFFICIAL))
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_edit_equals_the_official_generator(pipe: DiMOOPipeline, edit_type: str,
                                            temperature: float) -> None:
    img = _image(1)
    ref = _official(pipe, img, edit_type, 10, 2.5, 4.0, temperature, 5)
    res = pipe.edit(INSTRUCTION, steps=10, cfg=2.5, image_cfg=4.0, temperature=temperature,
                        seed=5, strategy="baseline", image=_float(img), edit_type=edit_type, size="as is")
    assert torch.equal(res.tokens, ref)
    assert res.nfe == res.steps == 10 and res.images.shape == (1, 32, 32, 3)


@pytest.mark.parametrize(("cfg", "image_cfg"), [(0.0, 0.0), (2.5, 0.0), (0.0, 4.0), (1.5, 2.0)])
def test_guidance_scales_equal_the_official_generator(pipe: DiMOOPipeline, cfg: float,
                                                      image_cfg: float) -> None:
    img = _image(2)
    ref = _official(pipe, img, "edit", 8, cfg, image_cfg, 1.0, 3)
    res = pipe.edit(INSTRUCTION, steps=8, cfg=cfg, image_cfg=image_cfg, seed=3,
                        strategy="baseline", image=_float(img), decode=False, size="as is")
    assert torch.equal(res.tokens, ref)


def test_batch_items_equal_the_official_generator_one_by_one(pipe: DiMOOPipeline) -> None:
    imgs = [_image(3), _image(4)]
    prompts = [INSTRUCTION, "remove the blue square and add a yellow star"]
    res = pipe.edit(prompts, steps=8, seed=11, strategy="baseline",
                        image=torch.cat([_float(i) for i in imgs]), decode=False, size="as is")
    assert res.tokens.shape == (2, 64)
    for i, (img, text) in enumerate(zip(imgs, prompts, strict=True)):
        ref = _official(pipe, img, "edit", 8, 2.5, 4.0, 1.0, 11 + i, text)
        assert torch.equal(res.tokens[i:i + 1], ref)


def test_a_rolling_batch_gives_each_item_its_single_run(pipe: DiMOOPipeline) -> None:
    img = _float(_image(5))
    kw = dict(steps=8, seed=7, strategy="ladr", image=img, decode=False, size="as is")
    both = pipe.edit(INSTRUCTION, batch_size=3, max_batch=2, **kw)
    for i in range(3):
        single = pipe.edit(INSTRUCTION, **{**kw, "seed": 7 + i})
        assert torch.equal(both.tokens[i], single.tokens[0])


STRATEGIES = {"baseline": Baseline(), "ladr": LADR(), "ladr-nano": LADR.preset("nano"),
              "prophet": Prophet(),
              # every other registered strategy (a new one joins by registering)
              **{name: resolve_strategy(name) for name in strategy_names()
                 if name not in ("baseline", "ladr", "prophet")}}


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_every_strategy_edits(pipe: DiMOOPipeline, strategy: str) -> None:
    kw = dict(steps=12, strategy=STRATEGIES[strategy], image=_float(_image(6)), decode=False,
              size="as is")
    res = pipe.edit(INSTRUCTION, seed=2, **kw)
    assert res.tokens.shape == (1, 64) and 1 <= res.nfe <= 12
    assert int(res.tokens.min()) >= 0 and int(res.tokens.max()) < pipe.ids.codebook_size
    # in a rolling batch each edit equals its single run
    both = pipe.edit(INSTRUCTION, seed=2, batch_size=3, max_batch=2, **kw)
    assert torch.equal(both.tokens[0], res.tokens[0])
    for i in (1, 2):
        single = pipe.edit(INSTRUCTION, seed=2 + i, **kw)
        assert torch.equal(both.tokens[i], single.tokens[0])


def test_rows_hold_the_reference_before_the_last_prompt_token(pipe: DiMOOPipeline) -> None:
    codes = pipe.encode_image(_float(_image(7)))
    layout = ladr_core.dimoo.denoise.prompt.ImageLayout(8, 8)
    batch = build_edit_batch(pipe.encode, pipe.ids, [INSTRUCTION], "edit", codes, layout, True)
    cond_text, _ = edit_texts(INSTRUCTION, "edit")
    cond = pipe.encode(cond_text)
    rows = [r[m.bool()].tolist() for r, m in zip(batch.input_ids, batch.attention_mask,
                                                 strict=True)]
    assert len(rows) == 3 and rows[2] == cond + layout.tokens(pipe.ids)
    assert rows[0][:len(cond) - 1] == cond[:-1] and rows[0][len(cond) - 1] == pipe.ids.boi
    assert rows[0][len(cond) + 72] == pipe.ids.eoi and rows[0][len(cond) + 73] == cond[-1]


def test_bad_input_gets_one_clear_message(pipe: DiMOOPipeline) -> None:
    img = _float(_image(8))
    with pytest.raises(ValueError, match="edit_type 'recolour' is not a known edit type; use one "
                                         "of edit, control"):
        pipe.edit(INSTRUCTION, image=img, edit_type="recolour", size="as is")
    with pytest.raises(ValueError, match=r"instruction is empty"):
        pipe.edit("  ", image=img, size="as is")
    with pytest.raises(ValueError, match="image width is 30 px, not a multiple of 4 px.*nearest "
                                         "valid width: 28 or 32"):
        pipe.edit(INSTRUCTION, image=_float(_image(9, 32, 30)), size="as is")
    with pytest.raises(ValueError, match="image_cfg must be a finite number >= 0"):
        pipe.edit(INSTRUCTION, image=img, image_cfg=-1.0, size="as is")
    with pytest.raises(ValueError, match="ML-Cache is not available for image editing"):
        pipe.run(pipe.prepare_edit(INSTRUCTION, img, size="as is"), LADR(),
                 cache=MLCacheConfig())
    with pytest.raises(ValueError, match="image has 2 images for 3 items"):
        pipe.edit(INSTRUCTION, batch_size=3, image=img.expand(2, -1, -1, -1), size="as is")
    assert "dense_depth" in EDIT_TYPES
    # a dense-prediction type needs no instruction
    assert pipe.edit("", image=img, edit_type="dense_depth", steps=2, decode=False, size="as is").nfe


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_style_transfer_equals_the_official_generator(pipe: DiMOOPipeline,
                                                      temperature: float) -> None:
    """Official image_ref_transfer: the image to transform first, the style image second, the
    output the style image's size (here 16 x 24 px, the content 16 x 16)."""
    content, style = _image(7, 16, 16), _image(8, 16, 24)
    ref = edit_generate(pipe.transformer, pipe.encode, pipe.vq, pipe.ids,
                        "Transform the current image into the style of the provided image.",
                        "image_ref_transfer", to_pil(content), to_pil(style), 6, 2.5, 4.0,
                        temperature, torch.Generator().manual_seed(4))
    res = pipe.edit("", steps=6, cfg=2.5, image_cfg=4.0, temperature=temperature, seed=4,
                        strategy="baseline", image=_float(content), style=_float(style),
                        edit_type="style", size="as is")
    assert torch.equal(res.tokens, ref) and res.grid == (4, 6)
    assert res.images.shape == (1, 16, 24, 3)


def test_style_transfer_needs_its_two_images(pipe: DiMOOPipeline) -> None:
    img = _float(_image(9, 16, 16))
    with pytest.raises(ValueError, match="style is missing: edit type 'style' needs the style "
                                         "image"):
        pipe.edit("", image=img, edit_type="style", steps=2, size="as is")
    with pytest.raises(ValueError, match="style is given, but only edit type 'style' takes a "
                                         "style image"):
        pipe.edit(INSTRUCTION, image=img, style=img, edit_type="edit", steps=2, size="as is")
    with pytest.raises(TypeError):  # the image to transform is edit()'s second argument
        pipe.edit(INSTRUCTION, style=img, steps=2)
    with pytest.raises(ValueError, match=r"style width is 18 px, not a multiple of 4"):
        pipe.edit("", image=img, style=torch.rand(1, 16, 18, 3), edit_type="style", size="as is")
    with pytest.raises(ValueError, match="style has 2 images for 3 items"):
        pipe.edit("", image=img, style=img.expand(2, -1, -1, -1), edit_type="style",
                      batch_size=3, size="as is")


TURNS = ["make the circle green", "add a yellow star", "remove the blue square"]


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_multiturn_equals_the_official_turns(pipe: DiMOOPipeline, temperature: float) -> None:
    """Official edit_multiturn_<i>: turn i edits the picture turn i - 1 saved, with instruction
    i and the editing template; nothing of earlier turns enters the prompt."""
    img = _image(10)
    ref = multiturn_generate(pipe.transformer, pipe.encode, pipe.vq, pipe.ids, TURNS,
                             to_pil(img), 6, 2.5, 4.0, temperature, 3)
    res = pipe.edit("\n".join(TURNS) + "\n\n", _float(img), edit_type="multiturn", steps=6,
                    temperature=temperature, seed=3, strategy="baseline", size="as is")
    assert torch.equal(res.tokens, ref) and res.images.shape == (1, 32, 32, 3)
    assert res.turns == 3 and res.nfe == res.steps == 18 and res.item_nfe == [18]
    # one turn is an edit
    one = pipe.edit(TURNS[0], _float(img), edit_type="multiturn", steps=6, seed=3,
                    temperature=temperature, strategy="baseline", decode=False, size="as is")
    edit = pipe.edit(TURNS[0], _float(img), steps=6, seed=3, temperature=temperature,
                     strategy="baseline", decode=False, size="as is")
    assert torch.equal(one.tokens, edit.tokens) and one.turns == 1


def test_multiturn_batch_items_take_their_own_turns(pipe: DiMOOPipeline) -> None:
    imgs = [_image(11), _image(12)]
    prompts = ["\n".join(TURNS[:2]), "\n".join(TURNS[1:])]
    res = pipe.edit(prompts, torch.cat([_float(i) for i in imgs]), edit_type="multiturn",
                    steps=5, seed=8, strategy="ladr", decode=False, size="as is")
    for i, (img, text) in enumerate(zip(imgs, prompts, strict=True)):
        single = pipe.edit(text, _float(img), edit_type="multiturn", steps=5, seed=8 + i,
                           strategy="ladr", decode=False, size="as is")
        assert torch.equal(res.tokens[i], single.tokens[0])
        assert res.item_nfe[i] == single.item_nfe[0]


def test_multi_view_and_multiturn_bad_input(pipe: DiMOOPipeline) -> None:
    img = _float(_image(13))
    views = ", ".join(f"multi_view_{v}" for v in MULTI_VIEWS)
    with pytest.raises(ValueError, match=f"edit_type 'multi_view_top' names the view 'top', "
                                         f"which is not offered; use one of {views}$"):
        pipe.edit("", img, edit_type="multi_view_top", size="as is")
    with pytest.raises(ValueError, match=f"edit_type 'multi_view' names no view; use one of "
                                         f"{views}$"):
        pipe.prepare_edit("", img, edit_type="multi_view", size="as is")
    with pytest.raises(ValueError, match=r"instruction gives the prompts different numbers of "
                                         r"turns \(2, 1 lines\); give every prompt as many"):
        pipe.prepare_edit(["a\nb", "c"], img, edit_type="multiturn", size="as is")
    with pytest.raises(ValueError, match="instruction is empty; edit type 'multiturn' needs"):
        pipe.prepare_edit(" \n ", img, edit_type="multiturn", size="as is")
    # every turn is checked before anything runs: its row must fit, its memory is counted
    with pytest.raises(ValueError, match="shorten the instruction"):
        pipe.prepare_edit("short\n" + "word " * 200, img, edit_type="multiturn", size="as is")
    rows = [pipe.prepare_edit(text, img, edit_type="multiturn", size="as is").rows(pipe.encode)
            for text in ("short", "short\n" + "word " * 20)]
    assert rows[1][1] > rows[0][1]
    # a multi-view edit needs no instruction: its text is fixed
    assert pipe.edit("", img, edit_type="multi_view_back", steps=2, decode=False,
                     size="as is").nfe

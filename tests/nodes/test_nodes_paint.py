"""Inpainting / outpainting through the nodes (no ComfyUI: host fallbacks) on DiMOO-nano (48 px,
12 x 12 tokens of 4 px): DiMOO Sampler's image + mask + paint inputs, LADR Paint Options and
VQ Decode's paste-back."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from support.nodes import SAMPLER_DEFAULTS, bits

from ladr_core.dimoo import PaintOptions
from ladr_core.dimoo.tasks.painting import token_mask
from nodes import events, host
from nodes.decode import DiMOOVQDecode
from nodes.paint import FEATHER_AUTO, PaintOptionsNode
from nodes.sampler_legacy import LegacyDiMOOSampler

SIDE = 48


def _image(seed: int = 0, batch: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    coarse = torch.rand(batch, 3, 6, 6, generator=g)  # smooth blobs the VQ keeps
    up = torch.nn.functional.interpolate(coarse, size=(SIDE, SIDE), mode="bilinear")
    return up.permute(0, 2, 3, 1).contiguous()


def _box(top: int, left: int, size: int, batch: int = 1) -> torch.Tensor:
    mask = torch.zeros(batch, SIDE, SIDE)
    mask[:, top:top + size, left:left + size] = 1.0
    return mask


def run(model, **kw) -> tuple:
    return LegacyDiMOOSampler.execute(model=model, **{**SAMPLER_DEFAULTS, **kw}).args


def test_an_image_too_large_for_the_model_is_refused_before_anything_loads(fake_model,
                                                                          monkeypatch) -> None:
    """A 2048 x 2048 picture on nano (context 512 tokens): one message on `image`, with the
    size that fits, raised before the model is moved to its device or sampled."""
    from nodes import host

    monkeypatch.setattr(host, "load_to_device", lambda *a, **k: pytest.fail("loaded"))
    image, mask = torch.rand(1, 2048, 2048, 3), torch.ones(1, 2048, 2048)
    with pytest.raises(ValueError, match=r"^DiMOO Sampler: image is 2048 x 2048 px, which needs "
                                         r"\d+ tokens .*; resize it to at most \d+ x \d+ px"):
        run(fake_model, image=image, mask=mask, width=0, height=0)


def test_inpaint_keeps_known_tokens_and_pastes_the_original_back(fake_model, sent) -> None:
    image, mask = _image(1), _box(12, 12, 16)
    tokens, stats = run(fake_model, image=image, mask=mask, width=0, height=0)
    codes = fake_model.pipe.encode_image(image)
    region, _ = token_mask(mask, 4)
    assert torch.equal(tokens.tokens[~region], codes[~region])
    assert not torch.equal(tokens.tokens[region], codes[region])  # something was generated
    assert tokens.grid == (12, 12) and (tokens.width, tokens.height) == (SIDE, SIDE)
    out = DiMOOVQDecode.execute(model=fake_model, tokens=tokens).args[0]
    inside = region.view(12, 12).repeat_interleave(4, 0).repeat_interleave(4, 1)
    far = ~(torch.nn.functional.max_pool2d(inside[None, None].float(), 5, 1, 2)[0, 0] > 0)
    assert torch.equal(out[0][far], image[0][far])  # > feather (2 px) outside: the original
    raw = fake_model.pipe.decode(tokens.tokens, tokens.grid).clamp(0, 1)
    torch.testing.assert_close(out[0][inside], raw[0][inside])  # the hole: as generated
    assert stats.startswith("ladr: ")


def _shown(pil: object, side: int = SIDE) -> torch.Tensor:
    """A progress-bar preview (enlarged by a whole factor, nearest) back at the image's own
    size: float [side, side, 3]."""
    arr = torch.from_numpy(np.array(pil)).float() / 255
    factor = arr.shape[0] // side
    assert arr.shape[:2] == (side * factor, side * factor) and factor >= 5  # 240 px for 48
    return arr[::factor, ::factor]


def test_preview_shows_known_region_from_step_one_and_progress_counts_the_rest(
        fake_model, sent, monkeypatch) -> None:
    """The kept tokens are the input's own pixels in every step's preview (not the colour
    table's guess), the last preview is what VQ Decode returns, and the progress bar counts
    only the tokens to regenerate."""
    shown: list = []
    monkeypatch.setattr(host.Progress, "update", lambda self, v, p=None: shown.append((v, p)))
    image, mask = _image(2), _box(0, 0, 24)  # the top-left quarter: 36 of 144 tokens
    tokens, _ = run(fake_model, image=image, mask=mask, strategy="baseline", steps=12)
    region, _ = token_mask(mask, 4)
    step_events = [p for e, p in sent if e == events.EVENT and not p["done"]]
    first = step_events[0]
    masked = torch.from_numpy(bits(first["masked_bits"], 144))
    assert not masked[~region[0]].any()  # the known tokens are shown from the first step
    known_px = (~region[0]).view(12, 12).repeat_interleave(4, 0).repeat_interleave(4, 1)
    steps = [pil for _, pil in shown[:-1]]
    assert len(steps) == len(step_events) and all(p is not None for p in steps)
    for pil in steps:  # uint8 rounding: half a level
        assert (_shown(pil)[known_px] - image[0][known_px]).abs().max() <= 0.5 / 255 + 1e-6
    table = fake_model.pipe.preview(fake_model.pipe.encode_image(image), None, tokens.grid)[0]
    assert (table[known_px] - image[0][known_px]).abs().max() > 0.05  # the table's guess
    decoded = DiMOOVQDecode.execute(model=fake_model, tokens=tokens).args[0][0]
    value, final = shown[-1]
    assert value == 1000 and (_shown(final) - decoded).abs().max() <= 0.5 / 255 + 1e-6
    progress = [p["progress"] for p in step_events]
    # baseline over 12 steps: after step 1 about 1/12 of the 36 tokens to generate is done;
    # counting the 108 known tokens as done would start at 3/4
    assert progress[0] < 0.3 and progress[-1] == 1.0 and progress == sorted(progress)


def test_empty_mask_returns_the_input_and_full_mask_is_text_to_image(fake_model, sent) -> None:
    image = _image(3)
    tokens, stats = run(fake_model, image=image, mask=torch.zeros(1, SIDE, SIDE))
    assert tokens.stats["nfe"] == 0 and "the mask is empty" in stats and "returned unchanged" in stats
    out = DiMOOVQDecode.execute(model=fake_model, tokens=tokens).args[0]
    assert torch.equal(out, image)
    full, _ = run(fake_model, image=image, mask=torch.ones(1, SIDE, SIDE), seed=9)
    t2i, _ = run(fake_model, seed=9)
    assert torch.equal(full.tokens, t2i.tokens)
    no_paste = PaintOptions(paste=False)
    full_raw, _ = run(fake_model, image=image, mask=torch.ones(1, SIDE, SIDE), seed=9,
                      paint=no_paste)
    out = DiMOOVQDecode.execute(model=fake_model, tokens=full_raw).args[0]
    torch.testing.assert_close(out, fake_model.pipe.decode(t2i.tokens, t2i.grid).clamp(0, 1))


def test_paint_options_node_reaches_the_core(fake_model, sent) -> None:
    image, mask = _image(4), torch.zeros(1, SIDE, SIDE)
    mask[:, 20:22, 20:22] = 1.0  # 4 px of one token: coverage 0.25
    node = PaintOptionsNode.execute(mask_threshold=0.2, mask_grow=1, paste_back=False,
                                    feather=FEATHER_AUTO).args[0]
    assert node == PaintOptions(threshold=0.2, grow=1, paste=False, feather=None)
    tokens, _ = run(fake_model, image=image, mask=mask, paint=node)
    codes = fake_model.pipe.encode_image(image)
    changed_allowed = token_mask(mask, 4, 0.2, 1)[0]
    assert int(changed_allowed.sum()) == 9  # one token, grown by one in every direction
    assert torch.equal(tokens.tokens[~changed_allowed], codes[~changed_allowed])
    default, _ = run(fake_model, image=image, mask=mask)  # threshold 0.5: nothing to do
    assert default.stats["nfe"] == 0
    with pytest.raises(ValueError, match="LADR Paint Options: mask_threshold"):
        PaintOptionsNode.execute(mask_threshold=float("nan"), mask_grow=0, paste_back=True,
                                 feather=0)


@pytest.mark.parametrize(("kw", "needle"), [
    (dict(image=_image(0, batch=1)), "mask is not connected but image is"),
    (dict(mask=_box(0, 0, 8)), "image is not connected but mask is"),
    (dict(image=_image(0)[:, :42], mask=_box(0, 0, 8)[:, :42]),
     "image height is 42 px, not a multiple of 4 px .*; set fit to crop or resize in LADR Paint Options"),
    (dict(image=_image(0), mask=torch.ones(1, 32, 32)), "mask is 32x32 px but the image is 48x48"),
    (dict(image=_image(0), mask=torch.zeros(1, 64, 64)), "Load Image gives a 64x64 empty mask"),
    (dict(image=_image(0, batch=2), mask=_box(0, 0, 8, batch=3)), "mask is a batch of 3 masks"),
    (dict(image=_image(0), mask=_box(0, 0, 8) * 2), "mask has values outside \\[0, 1\\].*Threshold Mask"),
    (dict(image=_image(0), mask=_box(0, 0, 8), paint="x"), "^paint: got a builtins.str, not this version.s paint options"),
])
def test_bad_painting_inputs_are_refused_naming_the_input(fake_model, sent, monkeypatch,
                                                          kw, needle) -> None:
    loads: list = []
    monkeypatch.setattr(host, "load_to_device", lambda *a, **k: loads.append(a))
    with pytest.raises(ValueError, match=needle):
        run(fake_model, **kw)
    assert not loads and not sent  # nothing ran


def test_paint_options_fit_crops_an_off_grid_image_and_its_mask(fake_model, sent) -> None:
    image, mask = _image(6)[:, :42], _box(8, 8, 16)[:, :42]  # 48 x 42 px: off nano's 4 px grid
    paint = PaintOptionsNode.execute(mask_threshold=0.5, mask_grow=0, paste_back=True,
                                     feather=FEATHER_AUTO, fit="crop").args[0]
    tokens, stats = run(fake_model, image=image, mask=mask, paint=paint, width=0, height=0)
    assert tokens.grid == (10, 12) and (tokens.width, tokens.height) == (48, 40)
    assert "image 48x42 px cropped to 48x40 (fit=crop)" in stats
    out = DiMOOVQDecode.execute(model=fake_model, tokens=tokens).args[0]
    assert out.shape == (1, 40, 48, 3)
    known = ~mask[:, 1:41].bool()  # the crop window; far from the hole: the original pixels
    known[:, 4:28, 4:28] = False
    assert torch.allclose(out[known], image[:, 1:41][known], atol=1e-6)


def test_image_sets_the_size_and_the_note_says_when_widgets_differ(fake_model, sent) -> None:
    image = _image(5)[:, :32]  # 32 x 48 px: 8 x 12 tokens
    tokens, stats = run(fake_model, image=image, mask=_box(0, 0, 16)[:, :32], width=64,
                        height=64)
    assert tokens.grid == (8, 12) and (tokens.width, tokens.height) == (48, 32)
    assert "size 48x32 from the image" in stats


def test_vq_encode_node_round_trips_through_vq_decode(fake_model, monkeypatch) -> None:
    from nodes.encode import DiMOOVQEncode

    loads: list[bool] = []
    monkeypatch.setattr(host, "load_to_device", lambda *a, **k: loads.append(True))
    from tests.kit.run_graph import load_image

    pictures = [load_image(name)[0] for name in ("ladr_caption_scene.png",
                                                 "ladr_inpaint_circle_square.png")]
    image = torch.cat(pictures)  # nano's kind of picture: two shipped 48 px inputs
    (tokens,) = DiMOOVQEncode.execute(model=fake_model, image=image, fit="exact").args
    assert torch.equal(tokens.tokens, fake_model.pipe.encode_image(image))
    assert tokens.grid == (12, 12) and tokens.paint is None and len(loads) == 1
    (out,) = DiMOOVQDecode.execute(model=fake_model, tokens=tokens).args
    assert torch.equal(out, fake_model.pipe.decode(tokens.tokens, (12, 12)).clamp(0, 1))
    assert (out - image).abs().mean() < 0.1  # the VQ's view of the picture, not noise
    # off the grid: refused with the nearest sizes, before the VQ loads; or fitted
    before = len(loads)
    with pytest.raises(ValueError, match=r"^DiMOO VQ Encode: image width is 50 px, not a multiple of 4 px.*48 or 52"):
        DiMOOVQEncode.execute(model=fake_model, image=torch.rand(1, 48, 50, 3), fit="exact")
    assert len(loads) == before
    off = torch.rand(1, 47, 51, 3)
    (cropped,) = DiMOOVQEncode.execute(model=fake_model, image=off, fit="crop").args
    assert (cropped.height, cropped.width) == (44, 48) and cropped.tokens.shape == (1, 132)
    assert torch.equal(cropped.tokens, fake_model.pipe.encode_image(off[:, 1:45, 1:49]))
    (resized,) = DiMOOVQEncode.execute(model=fake_model, image=off, fit="resize").args
    assert (resized.height, resized.width) == (48, 52)
    with pytest.raises(ValueError, match=r"^DiMOO VQ Encode: fit 'stretch' is not one of"):
        DiMOOVQEncode.execute(model=fake_model, image=image, fit="stretch")


def test_stats_line_sets_the_run_against_the_official_sampler_on_the_same_hole(fake_model,
                                                                               sent) -> None:
    """An inpaint with the nano preset at the sampler's 64 steps says how many of the 64
    planned steps ran (a preset brings no T of its own) and sets its forward passes against the official sampler's for the same hole (its 64 steps
    over the tokens to regenerate); with no ML-Cache there is no "0.0% saved"."""
    from support.nodes import policy_fields

    from ladr_core import official_passes
    from nodes.cache import MLCacheOptions
    from nodes.policy import LADRPolicyNode

    (nano,) = LADRPolicyNode.execute(preset="nano", **policy_fields()).args
    image, mask = _image(4), _box(0, 0, 24)  # 36 tokens to regenerate
    tokens, text = run(fake_model, image=image, mask=mask, policy=nano, steps=64)
    st = tokens.stats
    official = official_passes(36)
    assert st["steps_planned"] == 64 and st["tokens_per_image"] == 36 and st["painting"]
    assert st["official_nfe_per_image"] == official == 36
    assert text.startswith(f"ladr: done after {st['steps']} of 64 planned steps · "
                           f"{st['nfe']} forward passes vs {official} for the official sampler "
                           "(64 steps, 36 tokens to regenerate): ")
    assert f"{official / st['nfe']:.1f}x fewer" in text and "saved" not in text
    (cache,) = MLCacheOptions.execute(cache_ratio=0.9, warmup_ratio=0.0, refresh_interval=3,
                                      preset="ladr").args
    cached, text = run(fake_model, image=image, mask=mask, policy=nano, cache=cache, seed=3)
    saved = cached.stats["forwards_saved_pct"]
    assert saved > 0 and f"ML-Cache recomputed {100 - saved:.0f}% of the tokens " \
        f"({saved:.0f}% saved)" in text

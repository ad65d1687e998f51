"""GenEval-style evaluator: ground-truth scenes pass, wrong scenes fail."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from testbed import scenes
from testbed.evaluator import check, classify_shape, detect, score_images


def _gt(n_per_cat: int = 8, seed: int = 21):
    rng = np.random.default_rng(seed)
    specs, objs = [], []
    for i in range(n_per_cat * len(scenes.CATEGORIES)):
        sc = scenes.make_scene(rng, scenes.CATEGORIES[i % len(scenes.CATEGORIES)], allow_heldout=True)
        specs.append(sc.spec)
        objs.append(sc.objects)
    return specs, objs


def test_ground_truth_scenes_score_100_percent():
    specs, objs = _gt()
    res = score_images(specs, [scenes.render(o) for o in objs])
    assert res["score_overall"] == 1.0
    assert set(res["score"]) == set(scenes.CATEGORIES)


def test_float_images_in_unit_range_are_accepted():
    specs, objs = _gt(1)
    imgs = [scenes.render(o).astype(np.float32) / 255.0 for o in objs]
    assert score_images(specs, imgs)["score_overall"] == 1.0


@pytest.mark.parametrize("shape", scenes.SHAPES)
def test_shapes_are_classified_at_every_size(shape):
    for size in sorted({*range(10, 17), *scenes.SIZES}):  # the rendered sizes and a margin
        obj = scenes.Obj(shape, "red", 24.0, 24.0, size)
        pts = np.argwhere(scenes.shape_mask(obj))
        assert classify_shape(pts) == shape, size


def _first(category: str, seed: int = 5):
    rng = np.random.default_rng(seed)
    return scenes.make_scene(rng, category, allow_heldout=True)


def test_wrong_colour_fails():
    sc = _first("colors")
    other = next(c for c in scenes.COLORS if c != sc.objects[0].color)
    wrong = (dataclasses.replace(sc.objects[0], color=other),)
    assert check(sc.spec, detect(scenes.render(sc.objects)))
    assert not check(sc.spec, detect(scenes.render(wrong)))


def test_wrong_count_fails():
    sc = _first("counting")
    fewer, extra = sc.objects[:-1], None
    if len(sc.objects) == 1:
        extra = sc.objects + (scenes.Obj(sc.objects[0].shape, "red", 40.0, 40.0, 10),)
    assert not check(sc.spec, detect(scenes.render(extra or fewer)))
    assert not check(sc.spec, detect(scenes.render(())))


def test_wrong_position_fails():
    sc = _first("position")
    a, b = sc.objects
    swapped = (dataclasses.replace(a, cx=b.cx, cy=b.cy), dataclasses.replace(b, cx=a.cx, cy=a.cy))
    assert check(sc.spec, detect(scenes.render(sc.objects)))
    assert not check(sc.spec, detect(scenes.render(swapped)))


def test_wrong_shape_fails():
    sc = _first("color_attr")
    a = sc.objects[0]
    other = next(s for s in scenes.SHAPES if s not in (a.shape, sc.objects[1].shape))
    wrong = (dataclasses.replace(a, shape=other),) + sc.objects[1:]
    assert not check(sc.spec, detect(scenes.render(wrong)))


def test_noise_and_blank_images_fail_and_bad_input_is_named():
    specs, _ = _gt(1)
    rng = np.random.default_rng(0)
    noise = [rng.integers(0, 256, (48, 48, 3), dtype=np.uint8) for _ in specs]
    assert score_images(specs, noise)["score_overall"] < 0.2
    with pytest.raises(ValueError, match="specs"):
        score_images(specs, noise[:-1])
    with pytest.raises(ValueError, match="image must be"):
        detect(np.zeros((48, 48)))

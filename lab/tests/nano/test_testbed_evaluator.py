"""GenEval-style evaluator: ground-truth scenes pass, wrong scenes fail."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from lab.nano import scenes
from lab.nano.evaluator import check, classify_shape, detect, score_images


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


def _mask(shape: str, size: int = 16, cx: float = 24.0, cy: float = 24.0) -> np.ndarray:
    return scenes.shape_mask(scenes.Obj(shape, "red", cx, cy, size))


def _broken() -> dict[str, np.ndarray]:
    """Deliberately misshapen blobs; the previous evaluator called each a circle, square or
    triangle (everything that was not a square or triangle counted as a circle)."""
    out = {}
    m = _mask("circle"); m[24:, 24:] = False; out["circle missing a quarter"] = m  # noqa: E702
    m = _mask("square"); m[16:22, 16:22] = False; out["square, corner notch"] = m  # noqa: E702
    m = _mask("square"); m[19:29, 19:29] = False; out["hollow square"] = m  # noqa: E702
    m = np.zeros((48, 48), bool); m[16:32, 20:28] = True; out["16 x 8 bar"] = m  # noqa: E702
    m = np.zeros((48, 48), bool); m[16:32, 19:29] = True; out["16 x 10 bar"] = m  # noqa: E702
    out["two merged circles"] = _mask("circle", 12, 18.0) | _mask("circle", 12, 29.0)
    m = _mask("triangle"); m[:21] = False; out["triangle without apex"] = m  # noqa: E702
    m = _mask("triangle"); m[26:, :24] = False; out["half a triangle"] = m  # noqa: E702
    m = _mask("square"); m[16:24, 24:32] = False; out["L shape"] = m  # noqa: E702
    m = _mask("circle"); m[22:26, :] = False; out["circle cut by a gap"] = m  # noqa: E702
    return out


@pytest.mark.parametrize("name", list(_broken()))
def test_misshapen_blobs_are_not_shapes(name):
    mask = _broken()[name]
    assert classify_shape(np.argwhere(mask)) == "blob"


@pytest.mark.parametrize("shape", scenes.SHAPES)
def test_well_formed_shapes_pass_off_grid_at_every_size_from_11_px(shape):
    """The blob test is validated on rendered ground truth: every size from 11 to 20 px (the
    scenes use 12 and 16) at quarter-pixel offsets of the centre, i.e. off the VQ grid too."""
    for size in range(11, 21):
        for dx, dy in ((0, 0), (0.25, 0.5), (0.5, 0.5), (0.75, 0)):
            pts = np.argwhere(_mask(shape, size, 24.0 + dx, 24.0 + dy))
            assert classify_shape(pts) == shape, (size, dx, dy)


def test_a_scene_with_a_misshapen_object_fails_its_spec():
    sc = _first("single_object")
    obj = sc.objects[0]
    img = scenes.render(sc.objects)
    assert check(sc.spec, detect(img))
    box = scenes.shape_mask(obj)
    ys, xs = np.nonzero(box)
    img[ys.min():(ys.min() + ys.max()) // 2 + 1, xs.min():(xs.min() + xs.max()) // 2 + 1] = \
        scenes.BACKGROUND  # a quarter of the shape's box is erased
    dets = detect(img)
    assert [d.shape for d in dets] == ["blob"] and not check(sc.spec, dets)

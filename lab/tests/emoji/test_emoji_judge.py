"""The judge's reading and pass rules, on scenes of known truth."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lab.emoji import judge as J
from lab.emoji import scenes as S


def _found(spec: S.Spec, placed) -> list[J.Found]:
    return [J.Found(p.emoji, 1.0, *p.centre) for p in placed]


def test_objects_are_found_one_per_emoji_at_their_centres(disc_bank):
    rng = np.random.default_rng(2)
    for sc in (S.make_scene(rng, c) for c in S.CATEGORIES for _ in range(10)):
        objs = J.objects_in(S.render(disc_bank, "noto", sc.placed))
        assert len(objs) == len(sc.placed)
        for p in sc.placed:
            assert min(abs(cx - p.centre[0]) + abs(cy - p.centre[1]) for _, cx, cy in objs) <= 1.0
        for crop, _, _ in objs:
            assert crop.shape == (3, J.CROP, J.CROP) and crop.min() >= 0 and crop.max() <= 1


def test_blank_picture_has_no_objects_and_fails_every_prompt():
    blank = np.full((S.CANVAS, S.CANVAS, 3), S.BACKGROUND, dtype=np.uint8)
    assert J.objects_in(blank) == []
    assert not J.prompt_passes(S.Spec("single_object", (0,)), [])


@pytest.mark.parametrize("category", S.CATEGORIES)
def test_truth_passes_and_each_kind_of_error_fails(category):
    rng = np.random.default_rng(4)
    sc = S.make_scene(rng, category)
    truth = _found(sc.spec, sc.placed)
    assert J.prompt_passes(sc.spec, truth)
    other = next(i for i in range(len(S.VOCAB)) if i not in sc.spec.objects)
    assert not J.prompt_passes(sc.spec, [*truth, J.Found(other, 1.0, 0.0, 0.0)])    # extra
    assert not J.prompt_passes(sc.spec, truth[1:])                                  # missing
    assert not J.prompt_passes(sc.spec, [J.Found(other, 1.0, f.cx, f.cy) if k == 0 else f
                                         for k, f in enumerate(truth)])              # wrong one
    assert not J.prompt_passes(sc.spec, [J.Found(-1, 0.2, f.cx, f.cy) if k == 0 else f
                                         for k, f in enumerate(truth)])              # unknown


def test_position_fails_when_the_relation_is_swapped():
    rng = np.random.default_rng(6)
    sc = S.make_scene(rng, "position")
    a, b = _found(sc.spec, sc.placed)
    swapped = [J.Found(a.label, 1.0, b.cx, b.cy), J.Found(b.label, 1.0, a.cx, a.cy)]
    assert J.prompt_passes(sc.spec, [a, b]) and not J.prompt_passes(sc.spec, swapped)


def test_frechet_distance_is_zero_for_one_set_and_grows_with_a_shift():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(400, 8, generator=g)
    b = torch.randn(400, 8, generator=g)
    assert abs(J.frechet_distance(a, a)) < 1e-6
    near, far = J.frechet_distance(a, b), J.frechet_distance(a, b + 2.0)
    assert 0 < near < far and abs(far - near - 8 * 4.0) < 1.0


def test_augmented_crops_keep_size_range_and_label_colour(disc_bank):
    pics = J._rgba(disc_bank.full[0])
    idx = torch.arange(len(pics))
    x = J.augment(pics, idx, torch.Generator().manual_seed(1))
    assert x.shape == (len(pics), 3, J.CROP, J.CROP) and x.min() >= 0 and x.max() <= 1
    centre = x[:, :, J.CROP // 2, J.CROP // 2]
    truth = pics[:, :3, pics.shape[2] // 2, pics.shape[3] // 2]
    assert (centre - truth).abs().amax(1).median() < 0.35


def test_a_briefly_trained_judge_names_distinct_discs(disc_bank):
    torch.set_num_threads(1)
    judge, stats = J.train_judge(disc_bank, steps=150, batch=64, lr=3e-3)
    assert stats["history"][-1]["loss"] < stats["history"][0]["loss"]
    rng = np.random.default_rng(8)
    scenes = [S.make_scene(rng, "single_object") for _ in range(24)]
    right = sum(judge.read(S.render(disc_bank, "openmoji", sc.placed))[0].label == sc.spec.objects[0]
                for sc in scenes)
    assert right >= 18

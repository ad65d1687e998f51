"""Emoji scenes: captions from the truth, the prompt splits' promises, the layout rules."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from lab.emoji import scenes as S
from lab.emoji.vocab import KINDS, VOCAB


def _specs(split: str, n: int = 60, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [S.random_spec(rng, c, split) for c in S.CATEGORIES for _ in range(n)]


@pytest.mark.parametrize("category", S.CATEGORIES)
def test_caption_names_every_object_and_the_relation(category):
    rng = np.random.default_rng(3)
    for _ in range(30):
        sc = S.make_scene(rng, category)
        assert sc.caption == S.caption_for(sc.spec)
        assert [p.emoji for p in sc.placed] == list(sc.spec.objects)
        for i in set(sc.spec.objects):
            assert VOCAB[i].name in sc.caption or VOCAB[i].plural in sc.caption
        if sc.spec.relation:
            assert S.RELATION_WORDS[sc.spec.relation] in sc.caption
        if category == "counting":
            assert sc.caption.split()[0] == S.NUMBERS[len(sc.spec.objects) - 1]
        if category == "colors":
            a, b = (VOCAB[i] for i in sc.spec.objects)
            assert a.kind == b.kind and a.color != b.color


def test_layout_keeps_objects_apart_on_the_grid_and_holds_the_relation():
    rng = np.random.default_rng(5)
    for sc in (S.make_scene(rng, c) for c in S.CATEGORIES for _ in range(40)):
        for p in sc.placed:
            assert p.x % S.CELL == 0 and p.y % S.CELL == 0
            assert 0 <= p.x <= S.CANVAS - S.SIZE and 0 <= p.y <= S.CANVAS - S.SIZE
        for p, q in itertools.combinations(sc.placed, 2):
            assert abs(p.x - q.x) >= S.SIZE + S.GAP or abs(p.y - q.y) >= S.SIZE + S.GAP
        if sc.spec.relation:
            assert S.relation_holds(sc.spec.relation, sc.placed[0].centre, sc.placed[1].centre,
                                    S.RELATION_MIN_PX)


def test_no_training_scene_holds_a_held_out_pair_or_placement():
    for spec in _specs("train", 200):
        if len(set(spec.objects)) == 2:
            assert frozenset(spec.objects) not in S.PAIR_SPLIT
            if spec.relation:
                assert S.placement_key(*spec.objects, spec.relation) not in S.KEY_SPLIT


def test_test_and_validation_pairs_are_disjoint_and_test_has_both_kinds_of_novelty():
    test = [s for s in _specs("test", 200) if len(set(s.objects)) == 2]
    val = [s for s in _specs("validation", 100) if len(set(s.objects)) == 2]
    test_pairs = {frozenset(s.objects) for s in test}
    assert not test_pairs & {frozenset(s.objects) for s in val}
    assert all(S.spec_split(s) == "test" for s in test)
    assert all(S.spec_split(s) == "validation" for s in val)
    unseen_pair = [s for s in test if frozenset(s.objects) in S.PAIR_SPLIT]
    unseen_placement = [s for s in test if frozenset(s.objects) not in S.PAIR_SPLIT]
    assert unseen_pair and unseen_placement
    assert all(s.relation for s in unseen_placement)
    assert {s.category for s in test} == {"two_object", "position", "colors"}


def test_a_placement_is_one_key_however_it_is_worded():
    for a, b in [(0, 5), (7, 2)]:
        assert S.placement_key(a, b, "left of") == S.placement_key(b, a, "right of")
        assert S.placement_key(a, b, "above") == S.placement_key(b, a, "below")
        assert S.placement_key(a, b, "left of") != S.placement_key(a, b, "above")


def test_colour_kinds_cover_the_colour_named_emoji():
    named = {i for i, e in enumerate(VOCAB) if e.color}
    assert named == {i for k in KINDS.values() for i in k}
    assert all(len(k) >= 2 for k in KINDS.values())


def test_render_pastes_each_sprite_where_the_scene_says(disc_bank):
    rng = np.random.default_rng(9)
    for style in disc_bank.styles:
        sc = S.make_scene(rng, "counting")
        img = S.render(disc_bank, style, sc.placed)
        assert img.shape == (S.CANVAS, S.CANVAS, 3)
        drawn = (img != S.BACKGROUND).any(-1)
        inside = np.zeros_like(drawn)
        for p in sc.placed:
            inside[p.y:p.y + S.SIZE, p.x:p.x + S.SIZE] = True
            c = p.y + S.SIZE // 2, p.x + S.SIZE // 2
            sprite = disc_bank.sprites[disc_bank.style_index(style), p.emoji]
            assert (img[c] == sprite[S.SIZE // 2, S.SIZE // 2, :3]).all()
        assert drawn[inside].mean() > 0.5 and not drawn[~inside].any()


def test_dataset_is_deterministic_per_seed(disc_bank):
    a, sa = S.make_dataset(disc_bank, 12, 4)
    b, sb = S.make_dataset(disc_bank, 12, 4)
    c, _ = S.make_dataset(disc_bank, 12, 5)
    assert np.array_equal(a, b) and sa == sb and not np.array_equal(a, c)


def test_unknown_category_or_split_is_refused():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="single_object"):
        S.random_spec(rng, "shapes")
    with pytest.raises(ValueError, match="validation"):
        S.random_spec(rng, "position", "dev")

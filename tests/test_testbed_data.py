"""Scene generator and tokenizer of the DiMOO-nano testbed."""

from __future__ import annotations

import numpy as np
import pytest

from testbed import scenes
from testbed.tokenizer import SPECIAL_TOKENS, build_tokenizer, special_ids, t2i_prompts


def test_dataset_is_deterministic_per_seed():
    a_img, a_sc = scenes.make_dataset(24, seed=3)
    b_img, b_sc = scenes.make_dataset(24, seed=3)
    c_img, _ = scenes.make_dataset(24, seed=4)
    assert np.array_equal(a_img, b_img) and a_sc == b_sc
    assert not np.array_equal(a_img, c_img)


@pytest.mark.parametrize("category", scenes.CATEGORIES)
def test_scene_agrees_with_caption(category):
    rng = np.random.default_rng(11)
    for _ in range(20):
        sc = scenes.make_scene(rng, category)
        spec = sc.spec
        assert sc.caption == scenes.caption_for(spec)
        assert len(sc.objects) == len(spec.objects)
        for obj, (shape, color) in zip(sc.objects, spec.objects, strict=True):
            assert obj.shape == shape and (color is None or obj.color == color)
            assert obj.shape in sc.caption.replace("s ", " ") or obj.shape + "s" in sc.caption
        if spec.relation:
            a, b = sc.objects[:2]
            assert scenes.relation_holds(spec.relation, (a.cx, a.cy), (b.cx, b.cy), 1.0)
        img = scenes.render(sc.objects)
        for obj in sc.objects:  # every object is visible in its own colour, nothing overlaps
            m = scenes.shape_mask(obj)
            assert (img[m] == scenes.COLORS[obj.color]).all() and m.sum() > 30


def test_captions_cover_the_geneval_categories():
    rng = np.random.default_rng(0)
    caps = {c: scenes.caption_for(scenes.random_spec(rng, c)) for c in scenes.CATEGORIES}
    assert caps["counting"].split()[0] in scenes.NUMBERS
    assert any(r in caps["position"] for r in ("left of", "right of", "above", "below"))
    assert " and " in caps["color_attr"] and " and " in caps["two_object"]
    with pytest.raises(ValueError, match="category"):
        scenes.random_spec(rng, "texture")


def test_training_data_never_contains_heldout_combinations():
    _, sc = scenes.make_dataset(600, seed=2)
    assert not any(scenes.is_heldout(s.spec) for s in sc)
    bench = scenes.heldout_specs(60)
    attr = [s for s in bench if s.category == "color_attr"]
    assert attr and all(scenes.is_heldout(s) for s in attr)
    assert scenes.heldout_specs(60) == bench  # seeded


def test_tokenizer_round_trip_and_special_tokens():
    tok = build_tokenizer()
    cond, uncond = t2i_prompts("A red circle to the left of a blue square")
    ids = tok(cond)["input_ids"]
    toks = tok.convert_ids_to_tokens(ids)
    assert toks[0] == "<system>" and toks[-1] == "</user>" and "</system>" in toks
    assert "<unk>" not in toks
    assert tok.decode(ids[12:-1]) == "a red circle to the left of a blue square"
    u = tok(uncond)["input_ids"]
    sp = special_ids(tok)
    assert u[-3:] == [tok.convert_tokens_to_ids("<user>"), sp["uncondition_token_id"],
                      tok.convert_tokens_to_ids("</user>")]
    for text in SPECIAL_TOKENS:  # every DiMOO special is one token
        assert len(tok(text)["input_ids"]) == 1
    assert len(set(sp.values())) == len(sp)


def test_tokenizer_file_loads_with_plain_tokenizers(tmp_path):
    from tokenizers import Tokenizer

    tok = build_tokenizer()
    tok.save_pretrained(str(tmp_path))
    raw = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    cond, _ = t2i_prompts("three squares")
    assert raw.encode(cond, add_special_tokens=False).ids == tok(cond)["input_ids"]
    assert raw.encode("<uncondition>", add_special_tokens=False).ids == [
        special_ids(tok)["uncondition_token_id"]]

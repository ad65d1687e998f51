"""Scene generator and tokenizer of the DiMOO-nano testbed."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lab.nano import scenes
from lab.nano.tokenizer import SPECIAL_TOKENS, build_tokenizer, special_ids, t2i_prompts


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


def test_validation_specs_are_seeded_cycle_categories_and_avoid_heldout_combinations():
    specs = scenes.validation_specs(60)
    assert specs == scenes.validation_specs(60) and specs != scenes.validation_specs(60, seed=9)
    assert [s.category for s in specs[:6]] == list(scenes.CATEGORIES)
    assert not any(scenes.is_heldout(s) for s in specs)
    with pytest.raises(ValueError, match="n must be positive"):
        scenes.validation_specs(0)


def test_cfg_stage_writes_the_best_scale_into_config_json(tmp_path, monkeypatch):
    import json

    import ladr_core
    from lab.nano import tune_cfg
    from ladr_core.dimoo import DiMOOPipeline
    from tests.kit.tiny_checkpoint import write_tiny_checkpoint

    folder = write_tiny_checkpoint(tmp_path / "ckpt")
    scores = {0.0: 0.2, 2.0: 0.7, 4.0: 0.7}  # a tie: the smaller scale wins
    seen = []

    def fake_score(specs, images):
        seen.append(len(images))
        return {"score_overall": scores[current[0]]}

    current = [0.0]
    real_generate = DiMOOPipeline.generate

    def generate(self, *a, cfg, **kw):
        current[0] = cfg
        return real_generate(self, *a, cfg=cfg, width=16, height=16, **kw)

    monkeypatch.setattr(tune_cfg, "score_images", fake_score)
    monkeypatch.setattr(DiMOOPipeline, "generate", generate)
    result = tune_cfg.sweep(folder, prompts=2, steps=2, scales=(0.0, 2.0, 4.0))
    assert result["default_cfg"] == 2.0 and seen == [2] * 6
    monkeypatch.setattr(tune_cfg, "sweep", lambda out, prompts: result)
    tune_cfg.stage_cfg(folder, tmp_path, prompts=2)
    assert json.loads((folder / "config.json").read_text())["default_cfg"] == 2.0
    assert json.loads((tmp_path / "cfg_sweep.json").read_text())["default_cfg"] == 2.0
    assert ladr_core.load_dimoo(folder, dtype=torch.float32).default_cfg == 2.0


@pytest.mark.parametrize("category", scenes.CATEGORIES)
def test_every_caption_reads_back_into_its_spec(category):
    """spec_of_caption inverts caption_for (objects and relation: what the evaluator checks),
    colour-named position captions included; anything else is refused, naming the prompt."""
    rng = np.random.default_rng(5)
    for _ in range(30):
        sc = scenes.make_scene(rng, category)
        named = [scenes.with_colors_named(sc)] if category == "position" else []
        for s in (sc, *named):  # the training data names the colours of position scenes
            back = scenes.spec_of_caption(s.caption)
            assert (back.objects, back.relation) == (s.spec.objects, s.spec.relation)
    assert scenes.spec_of_caption("  A Red circle.") == scenes.spec_of_caption("a red circle")
    with pytest.raises(ValueError, match="'a red apple' is no caption"):
        scenes.spec_of_caption("a red apple")

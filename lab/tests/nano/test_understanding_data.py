"""The questions DiMOO-nano-mmu learns and is scored on, and the sibling it became.

Answers are derived from the scenes' truth (lab.nano.questions); the sibling's vocabulary is the
shipped one plus the understanding words, inserted before the image codes, and at step 0 of the
fine-tune it draws exactly as the shipped nano (lab.nano.train_understanding.widen).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from transformers import PreTrainedTokenizerFast

from lab.nano import questions, scenes
from lab.nano.tokenizer import build_tokenizer, t2i_prompts
from lab.nano.train_transformer import build_ids, image_part
from lab.nano.train_understanding import (
    by_answer,
    mmu_prompt,
    understanding_text,
    understanding_words,
    widen,
)
from ladr_core import load_dimoo, nano_mmu_model_path, nano_model_path
from ladr_core.dimoo.denoise.prompt import ImageLayout
from ladr_core.dimoo.tasks.understanding import answer_row


@pytest.mark.parametrize("kind", questions.KINDS)
def test_every_question_and_answer_is_in_the_vocabulary(kind):
    tok = build_tokenizer(understanding_words())
    shipped = build_tokenizer()
    rng = np.random.default_rng(5)
    for _ in range(30):
        q = questions.ask(scenes.make_scene(rng), kind, rng)
        if q is not None:
            for text in (understanding_text(q.text), q.answer):
                assert tok.unk_token_id not in tok(text)["input_ids"], (q, text)
            assert shipped.unk_token_id in shipped(understanding_text(q.text))["input_ids"]


def test_answers_follow_the_scene():
    red = scenes.Obj("circle", "red", 12.0, 24.0, 12)
    blue = scenes.Obj("square", "blue", 36.0, 24.0, 12)
    objs = (red, blue)
    assert questions.describe(objs) == "a red circle to the left of a blue square"
    assert questions.describe(objs[::-1]) == "a red circle to the left of a blue square"
    rng = np.random.default_rng(0)
    for _ in range(20):
        q = questions.ask(scenes.Scene(scenes.Spec("two_object", ()), "", objs), "position", rng)
        truth = ("left of" in q.text and q.text.index("circle") < q.text.index("square")
                 or "right of" in q.text and q.text.index("square") < q.text.index("circle"))
        assert q.answer == ("yes" if truth else "no"), q
    count = questions.ask(scenes.Scene(scenes.Spec("counting", ()), "", objs), "count", rng)
    assert count.answer == questions.COUNT_WORDS[sum(count.text.count(o.shape) for o in objs)]


def test_caption_scoring_accepts_any_order_and_refuses_wrong_words():
    red = scenes.Obj("circle", "red", 12.0, 24.0, 12)
    blue = scenes.Obj("square", "blue", 36.0, 24.0, 12)
    ok = questions.caption_matches
    assert ok("a blue square and a red circle", (red, blue))
    assert ok("a blue square to the right of a red circle.", (red, blue))
    assert not ok("a blue square to the left of a red circle", (red, blue))
    assert not ok("a green square and a red circle", (red, blue))
    assert not ok("a red circle", (red, blue))
    assert not ok("blue", (red, blue))


def test_the_study_questions_are_test_scenes_never_training_ones():
    items = questions.set_questions("color", 5)
    assert items == questions.set_questions("color", 5)
    test_specs = scenes.quality_test_specs(max(i for i, _, _ in items) + 1)
    for i, scene, q in items:
        assert scene.spec == test_specs[i]
        assert q.answer in scenes.COLORS


def test_widened_model_draws_as_the_shipped_one():
    pipe = load_dimoo(nano_model_path(), dtype=torch.float32)
    shipped = json.loads((nano_model_path() / "config.json").read_text())
    tok = build_tokenizer(understanding_words())
    new = build_ids(tok, pipe.ids.codebook_size)
    assert new.image_offset == len(tok) > pipe.ids.image_offset
    model = widen(pipe.transformer, shipped, pipe.ids, new, torch.Generator().manual_seed(0))
    codes = torch.randint(0, new.codebook_size, (1, 12, 12), generator=torch.Generator().manual_seed(1))
    prompt = tok(t2i_prompts("a red circle")[0])["input_ids"]
    assert prompt == pipe.encode(t2i_prompts("a red circle")[0])
    old_x = torch.tensor([prompt + image_part(codes, pipe.ids)[0].tolist()])
    new_x = torch.tensor([prompt + image_part(codes, new)[0].tolist()])
    with torch.no_grad():
        a = pipe.transformer.project(pipe.transformer.hidden_states(old_x)[0],
                                     slice(pipe.ids.image_offset, None))
        b = model.project(model.hidden_states(new_x)[0], slice(new.image_offset, None))
    torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_training_rows_are_the_pipelines_understanding_rows():
    tok = build_tokenizer(understanding_words())
    ids = build_ids(tok, 256)
    codes = torch.arange(144).view(12, 12)
    encode = lambda text: tok(text)["input_ids"]  # noqa: E731
    q = "what color is the circle?"
    row, start = answer_row(encode, ids, q, codes.reshape(-1), ImageLayout(12, 12), 16)
    ours = mmu_prompt(encode(understanding_text(q)), codes, ids)
    assert row[:start - 1] == ours and row[start - 1] == ids.boa


@pytest.mark.skipif(not (nano_mmu_model_path() / "model.safetensors").is_file(),
                    reason="the sibling checkpoint is not in this checkout")
def test_the_sibling_keeps_the_shipped_ids_and_can_understand():
    cfg = json.loads((nano_mmu_model_path() / "config.json").read_text())
    shipped = PreTrainedTokenizerFast(tokenizer_file=str(nano_model_path() / "tokenizer.json"))
    sibling = PreTrainedTokenizerFast(tokenizer_file=str(nano_mmu_model_path() / "tokenizer.json"))
    assert cfg["ladr_can_understand"] is True
    assert cfg["image_token_offset"] == len(sibling) == cfg["vocab_size"] - cfg["codebook_size"]
    assert shipped.get_vocab().items() <= sibling.get_vocab().items()
    pipe = load_dimoo(nano_mmu_model_path(), dtype=torch.float32)
    assert pipe.can_understand and not pipe.can_edit


def test_balanced_answer_rows_group_each_kinds_examples_by_answer():
    """`--balance` draws a kind's answer uniformly, then one of its examples: every example
    is in exactly one group and a group holds one answer."""
    pool = [(0, [1], [7]), (1, [2], [8, 9]), (2, [3], [7]), (3, [4], [7])]
    groups = by_answer(pool)
    assert sorted(i for g in groups for i in g) == list(range(len(pool)))
    assert [{tuple(pool[i][2]) for i in g} for g in groups] == [{(7,)}, {(8, 9)}]

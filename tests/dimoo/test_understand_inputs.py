"""Bad input to ``pipe.understand``: one InputError naming the input and the fix, raised before
any weight is touched; the sizes an answer reads its image at."""

from __future__ import annotations

import pytest
import torch

from ladr_core import InputError
from ladr_core.assets import nano_model_path
from ladr_core.dimoo import DIMOO_ROPE_CONTEXT, DiMOOPipeline, load_dimoo
from ladr_core.dimoo.model.config import DiMOOIds
from ladr_core.dimoo.tasks.understanding import plan_understanding, understanding_text
from ladr_core.dimoo.understand import UNDERSTAND_CONTEXT, understand_context
from tests.kit.tiny_checkpoint import tiny_vocab

IMAGE = torch.rand(1, 32, 32, 3, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"image": None}, r"^image is missing: a question needs an image; give the image"),
    ({"question": ""}, r"^question is empty; ask something"),
    ({"question": ["red", "  "]}, r"^question is empty"),
    ({"question": []}, r"^question is list; give a string or a non-empty list"),
    ({"question": 3}, r"^question is int"),
    ({"max_answer": 20, "block_length": 8}, r"^max_answer=20 is not a multiple of "
                                            r"block_length \(8\); nearest valid max_answer: "
                                            r"16 or 24"),
    ({"max_answer": 4, "block_length": 8}, r"^max_answer=4 is not a multiple.*: 8$"),
    ({"max_answer": 0}, r"^max_answer must be a positive int \(got 0\)"),
    ({"max_answer": True}, r"^max_answer must be a positive int"),
    ({"max_answer": 32, "block_length": 8, "steps": 6}, r"^steps=6 is not a multiple of the "
                                                        r"number of blocks.*: 4 or 8"),
    ({"rule": "fastest"}, r"^rule is 'fastest', not an answer rule; use one of official"),
    ({"temperature": -1.0}, r"^temperature must be a finite number >= 0"),
    ({"size": "huge"}, r"^size is 'huge'; use one of official, as is"),
    ({"image": torch.rand(1, 30, 32, 3), "size": "as is"},
     r"^image height is 30 px, not a multiple of 4 px.*use size='official'"),
    ({"image": torch.rand(1, 64, 64, 3), "size": "as is"},
     r"^image is 64 x 64 px, which needs \d+ tokens \(question and answer \d+ \+ image \d+\) "
     r"but the model's context \(max_sequence_length\) is 256; resize it to at most \d+ x \d+ "
     r"px \(same aspect ratio\), or ask for a shorter max_answer$"),
    ({"image": torch.rand(1, 32, 32, 4)}, r"^image has 4 channels"),
    ({"image": torch.rand(3, 32, 32, 3), "question": ["a", "b"]},
     r"^question has 2 questions for 3 images; give one question, or one per image"),
])
def test_bad_input_is_one_error_on_that_input(pipe: DiMOOPipeline, kwargs: dict,
                                              message: str) -> None:
    args = {"image": IMAGE, "question": "red", "max_answer": 32, "block_length": 8, **kwargs}
    with pytest.raises(InputError, match=message):
        pipe.prepare_understand(**args)


def test_a_checkpoint_that_cannot_understand_says_why() -> None:
    nano = load_dimoo(nano_model_path(), device="cpu", dtype=torch.float32)
    assert nano.can_edit is False and nano.can_understand is False
    with pytest.raises(InputError, match=r"^model cannot answer questions about images \(its "
                                         r"config.json says ladr_can_understand: false"):
        nano.understand(IMAGE, "what colour is the circle?")


def test_a_checkpoint_without_the_key_can_understand(pipe: DiMOOPipeline) -> None:
    assert pipe.can_understand is True
    assert pipe.answer_end_id is None  # the tiny vocabulary holds no token 126081


def test_official_size_crops_to_the_area_bucket(pipe: DiMOOPipeline) -> None:
    """"official": the crop size of ``default_size`` px in area (multiples of 2 x the VQ
    factor) closest to the image's shape; an image already there is kept."""
    wide = torch.rand(1, 20, 60, 3)
    job = pipe.prepare_understand(wide, "red", max_answer=16, block_length=8)
    h, w = job.images.shape[1:3]
    step = 2 * pipe.vq_factor
    assert h % step == 0 and w % step == 0 and w > h
    assert h * w <= pipe.default_size ** 2 and "image 60x20 ->" in job.note
    same = pipe.prepare_understand(job.images, "red", max_answer=16, block_length=8)
    assert torch.equal(same.images, job.images) and same.note == ""


def test_no_answer_length_takes_what_the_context_holds(pipe: DiMOOPipeline) -> None:
    """max_answer None: the official 1024 tokens, or the most whole blocks that fit."""
    job = pipe.prepare_understand(IMAGE, "red", block_length=8)
    row = len(pipe.encode(understanding_text("red"))) + job.layout.length + job.shape.length
    assert row <= pipe.context_length < row + 8 and job.shape.length % 8 == 0
    assert f"answer of {job.shape.length} tokens" in job.note
    assert job.shape.steps == job.shape.blocks  # one step per 8 tokens of a block
    res = pipe.understand(IMAGE, "red", block_length=8, size="as is")
    assert res.tokens[0].numel() <= job.shape.length and res.nfe[0] <= job.shape.steps


def test_the_official_default_fits_the_official_checkpoint() -> None:
    """1,024 answer tokens about a 1024 x 1024 px image (the official defaults) fit the context
    the official checkpoint gets for understanding, not the 5,120 it once had."""
    ids = DiMOOIds()
    context = understand_context(DIMOO_ROPE_CONTEXT, ids)
    assert context >= max(DIMOO_ROPE_CONTEXT, UNDERSTAND_CONTEXT)
    assert understand_context(256, tiny_vocab()[1]) == 256

    def encode(text: str) -> list[int]:  # about one token per word, as a BPE would give more
        return [0] * (2 * len(text.split()))

    image = torch.rand(1, 1024, 1024, 3)
    job = plan_understanding(encode, 16, context, 1024, image, "Describe this image.")
    assert (job.shape.length, job.shape.block_length, job.shape.steps) == (1024, 256, 128)
    assert (job.layout.h, job.layout.w) == (64, 64) and job.note == ""
    with pytest.raises(InputError, match="^image is 1024 x 1024 px, which needs"):
        plan_understanding(encode, 16, 5120, 1024, image, "Describe this image.",
                           max_answer=1024)

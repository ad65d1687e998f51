"""Answers about images on the tiny official-layout checkpoint (float32, CPU).

Parity: ``pipe.understand``'s answer tokens and forwards equal a transcription of the official
understanding path (tests/support/official_mmu.py) at temperature 0 and 1 with the same
generator, with and without the official stop; a list of questions or images gives each item
its own single answer; the callback sees every pass and can stop the run.
"""

from __future__ import annotations

import copy

import pytest
import torch
from support.official_mmu import official_answer, official_sequence

from ladr_core.dimoo import ANSWER_RECORD_KEYS, DiMOOPipeline
from ladr_core.dimoo.runs import item_generator
from ladr_core.dimoo.tasks.understanding import answer_row

QUESTION = "a red circle left of the square"
LENGTH, BLOCK = 32, 8


def _image(seed: int, side: int = 32) -> torch.Tensor:
    return torch.rand(1, side, side, 3, generator=torch.Generator().manual_seed(seed))


def _official(pipe: DiMOOPipeline, image: torch.Tensor, question: str, steps: int,
              temperature: float, seed: int, end_id: int | None = None
              ) -> tuple[torch.Tensor, int]:
    """The official answer tokens (the blocks it ran) and its forwards."""
    codes = pipe.encode_image(image)[0]
    h, w = image.shape[1] // pipe.vq_factor, image.shape[2] // pipe.vq_factor
    prompt, start = official_sequence(pipe.encode, pipe.ids, question, codes, h, w, LENGTH)
    x, nfe = official_answer(pipe.transformer, prompt, steps, LENGTH, BLOCK, temperature,
                             pipe.ids.mask, start, end_id, item_generator(seed, pipe.device))
    end = min(x.shape[1], start + LENGTH)
    return x[0, start:end], nfe


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("steps", [8, 12, 32])  # 2, 3 (counts 3, 3, 2) and 8 steps per block
def test_answer_equals_the_official_loop(pipe: DiMOOPipeline, temperature: float,
                                         steps: int) -> None:
    image = _image(1)
    ref, nfe = _official(pipe, image, QUESTION, steps, temperature, 7)
    res = pipe.understand(image, QUESTION, max_answer=LENGTH, block_length=BLOCK, steps=steps,
                          temperature=temperature, seed=7, size="as is")
    assert torch.equal(res.tokens[0], ref)
    assert res.nfe == [nfe] == [steps] and res.steps == steps and res.rule == "official"


def test_the_prompt_row_is_the_official_sequence(pipe: DiMOOPipeline) -> None:
    image = _image(2)
    codes = pipe.encode_image(image)[0]
    grid = pipe.prepare_understand(image, QUESTION, LENGTH, BLOCK, size="as is").layout
    ref, start = official_sequence(pipe.encode, pipe.ids, QUESTION, codes, grid.h, grid.w,
                                   LENGTH)
    row, at = answer_row(pipe.encode, pipe.ids, QUESTION, codes, grid, LENGTH)
    assert row == ref[0].tolist() and at == start


def _ends_in_block(pipe: DiMOOPipeline, temperature: float) -> tuple[int, int]:
    """(a token the official answer first decodes in a middle block, that block): an end id
    that makes the official stop fire there, found from the answer itself."""
    tokens, _ = _official(pipe, _image(1), QUESTION, 8, temperature, 7)
    blocks = tokens.view(-1, BLOCK).tolist()
    for b in range(1, len(blocks) - 1):
        fresh = set(blocks[b]) - {t for blk in blocks[:b] for t in blk}
        if fresh:
            return min(fresh), b
    pytest.skip("no token first appears in a middle block of this answer")


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_the_official_stop_ends_after_the_block_holding_the_end(pipe: DiMOOPipeline,
                                                                temperature: float) -> None:
    end, block = _ends_in_block(pipe, temperature)
    ref, nfe = _official(pipe, _image(1), QUESTION, 8, temperature, 7, end_id=end)
    stopping = copy.copy(pipe)
    stopping.answer_end_id = end
    res = stopping.understand(_image(1), QUESTION, max_answer=LENGTH, block_length=BLOCK,
                              steps=8, temperature=temperature, seed=7, size="as is")
    assert torch.equal(res.tokens[0], ref) and ref.numel() == (block + 1) * BLOCK
    assert res.nfe == [nfe] == [(block + 1) * 2]
    cut = res.tokens[0].tolist()
    assert res.text[0] == stopping.decode_text(cut[:cut.index(end)]).strip()


def test_many_questions_about_one_image_are_their_single_answers(pipe: DiMOOPipeline) -> None:
    image = _image(3)
    questions = ["red", QUESTION, "the blue square on the right of a green circle"]
    res = pipe.understand(image, questions, max_answer=LENGTH, block_length=BLOCK,
                          temperature=1.0, seed=11, size="as is")
    assert res.questions == questions and len(res.text) == 3
    for i, q in enumerate(questions):
        one = pipe.understand(image, q, max_answer=LENGTH, block_length=BLOCK,
                              temperature=1.0, seed=11 + i, size="as is")
        assert torch.equal(res.tokens[i], one.tokens[0]) and res.text[i] == one.text[0]
        assert res.nfe[i] == one.nfe[0]


def test_one_question_per_image_and_one_for_all(pipe: DiMOOPipeline) -> None:
    images = torch.cat([_image(4), _image(5)])
    both = pipe.understand(images, QUESTION, max_answer=LENGTH, block_length=BLOCK, seed=3,
                           size="as is")
    pairs = pipe.understand(images, [QUESTION, "red"], max_answer=LENGTH, block_length=BLOCK,
                            seed=3, size="as is")
    for i in range(2):
        one = pipe.understand(images[i:i + 1], QUESTION if i == 0 else "red",
                              max_answer=LENGTH, block_length=BLOCK, seed=3 + i, size="as is")
        assert torch.equal(pairs.tokens[i], one.tokens[0])
    assert torch.equal(both.tokens[0], pairs.tokens[0])
    assert both.questions == [QUESTION, QUESTION]


def test_the_callback_sees_every_pass(pipe: DiMOOPipeline) -> None:
    records: list[dict] = []
    res = pipe.understand(_image(1), [QUESTION, "red"], max_answer=LENGTH, block_length=BLOCK,
                          rule="threshold", callback=records.append, size="as is")
    assert len(records) == res.passes == max(res.nfe)
    assert all(tuple(r) == ANSWER_RECORD_KEYS for r in records)
    progress = [r["progress"] for r in records]
    assert progress == sorted(progress) and progress[-1] == 1.0
    assert [r["step"] for r in records] == list(range(res.passes))
    assert records[-1]["done"] == records[-1]["batch"] == 2


class Stop(BaseException):
    """Like ComfyUI's InterruptProcessingException: a BaseException."""


def test_an_exception_in_the_callback_stops_the_run(pipe: DiMOOPipeline) -> None:
    seen: list[int] = []

    def interrupt(record: dict) -> None:
        seen.append(record["step"])
        if record["step"] == 1:
            raise Stop

    with pytest.raises(Stop):
        pipe.understand(_image(1), QUESTION, max_answer=LENGTH, block_length=BLOCK,
                        callback=interrupt, size="as is")
    assert seen == [0, 1]
    again = pipe.understand(_image(1), QUESTION, max_answer=LENGTH, block_length=BLOCK,
                            size="as is")
    assert again.nfe == [again.steps]


@pytest.mark.parametrize("rule", ["official", "threshold+stop"])
def test_a_rolling_batch_gives_every_answer_as_alone(pipe: DiMOOPipeline, rule: str) -> None:
    """max_batch answers in flight, the rest join as answers finish: each answer equals its
    single run; no pass holds more than max_batch items, so the run takes more passes than
    its longest answer."""
    images = torch.cat([_image(20 + i) for i in range(5)])
    kw = dict(max_answer=LENGTH, block_length=BLOCK, temperature=1.0, rule=rule, size="as is")
    records: list[dict] = []
    res = pipe.understand(images, QUESTION, seed=9, max_batch=2, callback=records.append, **kw)
    assert max(len(r["items"]) for r in records) == 2 and records[-1]["done"] == 5
    assert res.passes > max(res.nfe)
    for i in range(5):
        one = pipe.understand(images[i:i + 1], QUESTION, seed=9 + i, **kw)
        assert torch.equal(res.tokens[i], one.tokens[0]) and res.nfe[i] == one.nfe[0]


def test_answers_in_flight_is_refused_below_one(pipe: DiMOOPipeline) -> None:
    from ladr_core import InputError

    with pytest.raises(InputError, match="max_batch"):
        pipe.understand(_image(1), QUESTION, max_answer=LENGTH, block_length=BLOCK,
                        size="as is", max_batch=0)

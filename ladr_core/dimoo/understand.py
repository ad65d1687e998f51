"""``DiMOOPipeline.understand``: questions about images, answered the official way. A request
is checked once (``understand_job``: the prompt, sizes and checks of tasks/understanding.py, in
the context ``understand_context`` allows) and answered (``answer``: the decoding loop of
tasks/answering.py, the answer rules by name of tasks/answer_rules.py, item i's noise from
``item_generator(seed + i)``); the end-of-answer token a checkpoint names, and the memory of
answering (how many answers run at once, what a host keeps free).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..errors import InputError
from .model.config import DIMOO_ROPE_CONTEXT, DiMOOIds, has_official_ids
from .model.memory import answer_memory, answers_in_flight, head_memory
from .runs import CPU_IN_FLIGHT, GPU_IN_FLIGHT, check_seed, item_generator
from .tasks.answer_rules import AnswerRule
from .tasks.answering import SAMPLE_CHUNK
from .tasks.understanding import (
    END_TOKEN_ID,
    AnswerResult,
    UnderstandJob,
    plan_understanding,
    run_understanding,
)

__all__ = ["UNDERSTAND_CONTEXT", "answer", "answer_end_id", "answering_bytes", "answers_at_once",
           "understand_context", "understand_job", "understand_memory"]

UNDERSTAND_CONTEXT = 6144
"""The longest understanding row of the official checkpoint: its default, 1,024 answer tokens
about an image of 1024 x 1024 px (64 rows of 65 tokens), is about 5,250 tokens with the
question; the official code runs it (RoPE is computed for any length). 6,144 admits questions of
about 900 tokens; the image tasks' DIMOO_ROPE_CONTEXT (8,192) already covers it."""


def understand_context(context_length: int, ids: DiMOOIds) -> int:
    """The context an understanding row may fill: UNDERSTAND_CONTEXT for a RoPE model with the
    official ids whose context the image tasks raised to DIMOO_ROPE_CONTEXT, else the same."""
    return max(context_length, UNDERSTAND_CONTEXT) if has_official_ids(ids) and \
        context_length >= DIMOO_ROPE_CONTEXT else context_length


def answer_end_id(raw_config: dict, vocab_size: int) -> int | None:
    """The end-of-answer token: config.json ``eos_token_id``, else the official 126081; None
    (no stop) when it is not a token of this vocabulary."""
    value = raw_config.get("eos_token_id", END_TOKEN_ID)
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value < vocab_size
    return value if ok else None


def answering_bytes(config: object, transformer: object, job: UnderstandJob, rows: int,
                    encode: Callable[[str], list[int]], dtype: torch.dtype) -> int:
    """Device memory beyond the weights of answering ``job`` with ``rows`` answers in one pass
    (model/memory.py ``answer_memory``: the whole answer as the last window)."""
    return answer_memory(config, rows, job.row_length(encode), job.shape.length,
                         noise=job.temperature > 0, entropy=job.rule.needs_entropy,
                         chunk=SAMPLE_CHUNK, dtype=dtype, head=head_memory(transformer, dtype))


def answers_at_once(job: UnderstandJob, device: torch.device, free_bytes: int | None,
                    bytes_of: Callable[[int], int]) -> int:
    """Answers of ``job`` in one pass when the caller does not say, as
    ``runs.images_in_flight`` chooses images, with ``bytes_of(answers)`` per pass."""
    items = len(job.questions)
    if device.type != "cuda":
        return max(1, min(items, CPU_IN_FLIGHT))
    if free_bytes is None:
        free_bytes = torch.cuda.mem_get_info(device)[0]
    return answers_in_flight(min(items, GPU_IN_FLIGHT), int(0.8 * free_bytes), bytes_of)


def understand_memory(job: UnderstandJob, answers: int | None, bytes_of: Callable[[int], int],
                      decode_bytes: Callable[[int, int], int]) -> int:
    """Device memory beyond the weights of answering ``job`` with ``answers`` in flight (None:
    all of them; ``bytes_of(answers)``), or encoding one of its images (one image's decode
    bounds it, ``decode_bytes(width, height)``) beside two float copies of one image (scaled to
    [-1, 1], moved), the larger: what a host keeps free when loading the weights."""
    rows = len(job.questions) if answers is None else max(1, min(answers, len(job.questions)))
    height, width = int(job.images.shape[1]), int(job.images.shape[2])
    return max(bytes_of(rows), decode_bytes(width, height) + 2 * height * width * 3 * 4)


def understand_job(can_understand: bool, encode: Callable[[str], list[int]], vq_factor: int,
                   context_length: int, ids: DiMOOIds, default_size: int, image: Any,
                   question: str | list[str], max_answer: int | None = None,
                   block_length: int | None = None, steps: int | None = None,
                   rule: str | AnswerRule = "official", temperature: float = 0.0,
                   size: str = "official") -> UnderstandJob:
    """A checked understanding request (tasks/understanding.py), before any weight is touched.
    ``question``: one image and many questions, one question and many images, or one per
    image. ``max_answer`` (None: 1024, or the whole blocks the context holds), ``block_length``
    (None: min(256, max_answer)) and ``steps`` (None: one per 8 tokens) divide as the official
    code asserts."""
    if not can_understand:
        raise InputError("model", "cannot answer questions about images (its config.json says "
                         "ladr_can_understand: false: it was trained for text to image only)",
                         "load the Lumina-DiMOO checkpoint, or a checkpoint trained to answer")
    return plan_understanding(encode, vq_factor, understand_context(context_length, ids),
                              default_size, image, question, max_answer, block_length, steps,
                              rule, temperature, size)


def answer(job: UnderstandJob, seed: int, callback: Callable[[dict[str, Any]], None] | None,
           max_batch: int | None, at_once: Callable[[], int], transformer: Any,
           encode: Callable[[str], list[int]], decode_text: Callable[[list[int]], str],
           encode_image: Callable[[torch.Tensor], torch.Tensor], ids: DiMOOIds,
           end_id: int | None) -> AnswerResult:
    """Answer a checked request: item i's noise from ``item_generator(seed + i)``,
    ``max_batch`` answers in flight (None: ``at_once()``), ``callback(record)`` after every
    forward pass (answering.ANSWER_RECORD_KEYS; an exception it raises, a host's interrupt,
    stops the run)."""
    check_seed(seed, len(job.questions))
    if max_batch is None:
        max_batch = at_once()
    if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
        raise InputError("max_batch", f"is {max_batch!r}", "give answers in flight >= 1, "
                         "or None to choose from the device's free memory")
    device = transformer.compute_device()
    generators = [item_generator(seed + i, device) for i in range(len(job.questions))]
    return run_understanding(transformer, encode, decode_text, encode_image, ids, job,
                             generators, end_id, callback, in_flight=max_batch)

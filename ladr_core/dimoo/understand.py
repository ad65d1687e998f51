"""``DiMOOPipeline.understand``: questions about images, answered the official way (a mixin of
the pipeline; the prompt, sizes and checks: tasks/understanding.py; the decoding loop:
tasks/answering.py; the answer rules by name: tasks/answer_rules.py).

Uses the pipeline's ``transformer``, ``tokenizer``, ``ids``, ``vq_factor``, ``default_size``,
``context_length``, ``can_understand``, ``answer_end_id``, ``encode`` and ``encode_image``.
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

__all__ = ["PipelineUnderstanding", "UNDERSTAND_CONTEXT", "answer_end_id", "understand_context"]

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


class PipelineUnderstanding:
    """Understanding entry points of DiMOOPipeline (module docstring)."""

    transformer: Any
    config: Any
    tokenizer: Any
    ids: Any
    vq_factor: int
    default_size: int
    context_length: int
    can_understand: bool
    answer_end_id: int | None
    encode: Callable[[str], list[int]]
    encode_image: Callable[..., Any]
    decode_bytes: Callable[[int, int], int]
    _compute_dtype: Callable[[], torch.dtype]

    def prepare_understand(self, image: Any, question: str | list[str],
                           max_answer: int | None = None, block_length: int | None = None,
                           steps: int | None = None, rule: str | AnswerRule = "official",
                           temperature: float = 0.0, size: str = "official") -> UnderstandJob:
        """A checked understanding request (tasks/understanding.py), before any weight is
        touched; InputError naming the input and the fix. ``image`` float [B, H, W, 3] in [0, 1]
        (a ComfyUI IMAGE); ``question`` a string or a list: one image and many questions, one
        question and many images, or one question per image. ``max_answer`` (None: the official
        1024 tokens, or the most whole blocks the context holds), ``block_length`` (None:
        min(256, max_answer)) and ``steps`` (None: one per 8 tokens, the official 128 for
        1024) must divide as the official code asserts. ``size`` "official" (the official
        crop of ``default_size`` px in area) or "as is"."""
        if not self.can_understand:
            raise InputError("model", "cannot answer questions about images (its config.json "
                             "says ladr_can_understand: false: it was trained for text to "
                             "image only)", "load the Lumina-DiMOO checkpoint, or a checkpoint "
                             "trained to answer")
        context = understand_context(self.context_length, self.ids)
        return plan_understanding(self.encode, self.vq_factor, context, self.default_size,
                                  image, question, max_answer, block_length, steps, rule,
                                  temperature, size)

    def understand(self, image: Any, question: str | list[str], max_answer: int | None = None,
                   block_length: int | None = None, steps: int | None = None,
                   rule: str | AnswerRule = "official", temperature: float = 0.0, seed: int = 0,
                   size: str = "official",
                   callback: Callable[[dict[str, Any]], None] | None = None,
                   max_batch: int | None = None) -> AnswerResult:
        """Answer ``question`` about ``image`` (the official understanding path; arguments:
        ``prepare_understand``). ``rule``: the decoding order by name (``official``,
        ``threshold``, ``entropy``, each with ``+stop``: tasks/answer_rules.py) or an AnswerRule
        object. ``temperature`` 0 (official) is greedy; item i's noise comes from
        ``item_generator(seed + i)``. ``callback(record)`` after every forward pass
        (answering.ANSWER_RECORD_KEYS); an exception it raises (a host's interrupt) stops the
        run. ``max_batch``: answers in flight at once (None: ``answers_in_flight``); the rest
        roll in as answers finish, each the same as alone. Returns an AnswerResult: ``text``,
        ``tokens``, ``nfe`` per answer, ``seconds``."""
        job = self.prepare_understand(image, question, max_answer, block_length, steps, rule,
                                      temperature, size)
        return self.run_understand(job, seed, callback, max_batch)

    def run_understand(self, job: UnderstandJob, seed: int = 0,
                       callback: Callable[[dict[str, Any]], None] | None = None,
                       max_batch: int | None = None) -> AnswerResult:
        """Answer a request ``prepare_understand`` checked (``understand``'s ``seed``,
        ``callback`` and ``max_batch``): a host checks first, asks for
        ``understand_memory(job, 1)``, then runs it with ``answers_in_flight(job, free)``."""
        check_seed(seed, len(job.questions))
        if max_batch is None:
            max_batch = self.answers_in_flight(job)
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise InputError("max_batch", f"is {max_batch!r}", "give answers in flight >= 1, "
                             "or None to choose from the device's free memory")
        device = self.transformer.compute_device()
        generators = [item_generator(seed + i, device) for i in range(len(job.questions))]
        return run_understanding(self.transformer, self.encode, self.decode_text,
                                 self.encode_image, self.ids, job, generators,
                                 self.answer_end_id, callback, in_flight=max_batch)

    def answers_in_flight(self, job: UnderstandJob, free_bytes: int | None = None) -> int:
        """Answers of ``job`` in one pass when the caller does not say (the answers are the
        same in float32 on a CPU, nearly always on a GPU, where the number follows free memory:
        docs/ARCHITECTURE.md section 3): on a CPU, CPU_IN_FLIGHT; on a GPU the most whose answering
        (``answer_memory``) fits 80 % of ``free_bytes`` (the host's count of free memory after
        loading; None = CUDA's), at most GPU_IN_FLIGHT. Never more than the job's answers."""
        items = len(job.questions)
        device = self.transformer.compute_device()
        if device.type != "cuda":
            return max(1, min(items, CPU_IN_FLIGHT))
        if free_bytes is None:
            free_bytes = torch.cuda.mem_get_info(device)[0]
        return answers_in_flight(min(items, GPU_IN_FLIGHT), int(0.8 * free_bytes),
                                 lambda k: self.answering_bytes(job, k))

    def understand_memory(self, job: UnderstandJob, answers: int | None = None) -> int:
        """Device memory beyond the weights of answering ``job`` with ``answers`` in flight
        (None: all of them; model/memory.py ``answer_memory``: those items in one pass, the
        whole answer as the last window), or encoding one of its images (one image's decode
        bounds it) beside two float copies of one image (scaled to [-1, 1], moved), the larger:
        what a host keeps free when loading the weights."""
        rows = len(job.questions) if answers is None else max(1, min(answers, len(job.questions)))
        height, width = int(job.images.shape[1]), int(job.images.shape[2])
        image = 2 * height * width * 3 * 4
        return max(self.answering_bytes(job, rows), self.decode_bytes(width, height) + image)

    def answering_bytes(self, job: UnderstandJob, rows: int) -> int:
        """Device memory of one pass of the answer loop over ``job`` with ``rows`` answers in
        flight: model/memory.py ``answer_memory`` at this model's config, dtype and head."""
        dtype = self._compute_dtype()
        return answer_memory(self.config, rows, job.row_length(self.encode), job.shape.length,
                             noise=job.temperature > 0, entropy=job.rule.needs_entropy,
                             chunk=SAMPLE_CHUNK, dtype=dtype,
                             head=head_memory(self.transformer, dtype))

    def decode_text(self, tokens: list[int]) -> str:
        """Token ids -> text, special tokens dropped (official ``batch_decode(...,
        skip_special_tokens=True)``)."""
        return self.tokenizer.decode(list(tokens), skip_special_tokens=True)

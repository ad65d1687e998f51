"""Lumina-DiMOO understanding: the official prompt, the image's place in it, the checked request
and its run (``DiMOOPipeline.understand``; the decoding loop: answering.py).

Official behaviour (``utils/prompt_utils.generate_multimodal_understanding_prompt``,
``inference/inference_mmu.py``): the text ``<system>{UNDERSTAND_SYSTEM}</system><user>
{question}</user>``, tokenized; the image center-cropped to the crop size of about 1024 x 1024
px in area (multiples of 32 px, aspect ratio at most 4) closest to its shape
(``generate_crop_size_list``, ``var_center_crop``), VQ-encoded and laid out as ``[BOI] + h rows
of (w codes + NEWLINE) + [EOI]``, inserted before the text's LAST token (as in editing); then
``[BOA] + gen_length MASK + [EOA]``, the answer starting at the first MASK.
``inference_mmu.py`` passes the laid-out image through ``add_break_line`` a second time (keeping
its first h*w tokens with a NEWLINE after every w, cutting the image's end and EOI); the
official training item processor and VLMEvalKit wrapper (whose benchmark figures the report
quotes) lay it out once, and so do we.

Sizes: ``size="official"`` crops every image to the crop size of ``default_size`` px in area
(1024 on the official checkpoint; multiples of twice the VQ factor) closest to its shape;
``"as is"`` keeps an image on the token grid. The longest row must fit the model's context; an
image too large is refused with the largest size that fits.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ...devices import synchronize
from ...errors import InputError
from ..denoise.prompt import Encode, ImageLayout, check_image_size
from ..model.config import DiMOOIds
from ..model.transformer import LLaDAModel
from .answer_rules import AnswerRule, resolve_answer_rule
from .answering import AnswerShape, decode_answers
from .edit_size import buckets, official_edit_size
from .editing import image_part
from .pictures import check_image

__all__ = ["UNDERSTAND_SYSTEM", "ANSWER_SIZES", "END_TOKEN_ID", "AnswerResult", "UnderstandJob",
           "understanding_text", "answer_row", "plan_understanding", "run_understanding"]

UNDERSTAND_SYSTEM = ("You are a multimodal model that can process both text and images. Answer "
                     "the following question based on the provided images. Analyze each image "
                     "and combine relevant details to answer.")
ANSWER_SIZES = ("official", "as is")
DEFAULT_LENGTH = 1024  # official gen_length
DEFAULT_BLOCK = 256  # official block_length
TOKENS_PER_STEP = 8  # official 1024 tokens in 128 steps
END_TOKEN_ID = 126081  # the official early stop's literal (config.json eos_token_id)


def understanding_text(question: str) -> str:
    """The official understanding prompt of ``question`` (before the image goes in)."""
    return f"<system>{UNDERSTAND_SYSTEM}</system><user>{question}</user>"


def prompt_length(encode: Encode, questions: Sequence[str]) -> int:
    """Tokens of the longest question's official prompt (the row's text, before the image)."""
    return max(len(encode(understanding_text(q))) for q in set(questions))


def answer_row(encode: Encode, ids: DiMOOIds, question: str, codes: torch.Tensor,
               layout: ImageLayout, length: int) -> tuple[list[int], int]:
    """(tokens, answer start) of one item: text[:-1] + image + text[-1:] + BOA + ``length``
    MASK + EOA; ``codes`` [h*w] the image's VQ codes."""
    text = encode(understanding_text(question))
    row = text[:-1] + image_part(codes, layout, ids) + text[-1:]
    return row + [ids.boa] + [ids.mask] * length + [ids.eoa], len(row) + 1


@dataclass(frozen=True)
class UnderstandJob:
    """A checked request: item i asks ``questions[i]`` about ``images[image_of[i]]`` (sized,
    float [I, H, W, 3]); its answer has ``shape``, decoded by ``rule``."""

    questions: list[str]
    images: torch.Tensor
    image_of: list[int]
    layout: ImageLayout
    shape: AnswerShape
    rule: AnswerRule
    temperature: float
    note: str = ""

    def row_length(self, encode: Encode) -> int:
        """Tokens of the longest item's row (answer_row): its prompt, the image part and the
        answer with BOA and EOA."""
        return prompt_length(encode, self.questions) + self.layout.length + self.shape.length


@dataclass
class AnswerResult:
    """Per item i: ``text[i]`` (special tokens dropped, cut at the end-of-answer token),
    ``tokens[i]`` (CPU, the blocks it decoded), ``nfe[i]`` its forward passes, ``questions[i]``;
    ``passes``: packed passes (items share them); ``steps``: a full answer's official steps."""

    text: list[str]
    tokens: list[torch.Tensor]
    nfe: list[int]
    seconds: float
    passes: int
    steps: int
    rule: str
    questions: list[str]
    note: str = ""


def check_question(question: object) -> list[str]:
    """A question or a non-empty list of them, none empty. InputError on ``question``."""
    questions = [question] if isinstance(question, str) else question
    if not isinstance(questions, (list, tuple)) or not questions or not all(
            isinstance(q, str) for q in questions):
        raise InputError("question", f"is {type(question).__name__}",
                         "give a string or a non-empty list of strings")
    if any(not q.strip() for q in questions):
        raise InputError("question", "is empty", "ask something, e.g. 'Describe this image.'")
    return list(questions)


def pair_items(images: int, questions: list[str]) -> list[int]:
    """The image each question reads: one image for every question, one question for every
    image, or one each. InputError on ``question`` otherwise."""
    if images == 1:
        return [0] * len(questions)
    if len(questions) in (1, images):
        return list(range(images))
    raise InputError("question", f"has {len(questions)} questions for {images} images",
                     "give one question, or one per image")


def _count(name: str, value: object, default: int) -> int:
    value = default if value is None else value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(name, f"must be a positive int (got {value!r})",
                         f"give {name} in tokens, e.g. {default}")
    return value


def _multiple_of(name: str, value: int, unit: int, of: str) -> None:
    if value % unit:
        low = max(unit, value // unit * unit)
        near = str(low) if low > value else f"{low} or {low + unit}"
        raise InputError(name, f"={value} is not a multiple of {of} ({unit})",
                         f"nearest valid {name}: {near}")


def answer_shape(length: object, block: object, steps: object) -> AnswerShape:
    """The checked answer length, block length and steps (official 1024, 256, 128; defaults
    as ``understand_job``): refused with the nearest valid values, never rounded."""
    length = _count("max_answer", length, DEFAULT_LENGTH)
    block = _count("block_length", block, min(DEFAULT_BLOCK, length))
    _multiple_of("max_answer", length, block, "block_length")
    blocks = length // block
    steps = _count("steps", steps, blocks * max(1, block // TOKENS_PER_STEP))
    _multiple_of("steps", steps, blocks, "the number of blocks, max_answer / block_length")
    return AnswerShape(length, block, steps)


def _temperature(value: object) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value) and value >= 0
    if not ok:
        raise InputError("temperature", f"must be a finite number >= 0 (got {value!r})",
                         "0 is the official greedy answer")
    return float(value)  # type: ignore[arg-type]


def sized_images(image: object, vq_factor: int, default_size: int, size: object
                 ) -> tuple[torch.Tensor, str]:
    """The images at their understanding size (module docstring) and a note when changed."""
    if image is None:
        raise InputError("image", "is missing: a question needs an image",
                         "give the image (float [B, H, W, 3] in [0, 1], a ComfyUI IMAGE)")
    if size not in ANSWER_SIZES:
        raise InputError("size", f"is {size!r}", f"use one of {', '.join(ANSWER_SIZES)}")
    images = check_image(image, vq_factor, "image", on_grid=size == "as is",
                         fix="use size='official', or crop or resize the image")
    if size == "as is":
        return images, ""
    sized = official_edit_size(images, buckets(default_size, 2 * vq_factor))
    if sized is images:
        return images, ""
    (h, w), (nh, nw) = images.shape[1:3], sized.shape[1:3]
    return sized, f"image {w}x{h} -> {nw}x{nh} (official {default_size} px area)"


def plan_understanding(encode: Encode, vq_factor: int, context_length: int, default_size: int,
                       image: object, question: object, max_answer: object = None,
                       block_length: object = None, steps: object = None,
                       rule: object = "official", temperature: object = 0.0,
                       size: object = "official") -> UnderstandJob:
    """Check a request once, before any weight is touched (``understand_job``)."""
    questions = check_question(question)
    images, note = sized_images(image, vq_factor, default_size, size)
    image_of = pair_items(images.shape[0], questions)
    if len(questions) == 1 and len(image_of) > 1:
        questions = questions * len(image_of)
    shape = answer_shape(max_answer, block_length, steps)
    text = prompt_length(encode, questions)
    height, width = int(images.shape[1]), int(images.shape[2])
    if max_answer is None:  # the longest whole-block answer the context holds, at most 1024
        grid = ImageLayout(height // vq_factor, width // vq_factor)
        room = (context_length - text - grid.length) // shape.block_length * shape.block_length
        if shape.block_length <= room < shape.length:
            shape = answer_shape(room, shape.block_length, steps)
            note += f"{'; ' if note else ''}answer of {room} tokens (what the context holds)"
    try:
        layout = check_image_size(width, height, vq_factor, context_length, text + shape.length,
                                  "question", source="image", prompt_label="question and answer")
    except InputError as err:
        raise InputError(err.name, err.problem, f"{err.fix}, or ask for a shorter max_answer"
                         ) from None
    return UnderstandJob(questions, images, image_of, layout, shape,
                         resolve_answer_rule(rule), _temperature(temperature), note)


def answer_text(decode: Callable[[list[int]], str], tokens: list[int], end_id: int | None
                ) -> str:
    """An answer's text: its tokens up to the first end token, special tokens dropped."""
    if end_id is not None and end_id in tokens:
        tokens = tokens[: tokens.index(end_id)]
    return decode(tokens).strip()


def run_understanding(model: LLaDAModel, encode: Encode, decode: Callable[[list[int]], str],
                      encode_image: Callable[[torch.Tensor], torch.Tensor], ids: DiMOOIds,
                      job: UnderstandJob, generators: Sequence[torch.Generator | None],
                      end_id: int | None,
                      callback: Callable[[dict[str, Any]], None] | None = None,
                      in_flight: int | None = None) -> AnswerResult:
    """Encode the images, build the rows, decode every answer (answering.decode_answers) and
    its text (``decode``: ids -> text, special tokens dropped)."""
    start = time.perf_counter()
    codes = encode_image(job.images)
    rows, starts = [], []
    for question, i in zip(job.questions, job.image_of, strict=True):
        row, at = answer_row(encode, ids, question, codes[i], job.layout, job.shape.length)
        rows.append(row)
        starts.append(at)
    run = decode_answers(model, rows, starts, job.shape, job.rule, job.temperature, generators,
                         ids.mask, end_id, callback, in_flight)
    tokens = [t.cpu() for t in run.tokens]
    synchronize(model.compute_device())
    texts = [answer_text(decode, t.tolist(), end_id) for t in tokens]
    return AnswerResult(texts, tokens, run.nfe, time.perf_counter() - start, run.passes,
                        job.shape.steps, job.rule.label, list(job.questions), job.note)

"""Lumina-DiMOO text-to-image prompt template and token layout (official behaviour).

Official (``utils/prompt_utils.py``, ``inference/inference_t2i.py``, ``utils/image_utils.py``):

* cond text   ``<system>Generate an image according to the text prompt.</system><user>{p}</user>``
* uncond text ``<system>…</system><user><uncondition></user>``; a negative prompt replaces
  ``<uncondition>`` (extension: the official code has no negative prompt);
* image part  ``[BOA, BOI] + h rows of (w MASK tokens + NEWLINE) + [EOI, EOA]``
  (h = height // vq_factor, w = width // vq_factor), appended to both branches;
* an image token is ``code + image_offset``.

Rows of a batch are LEFT-padded so every image part starts at the same column; the key-padding
mask hides padding and position ids count only real tokens, so a padded row computes exactly
what the unpadded official sequence computes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from ...errors import InputError
from ..model.config import DiMOOIds

__all__ = ["SYSTEM_PROMPT", "cond_text", "uncond_text", "ImageLayout", "PromptBatch",
           "check_image_size", "prompt_layout", "suggest_size", "build_prompt_batch"]

SYSTEM_PROMPT = "Generate an image according to the text prompt."

#: tokenizer callable: text -> list of token ids (official: ``tokenizer(text)["input_ids"]``)
Encode = Callable[[str], list[int]]


def cond_text(prompt: str) -> str:
    return f"<system>{SYSTEM_PROMPT}</system><user>{prompt}</user>"


def uncond_text(negative_prompt: str | None = None) -> str:
    user = negative_prompt if negative_prompt else "<uncondition>"
    return f"<system>{SYSTEM_PROMPT}</system><user>{user}</user>"


@dataclass(frozen=True)
class ImageLayout:
    """Token grid h x w and the image part of the sequence (official order)."""

    h: int
    w: int

    @property
    def n_codes(self) -> int:
        return self.h * self.w

    @property
    def length(self) -> int:
        """Tokens of the image part: BOA, BOI, h * (w + 1), EOI, EOA."""
        return self.h * (self.w + 1) + 4

    def tokens(self, ids: DiMOOIds) -> list[int]:
        row = [ids.mask] * self.w + [ids.newline]
        return [ids.boa, ids.boi] + row * self.h + [ids.eoi, ids.eoa]

    def code_offsets(self) -> torch.Tensor:
        """LongTensor [h*w]: offset of each code slot (row-major) inside the image part."""
        r = torch.arange(self.h).repeat_interleave(self.w)
        c = torch.arange(self.w).repeat(self.h)
        return 2 + r * (self.w + 1) + c


SIZE_STEP = 16
"""Pixel sizes are multiples of this (the official grid: one token per 16 x 16 pixels)."""


def nearest_multiples(value: int, factor: int) -> str:
    """The valid sizes around ``value`` on a ``factor`` px grid: "48 or 64", or "48"."""
    low = max(factor, value // factor * factor)
    high = low if low >= value else low + factor
    return str(low) if low == high else f"{low} or {high}"


def size_error(name: str, value: object, factor: int = SIZE_STEP) -> InputError | None:
    """The pack's one size rule: why ``value`` is not a positive multiple of ``factor`` for
    ``name`` (width / height), naming the nearest valid sizes, or None."""
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        return InputError(name, f"must be a positive int (got {value!r})",
                          f"give {name} in pixels, a multiple of {factor}")
    if value % factor:
        return InputError(name, f"={value} is not a multiple of {factor} (one token per "
                          f"{factor} x {factor} pixels)",
                          f"nearest valid {name}: {nearest_multiples(value, factor)}")
    return None


def suggest_size(width: int, height: int, step: int, vq_factor: int,
                 budget: int) -> tuple[int, int] | None:
    """Largest (width, height), multiples of ``step`` and at most the asked size, whose grid
    fits ``budget`` image tokens (h * (w + 1)), keeping the aspect ratio as closely as the step
    allows (within 2 % of the closest fitting ratio). None when not even step x step fits."""
    ratio = width / height
    found: list[tuple[float, int, int, int]] = []
    for hp in range(step, height + 1, step):
        for wp in {math.floor(hp * ratio / step) * step, math.ceil(hp * ratio / step) * step}:
            if step <= wp <= width and (hp // vq_factor) * (wp // vq_factor + 1) <= budget:
                found.append((abs(math.log(wp / hp / ratio)), wp * hp, wp, hp))
    if not found:
        return None
    closest = min(err for err, *_ in found)
    _, _, wp, hp = max((f for f in found if f[0] <= closest + 0.02), key=lambda f: f[1])
    return wp, hp


def check_image_size(width: int, height: int, vq_factor: int, max_length: int,
                     prompt_length: int, field: str = "prompt",
                     step: int | None = None, source: str | None = None,
                     prompt_label: str | None = None, base_length: int = 0) -> ImageLayout:
    """Validate a pixel size; InputError naming the input and the nearest valid sizes
    (multiples of ``step``). ``prompt_length``: tokens of the longest row besides the image,
    from input ``field`` (named ``prompt_label``); ``source``: the input the size comes from
    when not width / height. A size too large for the context is the prompt's fault when the
    image fits beside that row's ``base_length`` (empty-prompt) tokens, else ``_too_large``'s.
    """
    step = vq_factor if step is None else step
    for name, value in (("width", width), ("height", height)):
        err = size_error(name, value, vq_factor)
        if err is not None:
            raise err if source is None else InputError(source, f"is {width} x {height} px, "
                                                        f"not on the {vq_factor} px token grid",
                                                        "crop or resize it to multiples of "
                                                        f"{vq_factor} px")
    layout = ImageLayout(height // vq_factor, width // vq_factor)
    total = prompt_length + layout.length
    if total > max_length:
        fit = suggest_size(width, height, step, vq_factor, max_length - prompt_length - 4)
        need = (f"{total} tokens ({prompt_label or field} {prompt_length} + image "
                f"{layout.length}) but the model's context (max_sequence_length) is "
                f"{max_length}")
        if source is not None or layout.length + base_length <= max_length:
            raise _too_long(width, height, need, fit, field, source, step, total - max_length)
        raise _too_large(width, height, vq_factor, max_length - prompt_length, need, fit, field,
                         step)
    return layout



def prompt_layout(encode: Encode, vq_factor: int, context_length: int, width: int, height: int,
                  prompts: Sequence[str], negative_prompt: str | None = None,
                  source: str | None = None) -> ImageLayout:
    """The token grid of a text-to-image request at a pixel size, checked against the context
    with its longest row (``check_image_size``, on the node's 16 px grid)."""
    cond = max(len(encode(cond_text(p))) for p in prompts)
    uncond = len(encode(uncond_text(negative_prompt)))
    field, longest = ("negative_prompt", uncond) if uncond > cond else ("prompt", cond)
    return check_image_size(width, height, vq_factor, context_length, longest, field,
                            math.lcm(vq_factor, SIZE_STEP), source=source,
                            base_length=len(encode(cond_text(""))))

def _too_long(width: int, height: int, need: str, fit: tuple[int, int] | None, field: str,
              source: str | None, step: int, over: int) -> InputError:
    """The error of a prompt (`field`) too long for the context beside the image, or of an
    image input (`source`) too large with it."""
    if source is not None:
        fix = (f"resize it to at most {fit[0]} x {fit[1]} px (same aspect ratio)" if fit
               else f"shorten the {field}")
        return InputError(source, f"is {width} x {height} px, which needs {need}", fix)
    smaller = (f"; or draw a smaller image: nearest valid size in multiples of {step} px with "
               f"the closest aspect ratio: width={fit[0]}, height={fit[1]}" if fit else "")
    return InputError(field, f"is too long beside a {width} x {height} px image: it needs {need}",
                      f"shorten the {field} by at least {over} tokens{smaller}")


def _side_fit(side: str, width: int, height: int, step: int, vq_factor: int,
              room: int) -> int | None:
    """The largest value of `side` (a multiple of `step`, below the asked one) whose image fits
    `room` tokens with the other side kept; None when none does."""
    for value in range((width if side == "width" else height) // step * step, 0, -step):
        w, h = (value, height) if side == "width" else (width, value)
        if ImageLayout(h // vq_factor, w // vq_factor).length <= room:
            return value
    return None


def _too_large(width: int, height: int, vq_factor: int, room: int, need: str,
               fit: tuple[int, int] | None, field: str, step: int) -> InputError:
    """The error of a size whose image alone does not fit the `room` beside the prompt, naming
    the side whose smaller value alone makes it fit, else both."""
    fits = {side: _side_fit(side, width, height, step, vq_factor, room)
            for side in ("width", "height")}
    aspect = (f"nearest valid size in multiples of {step} px with the closest aspect ratio: "
              f"width={fit[0]}, height={fit[1]}" if fit else "")
    context = ("; if the checkpoint was trained on longer sequences, raise max_sequence_length "
               "in its config.json")
    for side, other in (("width", "height"), ("height", "width")):
        if fits[side] is not None and fits[other] is None:
            kept = height if side == "width" else width
            fix = f"set {side} to at most {fits[side]} (at {other} {kept})"
            return InputError(side, f"={width if side == 'width' else height} makes the image "
                              f"too large: {width} x {height} px need {need}",
                              fix + (f"; or {aspect}" if fit else "") + context)
    fix = aspect if fit else f"no size fits beside this {field}: shorten the {field}"
    return InputError("width and height", f"{width} x {height} px need {need}", fix + context)


@dataclass(frozen=True)
class PromptBatch:
    """Cond (+ uncond) rows of one generation, left-padded: input_ids / attention_mask
    [R, L] (R = B, or 2B with cfg: cond rows, then uncond), code_index [N] the image code
    slots' column."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    code_index: torch.Tensor
    layout: ImageLayout
    batch: int


def build_prompt_batch(encode: Encode, ids: DiMOOIds, prompts: Sequence[str],
                       negative_prompt: str | None, layout: ImageLayout,
                       with_uncond: bool) -> PromptBatch:
    """Token rows for ``prompts`` (cond) and, if ``with_uncond``, one uncond row per prompt."""
    image = layout.tokens(ids)
    rows = [encode(cond_text(p)) + image for p in prompts]
    if with_uncond:
        rows += [encode(uncond_text(negative_prompt)) + image for _ in prompts]
    return pad_rows(rows, layout, len(prompts))


def pad_rows(rows: Sequence[Sequence[int]], layout: ImageLayout, n_cond: int) -> PromptBatch:
    """Token rows that each end with ``layout``'s image part -> a left-padded PromptBatch (the
    first ``n_cond`` rows are the cond rows)."""
    length = max(len(r) for r in rows)
    input_ids = torch.zeros(len(rows), length, dtype=torch.long)
    mask = torch.zeros(len(rows), length, dtype=torch.long)
    for i, row in enumerate(rows):
        input_ids[i, length - len(row):] = torch.tensor(row, dtype=torch.long)
        mask[i, length - len(row):] = 1
    code_index = (length - layout.length) + layout.code_offsets()
    return PromptBatch(input_ids, mask, code_index, layout, n_cond)

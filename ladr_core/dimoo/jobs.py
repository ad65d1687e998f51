"""What a run makes, checked once: text to image (TextJob), inpainting / outpainting and image
to image (PaintJob) and editing (EditJob).

``text_job`` / ``paint_job`` / ``tokens_job`` / ``edit_job`` (``DiMOOPipeline.prepare_*``)
check a request before any weight is touched and return a job, or one InputError naming the
input; ``DiMOOPipeline.run(job, ...)`` samples it. A job builds its denoiser from a
``Runtime`` (what it uses, not the pipeline) into a ``Built``: the denoiser, the known tokens
(painting) and the plan the decode finishes with (paste-back).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from ..errors import InputError
from ..schedules import StepSchedule, check_denoise
from ..step import Strategy
from ..validation import KnownTokens
from .denoise.cache import MLCacheConfig
from .denoise.denoiser import DiMOODenoiser, valid_cfg
from .denoise.prompt import ImageLayout, build_prompt_batch, cond_text, uncond_text
from .model.config import DiMOOIds
from .tasks.edit_size import EDIT_SIZES, sized_for_edit
from .tasks.editing import (
    DEFAULT_EDIT_CFG,
    DEFAULT_IMAGE_CFG,
    EditPlan,
    edit_denoiser,
    edit_texts,
    plan_edit,
)
from .tasks.painting import PaintOptions, PaintPlan, plan_painting, plan_tokens
from .tasks.pictures import check_image, token_size
from .tasks.preview import PreviewBase, edit_base, painting_base

__all__ = ["Built", "EditJob", "Job", "PaintJob", "Runtime", "TextJob", "check_job", "check_run",
           "edit_job", "generate_job", "guidance", "paint_job", "positive_int", "prompt_list",
           "text_job", "tokens_job"]

Layout = Callable[..., ImageLayout]  # DiMOOPipeline.layout(width, height, prompts, negative, source)
IMAGE_FIT_FIX = ("crop or resize it, or redraw it with pipe.paint(prompt, image, None, "
                 "options=PaintOptions(fit='crop' or 'resize'), denoise=...)")
NO_IMAGE = ("there is no image to redraw", "give an image (generate(image=...)) or its tokens "
            "(tokens=), or denoise=1.0 for text to image")  # generate's denoise < 1 alone


@dataclass(frozen=True)
class Runtime:
    """What building a denoiser uses: the transformer, the text encoder (text -> ids), the
    special ids, the VQ encoder (IMAGE [B, H, W, 3] -> codes [B, N]) and the compiled passes
    (``DiMOOPipeline.compile``; None = eager)."""

    transformer: Any
    encode: Callable[[str], list[int]]
    ids: DiMOOIds
    encode_image: Callable[[torch.Tensor], torch.Tensor]
    forward_hook: Any = None


@dataclass
class Built:
    """A job made runnable: its denoiser, the sampler's known tokens (painting) and the plan
    the decoded images are finished with (painting: paste-back)."""

    denoiser: DiMOODenoiser
    known: KnownTokens | None = None
    paint: PaintPlan | None = None


@dataclass(frozen=True)
class TextJob:
    """Text to image: one prompt per image (``items``, B of them), the negative prompt, the
    token grid and the guidance scale (``(1 + cfg) * cond - cfg * uncond``; 0 = cond only)."""

    items: list[str]
    negative_prompt: str | None
    layout: ImageLayout
    cfg: float
    note: str = ""
    takes_cache = True
    nothing_to_do = False

    def denoiser(self, rt: Runtime, steps: int, cache: MLCacheConfig | None,
                 n_generate: list[int] | None = None) -> DiMOODenoiser:
        batch = build_prompt_batch(rt.encode, rt.ids, self.items, self.negative_prompt,
                                   self.layout, with_uncond=self.cfg > 0)
        denoiser = DiMOODenoiser(rt.transformer, batch, rt.ids, self.cfg, cache, steps,
                                 n_generate=n_generate)
        denoiser.forward_hook = rt.forward_hook
        return denoiser

    def build(self, rt: Runtime, steps: int, cache: MLCacheConfig | None) -> Built:
        return Built(self.denoiser(rt, steps, cache))

    def rows(self, encode: Callable[[str], list[int]]) -> tuple[int, int]:
        """(rows per image, tokens of the longest row) of the denoiser this job builds."""
        texts = [cond_text(p) for p in set(self.items)]
        texts += [uncond_text(self.negative_prompt)] if self.cfg > 0 else []
        longest = max(len(encode(t)) for t in texts)
        return (2 if self.cfg > 0 else 1), longest + self.layout.length

    def preview_base(self) -> PreviewBase | None:
        """What is known of the picture before sampling (tasks/preview.py): nothing here."""
        return None


@dataclass(frozen=True)
class PaintJob:
    """Inpainting / outpainting: the prompts at the image's size (``text``) and the checked
    image, mask and options (``plan``; painting.py). The VQ encodes the images when it runs
    (image to image from tokens: the plan has its codes already)."""

    text: TextJob
    plan: PaintPlan
    takes_cache = True

    @property
    def note(self) -> str:
        return self.plan.note

    @property
    def nothing_to_do(self) -> bool:
        return self.plan.nothing_to_do

    @property
    def items(self) -> list[str]:
        return self.text.items

    @property
    def layout(self) -> ImageLayout:
        return self.text.layout

    def build(self, rt: Runtime, steps: int, cache: MLCacheConfig | None) -> Built:
        plan = self.plan.encoded(rt.encode_image)
        return Built(self.text.denoiser(rt, steps, cache, plan.n_generate()), plan.known, plan)

    def rows(self, encode: Callable[[str], list[int]]) -> tuple[int, int]:
        """(rows per image, tokens of the longest row): the text job's."""
        return self.text.rows(encode)

    def preview_base(self) -> PreviewBase:
        """The input's own pixels under its known tokens (tasks/preview.py)."""
        return painting_base(self.plan)


@dataclass(frozen=True)
class EditJob:
    """Editing: the checked plan (editing.py) and the text and image guidance scales."""

    plan: EditPlan
    cfg: float
    image_cfg: float
    takes_cache = False
    nothing_to_do = False

    @property
    def note(self) -> str:
        return self.plan.note

    @property
    def items(self) -> list[str]:
        return self.plan.instructions

    @property
    def layout(self) -> ImageLayout:
        return self.plan.layout

    @property
    def turns(self) -> int:
        """Edits run one after the other (a multi-turn edit: one per instruction line)."""
        return 1 + len(self.plan.later)

    def next_turn(self, image: torch.Tensor) -> EditJob:
        """The next turn of a multi-turn edit: its instructions, on ``image`` [B, H, W, 3] (the
        turn before's output)."""
        plan = replace(self.plan, instructions=self.plan.later[0], image=image,
                       later=self.plan.later[1:], note="")
        return replace(self, plan=plan)

    def build(self, rt: Runtime, steps: int, cache: MLCacheConfig | None) -> Built:
        codes = rt.encode_image(self.plan.image)
        first = None if self.plan.first is None else rt.encode_image(self.plan.first)
        denoiser = edit_denoiser(rt.transformer, rt.encode, rt.ids, self.plan, codes, first,
                                 self.cfg, self.image_cfg, steps)
        denoiser.forward_hook = rt.forward_hook
        return Built(denoiser)

    def rows(self, encode: Callable[[str], list[int]]) -> tuple[int, int]:
        """(rows per image, tokens of the longest row): cond, text-uncond and image-uncond rows
        (one without guidance), each its text, the input images and the part to generate
        (editing.build_edit_batch)."""
        plan = self.plan
        longest = max(len(encode(t)) for p in plan.texts for t in edit_texts(p, plan.edit_type))
        images = [plan.layout] + ([] if plan.first_layout is None else [plan.first_layout])
        parts = sum(g.length - 2 for g in images)  # BOI .. EOI of each input image
        guided = self.cfg > 0 or self.image_cfg > 0
        return (3 if guided else 1), longest + parts + plan.layout.length

    def preview_base(self) -> PreviewBase | None:
        """The image being edited, faded under the tokens still masked, when it has the
        output's size (a style transfer's output takes the style image's: None)."""
        plan = self.plan
        factor = plan.image.shape[1] // plan.layout.h
        content = plan.image if plan.first is None else plan.first
        return edit_base(content, (plan.layout.h, plan.layout.w), factor)


Job = TextJob | PaintJob | EditJob


def check_job(job: object, cache: object) -> None:
    """``run``'s job and cache: a job from ``prepare_*``; a cache only where the job takes one."""
    if not isinstance(job, (TextJob, PaintJob, EditJob)):
        raise InputError("job", f"is a {type(job).__name__}",
                         "make it with pipe.prepare_text, prepare_paint or prepare_edit")
    if cache is not None and not isinstance(cache, MLCacheConfig):
        raise InputError("cache", f"is a {type(cache).__name__}", "give an MLCacheConfig or None")
    if cache is not None and not job.takes_cache:
        raise InputError("cache", "is set, but ML-Cache is not available for image editing",
                         "leave cache=None (off)")


def check_run(job: object, strategy: object, steps: int | StepSchedule | None,
              cache: object) -> StepSchedule:
    """``DiMOOPipeline.run``'s arguments: a Strategy object, a job from ``prepare_*`` and its
    cache, and the run's schedule (T, or a StepSchedule with the job's denoise)."""
    if not isinstance(strategy, Strategy):
        raise ValueError(f"strategy must be a Strategy object (run takes the object; resolve "
                         f"a name with ladr_core.resolve_strategy); got {strategy!r}")
    denoise = job.plan.denoise if isinstance(job, PaintJob) else 1.0
    plan = StepSchedule.of(steps, denoise)
    if plan.denoise != denoise:
        raise ValueError(f"steps: the schedule's denoise {plan.denoise:g} is not the job's "
                         f"{denoise:g}; build the job and the StepSchedule with one denoise")
    check_job(job, cache)
    return plan


def prompt_list(prompt: str | Sequence[str], name: str = "prompt") -> list[str]:
    """A request's prompt(s): a string or a non-empty list of strings; InputError naming
    ``name`` otherwise."""
    if isinstance(prompt, str):
        return [prompt]
    prompts = list(prompt) if isinstance(prompt, Sequence) else []
    if not prompts or not all(isinstance(p, str) for p in prompts):
        raise InputError(name, f"is {type(prompt).__name__}", "give a string or a non-empty "
                         "list of strings")
    return prompts


def positive_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum} (got {value!r})")
    return value


def guidance(name: str, value: object, default: float) -> float:
    """A guidance scale (None = ``default``): a finite number >= 0."""
    value = default if value is None else value
    if not valid_cfg(value):
        raise InputError(name, f"must be a finite number >= 0 (got {value!r})",
                         f"0 disables {'image ' if name == 'image_cfg' else ''}guidance")
    return float(value)


def text_job(layout: Layout, default_size: int, default_cfg: float, prompt: str | Sequence[str],
             negative_prompt: str | None = None, width: int | None = None,
             height: int | None = None, cfg: float | None = None, batch_size: int = 1) -> TextJob:
    """A checked text-to-image request: B = len(prompts) * batch_size images (prompt i's images
    are items i * batch_size ...). width / height None = ``default_size``; cfg None =
    ``default_cfg``. ``layout``: the model's token grid for a size (``DiMOOPipeline.layout``)."""
    prompts = prompt_list(prompt)
    positive_int("batch_size", batch_size)
    if negative_prompt is not None and not isinstance(negative_prompt, str):
        raise InputError("negative_prompt", f"is {type(negative_prompt).__name__}",
                         "give a string or None")
    width = default_size if width is None else width
    height = default_size if height is None else height
    grid = layout(width, height, prompts, negative_prompt)
    return TextJob([p for p in prompts for _ in range(batch_size)], negative_prompt, grid,
                   guidance("cfg", cfg, default_cfg))


def generate_job(layout: Layout, vq_factor: int, default_size: int, default_cfg: float,
                 codebook: int, prompt: str | Sequence[str], negative_prompt: str | None,
                 width: int | None, height: int | None, cfg: float | None, batch_size: int,
                 image: Any, denoise: float, tokens: Any) -> TextJob | PaintJob:
    """``DiMOOPipeline.generate``'s job: ``text_job``, or image to image of ``image``
    (``paint_job`` without a mask) or ``tokens`` (``tokens_job``)."""
    if tokens is not None:
        if image is not None:
            raise InputError("tokens", "and image are both given", "give one: the picture "
                             "(image=) or its tokens (tokens=)")
        return tokens_job(layout, vq_factor, default_size, default_cfg, codebook, prompt, tokens,
                          width, height, negative_prompt, cfg, batch_size, denoise)
    if image is None:
        check_denoise(denoise, NO_IMAGE)
        return text_job(layout, default_size, default_cfg, prompt, negative_prompt, width,
                        height, cfg, batch_size)
    if width is not None or height is not None:
        raise InputError("width", "and height are set, but the image sets the size",
                         "leave width and height None with an image")
    return paint_job(layout, vq_factor, default_cfg, prompt, image, None, None, negative_prompt,
                     cfg, batch_size, IMAGE_FIT_FIX, denoise)

def paint_job(layout: Layout, vq_factor: int, default_cfg: float, prompt: str | Sequence[str],
              image: Any, mask: Any, options: PaintOptions | None = None,
              negative_prompt: str | None = None, cfg: float | None = None, batch_size: int = 1,
              fit_fix: str | None = None, denoise: float = 1.0) -> PaintJob:
    """A checked inpaint / outpaint request (painting.plan_painting): ``image`` float
    [B, H, W, 3] and ``mask`` float [B, H, W] in [0, 1] (1 = regenerate; None = image to
    image), which sets the size. ``denoise``: the strength inside the mask (ladr_core.strength)."""
    prompts = prompt_list(prompt)
    positive_int("batch_size", batch_size)
    extra = {} if fit_fix is None else {"fit_fix": fit_fix}
    plan = plan_painting(prompts, image, mask, options, batch_size, vq_factor, denoise=denoise,
                         **extra)
    grid = layout(plan.width, plan.height, plan.prompts, negative_prompt, source="image")
    return _painting(plan, grid, negative_prompt, guidance("cfg", cfg, default_cfg), batch_size)


def tokens_job(layout: Layout, vq_factor: int, default_size: int, default_cfg: float,
               codebook: int, prompt: str | Sequence[str], tokens: Any, width: int | None = None,
               height: int | None = None, negative_prompt: str | None = None,
               cfg: float | None = None, batch_size: int = 1, denoise: float = 1.0) -> PaintJob:
    """A checked image-to-image request from image tokens (painting.plan_tokens): ``tokens``
    LongTensor [B or 1, h*w] in [0, ``codebook``), row-major over ``width`` x ``height`` px
    (both None: a square grid)."""
    prompts = prompt_list(prompt)
    positive_int("batch_size", batch_size)
    width, height = token_size(tokens, width, height, default_size, vq_factor)
    grid = layout(width, height, prompts, negative_prompt)
    plan = plan_tokens(prompts, tokens, (grid.h, grid.w), codebook, vq_factor, batch_size,
                       denoise)
    return _painting(plan, grid, negative_prompt, guidance("cfg", cfg, default_cfg), batch_size)


def _painting(plan: PaintPlan, grid: ImageLayout, negative_prompt: str | None, cfg: float,
              batch_size: int) -> PaintJob:
    text = TextJob([p for p in plan.prompts for _ in range(batch_size)], negative_prompt, grid,
                   cfg, plan.note)
    return PaintJob(text, plan)


def edit_job(can_edit: bool, encode: Callable[[str], list[int]], vq_factor: int,
             context_length: int, instruction: str | Sequence[str], image: Any,
             edit_type: str = "edit",
             style: Any = None, size: str = "official", cfg: float | None = None,
             image_cfg: float | None = None, batch_size: int = 1) -> EditJob:
    """A checked edit request (editing.py): ``image`` float [B, H, W, 3] in [0, 1], whose size
    sets the output's (the ``style`` image's in a style transfer); ``instruction`` (one turn
    a line for ``multiturn``); ``edit_type`` in ``editing.EDIT_TYPES``; ``size`` "official"
    (edit_size.py) or "as is"; cfg / image_cfg None: the official 2.5 / 4.0. Refused for a
    model whose config.json says ``ladr_can_edit: false``."""
    if not can_edit:
        raise InputError("model", "was trained for text to image only (its config.json says "
                         "ladr_can_edit: false) and cannot edit", "load the Lumina-DiMOO checkpoint")
    prompts = prompt_list(instruction, "instruction")
    positive_int("batch_size", batch_size)
    if size not in EDIT_SIZES:
        raise InputError("size", f"is {size!r}", f"use one of {', '.join(EDIT_SIZES)}")
    image, note = sized_for_edit(check_image(image, vq_factor, "image", on_grid=False), "image",
                                 size)
    if style is not None:
        style, more = sized_for_edit(check_image(style, vq_factor, "style", on_grid=False),
                                     "style", size)
        note += more
    plan = plan_edit(encode, vq_factor, context_length, prompts, image, edit_type, batch_size,
                     style, note.removeprefix("; "))
    return EditJob(plan, guidance("cfg", cfg, DEFAULT_EDIT_CFG),
                   guidance("image_cfg", image_cfg, DEFAULT_IMAGE_CFG))

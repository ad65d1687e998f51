"""What a run makes, checked once: text to image (TextJob), inpainting / outpainting (PaintJob)
and editing (EditJob).

``DiMOOPipeline.prepare_text`` / ``prepare_paint`` / ``prepare_edit`` check a request's inputs
(prompts, sizes, images, masks, guidance) before any weight is touched and return a job;
``DiMOOPipeline.run(job, ...)`` samples it. Building a job's denoiser needs the
network and the VQ encoder; a job receives them as a ``Runtime`` (what it uses, not the
pipeline) and returns a ``Built``: the denoiser, the known tokens (painting) and the plan the
decode finishes with (painting's paste-back).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch

from ..errors import InputError
from ..validation import KnownTokens
from .denoise.cache import MLCacheConfig
from .denoise.denoiser import DiMOODenoiser
from .denoise.prompt import ImageLayout, build_prompt_batch, cond_text, uncond_text
from .model.config import DiMOOIds
from .tasks.editing import EditPlan, edit_denoiser, edit_texts
from .tasks.painting import PaintPlan
from .tasks.preview import PreviewBase, edit_base, painting_base

__all__ = ["Built", "EditJob", "Job", "PaintJob", "Runtime", "TextJob", "check_job"]


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

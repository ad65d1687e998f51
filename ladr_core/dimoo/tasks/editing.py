"""Lumina-DiMOO image-to-image editing: prompt templates, prompt rows and the edit plan.

Official behaviour (``utils/prompt_utils.generate_image_to_image_prompt``,
``inference/inference_i2i.py``, ``generators/image_to_image_generator.generate_i2i``):

* the edit type picks a system prompt and the user text (the instruction, or a fixed text);
  the reference image enters as ``[BOI] + h rows of (w codes + NEWLINE) + [EOI]`` before the
  LAST token of the tokenized prompt;
* three rows per item, each followed by the image part to generate (prompt.ImageLayout):
  cond (prompt with the image), text-uncond (``<uncondition>`` prompt with the image),
  image-uncond (the prompt alone); guidance ``cond + cfg * (cond - text_uncond) + image_cfg *
  (cond - image_uncond)`` (official 2.5 and 4.0; both 0 runs the cond row only);
* the output has the reference image's size; in a style transfer (``image_ref_transfer``) the
  image to transform enters first, the style image second, the output has the STYLE image's
  size, the text-uncond row keeps both images and the image-uncond row neither;
* ``multi_view_<view>``: the multi-view system prompt, the fixed text "Generate the <view>
  view based on the provided front view." and the front view as the image (the official code
  lists no views: ``MULTI_VIEWS`` are the pack's, the sides a front view leaves unseen);
* ``multiturn`` (official ``edit_multiturn_<i>``): turn i is an ``edit`` with the i-th
  instruction (one a line) of the image the turn before made, decoded to 8 bits a channel (the
  official PNG) and encoded again; no history enters the prompt (``split_turns``; the
  pipeline runs the turns).

The pipeline sizes the images first (edit_size.official_edit_size). ``pred`` and ``dense_*``:
web/docs/LADR_DiMOOEdit/en.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ...errors import InputError
from ..denoise.prompt import Encode, ImageLayout, PromptBatch, pad_rows
from ..model.config import DiMOOIds

__all__ = ["EDIT_TYPES", "DEFAULT_EDIT_CFG", "DEFAULT_IMAGE_CFG", "MULTITURN", "MULTI_VIEWS",
           "EditPlan", "edit_texts", "build_edit_batch", "check_edit_type", "edit_denoiser",
           "plan_edit", "split_turns"]

DEFAULT_EDIT_CFG = 2.5  # official text guidance of image-to-image
DEFAULT_IMAGE_CFG = 4.0  # official image guidance of image-to-image

_EDIT = "Generate an image applying the following editing instruction based on the original image."
_CONTROL = "Generate an image according to the text prompt and the given control image."
_SUBJECT = "Generate an image according to the text prompt and the given object image."
_DENSE = "Perform dense prediction on the given images."
_GENERIC = "Generate an image according to the prompt and image."
_STYLE = "Transform the current image into the style of the provided image."
_VIEW = "Generate a view-image based on the given image."
MULTI_VIEWS = ("left", "right", "back")  # multi_view_<view>: the pack's choice (see above)
MULTITURN = "multiturn"
_MAPS = {"canny": "canny edge map", "hed": "hed edge map", "normal": "normal map",
         "sam2mask": "sam2 mask", "depth": "depth map", "openpose": "pose estimation map"}

#: edit type -> (system prompt, user text or None = the instruction)
EDIT_TYPES: dict[str, tuple[str, str | None]] = {
    "edit": (_EDIT, None),
    "control": (_CONTROL, None),
    "subject": (_SUBJECT, None),
    "style": (_STYLE, _STYLE),
    "pred": (_GENERIC, None),
    **{f"dense_{k}": (_DENSE, f"Generate a {v} according to the image.") for k, v in _MAPS.items()},
    **{f"multi_view_{v}": (_VIEW, f"Generate the {v} view based on the provided front view.")
       for v in MULTI_VIEWS},
    MULTITURN: (_EDIT, None),
}


def check_edit_type(edit_type: object) -> str:
    if isinstance(edit_type, str) and edit_type in EDIT_TYPES:
        return edit_type
    if isinstance(edit_type, str) and edit_type.startswith("multi_view"):
        view = edit_type.removeprefix("multi_view").removeprefix("_")
        raise InputError("edit_type", f"{edit_type!r} names " + (f"the view {view!r}, which "
                         "is not offered" if view else "no view"), "use one of " +
                         ", ".join(f"multi_view_{v}" for v in MULTI_VIEWS))
    raise InputError("edit_type", f"{edit_type!r} is not a known edit type",
                     f"use one of {', '.join(EDIT_TYPES)}")


def split_turns(prompts: list[str], edit_type: str) -> list[list[str]]:
    """The instructions of each turn, one per prompt: ``multiturn`` takes a prompt's lines
    (blank ones dropped) as its turns, every prompt as many; another type has one turn."""
    if edit_type != MULTITURN:
        return [prompts]
    lines = [[t.strip() for t in p.splitlines() if t.strip()] or [""] for p in prompts]
    if len({len(t) for t in lines}) > 1:
        raise InputError("instruction", "gives the prompts different numbers of turns ("
                         f"{', '.join(str(len(t)) for t in lines)} lines)",
                         "give every prompt as many turns, one a line")
    return [list(turn) for turn in zip(*lines, strict=True)]


def edit_texts(instruction: str, edit_type: str) -> tuple[str, str]:
    """(cond text, text-uncond text) of an edit type; ValueError for an unknown type or an
    empty instruction where the type needs one."""
    system, user = EDIT_TYPES[check_edit_type(edit_type)]
    if user is None:
        if not isinstance(instruction, str) or not instruction.strip():
            raise InputError("instruction", f"is empty; edit type {edit_type!r} needs one",
                             "write the edit, e.g. 'make the sky red'")
        user = instruction
    return (f"<system>{system}</system><user>{user}</user>",
            f"<system>{system}</system><user><uncondition></user>")


def image_part(codes: torch.Tensor, layout: ImageLayout, ids: DiMOOIds) -> list[int]:
    """[BOI] + rows of (code + image_offset) + NEWLINE + [EOI] of one image's codes [h*w]."""
    grid = (codes.view(layout.h, layout.w) + ids.image_offset).tolist()
    return [ids.boi] + [t for row in grid for t in row + [ids.newline]] + [ids.eoi]


def build_edit_batch(encode: Encode, ids: DiMOOIds, instructions: Sequence[str],
                     edit_type: str, codes: torch.Tensor, layout: ImageLayout,
                     guided: bool, first: tuple[torch.Tensor, ImageLayout] | None = None
                     ) -> PromptBatch:
    """Rows of B items (item j edits codes[j], instruction j): cond rows, then with `guided`
    the text-uncond rows, then the image-uncond rows; left-padded (prompt.PromptBatch).
    ``first``: codes [B, n] and layout of an image whose part comes before codes[j]'s (style
    transfer: the image to transform, then the style image)."""
    target = layout.tokens(ids)
    conds, texts, plain = [], [], []
    for j, (text, item_codes) in enumerate(zip(instructions, codes, strict=True)):
        cond, uncond = (encode(t) for t in edit_texts(text, edit_type))
        image = image_part(item_codes, layout, ids)
        if first is not None:
            image = image_part(first[0][j], first[1], ids) + image
        conds.append(cond[:-1] + image + cond[-1:] + target)
        texts.append(uncond[:-1] + image + uncond[-1:] + target)
        plain.append(cond + target)
    return pad_rows(conds + (texts + plain if guided else []), layout, len(conds))


@dataclass(frozen=True)
class EditPlan:
    """A checked edit: one instruction per item; ``image`` [1 or B, H, W, 3] the reference whose
    grid is generated (style transfer: the style image, the image to transform in ``first``),
    encoded later (``edit_denoiser``); ``later``: a multi-turn edit's next turns."""

    instructions: list[str]
    image: torch.Tensor
    layout: ImageLayout
    edit_type: str
    first: torch.Tensor | None = None
    first_layout: ImageLayout | None = None
    note: str = ""
    later: tuple[list[str], ...] = ()

    @property
    def texts(self) -> set[str]:
        """Every instruction of every turn."""
        return {t for turn in (self.instructions, *self.later) for t in turn}


def plan_edit(encode: Encode, vq_factor: int, context_length: int, prompts: list[str],
              image: object, edit_type: object, batch_size: int, style: object = None,
              note: str = "") -> EditPlan:
    """Check an edit once: B = len(prompts) * batch_size items, item i editing image i (or the
    one image); the longest row must fit the model's context."""
    from ..denoise.prompt import check_image_size
    from .pictures import check_image

    edit_type = check_edit_type(edit_type)
    if (edit_type == "style") != (style is not None):
        raise InputError("style", "is missing: edit type 'style' needs the style image" if style
                         is None else "is given, but only edit type 'style' takes a style image",
                         "pass style=<image>" if style is None else
                         "set edit_type='style' or drop style=")
    turns = [[p for p in turn for _ in range(batch_size)]
             for turn in split_turns(prompts, edit_type)]
    target = _per_item(check_image(image, vq_factor, "image"), "image", turns[0])
    first = first_layout = None
    if style is not None:  # official order: the image to transform, then the style image
        first, target = target, _per_item(check_image(style, vq_factor, "style"), "style",
                                          turns[0])
        first_layout = ImageLayout(first.shape[1] // vq_factor, first.shape[2] // vq_factor)
    texts = {t for turn in turns for t in turn}
    for text in texts:
        edit_texts(text, edit_type)  # an empty instruction is refused here, once
    height, width = int(target.shape[1]), int(target.shape[2])
    grid = ImageLayout(height // vq_factor, width // vq_factor)
    longest = max(len(encode(t)) for p in texts for t in edit_texts(p, edit_type))
    extra = 0 if first_layout is None else first_layout.length - 2  # BOI .. EOI of the first
    # the longest row: its text, the image parts (BOI .. EOI), the part to generate
    layout = check_image_size(width, height, vq_factor, context_length,
                              longest + extra + grid.length - 2, "instruction",
                              source="style" if style is not None else "image",
                              prompt_label="instruction and input images")
    return EditPlan(turns[0], target, layout, edit_type, first, first_layout, note,
                    tuple(turns[1:]))


def _per_item(image: torch.Tensor, name: str, items: list[str]) -> torch.Tensor:
    if image.shape[0] not in (1, len(items)):
        raise InputError(name, f"has {image.shape[0]} images for {len(items)} items",
                         "give one image, or one per item")
    return image


def edit_denoiser(model: Any, encode: Encode, ids: DiMOOIds, plan: EditPlan,
                  codes: torch.Tensor, first_codes: torch.Tensor | None,
                  cfg: float, image_cfg: float, steps: int | None) -> Any:
    """The denoiser of an edit (denoiser.DiMOODenoiser with three branches).
    codes / first_codes: the VQ codes of ``plan.image`` / ``plan.first`` ([1 or B, N])."""
    from ..denoise.denoiser import DiMOODenoiser

    n = len(plan.instructions)
    guided = cfg > 0 or image_cfg > 0
    first = None if first_codes is None else (first_codes.expand(n, -1), plan.first_layout)
    batch = build_edit_batch(encode, ids, plan.instructions, plan.edit_type,
                             codes.expand(n, -1), plan.layout, guided, first)
    return DiMOODenoiser(model, batch, ids, cfg, None, steps, image_cfg=image_cfg)

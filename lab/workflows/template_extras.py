"""What the example workflows show a user around the pack's own nodes (build_examples.py):

* TEMPLATE_FILES (kept in tests/kit/templates.py, which the product's tests read): the file
  name of each UI template, which ComfyUI's template browser shows as its title.
* ``enlarged`` / ``before_after``: nano's 48 px results shown 5x (ComfyUI's Upscale Image By,
  nearest-exact, into a Preview Image), next to the input for inpainting and outpainting; the
  Save Image node keeps saving the pack's own 48 px output.
* ``checkpoint_note``: a Markdown note beside a real-model template's loader saying where the
  Lumina-DiMOO folder goes (the host's own message when it is missing names only the input).

Each helper takes the builder's node constructor (``make``: build_examples.Node), so the
helpers and the graphs share one node type.
"""

from __future__ import annotations

from collections.abc import Callable

from tests.kit.templates import TEMPLATE_FILES, VIEW_METHOD

__all__ = ["CHECKPOINT_NOTE", "TEMPLATE_FILES", "VIEW_FACTOR", "VIEW_METHOD", "before_after",
           "checkpoint_note", "enlarged"]

VIEW_FACTOR = 5
"""Nano's 48 px results shown 5x: 240 px, every pixel a 5 x 5 block (nearest-exact). The
frontend draws an image at its own size at most: 48 px showed as about 34 px at a template's
fitted view."""


def enlarged(make: Callable, ids: tuple[int, int], src: tuple[int, int], pos: tuple[int, int],
             title: str, size: tuple[int, int], factor: int = VIEW_FACTOR) -> list:
    """Upscale Image By (nearest-exact, ``factor``) -> Preview Image, below each other at
    ``pos``: the images of output ``src`` (node id, slot) at a size a person can judge."""
    scale_id, preview_id = ids
    x, y = pos
    return [make(scale_id, "ImageScaleBy", (x, y), {"upscale_method": VIEW_METHOD,
                                                   "scale_by": float(factor)},
                 {"image": src}, f"Upscale {factor}x to look at (nearest)",
                 (size[0], 82)),
            make(preview_id, "PreviewImage", (x, y + 122), {}, {"images": (scale_id, 0)},
                 title, size)]


def before_after(make: Callable, ids: tuple[int, int, int], before: tuple[int, int],
                 after: tuple[int, int], pos: tuple[int, int], title: str,
                 size: tuple[int, int]) -> list:
    """Image Stitch (before | after, a 2 px white gap) -> ``enlarged``."""
    stitch_id, *rest = ids
    x, y = pos
    stitch = make(stitch_id, "ImageStitch", (x, y), {"direction": "right",
                                                     "match_image_size": True,
                                                     "spacing_width": 2,
                                                     "spacing_color": "white"},
                  {"image1": before, "image2": after}, "Input | result", (size[0], 160))
    return [stitch, *enlarged(make, tuple(rest), (stitch_id, 0), (x, y + 200), title, size)]


CHECKPOINT_NOTE = """## Needs the Lumina-DiMOO checkpoint

This template runs the real 8B model. Download the whole Hugging Face repository
`Alpha-VLLM/Lumina-DiMOO` and keep its layout, in ComfyUI's `models/lumina_dimoo/Lumina-DiMOO/`:

`huggingface-cli download Alpha-VLLM/Lumina-DiMOO --local-dir models/lumina_dimoo/Lumina-DiMOO`

Then press **R** (refresh) and pick it in **Load DiMOO Model**. Until it is there, Run says
*Load DiMOO Model rejected the value for model_name*: that is this missing folder.

Memory: bf16 needs a 24 GB card; `weight_dtype` fp8 12-16 GB (see the loader's help)."""


def checkpoint_note(make: Callable, id: int, pos: tuple[int, int], size: tuple[int, int]
                    ) -> object:
    """A Markdown note (the frontend's MarkdownNote, never sent to the server) saying where
    the checkpoint goes and what the host's message means when it is missing."""
    return make(id, "MarkdownNote", pos, {"text": CHECKPOINT_NOTE},
                title="Before you run: the checkpoint", size=size)

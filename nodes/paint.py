"""Inpainting / outpainting on the nodes' side: the LADR Paint Options node (LADR_PAINT socket ->
`ladr_core.dimoo.tasks.painting.PaintOptions`) and the sampler's checks of its `image` + `mask`.

The sampler's optional `image` (IMAGE) and `mask` (MASK, 1 = regenerate) come through links, so
they are checked in execute, before the model loads, each message naming the input that is wrong
(nodes/validate.py rule 3): here what only the graph gets wrong, in the library
(``prepare_paint``) their values and sizes, once. The core (painting.py) encodes the image, keeps
the known tokens and returns the plan that VQ Decode uses to paste the original pixels back.
"""

from __future__ import annotations

from typing import Any

from ladr_core.dimoo import FIT_MODES, PaintOptions

from . import host
from .handles import PAINT_TYPE

io, _ = host.v3()

NODE = "DiMOO Sampler"
FEATHER_AUTO = -1  # widget value: half a token (8 px for Lumina-DiMOO, 2 px for dimoo-nano)


def build_options(mask_threshold: float, mask_grow: int, paste_back: bool,
                  feather: int, fit: str = "exact") -> PaintOptions:
    """Widget values -> PaintOptions (its own checks name the bad input)."""
    try:
        return PaintOptions(threshold=float(mask_threshold), grow=int(mask_grow),
                            paste=bool(paste_back),
                            feather=None if int(feather) == FEATHER_AUTO else int(feather),
                            fit=fit)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"LADR Paint Options: {exc}") from exc


def painting(image: Any, mask: Any, paint: Any) -> bool:
    """Whether the sampler inpaints / outpaints: its image and mask are both connected (neither
    = text to image). What only the graph can get wrong is refused here, naming the input and
    the fix: one of the two connected, Load Image's empty 64x64 mask, a stale paint socket. The
    image's and mask's values and sizes are checked once, by the library (prepare_paint)."""
    if paint is not None and not isinstance(paint, PaintOptions):
        raise ValueError(f"{NODE}: paint is a {type(paint).__name__}, not this version's paint "
                         "options; "
                         "re-create the LADR Paint Options node and reconnect it")
    if image is None and mask is None:
        return False
    if image is None:
        raise ValueError(f"{NODE}: image is not connected but mask is; connect the image the "
                         "mask was drawn on (e.g. Load Image's IMAGE), or disconnect the mask")
    if mask is None:
        raise ValueError(f"{NODE}: mask is not connected but image is; connect a MASK "
                         "(1 = regenerate; Load Image's mask editor, Pad Image for Outpainting) "
                         "or disconnect the image for text-to-image")
    if _blank_placeholder(image, mask):
        raise ValueError(f"{NODE}: mask is empty and not the image's size (Load Image gives a "
                         "64x64 empty mask when nothing was painted); paint the region to "
                         "regenerate in Load Image's mask editor, or disconnect image and mask")
    return True


def _blank_placeholder(image: Any, mask: Any) -> bool:
    """Load Image's output for an image without a painted mask: zeros [1, 64, 64]."""
    shape = getattr(mask, "shape", ())
    return (len(shape) == 3 and tuple(shape[1:]) != tuple(getattr(image, "shape", (0, 0, 0))[1:3])
            and not bool(mask.any()))


def size_note(image: Any, width: int, height: int, auto: int) -> str:
    """'; size from the image ...' when a width / height widget asks for another size."""
    if image is None:
        return ""
    h, w = int(image.shape[1]), int(image.shape[2])
    if (width in (auto, w)) and (height in (auto, h)):
        return ""
    return f"; size {w}x{h} from the image (width/height widgets not used)"


class PaintOptionsNode(io.ComfyNode):
    """How the sampler turns a MASK into tokens to regenerate, and how VQ Decode pastes back."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LADR_PaintOptions",
            display_name="LADR Paint Options",
            category="LADR",
            search_aliases=["inpaint", "outpaint", "mask", "paste", "feather"],
            description="Inpainting / outpainting options for DiMOO Sampler's image + mask: "
            "which tokens the mask regenerates and how VQ Decode blends the original pixels "
            "back. Without this node the defaults below apply.",
            inputs=[
                io.Float.Input("mask_threshold", default=0.5, min=0.0, max=0.99, step=0.01,
                               tooltip="A token (16x16 px patch) is regenerated when the mask "
                               "covers more than this share of it (official 0.5)."),
                io.Int.Input("mask_grow", default=0, min=0, max=64,
                             tooltip="Grow the regenerated region by this many tokens in every "
                             "direction (official dilate; 0 = off)."),
                io.Boolean.Input("paste_back", default=True,
                                 tooltip="VQ Decode puts the original pixels back outside the "
                                 "regenerated tokens (the VQ round trip otherwise softens "
                                 "them)."),
                io.Int.Input("feather", default=FEATHER_AUTO, min=FEATHER_AUTO, max=256,
                             tooltip="Pixels of blend just outside the regenerated region when "
                             "pasting back (the region stays as generated); 0 = a hard edge, "
                             "-1 = half a token (8 px for Lumina-DiMOO, 2 px for dimoo-nano)."),
                io.Combo.Input("fit", options=list(FIT_MODES), default="exact",
                               tooltip="An image whose sides are not multiples of 16 px (4 on "
                               "dimoo-nano): exact = refuse it, naming the nearest sizes; crop "
                               "= centre crop; resize = to the nearest valid size. The mask "
                               "follows the image."),
            ],
            outputs=[io.Custom(PAINT_TYPE).Output("paint", tooltip="-> DiMOO Sampler's paint.")],
        )

    # No validate_inputs: the schema's ranges are the whole check (nodes/validate.py rule 1).

    @classmethod
    def execute(cls, mask_threshold: float, mask_grow: int, paste_back: bool,
                feather: int, fit: str = "exact") -> io.NodeOutput:
        return io.NodeOutput(build_options(mask_threshold, mask_grow, paste_back, feather, fit))

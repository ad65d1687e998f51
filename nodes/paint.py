"""Inpainting / outpainting on the nodes' side: the paint option widgets (-> PaintOptions; DiMOO
Paint Canvas and the deprecated LADR Paint Options node) and the checks of an `image` + `mask` pair
that only the graph gets wrong; their values and sizes are the library's (``prepare_paint``).
"""

from __future__ import annotations

from typing import Any

from ladr_core.dimoo import FIT_MODES, PaintOptions

from . import host, register_node
from .handles import PAINT_TYPE
from .validate import check_socket

io, _ = host.v3()

NODE = "DiMOO Sampler"
FEATHER_AUTO = -1  # widget value: half a token (8 px for Lumina-DiMOO, 2 px for dimoo-nano)


def build_options(mask_threshold: float, mask_grow: int, paste_back: bool,
                  feather: int, fit: str = "exact", node: str = "LADR Paint Options"
                  ) -> PaintOptions:
    """Widget values -> PaintOptions (its own checks name the bad input)."""
    try:
        return PaintOptions(threshold=float(mask_threshold), grow=int(mask_grow),
                            paste=bool(paste_back),
                            feather=None if int(feather) == FEATHER_AUTO else int(feather),
                            fit=fit)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{node}: {exc}") from exc


def painting(image: Any, mask: Any, paint: Any, node: str = NODE,
             unpainted_fix: str = "disconnect image and mask") -> bool:
    """Whether the sampler paints: image and mask both connected (neither: text to image). Only
    one of them, Load Image's empty 64x64 mask or a stale paint socket is refused here."""
    check_socket("paint", paint, PaintOptions, "paint options", "LADR Paint Options")
    if image is None and mask is None:
        return False
    if image is None:
        raise ValueError(f"{node}: image is not connected but mask is; connect the image the "
                         "mask was drawn on (e.g. Load Image's IMAGE), or disconnect the mask")
    if mask is None:
        raise ValueError(f"{node}: mask is not connected but image is; connect a MASK "
                         "(1 = regenerate; Load Image's mask editor, Pad Image for Outpainting) "
                         "or disconnect the image for text-to-image")
    if _blank_placeholder(image, mask):
        raise ValueError(f"{node}: mask is empty and not the image's size (Load Image gives a "
                         "64x64 empty mask when nothing was painted); paint the region to "
                         f"regenerate in Load Image's mask editor, or {unpainted_fix}")
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


def option_inputs() -> list:
    """The paint option widgets (defaults: the official painting)."""
    return [
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
    ]


@register_node(menu=190)
class PaintOptionsNode(io.ComfyNode):
    """Deprecated (kept so saved workflows load): the legacy sampler's paint options; DiMOO
    Paint Canvas shows the same widgets beside its image and mask."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LADR_PaintOptions",
            display_name="LADR Paint Options (legacy)",
            is_deprecated=True,
            category="LADR",
            search_aliases=["inpaint", "outpaint", "mask", "paste", "feather"],
            description="Legacy: the paint options of DiMOO Sampler (legacy)'s image + mask. "
            "New workflows set them on DiMOO Paint Canvas.",
            inputs=option_inputs(),
            outputs=[io.Custom(PAINT_TYPE).Output("paint", tooltip="-> DiMOO Sampler (LADR, legacy)'s "
                                                    "paint.")],
        )

    @classmethod
    def execute(cls, mask_threshold: float, mask_grow: int, paste_back: bool,
                feather: int, fit: str = "exact") -> io.NodeOutput:
        return io.NodeOutput(build_options(mask_threshold, mask_grow, paste_back, feather, fit))

"""The sampler's and DiMOO Edit's progress-bar preview (docs/ARCHITECTURE.md section 7): each
step the colour-table preview with the known pixels in place, enlarged with nearest-neighbour
sampling to at least DISPLAY_MIN px or reduced to DISPLAY_MAX (ComfyUI's `--preview-size`), and
at the end the real VQ decode of the image it showed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from . import events

if TYPE_CHECKING:
    from ladr_core import DiMOOPipeline, GenerationResult

DISPLAY_MIN = 256
DISPLAY_MAX = 512

__all__ = ["DISPLAY_MAX", "DISPLAY_MIN", "final_image", "final_pil", "for_display"]


def for_display(pil: Any) -> Any:
    """A PIL preview at a size the frontend shows well: small ones enlarged by a whole factor
    (nearest), large ones reduced to DISPLAY_MAX on the longer side (Lanczos)."""
    from PIL import Image  # noqa: PLC0415 - pillow only when a preview is drawn

    side = max(pil.size)
    if side > DISPLAY_MAX:
        scale = DISPLAY_MAX / side
        size = (max(1, round(pil.width * scale)), max(1, round(pil.height * scale)))
        return pil.resize(size, Image.LANCZOS)
    factor = DISPLAY_MIN // side if side else 1
    if factor <= 1:
        return pil
    return pil.resize((pil.width * factor, pil.height * factor), Image.NEAREST)


def final_image(pipe: DiMOOPipeline, result: GenerationResult, item: int) -> torch.Tensor:
    """Image ``item`` of a GenerationResult as VQ Decode returns it: float [H, W, 3] (the real
    decode; the original pixels pasted back outside the regenerated tokens when painting)."""
    tokens = result.tokens[item:item + 1]
    plan = getattr(result, "paint", None)
    if plan is not None and plan.nothing_to_do:
        return plan.images[item].float()
    with torch.no_grad():
        image = pipe.decode(tokens, tuple(result.grid)).float()
    if plan is not None:
        from dataclasses import replace  # noqa: PLC0415

        one = replace(plan, images=plan.images[item:item + 1], codes=plan.codes[item:item + 1],
                      region=plan.region[item:item + 1], prompts=plan.prompts[:1])
        image = one.finish(image.to(plan.images.device)).float()
    return image[0].clamp(0.0, 1.0)


def final_pil(pipe: DiMOOPipeline, result: GenerationResult, item: int) -> Any:
    """``final_image`` as the PIL picture the progress bar shows."""
    return for_display(events.to_pil(final_image(pipe, result, item)))

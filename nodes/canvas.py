"""DiMOO Canvas, DiMOO Paint Canvas and DiMOO Token Canvas nodes -> the LADR_CANVAS socket
(nodes/handles.Canvas): what DiMOO Sampler paints on, as KSampler takes a LATENT from Empty Latent
Image, VAE Encode with a noise mask, or another KSampler. `prepare_job` turns a canvas and the
prompts into the library's checked request before the model loads.
"""

from __future__ import annotations

import math

import torch

from ladr_core import SIZE_STEP, DiMOOPipeline, InputError, check_denoise, nano_vq_factor
from ladr_core.dimoo import PaintJob, TextJob, nearest_multiples

from . import host, paint, register_node
from .connected import connected_models
from .handles import CANVAS_TYPE, TOKENS_TYPE, Canvas, DiMOOTokens
from .loader import model_grid
from .validate import ABSENT, check_socket, node_error

io, _ = host.v3()

SIZE_MAX = 2048
SIZE_AUTO = 0  # width/height widget value meaning "the checkpoint's default_size"
BATCH_MAX = 64
NODE = "DiMOO Canvas"
PAINT_NODE = "DiMOO Paint Canvas"
TOKEN_NODE = "DiMOO Token Canvas"
FIT_FIX = f"set fit to crop or resize in {PAINT_NODE}, or resize the image first (Upscale Image)"
IMG2IMG = f"Load Image -> {PAINT_NODE} (no mask) -> DiMOO Sampler, denoise 0.6"
VARIATIONS = f"DiMOO Sampler's tokens -> {TOKEN_NODE} -> DiMOO Sampler, denoise 0.5"
NO_PICTURE_FIX = (f"set denoise to 1.0 for text to image, or redraw a picture: {IMG2IMG}; or "
                  f"a drawn one: {VARIATIONS}")


def resolve_size(value: int) -> int | None:
    """Widget width/height -> pixels, None for SIZE_AUTO (the pipeline's default_size)."""
    return None if int(value) == SIZE_AUTO else int(value)


def model_grids() -> dict[str, int]:
    """Pixels per token side of each model the pack knows (Lumina-DiMOO's 16, the nano's own),
    for messages given before one is connected."""
    grids = {"Lumina-DiMOO 8B": SIZE_STEP}
    if nano := nano_vq_factor():
        grids["dimoo-nano"] = nano
    return dict(sorted(grids.items(), key=lambda kv: kv[1]))


def connected_grids(prompt: object, node_id: object) -> dict[str, int]:
    """The checkpoints a canvas's sampler is connected to in the prompt (nodes/connected.py) whose
    grid is known without loading them -> pixels per token side ({"dimoo-nano": 4})."""
    grids = {}
    for name in connected_models(prompt, node_id):
        if (grid := model_grid(name)) is not None:
            grids[name.removesuffix(" (built-in)")] = grid
    return grids


def grid_error(name: str, value: object, grids: dict[str, int] | None = None) -> InputError | None:
    """A width / height off the connected models' token grid (`grids`), or with none known, on no
    known model's grid, with the nearest valid sizes; None for SIZE_AUTO or a link. The
    pipeline checks the model's own grid again when the sampler runs."""
    if not isinstance(value, int) or isinstance(value, bool) or value == SIZE_AUTO:
        return None
    for label, g in (grids or {}).items():
        if value % g:
            return InputError(name, f"={value} is off the token grid of the connected model "
                              f"{label} (one token per {g} x {g} px)",
                              f"nearest valid {name}: {nearest_multiples(value, g)}")
    if grids:
        return None
    grids = model_grids()
    if value % math.gcd(*grids.values()) == 0:
        return None
    first, *rest = [f"{label} draws one token per {g} x {g} px" for label, g in grids.items()]
    drawn = ", ".join([first, *(r.replace(" draws one token per", " one per") for r in rest)])
    near = ", ".join(f"{nearest_multiples(value, g)} for {label}" for label, g in grids.items())
    return InputError(name, f"={value} is on no model's token grid ({drawn})",
                      f"nearest valid {name}: {near}")


def range_error(name: str, value: object) -> InputError | None:
    """A width / height outside 0..SIZE_MAX (a workflow file, an API prompt) in the words of
    ComfyUI's range check, which it skips for inputs a ``validate_inputs`` names."""
    if not isinstance(value, int) or isinstance(value, bool) or SIZE_AUTO <= value <= SIZE_MAX:
        return None
    if value > SIZE_MAX:
        return InputError(name, f"={value} is bigger than max of {SIZE_MAX}",
                          f"set {name} to at most {SIZE_MAX}")
    return InputError(name, f"={value} is smaller than min of {SIZE_AUTO}",
                      f"set {name} to a size in pixels, or 0 for the checkpoint's default size")


CANVAS_ID = "LADR_Canvas"
_NOTED: dict[tuple, tuple | None] = {}
"""(canvas node id, width, height) -> the grids ``note_prompt`` noted for that canvas's
``validate_inputs`` (None where two prompts disagreed)."""
_NOTED_MAX = 256  # entries a prompt never validated (a canvas that feeds no output) leave


def _size_key(value: object) -> int | None:
    """A size as ComfyUI's validation hands it on (``int(value)``); None for a link or a non-int."""
    try:
        return None if isinstance(value, list) else int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None


def note_prompt(request: object) -> object:
    """ComfyUI's on-prompt hook: for each DiMOO Canvas of the prompt about to be validated, note
    the grids of its sampler's models for its ``validate_inputs``, which ComfyUI calls without
    the prompt. Two prompts that disagree on a key note nothing (validation then falls back to
    "on no model's grid"; execute checks the connected grid). Returns `request` unchanged."""
    prompt = request.get("prompt") if isinstance(request, dict) else None
    if not isinstance(prompt, dict):
        return request
    if len(_NOTED) > _NOTED_MAX:
        _NOTED.clear()
    for node_id, node in prompt.items():
        if not isinstance(node, dict) or node.get("class_type") != CANVAS_ID:
            continue
        inputs = node.get("inputs") if isinstance(node.get("inputs"), dict) else {}
        key = (str(node_id), _size_key(inputs.get("width")), _size_key(inputs.get("height")))
        grids = tuple(sorted(connected_grids(prompt, node_id).items()))
        _NOTED[key] = grids if _NOTED.get(key, grids) == grids else None
    return request


def noted_grids(node_id: object, width: object, height: object) -> dict[str, int] | None:
    """The grids ``note_prompt`` noted for this canvas and size (each taken once), or None."""
    entry = _NOTED.pop((str(node_id), _size_key(width), _size_key(height)), None)
    return None if entry is None else dict(entry)


def prepare_job(pipe: DiMOOPipeline, prompts: list[str], canvas: Canvas, *,
                negative_prompt: str | None, cfg: float | None, node: str,
                names: dict[str, str] | None = None,
                fit_fix: str = FIT_FIX, denoise: float = 1.0) -> TextJob | PaintJob:
    """The request, checked once by the library before the model loads: text to image (denoise
    < 1 refused: no picture), or a redraw of the canvas's picture or tokens at `denoise`. Each
    message starts with `node` and names its input (`names`: library argument -> input)."""
    try:
        if canvas.tokens is not None:
            return pipe.prepare_tokens(prompts, canvas.tokens.tokens, canvas.tokens.width,
                                       canvas.tokens.height, negative_prompt=negative_prompt,
                                       cfg=cfg, batch_size=canvas.batch_size, denoise=denoise)
        if not canvas.painting:
            check_denoise(denoise, ("the canvas has no picture to redraw", NO_PICTURE_FIX))
            return pipe.prepare_text(prompts, negative_prompt=negative_prompt,
                                     width=resolve_size(canvas.width),
                                     height=resolve_size(canvas.height), cfg=cfg,
                                     batch_size=canvas.batch_size)
        return pipe.prepare_paint(prompts, image=canvas.image, mask=canvas.mask,
                                  options=canvas.paint, negative_prompt=negative_prompt, cfg=cfg,
                                  batch_size=canvas.batch_size, fit_fix=fit_fix,
                                  denoise=denoise)
    except InputError as err:
        raise node_error(node, err, names) from None


def size_inputs() -> list:
    """width and height (DiMOO Canvas, the legacy sampler), stepping 16 px, a size every model
    draws; web/ladr_canvas_grid.js moves the canvas's step to the connected model's grid."""
    steps = ("The widget steps on the connected model's token grid (dimoo-nano: 4 px, one "
             "token per 4 x 4 px; Lumina-DiMOO 8B: 16 px; 16 px while none is connected).")
    return [
        io.Int.Input("width", default=SIZE_AUTO, min=SIZE_AUTO, max=SIZE_MAX, step=SIZE_STEP,
                     tooltip=f"Image width in pixels. {steps} 0 = the checkpoint's default "
                     "size (Lumina-DiMOO 1024, dimoo-nano 48)."),
        io.Int.Input("height", default=SIZE_AUTO, min=SIZE_AUTO, max=SIZE_MAX, step=SIZE_STEP,
                     tooltip=f"Image height in pixels. {steps} 0 = the checkpoint's default "
                     "size."),
    ]


def batch_input() -> object:
    return io.Int.Input("batch_size", default=1, min=1, max=BATCH_MAX,
                        tooltip="Images per prompt.")


@register_node(menu=40)
class CanvasNode(io.ComfyNode):
    """An empty canvas: the image size and batch for DiMOO Sampler (text to image)."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id=CANVAS_ID,
            display_name=NODE,
            category="LADR",
            search_aliases=["empty latent", "size", "batch", "width", "height"],
            description="The image size and batch DiMOO Sampler draws (like Empty Latent "
            "Image). Without a canvas the sampler draws one image at the checkpoint's default "
            "size.",
            inputs=[*size_inputs(), batch_input()],
            outputs=[io.Custom(CANVAS_TYPE).Output("canvas", tooltip="-> DiMOO Sampler's "
                                                   "canvas.")],
            hidden=[io.Hidden.prompt, io.Hidden.unique_id],
        )

    @classmethod
    def validate_inputs(cls, width: object = ABSENT, height: object = ABSENT) -> bool | str:
        """At /prompt: a size out of range or off the connected model's grid (``note_prompt``;
        without a note, off every model's), one message naming the input. ComfyUI attaches it
        to both inputs named here (web/ladr_input_errors.js keeps it on the one it names) and
        skips its own range check for them, hence ``range_error``. A link is left to execute."""
        grids = noted_grids(getattr(cls.hidden, "unique_id", None), width, height)
        for name, value in (("width", width), ("height", height)):
            if (err := range_error(name, value) or grid_error(name, value, grids)) is not None:
                return str(node_error(NODE, err))
        return True

    @classmethod
    async def execute(cls, width: int, height: int, batch_size: int) -> io.NodeOutput:
        """The backstop of ``validate_inputs`` (a linked size, no on-prompt note). Async: ComfyUI
        runs a ready async node first (comfy_execution/graph.py, ux_friendly_pick_node), so a
        canvas with widget sizes refuses a bad one before Load DiMOO Model loads."""
        hidden = cls.hidden
        grids = connected_grids(getattr(hidden, "prompt", None), getattr(hidden, "unique_id", None))
        for name, value in (("width", width), ("height", height)):
            if (err := grid_error(name, value, grids)) is not None:
                raise node_error(NODE, err)
        return io.NodeOutput(Canvas(width=int(width), height=int(height),
                                    batch_size=int(batch_size)))


@register_node(menu=50)
class PaintCanvasNode(io.ComfyNode):
    """A picture with its mask and paint options: DiMOO Sampler inpaints / outpaints it, or
    without a mask redraws the whole picture at its denoise (image to image)."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LADR_PaintCanvas",
            display_name=PAINT_NODE,
            category="LADR",
            search_aliases=["inpaint", "outpaint", "mask", "noise mask", "paste", "feather",
                            "img2img", "image to image", "vae encode", "denoise"],
            description="A picture and its mask (1 = regenerate) for DiMOO Sampler to "
            "inpaint or outpaint (like VAE Encode + Set Latent Noise Mask): known tokens never "
            "change, VQ Decode pastes the original pixels back. Without a mask the whole "
            "picture is redrawn at DiMOO Sampler's denoise (image to image, like VAE Encode; "
            f"{IMG2IMG}). The picture sets the size.",
            inputs=[
                io.Image.Input("image", tooltip="The image to inpaint / outpaint (sets the "
                               "size; sides multiples of 16 px, or see fit)."),
                io.Mask.Input("mask", optional=True,
                              tooltip="1 = regenerate (Load Image's mask editor, Pad Image for "
                              "Outpainting). An empty mask returns the image unchanged, a full "
                              "one is text to image. Not connected: the whole picture, redrawn "
                              "at DiMOO Sampler's denoise (image to image; paste_back off)."),
                batch_input(),
                *paint.option_inputs(),
            ],
            outputs=[io.Custom(CANVAS_TYPE).Output("canvas", tooltip="-> DiMOO Sampler's "
                                                   "canvas.")],
        )

    @classmethod
    def execute(cls, image: torch.Tensor, batch_size: int, mask_threshold: float,
                mask_grow: int, paste_back: bool, feather: int, fit: str,
                mask: torch.Tensor | None = None) -> io.NodeOutput:
        if mask is not None:
            paint.painting(image, mask, None, PAINT_NODE, unpainted_fix="disconnect the mask "
                           "to redraw the whole picture (image to image: DiMOO Sampler's "
                           "denoise)")
        options = paint.build_options(mask_threshold, mask_grow, paste_back, feather, fit,
                                      node=PAINT_NODE)
        return io.NodeOutput(Canvas(batch_size=int(batch_size), image=image, mask=mask,
                                    paint=options))


@register_node(menu=60)
class TokenCanvasNode(io.ComfyNode):
    """Image tokens for DiMOO Sampler to redraw at its denoise (image to image from tokens)."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LADR_TokenCanvas",
            display_name=TOKEN_NODE,
            category="LADR",
            search_aliases=["variations", "img2img", "image to image", "latent", "denoise",
                            "tokens", "redraw"],
            description="Image tokens for DiMOO Sampler to redraw at its denoise: variations of "
            "a picture the model drew, like a LATENT from one KSampler into a second one with "
            f"denoise 0.5 ({VARIATIONS}). The tokens go in as they are (no VQ round trip) and "
            "set the size.",
            inputs=[
                io.Custom(TOKENS_TYPE).Input("tokens", tooltip="From DiMOO Sampler (or DiMOO VQ "
                                             "Encode): the picture to redraw, as tokens."),
                batch_input(),
            ],
            outputs=[io.Custom(CANVAS_TYPE).Output("canvas", tooltip="-> DiMOO Sampler's "
                                                   "canvas; set its denoise below 1.")],
        )

    @classmethod
    def execute(cls, tokens: DiMOOTokens, batch_size: int) -> io.NodeOutput:
        check_socket("tokens", tokens, DiMOOTokens, "image tokens", "DiMOO Sampler")
        return io.NodeOutput(Canvas(width=tokens.width, height=tokens.height,
                                    batch_size=int(batch_size), tokens=tokens))

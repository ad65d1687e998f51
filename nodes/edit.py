"""DiMOO Edit node: reference image + instruction -> edited image tokens (image-to-image).

The official Lumina-DiMOO editing path (ladr_core/dimoo/editing.py): the edit type's prompt
template, the reference image's tokens in the prompt, text and image guidance. Any strategy
runs it through the same sampler loop; progress, previews and stats as the DiMOO Sampler.
"""

from __future__ import annotations

from pathlib import Path

import ladr_core
from ladr_core.dimoo.edit_size import official_edit_size
from ladr_core.dimoo.editing import DEFAULT_EDIT_CFG, DEFAULT_IMAGE_CFG, EDIT_TYPES
from ladr_core.dimoo.painting import check_image

from . import events, host, preview
from .handles import CACHE_TYPE, MODEL_TYPE, POLICY_TYPE, TOKENS_TYPE, DiMOOModel
from .sampler import SEED_MAX, STRATEGIES, check_options, generate_tokens, pick_strategy
from .validate import input_error

io, _ = host.v3()

NODE = "DiMOO Edit"
OFFICIAL_SIZE, AS_IS = "official 512 px area", "as is"
SIZES = [OFFICIAL_SIZE, AS_IS]
NANO_CANNOT_EDIT = ("is the built-in dimoo-nano, which was trained for text-to-image only and "
                    "cannot edit")


def is_nano(pipe: object) -> bool:
    folder = getattr(pipe, "source_folder", None)
    return folder is not None and Path(folder).resolve() == ladr_core.nano_model_path().resolve()


def check_request(model: DiMOOModel, image: object, instruction: str, edit_type: str,
                  cache: object | None, style_image: object | None = None,
                  size: str = AS_IS) -> int:
    """One message per mistake, on its input, before anything runs; returns the image count.
    ``size`` OFFICIAL_SIZE: any image size is fine (it will be brought to its bucket)."""
    if is_nano(model.pipe):
        raise input_error(NODE, "model", NANO_CANNOT_EDIT,
                          "load the Lumina-DiMOO checkpoint (models/lumina_dimoo/) in Load DiMOO "
                          "Model")
    if edit_type not in EDIT_TYPES:
        raise input_error(NODE, "edit_type", f"{edit_type!r} is not a known edit type",
                          f"use one of {', '.join(EDIT_TYPES)}")
    if EDIT_TYPES[edit_type][1] is None and not instruction.strip():
        raise input_error(NODE, "instruction", "is empty",
                          "write the edit, e.g. 'make the sky red'")
    if cache is not None:
        raise input_error(NODE, "cache", "is connected, but ML-Cache does not support editing",
                          "disconnect the ML-Cache Options node")
    if size not in SIZES:
        raise input_error(NODE, "size", f"{size!r} is not a size choice",
                          f"use one of {', '.join(SIZES)}")
    if edit_type == "style" and style_image is None:
        raise input_error(NODE, "style_image", "is not connected, but edit_type 'style' needs "
                          "it", "connect the image whose style to copy (e.g. a Load Image)")
    if edit_type != "style" and style_image is not None:
        raise input_error(NODE, "style_image", f"is connected, but edit_type {edit_type!r} "
                          "does not use it", "set edit_type to style, or disconnect it")
    counts = []
    for name, value in (("image", image), ("style_image", style_image)):
        if value is None:
            continue
        try:
            checked = check_image(value, model.pipe.vq_factor, name, on_grid=size == AS_IS,
                                  fix=f"set size to {OFFICIAL_SIZE!r}, or resize or crop it "
                                  "first (Upscale Image, crop: center)")
        except ValueError as exc:
            raise ValueError(f"{NODE}: {exc}") from None
        counts.append(int(checked.shape[0]))
    if len(counts) == 2 and 1 not in counts and counts[0] != counts[1]:
        raise input_error(NODE, "style_image", f"is a batch of {counts[1]} for {counts[0]} "
                          "images", "give one style image, or one per image")
    return max(counts)


class DiMOOEdit(io.ComfyNode):
    """Image-to-image editing with Lumina-DiMOO, accelerated by LADR."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LADR_DiMOOEdit",
            display_name="DiMOO Edit (LADR)",
            category="LADR",
            search_aliases=["lumina", "dimoo", "ladr", "image to image", "edit", "instruct"],
            description="Edits an image by instruction with Lumina-DiMOO (image-to-image). By "
            "default the image is brought to the official editing size (about 512 x 512 px in "
            "area, its shape kept); the output has that size. The built-in nano model cannot "
            "edit.",
            inputs=_inputs(),
            outputs=[
                io.Custom(TOKENS_TYPE).Output("tokens", tooltip="Image tokens -> VQ Decode."),
                io.String.Output("stats", tooltip="Steps run, NFE, seconds, forwards saved."),
            ],
            hidden=[io.Hidden.unique_id],
        )

    @classmethod
    def execute(cls, model: DiMOOModel, image: object, instruction: str, edit_type: str,
                cfg: float, image_cfg: float, steps: int, temperature: float, seed: int,
                strategy: str, policy: object | None = None, cache: object | None = None,
                style_image: object | None = None, size: str = OFFICIAL_SIZE
                ) -> io.NodeOutput:
        check_options(policy, cache)
        count = check_request(model, image, instruction, edit_type, cache, style_image, size)
        note = ""
        if size == OFFICIAL_SIZE:
            image, note = _official(image, "image")
            if style_image is not None:
                style_image, more = _official(style_image, "style_image")
                note += more
        chosen, steps, picked = pick_strategy(strategy, policy, steps)
        note = picked + note
        node_id = getattr(cls.hidden, "unique_id", None) if cls.hidden else None
        host.load_to_device(model.patcher)
        tokens, stats = generate_tokens(model, node_id, chosen, None, instruction, steps=steps,
                                        cfg=cfg, image_cfg=image_cfg, temperature=temperature,
                                        seed=seed, reference=image, style=style_image,
                                        edit_type=edit_type, batch_size=count,
                                        preview_base=preview.base_for_edit(model.pipe, image,
                                                                           style_image))
        return io.NodeOutput(tokens, events.stats_text(stats) + note)


def _official(image: object, name: str) -> tuple[object, str]:
    """An IMAGE at its official 512 px-area bucket, and a stats note when that changed it."""
    sized = official_edit_size(image)
    if sized is image:
        return image, ""
    (h, w), (nh, nw) = image.shape[1:3], sized.shape[1:3]
    return sized, f"; {name} {w}x{h} -> {nw}x{nh} ({OFFICIAL_SIZE})"


def _inputs() -> list:
    return [
        io.Custom(MODEL_TYPE).Input("model", tooltip="From Load DiMOO Model: the Lumina-DiMOO "
                                    "checkpoint (the built-in nano cannot edit)."),
        io.Image.Input("image", tooltip="The image to edit (sets the output size; width and "
                       "height multiples of the VQ factor, 16 for Lumina-DiMOO)."),
        io.String.Input("instruction", multiline=True, default="make the sky a warm sunset",
                        tooltip="The edit, in words (for dense_* types the text is fixed and "
                        "this is not used)."),
        io.Combo.Input("edit_type", options=list(EDIT_TYPES), default="edit",
                       tooltip="The official template: edit (instruction edits), control "
                       "(prompt + control map), subject (prompt + object image), style (take "
                       "on style_image's style; no instruction), pred (the official *_pred: "
                       "your text, e.g. 'Generate a canny edge map according to the image.'), "
                       "dense_* (predict a map from the image, fixed text)."),
        io.Float.Input("cfg", default=DEFAULT_EDIT_CFG, min=0.0, max=30.0, step=0.05, round=0.01,
                       tooltip="Text guidance: cond + cfg*(cond - text-uncond). Official 2.5."),
        io.Float.Input("image_cfg", default=DEFAULT_IMAGE_CFG, min=0.0, max=30.0, step=0.05,
                       round=0.01, tooltip="Image guidance: + image_cfg*(cond - prompt without "
                       "the image). Official 4.0. Both 0 = one branch, a third of the compute."),
        io.Int.Input("steps", default=64, min=1, max=1000,
                     tooltip="Schedule length T. LADR usually finishes in far fewer steps."),
        io.Float.Input("temperature", default=1.0, min=0.0, max=5.0, step=0.05, round=0.01,
                       tooltip="Sampling temperature; 0 = greedy (deterministic, no noise)."),
        io.Int.Input("seed", default=0, min=0, max=SEED_MAX, control_after_generate=True,
                     tooltip="Random seed; batch item i uses seed + i."),
        io.Combo.Input("strategy", options=STRATEGIES, default="ladr",
                       tooltip="ladr: locality-aware dynamic rescue (fast). baseline: the "
                       "official cosine schedule. prophet: early-commit comparison."),
        io.Custom(POLICY_TYPE).Input("policy", optional=True,
                                     tooltip="Optional LADR Policy or Prophet Policy."),
        io.Custom(CACHE_TYPE).Input("cache", optional=True,
                                    tooltip="Not supported for editing: leave unconnected."),
        io.Image.Input("style_image", optional=True,
                       tooltip="edit_type style only: the image whose style `image` takes on. "
                       "The output has this image's size (as the official script)."),
        io.Combo.Input("size", options=SIZES, default=OFFICIAL_SIZE,
                       tooltip="official 512 px area: scale and centre-crop each image to the "
                       "official editing size closest to its shape (about 512 x 512 px in "
                       "area, e.g. 576 x 448), what the model was trained on. as is: keep the "
                       "size (a multiple of 16 px; larger costs more tokens)."),
    ]

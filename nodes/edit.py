"""DiMOO Edit node: reference image + instruction -> edited image tokens, the official
Lumina-DiMOO editing path (ladr_core/dimoo/tasks/editing.py) under any strategy, with the
sampler's progress, previews and stats (nodes/run.py).
"""

from __future__ import annotations

import torch

from ladr_core import DEFAULT_STRATEGY, InputError, MLCacheConfig, Strategy
from ladr_core.dimoo import DEFAULT_EDIT_CFG, DEFAULT_IMAGE_CFG, EDIT_TYPES, EditJob, check_job

from . import events, host, register_node
from .handles import (
    CACHE_TYPE,
    MODEL_TYPE,
    POLICY_TYPE,
    RULE_TYPE,
    DiMOOModel,
    SamplingRule,
)
from .rules import STRATEGIES, build_rule
from .run import generate_tokens, node_schedule
from .sampler import SEED_MAX, check_cache, token_outputs
from .validate import check_socket, input_error, node_error

io, _ = host.v3()

NODE = "DiMOO Edit"
OFFICIAL_SIZE, AS_IS = "official 512 px area", "as is"
SIZES = [OFFICIAL_SIZE, AS_IS]
SIZE_CHOICE = {OFFICIAL_SIZE: "official", AS_IS: "as is"}  # widget -> DiMOOPipeline.edit's
NAMES = {"style": "style_image"}  # the library's argument -> this node's input


def prepare_job(model: DiMOOModel, image: torch.Tensor, instruction: str, edit_type: str,
                cfg: float, image_cfg: float, cache: MLCacheConfig | None,
                style_image: torch.Tensor | None = None, size: str = OFFICIAL_SIZE) -> EditJob:
    """The edit, checked once by ``pipe.prepare_edit`` before anything loads (one message per
    mistake, on its input); the graph-only mistakes (size, style_image) here."""
    if size not in SIZE_CHOICE:
        raise input_error(NODE, "size", f"{size!r} is not a size choice",
                          f"use one of {', '.join(SIZES)}")
    if edit_type != "style" and style_image is not None:
        raise input_error(NODE, "style_image", f"is connected, but edit_type {edit_type!r} "
                          "does not use it", "set edit_type to style, or disconnect it")
    if edit_type == "style" and style_image is None:
        raise input_error(NODE, "style_image", "is not connected, but edit_type 'style' needs "
                          "it", "connect the image whose style to copy (e.g. a Load Image)")
    counts = [_batch(v) for v in (image, style_image) if v is not None]
    if len(counts) == 2 and 1 not in counts and counts[0] != counts[1]:
        raise input_error(NODE, "style_image", f"is a batch of {counts[1]} for {counts[0]} "
                          "images", "give one style image, or one per image")
    try:
        job = model.pipe.prepare_edit(instruction, image=image, edit_type=edit_type,
                                      style=style_image, size=SIZE_CHOICE[size], cfg=cfg,
                                      image_cfg=image_cfg, batch_size=max(counts))
        check_job(job, cache)
    except InputError as err:
        fixes = {"model": "load the Lumina-DiMOO checkpoint (models/lumina_dimoo/) in Load "
                 "DiMOO Model", "cache": "disconnect the ML-Cache Options node"}
        if size == AS_IS:
            fixes.update({n: f"set size to {OFFICIAL_SIZE!r}, or resize or crop it first "
                          "(Upscale Image, crop: center)" for n in ("image", "style_image")})
        raise node_error(NODE, err, NAMES, fixes if _fixable(err) else None) from None
    return job


def edit_rule(strategy: str, policy: Strategy | None, rule: SamplingRule | None) -> SamplingRule:
    """The `rule` socket's, else (workflows saved before it) `strategy` with the `policy` socket."""
    check_socket("rule", rule, SamplingRule, "sampling rule", "DiMOO Sampling Rule")
    if rule is None:
        return build_rule(strategy, policy, node=NODE)
    if policy is not None:
        raise input_error(NODE, "policy", "is connected together with rule, which carries the "
                          "strategy", "connect the policy to the DiMOO Sampling Rule instead, "
                          "or disconnect rule")
    return rule


def _batch(image: object) -> int:
    """An IMAGE's batch size (anything else counts 1: the library refuses it, naming it)."""
    return int(image.shape[0]) if isinstance(image, torch.Tensor) and image.dim() == 4 else 1


def _fixable(err: InputError) -> bool:
    """The node's own fixes apply to the model and cache inputs, and to an image's size."""
    return err.name in ("model", "cache") or "not a multiple" in err.problem


@register_node(menu=130)
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
            outputs=token_outputs(),
            hidden=[io.Hidden.unique_id],
        )

    @classmethod
    def execute(cls, model: DiMOOModel, image: torch.Tensor, instruction: str, edit_type: str,
                cfg: float, image_cfg: float, steps: int, temperature: float, seed: int,
                strategy: str, policy: Strategy | None = None,
                cache: MLCacheConfig | None = None, style_image: torch.Tensor | None = None,
                size: str = OFFICIAL_SIZE, rule: SamplingRule | None = None) -> io.NodeOutput:
        check_cache(cache)
        plan = node_schedule(NODE, steps)
        rule = edit_rule(strategy, policy, rule)
        job = prepare_job(model, image, instruction, edit_type, cfg, image_cfg, cache,
                          style_image, size)
        node_id = getattr(cls.hidden, "unique_id", None) if cls.hidden else None
        host.load_to_device(model.patcher, model.pipe.run_memory(job, len(job.items)))
        tokens, stats, note = generate_tokens(model, node_id, job, rule=rule, steps=plan,
                                              temperature=temperature, seed=seed, cache=None,
                                              max_batch=len(job.items))
        note += f"; {job.note}" if job.note else ""
        return io.NodeOutput(tokens, events.stats_text(stats) + note)


def _inputs() -> list:
    return [
        io.Custom(MODEL_TYPE).Input("model", tooltip="From Load DiMOO Model: the Lumina-DiMOO "
                                    "checkpoint (the built-in nano cannot edit)."),
        io.Image.Input("image", tooltip="The image to edit (sets the output size; width and "
                       "height multiples of the VQ factor, 16 for Lumina-DiMOO)."),
        io.String.Input("instruction", multiline=True, default="make the sky a warm sunset",
                        tooltip="The edit, in words (for dense_* and multi_view_* types the "
                        "text is fixed and this is not used). multiturn: one edit a line, "
                        "each applied to the result of the line before."),
        io.Combo.Input("edit_type", options=list(EDIT_TYPES), default="edit",
                       tooltip="The official template: edit (instruction edits), control "
                       "(prompt + control map), subject (prompt + object image), style (take "
                       "on style_image's style; no instruction), pred (the official *_pred: "
                       "your text, e.g. 'Generate a canny edge map according to the image.'), "
                       "dense_* (predict a map from the image, fixed text), multi_view_* (the "
                       "image is an object's front view: draw it from that side; fixed text), "
                       "multiturn (the instruction's lines edit one after the other)."),
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
        io.Combo.Input("strategy", options=STRATEGIES, default=DEFAULT_STRATEGY,
                       tooltip=f"{DEFAULT_STRATEGY} (default), ladr (with the policy), baseline "
                       "(the official cosine schedule), prophet or another rule of DiMOO "
                       "Sampling Rule. Not used when rule is connected."),
        io.Custom(POLICY_TYPE).Input("policy", optional=True,
                                     tooltip="Optional LADR Policy or Prophet Policy (without "
                                     "rule; with rule, connect it to the DiMOO Sampling Rule)."),
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
        # Appended last and optional: saved workflows keep their widgets' order.
        io.Custom(RULE_TYPE).Input("rule", optional=True,
                                   tooltip="Optional DiMOO Sampling Rule, as DiMOO Sampler takes "
                                   "it: the strategy with its settings and policy. Connected, "
                                   "it is used instead of strategy and policy."),
    ]

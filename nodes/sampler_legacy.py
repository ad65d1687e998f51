"""DiMOO Sampler (legacy): the sampler as workflows saved before 2026-11 have it (node_id
`LADR_DiMOOSampler`, deprecated: it loads and runs, and is not offered for new graphs).

A thin adapter: from its own widgets it builds the SamplingRule and Canvas that DiMOO Sampling
Rule and DiMOO (Paint) Canvas output and runs nodes/sampler.sample, so a saved workflow samples
what it sampled before. Input names, order and messages are those it shipped with.
"""

from __future__ import annotations

import torch

from ladr_core import MLCacheConfig, Strategy
from ladr_core.dimoo import PaintOptions

from . import batching, register_node, rules
from . import paint as paint_module
from .canvas import SIZE_AUTO, batch_input, size_inputs
from .handles import MODEL_TYPE, PAINT_TYPE, Canvas, DiMOOModel, step_map_ui
from .host import v3
from .sampler import (
    EMPTY_PROMPT,
    cache_input,
    check_cache,
    lines_input,
    max_batch_input,
    prompt_inputs,
    run_inputs,
    sample,
    token_outputs,
)

io, _ = v3()

NODE = "DiMOO Sampler"
FIT_FIX = ("set fit to crop or resize in LADR Paint Options (connected to paint), or resize the "
           "image first (Upscale Image)")


@register_node(menu=180)
class LegacyDiMOOSampler(io.ComfyNode):
    """Deprecated twin of DiMOO Sampler with the rule and canvas as widgets of its own."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LADR_DiMOOSampler",
            display_name="DiMOO Sampler (LADR, legacy)",
            category="LADR",
            is_deprecated=True,
            search_aliases=["lumina", "dimoo", "ladr", "text to image", "masked diffusion"],
            description="Legacy DiMOO Sampler of saved workflows: runs as before. New graphs "
            "use DiMOO Sampler with DiMOO Sampling Rule and DiMOO Canvas.",
            inputs=legacy_inputs(),
            outputs=token_outputs(),
            hidden=[io.Hidden.unique_id],
            # its UI output (the step map, handles.step_map_ui) is sent again for a cached run
            has_intermediate_output=True,
        )

    @classmethod
    def validate_inputs(cls, prompt: str | None = None) -> bool | str:
        """An empty prompt, named alone (width / height keep the host's range check, and the run
        checks them on the model's grid: nodes/validate.py)."""
        if isinstance(prompt, str) and not prompt.strip():
            return EMPTY_PROMPT
        return True

    @classmethod
    def execute(cls, model: DiMOOModel, prompt: str, negative_prompt: str, width: int,
                height: int, steps: int, cfg: float, temperature: float, seed: int,
                batch_size: int, strategy: str, one_prompt_per_line: bool,
                policy: Strategy | None = None, cache: MLCacheConfig | None = None,
                max_batch: int = batching.AUTO, image: torch.Tensor | None = None,
                mask: torch.Tensor | None = None, paint: PaintOptions | None = None,
                tau: float = rules.AUTO, gamma: float = rules.AUTO,
                token: str = "sample") -> io.NodeOutput:
        check_cache(cache)
        rule = rules.build_rule(strategy, policy, rules.RuleFields(tau, gamma, token), NODE)
        canvas = legacy_canvas(width, height, batch_size, image, mask, paint)
        node_id = getattr(cls.hidden, "unique_id", None) if cls.hidden else None
        tokens, text = sample(model, node_id, prompt=prompt, negative_prompt=negative_prompt,
                              rule=rule, canvas=canvas, steps=steps, cfg=cfg,
                              temperature=temperature, seed=seed,
                              one_prompt_per_line=one_prompt_per_line, cache=cache,
                              max_batch=max_batch, names={"options": "paint"},
                              fit_fix=FIT_FIX,
                              note=paint_module.size_note(image, width, height, SIZE_AUTO))
        return io.NodeOutput(tokens, text, ui=step_map_ui(tokens))


def legacy_canvas(width: int, height: int, batch_size: int, image: torch.Tensor | None,
                  mask: torch.Tensor | None, options: PaintOptions | None) -> Canvas:
    """Text to image at width x height, or with image and mask both connected, their canvas."""
    if paint_module.painting(image, mask, options):
        return Canvas(batch_size=batch_size, image=image, mask=mask, paint=options)
    return Canvas(width=width, height=height, batch_size=batch_size)


def legacy_inputs() -> list:
    """Today's inputs in their shipped order (appended ones optional)."""
    return [
        io.Custom(MODEL_TYPE).Input("model", tooltip="From Load DiMOO Model."),
        *prompt_inputs(),
        *size_inputs(),
        *run_inputs("Schedule length T, the price: no rule or preset runs more forward passes "
                    "than the official sampler at these steps."),
        batch_input(),
        rules.strategy_input(),
        lines_input(),
        rules.policy_input(),
        cache_input(),
        max_batch_input(optional=True),
        io.Image.Input("image", optional=True, tooltip="Optional: the image to inpaint / "
                       "outpaint (with mask). It sets the size (width/height not used)."),
        io.Mask.Input("mask", optional=True, tooltip="Optional, with image: 1 = regenerate."),
        io.Custom(PAINT_TYPE).Input("paint", optional=True,
                                    tooltip="Optional LADR Paint Options (default: threshold "
                                    "0.5, no grow, paste back with a half-token feather)."),
        *rules.rule_inputs(),
    ]

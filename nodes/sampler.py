"""DiMOO Sampler node: prompt -> image tokens with LADR (or another sampling rule) + stats.

Composed the ComfyUI way: the sampling rule comes through one socket (`rule`, nodes/rules.py;
none = ladr_core.DEFAULT_STRATEGY), the canvas through another (`canvas`, nodes/canvas.py;
none = one image at the default size). `sample` is the node's whole run, shared with the legacy
sampler (nodes/sampler_legacy.py); the run itself is nodes/run.py.
"""

from __future__ import annotations

import ladr_core
from ladr_core import DEFAULT_STEPS, DEFAULT_STRATEGY, MAX_STEPS, MLCacheConfig, resolve_strategy

from . import batching, events, register_node, run
from .canvas import FIT_FIX, IMG2IMG, VARIATIONS, prepare_job
from .handles import (
    CACHE_TYPE,
    CANVAS_TYPE,
    MODEL_TYPE,
    RULE_TYPE,
    TOKENS_TYPE,
    Canvas,
    DiMOOModel,
    DiMOOTokens,
    SamplingRule,
    step_map_ui,
)
from .host import v3
from .validate import check_socket, input_error

io, _ = v3()

CFG_AUTO = -1.0  # cfg widget value meaning "the checkpoint's default_cfg"
SEED_MAX = 2**53 - 1  # exact in the browser's JS numbers
DENOISE_MIN = 0.01  # the widget's smallest strength: the core takes d in (0, 1], 0 would redraw nothing
NODE = "DiMOO Sampler"
EMPTY_PROMPT = "prompt is empty: write what the image should show"
CANVAS_NAMES = {n: f"canvas's {n}" for n in ("width", "height", "width and height", "batch_size",
                                             "image", "mask", "tokens")}
CANVAS_NAMES["options"] = "canvas's paint options"


def split_prompts(prompt: str, one_per_line: bool) -> tuple[list[str], int]:
    """The prompt widget -> (prompts, empty lines skipped): with `one_per_line` one prompt per
    non-empty line (the stats line counts the skipped ones). An empty prompt is refused."""
    if not prompt.strip():
        raise ValueError(f"{NODE}: {EMPTY_PROMPT}")
    if not one_per_line:
        return [prompt], 0
    lines = prompt.strip().splitlines()
    prompts = [line.strip() for line in lines if line.strip()]
    return prompts, len(lines) - len(prompts)


def resolve_cfg(value: float) -> float | None:
    """Widget cfg -> guidance scale, None for CFG_AUTO (the checkpoint's default_cfg)."""
    cfg = float(value)
    if cfg == CFG_AUTO:
        return None
    if not cfg >= 0.0:  # also refuses NaN
        raise input_error(NODE, "cfg", f"is {value!r}",
                          "use a scale >= 0, or -1 for the checkpoint's default")
    return cfg


def check_cache(cache: object | None) -> None:
    check_socket("cache", cache, MLCacheConfig, "MLCacheConfig", "ML-Cache Options")


def sample(model: DiMOOModel, node_id: str | None, *, prompt: str, negative_prompt: str,
           rule: SamplingRule, canvas: Canvas, steps: int, cfg: float, temperature: float,
           seed: int, one_prompt_per_line: bool, cache: MLCacheConfig | None, max_batch: int,
           names: dict[str, str] = CANVAS_NAMES, fit_fix: str = FIT_FIX, note: str = "",
           denoise: float = 1.0) -> tuple[DiMOOTokens, str]:
    """A sampler node's run: the request checked once (`canvas.prepare_job`; `names`: library
    arguments -> the node's inputs), then `run.load_and_run` -> (tokens, the stats line with
    every note, the node's own `note` first)."""
    plan = run.node_schedule(NODE, steps, denoise)
    prompts, skipped = split_prompts(prompt, one_prompt_per_line)
    made = canvas.tokens.model_key[:2] if canvas.tokens is not None else model.key[:2]
    if tuple(made) != tuple(model.key[:2]):  # (checkpoint, mtime): another codebook
        raise input_error(NODE, "canvas's tokens", "were made with another checkpoint (another "
                          "codebook)", "connect the DiMOO Sampler that made them to this Load "
                          "DiMOO Model")
    job = prepare_job(model.pipe, prompts, canvas, negative_prompt=negative_prompt or None,
                      cfg=resolve_cfg(cfg), node=NODE, names=names, fit_fix=fit_fix,
                      denoise=plan.denoise)
    tokens, stats, told = run.load_and_run(model, job, node_id, rule=rule, steps=plan,
                                           temperature=temperature, seed=seed, cache=cache,
                                           max_batch=max_batch)
    if skipped:
        told += f"; {skipped} empty prompt line{'s' * (skipped > 1)} skipped"
    told += note + (f"; {stats['note']}" if stats.get("note") else "")
    return tokens, events.stats_text(stats) + told


@register_node(menu=20)
class DiMOOSampler(io.ComfyNode):
    """Text-to-image (or inpaint) token sampling with Lumina-DiMOO, accelerated by LADR."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LADR_DiMOOSampler2",
            display_name="DiMOO Sampler (LADR)",
            category="LADR",
            search_aliases=["lumina", "dimoo", "ladr", "text to image", "masked diffusion",
                            "ksampler"],
            description="Samples DiMOO image tokens. The rule (default: ladr-global, LADR's rescue "
            "of confident masked tokens, fewer forward passes; the live preview shows them) "
            "comes from DiMOO Sampling Rule, the size or picture from a canvas node.",
            inputs=sampler_inputs(),
            outputs=token_outputs(),
            hidden=[io.Hidden.unique_id],
            # its UI output (the step map, handles.step_map_ui) is sent again for a cached run
            has_intermediate_output=True,
        )

    @classmethod
    def validate_inputs(cls, prompt: str | None = None) -> bool | str:
        """Refuses an empty prompt before anything runs (a link-fed prompt is not passed)."""
        if isinstance(prompt, str) and not prompt.strip():
            return EMPTY_PROMPT
        return True

    @classmethod
    def execute(cls, model: DiMOOModel, prompt: str, negative_prompt: str, steps: int,
                cfg: float, temperature: float, seed: int, one_prompt_per_line: bool,
                max_batch: int, rule: SamplingRule | None = None, canvas: Canvas | None = None,
                cache: MLCacheConfig | None = None, denoise: float = 1.0) -> io.NodeOutput:
        check_socket("rule", rule, SamplingRule, "sampling rule", "DiMOO Sampling Rule")
        check_socket("canvas", canvas, Canvas, "canvas", "DiMOO Canvas (or DiMOO Paint Canvas)")
        check_cache(cache)
        node_id = getattr(cls.hidden, "unique_id", None) if cls.hidden else None
        rule = rule or SamplingRule(resolve_strategy(DEFAULT_STRATEGY), default=True)
        tokens, text = sample(model, node_id, prompt=prompt, negative_prompt=negative_prompt,
                              rule=rule, canvas=canvas or Canvas(),
                              steps=steps, cfg=cfg, temperature=temperature, seed=seed,
                              one_prompt_per_line=one_prompt_per_line, cache=cache,
                              max_batch=max_batch, denoise=denoise)
        return io.NodeOutput(tokens, text, ui=step_map_ui(tokens))


def _nano_cfg_hint() -> str:
    """'; the built-in dimoo-nano was tuned for X[, dimoo-emoji for Y]' (those that say)."""
    tuned = [(name, value) for name, value in (("dimoo-nano", ladr_core.nano_default_cfg()),
                                               ("dimoo-emoji", ladr_core.emoji_default_cfg()))
             if value is not None]
    if not tuned:
        return ""
    (first, value), *rest = tuned
    more = "".join(f", {name} for {v:g}" for name, v in rest)
    return f"; the built-in {first} was tuned for {value:g}{more}"


def prompt_inputs() -> list:
    """prompt and negative_prompt (both sampler nodes)."""
    return [
        io.String.Input("prompt", multiline=True, default="a red apple on a wooden table",
                        tooltip="What the image shows. With one_prompt_per_line, each line is "
                        "its own prompt (a batch of prompts)."),
        io.String.Input("negative_prompt", multiline=True, default="",
                        tooltip="Optional: what to steer away from (used by CFG; empty = the "
                        "model's unconditional prompt)."),
    ]


def run_inputs(steps_tip: str) -> list:
    """steps, cfg, temperature and seed (both sampler nodes)."""
    return [
        io.Int.Input("steps", default=DEFAULT_STEPS, min=1, max=MAX_STEPS, tooltip=steps_tip),
        # step 0.05: the frontend shows -floor(log10(step)) decimals, so 0.75 stays 0.75
        io.Float.Input("cfg", default=CFG_AUTO, min=CFG_AUTO, max=30.0, step=0.05, round=0.01,
                       tooltip="Classifier-free guidance scale s: (1+s)*cond - s*uncond "
                       f"(Lumina-DiMOO: 4.0{_nano_cfg_hint()}; 0 = no guidance, half the "
                       "compute). -1 = the connected checkpoint's default."),
        io.Float.Input("temperature", default=1.0, min=0.0, max=5.0, step=0.05, round=0.01,
                       tooltip="Sampling temperature; 0 = greedy (deterministic, no noise)."),
        io.Int.Input("seed", default=0, min=0, max=SEED_MAX, control_after_generate=True,
                     tooltip="Random seed; batch item i uses seed + i."),
    ]


def token_outputs() -> list:
    """tokens and stats (the sampler nodes and DiMOO Edit)."""
    return [io.Custom(TOKENS_TYPE).Output("tokens", tooltip="Image tokens -> VQ Decode."),
            io.String.Output("stats", tooltip="Steps run, NFE, seconds, forwards saved.")]


def lines_input() -> object:
    return io.Boolean.Input("one_prompt_per_line", default=False,
                            tooltip="Treat each non-empty prompt line as a separate prompt.")


def max_batch_input(optional: bool) -> object:
    return io.Int.Input("max_batch", default=batching.AUTO, min=batching.AUTO,
                        max=batching.MAX_IN_FLIGHT, optional=optional,
                        tooltip="Images in flight at once. More prompts (one per line) or a "
                        "larger batch_size roll through: a finished image makes room for the "
                        "next. Images are identical whatever the value; it trades speed for "
                        "memory. 0 = automatic: what the GPU's free memory holds (up to 8), 4 "
                        "on a CPU.")


def cache_input() -> object:
    return io.Custom(CACHE_TYPE).Input("cache", optional=True,
                                       tooltip="Optional ML-Cache Options (default: no cache).")


def sampler_inputs() -> list:
    return [
        io.Custom(MODEL_TYPE).Input("model", tooltip="From Load DiMOO Model."),
        *prompt_inputs(),
        *run_inputs("Schedule length T, the price: the official sampler's forward passes per "
                    "image. No rule or preset runs more; LADR usually finishes in fewer."),
        lines_input(),
        max_batch_input(optional=False),
        io.Custom(RULE_TYPE).Input("rule", optional=True,
                                   tooltip="Optional DiMOO Sampling Rule: the strategy and its "
                                   f"settings (default: {DEFAULT_STRATEGY})."),
        io.Custom(CANVAS_TYPE).Input("canvas", optional=True,
                                     tooltip="Optional DiMOO Canvas (size, batch) or DiMOO Paint "
                                     "Canvas (a picture and its mask to inpaint / outpaint, "
                                     "or without a mask a picture to redraw at denoise) or "
                                     "DiMOO Token Canvas (a sampler's tokens to redraw at "
                                     "denoise: variations); default: one image at the "
                                     "checkpoint's default size."),
        cache_input(),
        # last and optional: API prompts and UI workflows saved before it load unchanged (1.0)
        io.Float.Input("denoise", default=1.0, min=DENOISE_MIN, max=1.0, step=0.01,
                       optional=True,
                       tooltip="How much of the canvas's picture to redraw (KSampler's "
                       "denoise): 1.0 = all of it (text to image; a picture then only sets "
                       "the size); lower keeps more of the picture (above 0: 0 would redraw nothing). "
                       "With a mask it applies inside the mask. Image to image: "
                       f"{IMG2IMG}; variations of a drawn picture: {VARIATIONS}."),
    ]

"""DiMOO Sampler node: prompt -> image tokens with LADR (or the baseline / Prophet) + stats.

Each step: interrupt check, the codebook->RGB table preview of the shown image (`pipe.preview`,
never the VQ decoder; known pixels in place when painting, nodes/preview.py) on ComfyUI's
progress bar (the one preview channel), which advances the way LADR does (events.step_payload's
`progress`), and one small "ladr.step" event (masks, counters) for the widget. At the end the
preview becomes the real decode of that image.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ladr_core
from ladr_core import (
    SIZE_STEP,
    InputError,
    Strategy,
    resolve_strategy,
    size_problem,
    strategy_names,
)

from . import batching, events, host, rules, threads
from . import paint as paint_module
from . import policy as policy_node
from . import preview as preview_module
from .handles import (
    CACHE_TYPE,
    MODEL_TYPE,
    PAINT_TYPE,
    POLICY_TYPE,
    TOKENS_TYPE,
    DiMOOModel,
    DiMOOTokens,
)
from .validate import input_error, node_error

io, _ = host.v3()

STRATEGIES = ["ladr", *(n for n in strategy_names() if n != "ladr")]  # widget order: ladr first
PROGRESS_TOTAL = 1000  # progress-bar units: thousandths of the payload's `progress`
SIZE_MIN, SIZE_MAX = SIZE_STEP, 2048
SIZE_AUTO = 0  # width/height widget value meaning "the checkpoint's default_size"
CFG_AUTO = -1.0  # cfg widget value meaning "the checkpoint's default_cfg"
SEED_MAX = 2**53 - 1  # exact in the browser's JS numbers
NODE = "DiMOO Sampler"
EMPTY_PROMPT = "prompt is empty: write what the image should show"


def split_prompts(prompt: str, one_per_line: bool) -> tuple[list[str], int]:
    """The prompt widget -> (prompt list, empty lines skipped): one prompt per non-empty line
    when `one_per_line` (an empty line between prompts is skipped, and the stats line says
    so; it is not a prompt and not an error).

    ValueError when no prompt is left: an empty prompt is refused in both modes."""
    if not prompt.strip():
        raise ValueError(f"{NODE}: {EMPTY_PROMPT}")
    if not one_per_line:
        return [prompt], 0
    lines = prompt.strip().splitlines()
    prompts = [line.strip() for line in lines if line.strip()]
    return prompts, len(lines) - len(prompts)


def resolve_size(value: int) -> int | None:
    """Widget width/height -> pixels, None for SIZE_AUTO (the pipeline's default_size)."""
    return None if int(value) == SIZE_AUTO else int(value)


def resolve_cfg(value: float) -> float | None:
    """Widget cfg -> guidance scale, None for CFG_AUTO (the checkpoint's default_cfg)."""
    cfg = float(value)
    if cfg == CFG_AUTO:
        return None
    if not cfg >= 0.0:  # also refuses NaN
        raise input_error(NODE, "cfg", f"is {value!r}",
                          "use a scale >= 0, or -1 for the checkpoint's default")
    return cfg


def check_size(name: str, value: int, multiple: int = SIZE_STEP) -> str | None:
    """Error text for a bad width/height (SIZE_AUTO is fine), None when fine: the core's one size
    rule (ladr_core.dimoo.denoise.prompt.size_problem) with the checkpoint's VQ factor."""
    if value == SIZE_AUTO:
        return None
    if not SIZE_MIN <= value <= SIZE_MAX:  # the widget's range (the host checks it too)
        return f"{name}={value} is outside [{SIZE_MIN}, {SIZE_MAX}]"
    return size_problem(name, value, multiple)


def check_options(policy: object | None, cache: object | None) -> None:
    """Socket values built by another pack version (stale class) get a clear error."""
    if policy is not None and not isinstance(policy, Strategy):
        raise ValueError(
            f"policy: got a {type(policy).__module__}.{type(policy).__name__}, not this "
            "version's LADR / Prophet strategy (a workflow or node from another ComfyUI-LADR "
            "version?). Re-create the LADR Policy node and reconnect it."
        )
    if cache is not None and not isinstance(cache, ladr_core.MLCacheConfig):
        raise ValueError(
            f"cache: got a {type(cache).__name__}, not this version's MLCacheConfig. "
            "Re-create the ML-Cache Options node and reconnect it."
        )


def pick_strategy(name: str, connected: Strategy | None, steps: int,
                  rule: rules.RuleFields | None = None) -> tuple[Strategy, int | None, str]:
    """The strategy widget + the policy socket -> (strategy to run, the T to ask for, a note).

    The socket's strategy runs when it is of the chosen kind (an LADR Policy with "ladr", a
    Prophet Policy with "prophet"); otherwise the chosen kind's defaults run and the note says
    the connected one was not used (it may stay connected for A/B runs). A preset tuned at its
    own T (nano: 128) brings it: the T asked for is then None (the strategy's own, chosen by
    `Strategy.run_steps`), the `steps` widget is not used, and the note says so. A rule
    (nodes/rules.py) takes the rule widgets it reads and runs at the T it was tuned at.
    """
    if name not in STRATEGIES:
        raise ValueError(f"strategy: {name!r} is not one of {STRATEGIES}")
    note = ""
    chosen = (rule or rules.RuleFields()).strategy(name) if name in rules.RULES \
        else resolve_strategy(name)
    if connected is not None and connected.name == name:
        chosen = connected
    elif connected is not None:
        note = f"; the connected {policy_node.describe(connected)} was not used (strategy is {name!r})"
    if chosen.steps is None:
        return chosen, steps, note
    if chosen.steps != steps:
        source = "the policy preset" if name not in rules.RULES else f"{name}'s tuned setting"
        note += f"; T={chosen.steps} from {source} (steps={steps} not used)"
    return chosen, None, note


def make_callback(pipe: object, node_id: str | None, progress: host.Progress,
                  sink: list[dict], base: object | None = None) -> Callable[[dict], None]:
    """Step record -> interrupt check, progress-bar preview, "ladr.step" event (kept in sink).
    base: a PreviewBase (known pixels under the preview, nodes/preview.py), or None."""

    def on_step(record: dict) -> None:
        host.check_interrupt()  # InterruptProcessingException is a BaseException: let it fly
        s = events.shown_slot(record)  # an image in flight (a rolling batch moves on)
        preview = pipe.preview(record["tokens"][s:s + 1], record["masked"][s:s + 1],
                               record["grid"])[0]
        if base is not None:
            item = record.get("items", list(range(record["masked"].shape[0])))[s]
            preview = base.apply(preview, record["masked"][s], int(item))
        # the preview's bytes, the masks and the counts: one device -> host transfer per step
        payload, image = events.step_update(record, node_id, preview)
        image = None if image is None else preview_module.for_display(image)
        progress.update(round(progress.total * payload["progress"]), image)
        host.send_event(events.EVENT, payload)
        sink[:] = [payload]

    return on_step


FIT_FIX = ("set fit to crop or resize in LADR Paint Options (connected to paint), or resize the "
           "image first (Upscale Image)")


def prepare_job(pipe: Any, prompts: list[str], *, negative_prompt: str | None, width: int,
                height: int, cfg: float, batch_size: int, image: object | None,
                mask: object | None, paint: object | None) -> Any:
    """The request, checked once by the library (``pipe.prepare_text`` / ``prepare_paint``)
    before the model loads: text to image, or with image + mask (1 = regenerate) inpaint /
    outpaint, the image setting the size. Every message starts with the node and names the
    input to change. width / height / cfg: widget values (SIZE_AUTO / CFG_AUTO = the
    checkpoint's defaults)."""
    try:
        if not paint_module.painting(image, mask, paint):
            return pipe.prepare_text(prompts, negative_prompt=negative_prompt,
                                     width=resolve_size(width), height=resolve_size(height),
                                     cfg=resolve_cfg(cfg), batch_size=batch_size)
        return pipe.prepare_paint(prompts, image=image, mask=mask, options=paint,
                                  negative_prompt=negative_prompt, cfg=resolve_cfg(cfg),
                                  batch_size=batch_size, fit_fix=FIT_FIX)
    except InputError as err:
        raise node_error(NODE, err, {"options": "paint"}) from None


def run_sampler(model: DiMOOModel, job: Any, node_id: str | None, *, steps: int | None,
                temperature: float, seed: int, strategy: Strategy, cache: object | None,
                max_batch: int = batching.AUTO) -> tuple[DiMOOTokens, dict]:
    """Host-aware run of a checked job: memory load, progress, events; returns tokens + stats.
    steps None: the strategy's own T; max_batch: images in flight (batching.AUTO: from the
    device and its free memory), the rest roll in."""
    pipe = model.pipe
    # room for the run beside the weights: the images asked for, or one (the automatic choice
    # then fills what is free after loading)
    wanted = 1 if max_batch == batching.AUTO else min(max_batch, len(job.items))
    host.load_to_device(model.patcher, pipe.run_memory(job, wanted, cache))
    flying = batching.in_flight(max_batch, pipe, len(job.items), job.layout.w * pipe.vq_factor,
                                job.layout.h * pipe.vq_factor, cache)
    return generate_tokens(model, node_id, job, steps=steps, temperature=temperature,
                           seed=seed, strategy=strategy, cache=cache, max_batch=flying)


def generate_tokens(model: DiMOOModel, node_id: str | None, job: Any, *, steps: int | None,
                    temperature: float, seed: int, strategy: Strategy, cache: object | None,
                    max_batch: int) -> tuple[DiMOOTokens, dict]:
    """``pipe.run(job)`` without decoding (VQ Decode is its own node), with the host's progress
    bar and previews (the job's known pixels under them, nodes/preview.py), the per-step and
    final events: tokens + stats. The last preview is the real decode of the image the previews
    showed. The sampler and DiMOO Edit share it."""
    pipe = model.pipe
    progress = host.Progress.start(PROGRESS_TOTAL)
    last: list[dict] = []
    with threads.torch_threads():
        res = pipe.run(job, steps=steps, temperature=temperature, seed=seed, strategy=strategy,
                       cache=cache, callback=make_callback(pipe, node_id, progress, last,
                                                           preview_module.base_for_job(job)),
                       decode=False, max_batch=max_batch)
        shown = int(last[0]["image"]) - 1 if last else 0
        final = preview_module.final_pil(pipe, res, shown)
    progress.update(progress.total, final)
    stats = events.stats_dict(res, strategy.name, strategy.run_steps(steps))
    stats.update({"in_flight": res.in_flight, **({"note": res.note} if res.note else {})})
    host.send_event(events.EVENT, events.final_payload(node_id, stats, last[0] if last else None))
    h, w = res.grid
    tokens = DiMOOTokens(tokens=res.tokens.detach().cpu(), grid=tuple(res.grid),
                         width=w * pipe.vq_factor, height=h * pipe.vq_factor,
                         model_key=model.key, stats=stats, paint=res.paint)
    return tokens, stats


class DiMOOSampler(io.ComfyNode):
    """Text-to-image token sampling with Lumina-DiMOO, accelerated by LADR."""

    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="LADR_DiMOOSampler",
            display_name="DiMOO Sampler (LADR)",
            category="LADR",
            search_aliases=["lumina", "dimoo", "ladr", "text to image", "masked diffusion"],
            description="Samples DiMOO image tokens. strategy 'ladr' rescues confident "
            "frontier tokens early (~4x fewer steps); the live preview shows them.",
            inputs=_inputs(),
            outputs=[
                io.Custom(TOKENS_TYPE).Output("tokens", tooltip="Image tokens -> VQ Decode."),
                io.String.Output("stats", tooltip="Steps run, NFE, seconds, forwards saved."),
            ],
            hidden=[io.Hidden.unique_id],
        )

    @classmethod
    def validate_inputs(cls, prompt: str | None = None, width: int | None = None,
                        height: int | None = None) -> bool | str:
        """Refuses an empty prompt and a width / height off the 16 px grid or out of range
        before anything runs (an 8B model is not loaded for a size that cannot work).

        ComfyUI attaches a failure to every input named here (nodes/validate.py): the three,
        so each message starts with the input that is wrong. Each argument defaults to None:
        an input missing from the workflow or fed by a link is not passed, and ComfyUI reports
        a missing one itself. cfg and the checkpoint's own VQ factor are checked in execute."""
        if isinstance(prompt, str) and not prompt.strip():
            return EMPTY_PROMPT  # empty in both modes
        for name, value in (("width", width), ("height", height)):
            err = check_size(name, value) if isinstance(value, int) else None
            if err:
                return err
        return True

    @classmethod
    def execute(cls, model: DiMOOModel, prompt: str, negative_prompt: str, width: int,
                height: int, steps: int, cfg: float, temperature: float, seed: int,
                batch_size: int, strategy: str, one_prompt_per_line: bool,
                policy: object | None = None, cache: object | None = None,
                max_batch: int = batching.AUTO, image: object | None = None,
                mask: object | None = None, paint: object | None = None,
                tau: float = rules.AUTO, gamma: float = rules.AUTO,
                token: str = "sample") -> io.NodeOutput:
        check_options(policy, cache)
        chosen, steps, note = pick_strategy(strategy, policy, steps,
                                            rules.RuleFields(tau=tau, gamma=gamma, token=token))
        node_id = getattr(cls.hidden, "unique_id", None) if cls.hidden else None
        prompts, skipped = split_prompts(prompt, one_prompt_per_line)
        if skipped:
            note += f"; {skipped} empty prompt line{'s' * (skipped > 1)} skipped"
        job = prepare_job(model.pipe, prompts, negative_prompt=negative_prompt or None,
                          width=width, height=height, cfg=cfg, batch_size=batch_size,
                          image=image, mask=mask, paint=paint)
        tokens, stats = run_sampler(model, job, node_id, steps=steps, temperature=temperature,
                                    seed=seed, strategy=chosen, cache=cache,
                                    max_batch=max_batch)
        note += paint_module.size_note(image, width, height, SIZE_AUTO)
        if stats.get("note"):
            note += f"; {stats['note']}"
        return io.NodeOutput(tokens, events.stats_text(stats) + note)


def _nano_cfg_hint() -> str:
    """'; the built-in dimoo-nano was tuned for X' (empty if its config does not say)."""
    value = ladr_core.nano_default_cfg()
    return "" if value is None else f"; the built-in dimoo-nano was tuned for {value:g}"


def _inputs() -> list:
    return [
        io.Custom(MODEL_TYPE).Input("model", tooltip="From Load DiMOO Model."),
        io.String.Input("prompt", multiline=True, default="a red apple on a wooden table",
                        tooltip="What the image shows. With one_prompt_per_line, each line is "
                        "its own prompt (a batch of prompts)."),
        io.String.Input("negative_prompt", multiline=True, default="",
                        tooltip="Optional: what to steer away from (used by CFG; empty = the "
                        "model's unconditional prompt)."),
        io.Int.Input("width", default=SIZE_AUTO, min=SIZE_AUTO, max=SIZE_MAX, step=SIZE_STEP,
                     tooltip="Image width in pixels, a multiple of 16 (one token per 16 px); "
                     "0 = the checkpoint's default size (Lumina-DiMOO 1024, dimoo-nano 48)."),
        io.Int.Input("height", default=SIZE_AUTO, min=SIZE_AUTO, max=SIZE_MAX, step=SIZE_STEP,
                     tooltip="Image height in pixels, a multiple of 16; 0 = the checkpoint's "
                     "default size."),
        io.Int.Input("steps", default=64, min=1, max=1000,
                     tooltip="Schedule length T. LADR usually finishes in far fewer steps. A "
                     "policy preset tuned at its own T (nano: 128) uses that T instead."),
        # step 0.05: the frontend shows -floor(log10(step)) decimals, so 0.75 stays 0.75
        io.Float.Input("cfg", default=CFG_AUTO, min=CFG_AUTO, max=30.0, step=0.05, round=0.01,
                       tooltip="Classifier-free guidance scale s: (1+s)*cond - s*uncond "
                       f"(Lumina-DiMOO: 4.0{_nano_cfg_hint()}; 0 = no guidance, half the "
                       "compute). -1 = the connected checkpoint's default."),
        io.Float.Input("temperature", default=1.0, min=0.0, max=5.0, step=0.05, round=0.01,
                       tooltip="Sampling temperature; 0 = greedy (deterministic, no noise)."),
        io.Int.Input("seed", default=0, min=0, max=SEED_MAX, control_after_generate=True,
                     tooltip="Random seed; batch item i uses seed + i."),
        io.Int.Input("batch_size", default=1, min=1, max=64,
                     tooltip="Images per prompt."),
        io.Combo.Input("strategy", options=STRATEGIES, default="ladr",
                       tooltip="ladr: locality-aware dynamic rescue (fast). baseline: the "
                       "official cosine schedule. prophet: early-commit comparison. threshold, "
                       "entropy, halton, threshold-frontier, halton-ladr, ladr-global: "
                       "training-free rules, set by tau, gamma and token.",
                       extra_dict={"ladr_rules": rules.applies_table()}),
        io.Boolean.Input("one_prompt_per_line", default=False,
                         tooltip="Treat each non-empty prompt line as a separate prompt."),
        io.Custom(POLICY_TYPE).Input("policy", optional=True,
                                     tooltip="Optional LADR Policy (strategy ladr; default: "
                                     "the paper's) or Prophet Policy (strategy prophet)."),
        io.Custom(CACHE_TYPE).Input("cache", optional=True,
                                    tooltip="Optional ML-Cache Options (default: no cache)."),
        # added after the others, optional: workflows saved without it get the default
        io.Int.Input("max_batch", default=batching.AUTO, min=batching.AUTO,
                     max=batching.MAX_IN_FLIGHT, optional=True,
                     tooltip="Images in flight at once. More prompts (one per line) or a "
                     "larger batch_size roll through: a finished image makes room for the "
                     "next. Images are identical whatever the value; it trades speed for "
                     "memory. 0 = automatic: what the GPU's free memory holds (up to 8), 4 on "
                     "a CPU."),
        # inpainting / outpainting, appended last so saved workflows keep their links
        io.Image.Input("image", optional=True,
                       tooltip="Optional: the image to inpaint / outpaint (with mask). It sets "
                       "the size (width/height not used); sides must be multiples of 16."),
        io.Mask.Input("mask", optional=True,
                      tooltip="Optional, with image: 1 = regenerate (Load Image's mask editor, "
                      "Pad Image for Outpainting). Known tokens never change; an empty mask "
                      "returns the image unchanged, a full one is text-to-image."),
        io.Custom(PAINT_TYPE).Input("paint", optional=True,
                                    tooltip="Optional LADR Paint Options (default: threshold "
                                    "0.5, no grow, paste back with a half-token feather)."),
        # the training-free rules' settings, appended last (saved workflows get the tuned ones)
        *rules.rule_inputs(),
    ]

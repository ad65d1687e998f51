"""The one run routine of DiMOO Sampler, its legacy twin and DiMOO Edit: a checked job -> image
tokens + stats, with the host's memory load, progress bar, previews and events (docs/ARCHITECTURE.md
section 7). The bar follows the payload's `progress` (gamma^-1 of the masked share: monotone, 1.0
when the run ends, even when LADR stops at step 16 of 128). The schedule (steps and denoise, one
`StepSchedule`) is the price: no preset or rule overrules it.
"""

from __future__ import annotations

from collections.abc import Callable

from ladr_core import LADR, PRESETS, DiMOOPipeline, InputError, StepSchedule, Strategy
from ladr_core.dimoo import EditJob, MLCacheConfig, PaintJob, PreviewBase, TextJob

from . import batching, events, host, threads
from . import preview as preview_module
from .handles import DiMOOModel, DiMOOTokens, SamplingRule
from .validate import node_error

Job = TextJob | PaintJob | EditJob
PROGRESS_TOTAL = 1000  # progress-bar units: thousandths of the payload's `progress`


FORMER_T = {"preset nano": 128, "preset adaptive": 64, "rule ladr-global": 256, "rule entropy": 32,
            "rule halton-ladr": 128, "rule halton": 18, "rule threshold": 32,
            "rule threshold-frontier": 32}
"""The T each LADR preset or rule brought, overruling the steps widget, before the cost
contract; a saved workflow naming one now runs its steps."""


def node_schedule(node: str, steps: int, denoise: float = 1.0) -> StepSchedule:
    """A node's steps and denoise widgets -> the run's schedule, checked once, on its input."""
    try:
        return StepSchedule(steps, denoise)
    except InputError as err:
        raise node_error(node, err) from None


def schedule_note(strategy: Strategy, steps: StepSchedule) -> str:
    """The one note for a preset or rule that used to bring another T (FORMER_T); else ""."""
    name = next((f"preset {n}" for n, p in PRESETS.items()
                 if type(strategy) is LADR and p.policy == strategy.policy), f"rule {strategy.name}")
    former = FORMER_T.get(name, steps.steps)
    return "" if former == steps.steps else (
        f"; {name} no longer brings its own T={former}: it runs steps={steps.steps}, never more "
        "forward passes than the official sampler")


def make_callback(pipe: DiMOOPipeline, node_id: str | None, progress: host.Progress,
                  sink: list[dict], base: PreviewBase | None = None,
                  run_map: events.RunMap | None = None) -> Callable[[dict], None]:
    """Step record -> interrupt check, progress-bar preview (over `base`'s known pixels, if
    any), "ladr.step" event (kept in sink, followed by run_map)."""

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
        if run_map is not None:
            run_map.update(payload)

    return on_step


def load_and_run(model: DiMOOModel, job: Job, node_id: str | None, *, rule: SamplingRule,
                 steps: StepSchedule, temperature: float, seed: int, cache: MLCacheConfig | None,
                 max_batch: int = batching.AUTO) -> tuple[DiMOOTokens, dict, str]:
    """Memory load (for the images asked for, or one: AUTO then fills what is free after
    loading), the images in flight (nodes/batching.py), then `generate_tokens`."""
    pipe = model.pipe
    wanted = 1 if max_batch == batching.AUTO else min(max_batch, len(job.items))
    host.load_to_device(model.patcher, pipe.run_memory(job, wanted, cache))
    flying = batching.in_flight(max_batch, pipe, len(job.items), job.layout.w * pipe.vq_factor,
                                job.layout.h * pipe.vq_factor, cache)
    return generate_tokens(model, node_id, job, rule=rule, steps=steps,
                           temperature=temperature, seed=seed, cache=cache, max_batch=flying)


def generate_tokens(model: DiMOOModel, node_id: str | None, job: Job, *, rule: SamplingRule,
                    steps: StepSchedule, temperature: float, seed: int, cache: MLCacheConfig | None,
                    max_batch: int) -> tuple[DiMOOTokens, dict, str]:
    """``pipe.run(job)`` without decoding (VQ Decode's job) with progress, previews and events ->
    (tokens, stats, the rule's and the schedule's note). The last preview is a real decode."""
    pipe, strategy = model.pipe, rule.strategy
    note = "" if rule.default else schedule_note(strategy, steps)
    progress = host.Progress.start(PROGRESS_TOTAL)
    last: list[dict] = []
    run_map = events.RunMap()
    with threads.torch_threads():
        res = pipe.run(job, steps=steps, temperature=temperature, seed=seed, strategy=strategy,
                       cache=cache, callback=make_callback(pipe, node_id, progress, last,
                                                           job.preview_base(), run_map),
                       decode=False, max_batch=max_batch)
        shown = int(last[0]["image"]) - 1 if last else 0
        final = preview_module.final_pil(pipe, res, shown)
    progress.update(progress.total, final)
    stats = events.stats_dict(res, strategy.name, steps)
    stats.update({"in_flight": res.in_flight, **({"note": res.note} if res.note else {})})
    ended = events.final_payload(node_id, stats, last[0] if last else None, run_map)
    host.send_event(events.EVENT, ended)
    kept = host.save_temp_image(final) if final is not None else None
    if kept is not None:  # the last preview, kept as the node's UI image (handles.step_map_ui)
        ended = {**ended, "preview": kept}
    h, w = res.grid
    tokens = DiMOOTokens(tokens=res.tokens.detach().cpu(), grid=tuple(res.grid),
                         width=w * pipe.vq_factor, height=h * pipe.vq_factor,
                         model_key=model.key, stats=stats, paint=res.paint, step_map=ended)
    return tokens, stats, rule.note + note

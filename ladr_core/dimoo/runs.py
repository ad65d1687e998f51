"""The one run routine every task shares (``run_job``, pipeline.py's module docstring), its
result, the seeds of its images and how many images it keeps in flight (``images_in_flight``,
the choice the ComfyUI sampler node makes too, nodes/batching.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import torch

from ..devices import synchronize
from ..sampling import sample
from ..schedules import StepSchedule
from ..step import Strategy
from .jobs import Built, EditJob, PaintJob
from .model.vq import decode_codes

if TYPE_CHECKING:
    from .tasks.selfscore import SelfScore

__all__ = ["CPU_IN_FLIGHT", "GPU_IN_FLIGHT", "SEED_MAX", "GenerationResult", "RunOptions", "check_seed",
           "generator_seed", "images_in_flight", "item_generator", "run_job", "start_late",
           "unchanged"]

SEED_MAX = 2**64 - 1  # torch.Generator.manual_seed accepts [0, 2**64)
GPU_IN_FLIGHT = 8  # at most, on a GPU (what its free memory holds)
CPU_IN_FLIGHT = 4  # on a CPU a pass costs about the same per token whatever its size


@dataclass
class GenerationResult:
    """tokens [B, h*w] codes; images float [B, H, W, 3] in [0, 1] (None with decode=False);
    seconds = sampling time (excluding the VQ decode, reported in ``decode_seconds``)."""

    tokens: torch.Tensor
    images: torch.Tensor | None
    nfe: int
    steps: int
    seconds: float
    token_forwards: int
    token_forwards_full: int
    grid: tuple[int, int]
    decode_seconds: float = 0.0
    compile_seconds: float = 0.0  # first calls of new shapes under pipe.compile (0 when eager)
    note: str = ""  # what the user should know (e.g. a mask with nothing to regenerate)
    item_nfe: list[int] = field(default_factory=list)  # forward passes each image took part in
    item_token_forwards: list[int] = field(default_factory=list)  # tokens each image pushed
    self_score: SelfScore | None = None  # generate(self_score=...): opt-in, its passes extra
    paint: Any = None  # the PaintPlan of an inpaint / outpaint run (paste-back after a decode)
    in_flight: int = 0  # images in one pass at most (a longer list rolls through)
    turns: int = 1  # edits run one after the other (a multi-turn edit), their counts summed
    start_step: int = 0  # the schedule step the run started from (StepSchedule.start)

    def then(self, later: GenerationResult) -> GenerationResult:
        """This run followed by ``later`` (the next turn of a multi-turn edit): the later run's
        tokens and images, the counts of both."""
        def add(a: list[int], b: list[int]) -> list[int]:
            return [x + y for x, y in zip(a, b, strict=True)]

        return replace(later, nfe=self.nfe + later.nfe, steps=self.steps + later.steps,
                       seconds=self.seconds + later.seconds,
                       token_forwards=self.token_forwards + later.token_forwards,
                       token_forwards_full=self.token_forwards_full + later.token_forwards_full,
                       decode_seconds=self.decode_seconds + later.decode_seconds,
                       compile_seconds=self.compile_seconds + later.compile_seconds,
                       note=self.note, item_nfe=add(self.item_nfe, later.item_nfe),
                       item_token_forwards=add(self.item_token_forwards,
                                               later.item_token_forwards),
                       in_flight=max(self.in_flight, later.in_flight),
                       turns=self.turns + later.turns)


def generator_seed(seed: int, device: torch.device) -> int:
    """The ``manual_seed`` value giving distinct 64-bit seeds distinct streams: the CPU's
    mt19937 keeps only the low 32 bits, so on a CPU a seed >= 2**32 is mixed into 32 bits
    (splitmix64 finaliser); smaller seeds, and every seed on CUDA (Philox keeps 64 bits), pass
    unchanged, so their images stay the ones they were."""
    if device.type != "cpu" or seed < 2**32:
        return seed
    z = (seed + 0x9E3779B97F4A7C15) & (2**64 - 1)
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
    return (z ^ (z >> 31)) & (2**32 - 1)


def check_seed(seed: object, items: int) -> int:
    """The one seed rule: an int in [0, SEED_MAX - items + 1] (item i uses seed + i, and torch
    seeds are 64-bit). ValueError naming the bound otherwise."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an int >= 0 (got {seed!r})")
    if seed + items - 1 > SEED_MAX:
        raise ValueError(f"seed must be <= {SEED_MAX - items + 1} for {items} items (item i uses "
                         f"seed + i, seeds are 64-bit); got {seed}")
    return seed


def item_generator(seed: int, device: torch.device) -> torch.Generator:
    """``torch.Generator`` of one batch item, seeded with ``generator_seed``."""
    return torch.Generator(device=device).manual_seed(generator_seed(seed, device))


def images_in_flight(device: torch.device, images: int, per_image_bytes: int,
                     free_bytes: int | None = None) -> int:
    """How many of ``images`` one pass holds when the caller does not say (speed for memory;
    same images: docs/ARCHITECTURE.md section 3): CPU_IN_FLIGHT on a CPU (a pass costs about
    the same per token whatever its size, lab/benchmarks/rolling.py); on a GPU what 80 % of
    ``free_bytes`` (None: CUDA's count) holds at ``per_image_bytes``, at most GPU_IN_FLIGHT."""
    if device.type != "cuda":
        return max(1, min(images, CPU_IN_FLIGHT))
    if free_bytes is None:
        free_bytes = torch.cuda.mem_get_info(device)[0]
    cap = min(images, GPU_IN_FLIGHT)
    return max(1, min(cap, int(0.8 * free_bytes) // max(1, per_image_bytes)))


@dataclass(frozen=True)
class RunOptions:
    """How a run samples (``DiMOOPipeline.run`` checks them): the strategy, the schedule, the
    temperature, the first seed, the step callback, whether to decode, images in flight."""

    strategy: Strategy
    steps: StepSchedule
    temperature: float
    seed: int
    callback: Callable[[dict[str, Any]], None] | None
    decode: bool
    max_batch: int


def run_job(built: Built, options: RunOptions, vq: Any, device: torch.device,
            note: str = "") -> GenerationResult:
    """Sample a built job, decode it (and finish it: painting's paste-back)."""
    denoiser = built.denoiser
    layout = denoiser.layout
    check_seed(options.seed, denoiser.batch)
    generators = [item_generator(options.seed + i, device) for i in range(denoiser.batch)]
    start = time.perf_counter()
    result = sample(denoiser, shape=(denoiser.batch, layout.h, layout.w), steps=options.steps,
                    strategy=options.strategy, temperature=options.temperature,
                    generator=generators, callback=options.callback, device=device,
                    known=built.known, max_batch=options.max_batch)
    synchronize(device)  # the clock after the device's work, not after its queueing
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    images = None
    if options.decode:  # the sampler's codes are in [0, K) by construction: no range check
        images = decode_codes(vq, result.tokens, (layout.h, layout.w), check_range=False)
        if built.paint is not None:
            images = built.paint.finish(images)
        synchronize(images.device)
    stats = denoiser.stats
    return GenerationResult(result.tokens, images, result.nfe, result.steps, seconds,
                            stats.token_forwards, stats.token_forwards_full,
                            (layout.h, layout.w), time.perf_counter() - start,
                            stats.compile_seconds, note, result.item_nfe,
                            list(stats.item_token_forwards), None, built.paint,
                            options.max_batch)


def run_turns(job: object, built: Built, options: RunOptions, vq: Any, device: torch.device,
              runtime: Any) -> GenerationResult:
    """``run_job`` of a built job and, for a multi-turn edit (jobs.EditJob), its later turns:
    each edits the turn before's image, decoded and rounded to 8 bits a channel (the PNG the
    official script writes and the next turn reads back), with the same options (seeds too).
    The result is the last turn's, its counts summed over the turns (``then``)."""
    turns = job.turns if isinstance(job, EditJob) else 1
    res = run_job(built, turn_options(options, 0, turns), vq, device, job.note)
    while isinstance(job, EditJob) and job.turns > 1:
        pixels = res.images if res.images is not None else decode_codes(
            vq, res.tokens, res.grid, check_range=False)
        job = job.next_turn(pixels.mul(255.0).round().div(255.0))
        res = res.then(run_job(job.build(runtime, options.steps.left, None),
                               turn_options(options, turns - job.turns, turns), vq, device))
    return res


def turn_options(options: RunOptions, turn: int, turns: int) -> RunOptions:
    """The options of turn ``turn`` (0-based) of ``turns``: with more than one, each step
    record also says ``turn`` and ``turns`` (a host's progress bar spans every turn)."""
    if turns == 1 or options.callback is None:
        return options
    inner = options.callback

    def on_step(record: dict[str, Any]) -> None:
        inner({**record, "turn": turn, "turns": turns})

    return replace(options, callback=on_step)


def unchanged(job: PaintJob, steps: StepSchedule, vq: Any,
              encode_image: Callable[[torch.Tensor], torch.Tensor], decode: bool
              ) -> GenerationResult:
    """A painting whose mask regenerates nothing (or whose denoise redraws no step of the
    schedule ``steps``): the images' codes and the images."""
    plan = job.plan.encoded(encode_image)
    images = plan.images if plan.source is not None or not decode else \
        decode_codes(vq, plan.codes, plan.grid)
    note = plan.note
    if not job.nothing_to_do:
        note = "; ".join(n for n in (note, f"denoise {plan.denoise:g} redraws no step of the "
                                     f"{steps.steps}-step schedule: the picture returned "
                                     "unchanged") if n)
    return GenerationResult(plan.codes, images if decode else None, 0, 0, 0.0, 0, 0,
                            plan.grid, note=note, paint=plan, start_step=steps.start)


def start_late(job: PaintJob, steps: StepSchedule, seed: int) -> PaintJob:
    """Image to image from the schedule's start: the re-masked share of each item's region
    drawn with a CPU generator of its own (seed + i, apart from the sampling's)."""
    plan = job.plan
    check_seed(seed, plan.region.shape[0])
    cpu = torch.device("cpu")
    gens = [item_generator(seed + i, cpu) for i in range(plan.region.shape[0])]
    return PaintJob(job.text, plan.from_step(steps.start, steps.steps, gens))

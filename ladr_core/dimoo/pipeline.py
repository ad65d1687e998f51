"""``load_dimoo`` and ``DiMOOPipeline``: load an official folder, then one entry point per task.

Contract: docs/ARCHITECTURE.md section 2. ``generate`` (text to image), ``paint`` (inpaint /
outpaint) and ``edit`` (image editing) each check their inputs once (``prepare_text`` /
``prepare_paint`` / ``prepare_edit``, jobs.py: before any weight is touched) and run through one
routine (``run``, runs.run_turns): the job's ``denoise`` callable -> the core ``sample`` loop (any
strategy) -> VQ decode. Item i of a run uses ``item_generator(seed + i, device)``: a
``torch.Generator(device).manual_seed(...)`` that keeps all 64 bits of the seed; seed 0 is an
ordinary seed (the official script treats 0 as "do not seed").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..errors import InputError
from ..registry import resolve_strategy
from ..schedules import StepSchedule, check_denoise
from ..step import Strategy
from .denoise.cache import MLCacheConfig
from .denoise.denoiser import DiMOODenoiser, valid_cfg
from .denoise.prompt import SIZE_STEP, ImageLayout, check_image_size, cond_text, uncond_text
from .images import PipelineImages
from .jobs import EditJob, Job, PaintJob, Runtime, TextJob, check_job
from .model.config import DiMOOIds, LLaDAConfig, context_length
from .model.memory import model_compute_dtype, working_memory
from .model.transformer import LLaDAModel
from .model.vq import (
    PREVIEW_TABLE_FILE,
)
from .runs import (
    GenerationResult,
    RunOptions,
    check_seed,
    images_in_flight,
    item_generator,
    run_turns,
)
from .tasks.edit_size import EDIT_SIZES, sized_for_edit
from .tasks.editing import DEFAULT_EDIT_CFG, DEFAULT_IMAGE_CFG, plan_edit
from .tasks.painting import PaintOptions, check_image, plan_painting, plan_tokens
from .understand import PipelineUnderstanding, answer_end_id
from .weights.checkpoint import load_checkpoint
from .weights.files import CheckpointError, LoadedCheckpoint, resolve_device, resolve_dtype
from .weights.vqfiles import vq_folder

if TYPE_CHECKING:
    from .tasks.selfscore import SelfScore, SelfScoreConfig

__all__ = ["load_dimoo", "DiMOOPipeline", "GenerationResult"]

DEFAULT_SIZE = 1024
DEFAULT_CFG = 4.0  # the official Lumina-DiMOO guidance scale
IMAGE_FIT_FIX = ("crop or resize it, or redraw it with pipe.paint(prompt, image, None, "
                 "options=PaintOptions(fit='crop' or 'resize'), denoise=...)")
NO_IMAGE = ("there is no image to redraw", "give an image (generate(image=...)) or its tokens "
            "(tokens=), or denoise=1.0 for text to image")  # generate's denoise < 1 alone
def _prompt_list(prompt: str | Sequence[str], name: str = "prompt") -> list[str]:
    if isinstance(prompt, str):
        return [prompt]
    prompts = list(prompt) if isinstance(prompt, Sequence) else []
    if not prompts or not all(isinstance(p, str) for p in prompts):
        raise InputError(name, f"is {type(prompt).__name__}", "give a string or a non-empty "
                         "list of strings")
    return prompts


def _positive_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum} (got {value!r})")
    return value


def _guidance(name: str, value: object, default: float) -> float:
    """A guidance scale (None = ``default``): a finite number >= 0."""
    value = default if value is None else value
    if not valid_cfg(value):
        raise InputError(name, f"must be a finite number >= 0 (got {value!r})",
                         f"0 disables {'image ' if name == 'image_cfg' else ''}guidance")
    return float(value)


def _config_value(raw: dict, key: str, default: Any, ok: Callable[[Any], bool],
                  what: str) -> Any:
    """A key of ours in config.json (``default`` when absent); a present but bad value is a
    CheckpointError naming the key."""
    value = raw.get(key, default)
    if not ok(value):
        raise CheckpointError(f"config.json: {key} must be {what} (got {value!r}); fix or delete "
                              f"the key (absent = {default})")
    return value


class DiMOOPipeline(PipelineImages, PipelineUnderstanding):
    """Native Lumina-DiMOO pipeline: text to image, painting, editing (module docstring), and
    answers about images (``understand``, understand.py).

    Read from config.json beyond the official keys (all optional): ``default_image_size``
    (else 1024), ``default_cfg`` (the guidance scale the checkpoint was tuned for, else the
    official 4.0), ``ladr_can_edit`` and ``ladr_can_understand`` (False for a checkpoint trained
    for text to image only, like the built-in nano; else True) and ``eos_token_id`` (the
    end-of-answer token, else the official 126081)."""

    def __init__(self, checkpoint: LoadedCheckpoint, preview_size: int = 4) -> None:
        self.transformer: LLaDAModel = checkpoint.transformer
        self.config: LLaDAConfig = checkpoint.config
        self.tokenizer = checkpoint.tokenizer
        self.vq = checkpoint.vq
        self.ids: DiMOOIds = checkpoint.ids
        self.vq_factor: int = checkpoint.vq_factor
        self.source_folder: Path | None = checkpoint.folder
        raw = checkpoint.raw_config
        size = raw.get("default_image_size", DEFAULT_SIZE)
        self.default_size: int = size if isinstance(size, int) and size > 0 else DEFAULT_SIZE
        self.default_cfg: float = float(_config_value(raw, "default_cfg", DEFAULT_CFG, valid_cfg,
                                                      "a finite number >= 0"))
        self.can_edit: bool = _config_value(raw, "ladr_can_edit", True,
                                            lambda v: isinstance(v, bool), "true or false")
        self.can_understand: bool = _config_value(raw, "ladr_can_understand", True,
                                                  lambda v: isinstance(v, bool), "true or false")
        self.answer_end_id: int | None = answer_end_id(raw, self.config.n_embeddings)
        self.preview_size = preview_size
        self.context_length: int = context_length(self.config, self.ids)
        self._preview_copies: dict[torch.device, torch.Tensor] = {}  # images.py
        self.compute_dtype: torch.dtype | None = None  # the load's dtype (load_dimoo)
        self.compiled: Any = None  # compile.CompiledPasses on a view made by compile()
        self._compiled_views: dict[tuple, DiMOOPipeline] = {}

    def compile(self, backend: str = "inductor", mode: str = "default",
                dynamic: bool = True) -> DiMOOPipeline:
        """Opt-in ``torch.compile`` of the transformer passes (ComfyUI TorchCompileModel-like).

        Returns a view of this pipeline (same weights, tokenizer, VQ) whose denoisers run the
        compiled passes; this pipeline stays eager. The view is kept per (backend, mode,
        dynamic), so calling again returns it with every graph compiled so far, kept as long
        as this pipeline lives. ``dynamic`` True (the default) compiles the packed sizes as
        symbols, so a new prompt length, a rolling batch's changing width or a new cached count
        reuses the graph (model/compile.py); False compiles one graph per shape. The one-time cost is logged and
        reported as ``GenerationResult.compile_seconds``.
        """
        import copy

        from .model.compile import CompiledPasses

        key = (backend, mode, dynamic)
        if key not in self._compiled_views:
            passes = CompiledPasses(backend, mode, dynamic)  # validates the arguments
            view = copy.copy(self)
            view.compiled, view._compiled_views = passes, {}
            self._compiled_views[key] = view
        return self._compiled_views[key]

    @property
    def device(self) -> torch.device:
        return self.transformer.compute_device()

    def image_bytes(self, width: int | None = None, height: int | None = None,
                    cache: bool = False) -> int:
        """Device memory beyond the weights of one image in flight, to choose how many run at
        once: ``working_memory`` (model/memory.py) of one image, prompts of 96 tokens."""
        grid = ImageLayout((height or self.default_size) // self.vq_factor,
                           (width or self.default_size) // self.vq_factor)
        return working_memory(self.config, 1, grid.length + 96, grid.n_codes,
                              self.ids.codebook_size, cache=cache, dtype=self._compute_dtype())

    def run_memory(self, job: Job, images: int = 1, cache: MLCacheConfig | None = None) -> int:
        """Device memory beyond the weights of a run of ``job``, ``images`` in flight: its
        sampling (``working_memory`` at the job's rows), the decode of its images (one at a
        time, the decoded ones kept) or, while the pipeline has no preview table, building it
        (``preview_bytes``: before the first step), the largest (they do not overlap): what a
        host keeps free when loading the weights."""
        branches, length = job.rows(self.encode)
        grid = job.layout
        sampling = working_memory(self.config, images, length, grid.n_codes,
                                  self.ids.codebook_size, branches=branches,
                                  cache=cache is not None, dtype=self._compute_dtype())
        return max(sampling, self.decode_bytes(grid.w * self.vq_factor, grid.h * self.vq_factor,
                                               len(job.items)), self.preview_bytes())

    def _compute_dtype(self) -> torch.dtype:
        """The dtype activations are computed in: the load's ``dtype`` (``load_dimoo``), else
        what the model's layers say (a GGUF embedding stores raw bytes: its ``compute_dtype``)."""
        if self.compute_dtype is not None:
            return self.compute_dtype
        return model_compute_dtype(self.transformer)

    def encode(self, text: str) -> list[int]:
        """Official ``tokenizer(text)["input_ids"]`` (tokenizer's own special-token rules)."""
        return list(self.tokenizer.encode(text).ids)

    def layout(self, width: int, height: int, prompts: Sequence[str],
               negative_prompt: str | None = None, source: str | None = None) -> ImageLayout:
        """Validated token grid for a pixel size; ValueError with the nearest valid sizes
        (source "image": the size of an input image, the error then names ``image``)."""
        cond = max(len(self.encode(cond_text(p))) for p in prompts)
        uncond = len(self.encode(uncond_text(negative_prompt)))
        field, longest = ("negative_prompt", uncond) if uncond > cond else ("prompt", cond)
        return check_image_size(width, height, self.vq_factor, self.context_length, longest,
                                field, math.lcm(self.vq_factor, SIZE_STEP), source=source,
                                base_length=len(self.encode(cond_text(""))))

    def runtime(self) -> Runtime:
        """What a job's denoiser is built from (jobs.Runtime)."""
        return Runtime(self.transformer, self.encode, self.ids, self.encode_image, self.compiled)

    # ---- checking a request once (before any weight is touched) ------------------------------
    def prepare_text(self, prompt: str | Sequence[str], negative_prompt: str | None = None,
                     width: int | None = None, height: int | None = None,
                     cfg: float | None = None, batch_size: int = 1) -> TextJob:
        """A checked text-to-image request: B = len(prompts) * batch_size images (prompt i's
        images are items i * batch_size ...). width / height None = ``default_size``; cfg
        None = ``default_cfg``. InputError naming the input that is wrong."""
        prompts = _prompt_list(prompt)
        _positive_int("batch_size", batch_size)
        if negative_prompt is not None and not isinstance(negative_prompt, str):
            raise InputError("negative_prompt", f"is {type(negative_prompt).__name__}",
                             "give a string or None")
        width = self.default_size if width is None else width
        height = self.default_size if height is None else height
        layout = self.layout(width, height, prompts, negative_prompt)
        return TextJob([p for p in prompts for _ in range(batch_size)], negative_prompt, layout,
                       _guidance("cfg", cfg, self.default_cfg))

    def prepare_paint(self, prompt: str | Sequence[str], image: Any, mask: Any,
                      options: PaintOptions | None = None, negative_prompt: str | None = None,
                      cfg: float | None = None, batch_size: int = 1,
                      fit_fix: str | None = None, denoise: float = 1.0) -> PaintJob:
        """A checked inpaint / outpaint request (painting.py): ``image`` float [B, H, W, 3] in
        [0, 1] and ``mask`` float [B, H, W] in [0, 1] (1 = regenerate; one mask may serve every
        image; None = the whole picture, image to image), ``options`` (PaintOptions: threshold,
        grow, paste-back, feather, fit). The image sets the size. ``fit_fix``: what an
        off-grid image's message says to do. ``denoise``: the strength inside the mask
        (ladr_core.strength; 1.0 = redraw it all)."""
        prompts = _prompt_list(prompt)
        _positive_int("batch_size", batch_size)
        extra = {} if fit_fix is None else {"fit_fix": fit_fix}
        plan = plan_painting(prompts, image, mask, options, batch_size, self.vq_factor,
                             denoise=denoise, **extra)
        layout = self.layout(plan.width, plan.height, plan.prompts, negative_prompt,
                             source="image")
        text = TextJob([p for p in plan.prompts for _ in range(batch_size)], negative_prompt,
                       layout, _guidance("cfg", cfg, self.default_cfg), plan.note)
        return PaintJob(text, plan)

    def prepare_tokens(self, prompt: str | Sequence[str], tokens: Any, width: int | None = None,
                       height: int | None = None, negative_prompt: str | None = None,
                       cfg: float | None = None, batch_size: int = 1,
                       denoise: float = 1.0) -> PaintJob:
        """A checked image-to-image request from image tokens instead of a picture: ``tokens``
        LongTensor [B or 1, h*w], codes in [0, K) (a sampler's ``res.tokens`` or
        ``encode_image``'s codes), row-major over the grid of ``width`` x ``height`` px (both
        None: a square grid). The whole grid is redrawn at ``denoise`` from those codes as the
        picture route redraws its encoding (no paste-back); at 1.0 they only set the size."""
        prompts = _prompt_list(prompt)
        _positive_int("batch_size", batch_size)
        width, height = self._token_size(tokens, width, height)
        layout = self.layout(width, height, prompts, negative_prompt)
        plan = plan_tokens(prompts, tokens, (layout.h, layout.w), self.ids.codebook_size,
                           self.vq_factor, batch_size, denoise)
        text = TextJob([p for p in plan.prompts for _ in range(batch_size)], negative_prompt,
                       layout, _guidance("cfg", cfg, self.default_cfg), plan.note)
        return PaintJob(text, plan)

    def _token_size(self, tokens: Any, width: int | None, height: int | None
                    ) -> tuple[int, int]:
        """The picture size of ``tokens``: width and height as given, or (both None) the square
        grid their count makes; InputError naming ``tokens`` when it makes none."""
        if width is not None or height is not None:
            return (self.default_size if width is None else width,
                    self.default_size if height is None else height)
        n = int(tokens.shape[-1]) if isinstance(tokens, torch.Tensor) and tokens.dim() else 0
        side = math.isqrt(n)
        if n < 1 or side * side != n:
            raise InputError("tokens", f"has {n} codes per picture, not a square grid",
                             "give the width and height of the picture they came from")
        return side * self.vq_factor, side * self.vq_factor

    def prepare_edit(self, instruction: str | Sequence[str], image: Any, edit_type: str = "edit",
                     style: Any = None, size: str = "official", cfg: float | None = None,
                     image_cfg: float | None = None, batch_size: int = 1) -> EditJob:
        """A checked edit request (editing.py): ``image`` float [B, H, W, 3] in [0, 1] the image
        to edit (its size sets the output's), ``instruction`` the edit (``multiturn``: one
        turn a line, each editing the turn before's output), ``edit_type`` one of
        ``editing.EDIT_TYPES``; ``style``: the style image of ``edit_type="style"`` (it sets the
        output size, as the official script). ``size``: "official" brings each image to the
        official editing size closest to its shape (about 512 x 512 px in area, edit_size.py),
        "as is" keeps it. cfg (text) None = 2.5 and image_cfg None = 4.0, the official
        image-to-image scales."""
        if not self.can_edit:
            raise InputError("model", "was trained for text to image only (its config.json says "
                             "ladr_can_edit: false) and cannot edit",
                             "load the Lumina-DiMOO checkpoint")
        prompts = _prompt_list(instruction, "instruction")
        _positive_int("batch_size", batch_size)
        if size not in EDIT_SIZES:
            raise InputError("size", f"is {size!r}", f"use one of {', '.join(EDIT_SIZES)}")
        image, note = sized_for_edit(check_image(image, self.vq_factor, "image", on_grid=False),
                                     "image", size)
        if style is not None:
            style, more = sized_for_edit(check_image(style, self.vq_factor, "style",
                                                     on_grid=False), "style", size)
            note += more
        plan = plan_edit(self.encode, self.vq_factor, self.context_length, prompts, image,
                         edit_type, batch_size, style, note.removeprefix("; "))
        return EditJob(plan, _guidance("cfg", cfg, DEFAULT_EDIT_CFG),
                       _guidance("image_cfg", image_cfg, DEFAULT_IMAGE_CFG))

    # ---- the one run routine -----------------------------------------------------------------
    def run(self, job: Job, strategy: Strategy, steps: int | StepSchedule | None = None,
            temperature: float = 1.0, seed: int = 0, cache: MLCacheConfig | None = None,
            callback: Callable[[dict[str, Any]], None] | None = None, decode: bool = True,
            max_batch: int | None = None) -> GenerationResult:
        """Sample a checked job (``prepare_*``) with a Strategy object (``LADR(policy)``,
        ``LADR.preset("nano")``, ``Baseline()``, ...; a name is resolved once by the entry that
        received it: ``generate`` / ``paint`` / ``edit``, or ``ladr_core.resolve_strategy``).
        ``steps``: the schedule, T (None = DiMOO's 64; a painting job's denoise sets its start)
        or a StepSchedule with the job's denoise; no strategy runs more than its steps.
        ``decode=False``
        skips the VQ decoder (images None). ``max_batch``: images in flight at once (None =
        ``runs.images_in_flight``, the sampler node's automatic choice: 4 on a CPU, what the
        GPU's free memory holds up to 8); the rest roll in as images finish. Image i is the same
        whatever its neighbours (equal to its own single run in float32)."""
        if not isinstance(strategy, Strategy):
            raise ValueError(f"strategy must be a Strategy object (run takes the object; resolve "
                             f"a name with ladr_core.resolve_strategy); got {strategy!r}")
        denoise = job.plan.denoise if isinstance(job, PaintJob) else 1.0
        plan = StepSchedule.of(steps, denoise)
        if plan.denoise != denoise:
            raise ValueError(f"steps: the schedule's denoise {plan.denoise:g} is not the job's "
                             f"{denoise:g}; build the job and the StepSchedule with one denoise")
        check_job(job, cache)
        if job.nothing_to_do or plan.left == 0:  # nothing to regenerate: the input, unchanged
            return self._unchanged(job, decode, plan)  # type: ignore[arg-type]
        if plan.start > 0 and job.plan.generate is None:  # a plan given its re-mask keeps it
            job = self._from_step(job, plan, seed)  # type: ignore[arg-type]
        if callback is not None and self.vq is not None:  # a callback may draw previews:
            self.preview_table()  # the table is made now, not in the first step beside sampling
        built = job.build(self.runtime(), plan.left, cache)
        if max_batch is None:
            grid = built.denoiser.layout
            max_batch = images_in_flight(self.device, built.denoiser.batch, self.image_bytes(
                grid.w * self.vq_factor, grid.h * self.vq_factor, cache is not None))
        options = RunOptions(strategy, plan, temperature, seed, callback, bool(decode), max_batch)
        res = run_turns(job, built, options, self.vq, self.device, self.runtime())
        return replace(res, start_step=plan.start) if plan.start else res

    def _unchanged(self, job: PaintJob, decode: bool, steps: StepSchedule) -> GenerationResult:
        """A painting whose mask regenerates nothing (or whose denoise redraws no step of the
        schedule ``steps``): the images' codes and the images."""
        plan = job.plan.encoded(self.encode_image)
        images = plan.images if plan.source is not None or not decode else \
            self.decode(plan.codes, plan.grid)
        note = plan.note
        if not job.nothing_to_do:
            note = "; ".join(n for n in (note, f"denoise {plan.denoise:g} redraws no step of the "
                                         f"{steps.steps}-step schedule: the picture returned "
                                         "unchanged") if n)
        return GenerationResult(plan.codes, images if decode else None, 0, 0, 0.0, 0, 0,
                                plan.grid, note=note, paint=plan, start_step=steps.start)

    @staticmethod
    def _from_step(job: PaintJob, steps: StepSchedule, seed: int) -> PaintJob:
        """Image to image from the schedule's start: the re-masked share of each item's region
        drawn with a CPU generator of its own (seed + i, apart from the sampling's)."""
        plan = job.plan
        check_seed(seed, plan.region.shape[0])
        cpu = torch.device("cpu")
        gens = [item_generator(seed + i, cpu) for i in range(plan.region.shape[0])]
        return PaintJob(job.text, plan.from_step(steps.start, steps.steps, gens))

    # ---- one entry point per task ------------------------------------------------------------
    def generate(self, prompt: str | Sequence[str], negative_prompt: str | None = None,
                 width: int | None = None, height: int | None = None, steps: int | None = None,
                 cfg: float | None = None, temperature: float = 1.0, seed: int = 0,
                 strategy: str | Strategy = "ladr", cache: MLCacheConfig | None = None,
                 callback: Callable[[dict[str, Any]], None] | None = None,
                 batch_size: int = 1, decode: bool = True, max_batch: int | None = None,
                 self_score: SelfScoreConfig | None = None, image: Any = None,
                 denoise: float = 1.0, tokens: Any = None) -> GenerationResult:
        """Text to image: ``prepare_text`` then ``run`` (their docstrings say every argument).
        ``self_score``: also score the final tokens (``self_score()``, same seed), which costs
        ``self_score.passes`` extra denoiser passes per image; None (default) = no score.
        ``image`` (float [B, H, W, 3] in [0, 1]) with ``denoise`` d < 1: image to image, the
        whole picture redrawn at strength d (``prepare_paint`` without a mask; the image sets
        the size, width / height stay None; at d = 1.0 it only sets the size); d must be in
        (0, 1]. ``tokens`` instead of ``image``: the same from image tokens
        (a run's ``res.tokens``: variations of a picture the model drew; ``prepare_tokens``).
        ``steps`` and ``denoise`` become one StepSchedule, checked first."""
        plan = StepSchedule.of(steps, denoise)
        job = self._text_or_image(prompt, negative_prompt, width, height, cfg, batch_size,
                                  image, plan.denoise, tokens)
        res = self.run(job, resolve_strategy(strategy), plan, temperature, seed, cache, callback,
                       decode, max_batch)
        if self_score is not None:
            w, h = job.layout.w * self.vq_factor, job.layout.h * self.vq_factor
            res.self_score = self.self_score(res.tokens, job.items, negative_prompt, w, h,
                                             job.text.cfg if isinstance(job, PaintJob)
                                             else job.cfg, seed, self_score)
        return res

    def _text_or_image(self, prompt: str | Sequence[str], negative_prompt: str | None,
                       width: int | None, height: int | None, cfg: float | None,
                       batch_size: int, image: Any, denoise: float, tokens: Any = None
                       ) -> TextJob | PaintJob:
        """``generate``'s job: text to image, or image to image of the whole ``image`` (or of
        ``tokens``)."""
        if tokens is not None:
            if image is not None:
                raise InputError("tokens", "and image are both given", "give one: the picture "
                                 "(image=) or its tokens (tokens=)")
            return self.prepare_tokens(prompt, tokens, width, height, negative_prompt, cfg,
                                       batch_size, denoise)
        if image is None:
            check_denoise(denoise, NO_IMAGE)
            return self.prepare_text(prompt, negative_prompt, width, height, cfg, batch_size)
        if width is not None or height is not None:
            raise InputError("width", "and height are set, but the image sets the size",
                             "leave width and height None with an image")
        return self.prepare_paint(prompt, image, None, None, negative_prompt, cfg, batch_size,
                                  fit_fix=IMAGE_FIT_FIX, denoise=denoise)

    def paint(self, prompt: str | Sequence[str], image: Any, mask: Any,
              options: PaintOptions | None = None, negative_prompt: str | None = None,
              steps: int | None = None, cfg: float | None = None, temperature: float = 1.0,
              seed: int = 0, strategy: str | Strategy = "ladr",
              cache: MLCacheConfig | None = None,
              callback: Callable[[dict[str, Any]], None] | None = None, batch_size: int = 1,
              decode: bool = True, max_batch: int | None = None,
              denoise: float = 1.0) -> GenerationResult:
        """Inpaint / outpaint: ``prepare_paint`` then ``run``. Known tokens never change; a
        mask with nothing to regenerate returns the input unchanged (``res.note`` says why);
        ``res.paint`` is the plan a later decode pastes the original pixels back with.
        ``denoise`` < 1: the masked part redrawn at that strength from the picture's codes
        (mask None: the whole picture, as ``generate(image=...)``)."""
        plan = StepSchedule.of(steps, denoise)
        job = self.prepare_paint(prompt, image, mask, options, negative_prompt, cfg, batch_size,
                                 denoise=plan.denoise)
        return self.run(job, resolve_strategy(strategy), plan, temperature, seed, cache,
                        callback, decode, max_batch)

    def edit(self, instruction: str | Sequence[str], image: Any, edit_type: str = "edit",
             style: Any = None, size: str = "official", cfg: float | None = None,
             image_cfg: float | None = None, steps: int | None = None, temperature: float = 1.0,
             seed: int = 0, strategy: str | Strategy = "ladr",
             callback: Callable[[dict[str, Any]], None] | None = None, batch_size: int = 1,
             decode: bool = True, max_batch: int | None = None) -> GenerationResult:
        """Edit an image by instruction (the official image-to-image path): ``prepare_edit``
        then ``run``. No ML-Cache."""
        steps = StepSchedule.of(steps)
        job = self.prepare_edit(instruction, image, edit_type, style, size, cfg, image_cfg,
                                batch_size)
        return self.run(job, resolve_strategy(strategy), steps, temperature, seed, None,
                        callback, decode, max_batch)

    def make_denoiser(self, prompts: str | Sequence[str], negative_prompt: str | None = None,
                      width: int | None = None, height: int | None = None,
                      cfg: float | None = None, cache: MLCacheConfig | None = None,
                      steps: int | None = None, batch_size: int = 1,
                      n_generate: list[int] | None = None) -> DiMOODenoiser:
        """The text-to-image ``denoise`` callable for B = len(prompts) * batch_size items
        (``.stats`` inside): ``prepare_text`` and the job's denoiser. ``steps`` (the sampler's
        T) is needed with an ML-Cache to place the refresh steps; ``n_generate``: tokens each
        item generates when some are known (its ML-Cache schedule runs over them)."""
        job = self.prepare_text(prompts, negative_prompt, width, height, cfg, batch_size)
        return job.denoiser(self.runtime(), steps, cache, n_generate)  # type: ignore[arg-type]

    def self_score(self, tokens: torch.Tensor, prompt: str | Sequence[str],
                   negative_prompt: str | None = None, width: int | None = None,
                   height: int | None = None, cfg: float | None = None, seed: int = 0,
                   config: SelfScoreConfig | None = None, chunk: int = 8) -> SelfScore:
        """How plausible this model finds final image tokens [B, h*w] under their prompt(s)
        (selfscore.py): ``config.passes`` packed passes per image, re-masked blocks drawn from
        a CPU generator seeded ``seed + i`` for image i. ``prompt``: one string for every image
        or one per image; size and ``cfg`` as in ``generate`` (the run's, for the guided
        score). ``chunk``: images per packed pass."""
        from .tasks.selfscore import SelfScoreConfig, score_tokens

        if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2:
            raise ValueError("tokens must be a LongTensor [B, h*w] of image codes "
                             "(GenerationResult.tokens)")
        prompts = _prompt_list(prompt)
        prompts = prompts * tokens.shape[0] if len(prompts) == 1 else prompts
        _positive_int("seed", seed, minimum=0)
        layout = self.layout(self.default_size if width is None else width,
                             self.default_size if height is None else height, prompts,
                             negative_prompt)
        k = self.ids.codebook_size
        if tokens.numel() and not 0 <= int(tokens.min()) <= int(tokens.max()) < k:
            raise ValueError(f"tokens must be image codes in [0, {k}) of this checkpoint")
        generators = [item_generator(seed + i, torch.device("cpu"))
                      for i in range(tokens.shape[0])]
        return score_tokens(
            lambda items: self.make_denoiser(items, negative_prompt, width, height, cfg),
            tokens.long(), prompts, (layout.h, layout.w), generators,
            SelfScoreConfig() if config is None else config, chunk)


def load_dimoo(path: str | Path, device: str | torch.device = "cpu",
               dtype: torch.dtype | str = torch.bfloat16, weight_dtype: str | None = None,
               fp8_scale: str = "channel", offload_blocks: bool = False,
               operations: Any = None) -> DiMOOPipeline:
    """Load an official Lumina-DiMOO folder (see checkpoint.py) into a ``DiMOOPipeline``.

    ``dtype``: compute dtype. ``weight_dtype``: "default" / None (as stored), "fp8_e4m3fn" or
    "fp8_e5m2" (block linears stored in fp8 with per-output-channel scales, ``fp8_scale=
    "tensor"`` for one scale per matrix; see fp8.py). ``offload_blocks``: keep the blocks on the
    CPU and stream each to ``device`` one block ahead (offload.py). ``operations``: the layer
    classes (``LLaDAModel``). ``vqvae/preview_table.safetensors``, when present, is the
    fitted preview table (vq.py).
    """
    if not isinstance(offload_blocks, bool):
        raise ValueError(f"offload_blocks must be True or False (got {offload_blocks!r})")
    checkpoint = load_checkpoint(path, device=device, dtype=dtype, weight_dtype=weight_dtype,
                                 fp8_scale=fp8_scale, operations=operations,
                                 weights_device="cpu" if offload_blocks else None)
    if offload_blocks:
        from .model.offload import stream_blocks

        stream_blocks(checkpoint.transformer, resolve_device(device))
    pipe = DiMOOPipeline(checkpoint)
    pipe.compute_dtype = resolve_dtype(dtype)  # the load setting, whatever the weights store
    table = vq_folder(Path(path)) / PREVIEW_TABLE_FILE
    if table.is_file():
        pipe.use_preview_table(table)
    return pipe

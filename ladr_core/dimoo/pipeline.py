"""``DiMOOPipeline`` (``load_dimoo`` makes one from a folder): one entry point per task.

It holds the model (transformer, tokenizer, VQ, ids, the checkpoint's settings) and hands
each task what it uses. ``generate``, ``paint`` and ``edit`` check their inputs once
(``prepare_*``: a job, jobs.py) and run one routine (``run``, runs.py): the job's ``denoise``
callable -> the core ``sample`` loop -> VQ decode; ``understand`` answers questions
(understand.py). Item i uses ``item_generator(seed + i, device)``, all 64 bits of the seed
(seed 0 is an ordinary seed, unlike the official script's "do not seed").
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..registry import DEFAULT_STRATEGY, resolve_strategy
from ..schedules import StepSchedule
from ..step import Strategy
from . import jobs, runs
from .denoise.cache import MLCacheConfig
from .denoise.denoiser import DiMOODenoiser, valid_cfg
from .denoise.prompt import ImageLayout, prompt_layout
from .images import decode_bytes, preview_bytes, preview_table, read_preview_table
from .jobs import EditJob, Job, PaintJob, Runtime, TextJob
from .model.config import DiMOOIds, LLaDAConfig, context_length
from .model.memory import model_compute_dtype, working_memory
from .model.transformer import LLaDAModel
from .model.vq import decode_codes, encode_images, preview_from_table
from .runs import GenerationResult, item_generator
from .tasks.answer_rules import AnswerRule
from .tasks.painting import PaintOptions
from .tasks.pictures import check_image
from .tasks.understanding import AnswerResult, UnderstandJob
from .understand import (
    answer,
    answer_end_id,
    answering_bytes,
    answers_at_once,
    understand_job,
    understand_memory,
)
from .weights.files import LoadedCheckpoint, config_value

if TYPE_CHECKING:
    from .tasks.selfscore import SelfScore, SelfScoreConfig

__all__ = ["DiMOOPipeline", "GenerationResult"]

DEFAULT_SIZE = 1024
DEFAULT_CFG = 4.0  # the official Lumina-DiMOO guidance scale
Callback = Callable[[dict[str, Any]], None]


class DiMOOPipeline:
    """Native Lumina-DiMOO pipeline (module docstring). Its settings beyond the official
    config.json keys: the pack's keys (ladr_core/assets) and ``eos_token_id`` (the
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
        self.default_cfg: float = float(config_value(raw, "default_cfg", DEFAULT_CFG, valid_cfg,
                                                     "a finite number >= 0"))
        self.can_edit: bool = config_value(raw, "ladr_can_edit", True,
                                           lambda v: isinstance(v, bool), "true or false")
        self.can_understand: bool = config_value(raw, "ladr_can_understand", True,
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
        """A view of this pipeline (same weights) whose denoisers run compiled passes
        (model/compile.py), kept per (backend, mode, dynamic); this pipeline stays eager."""
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

    def _compute_dtype(self) -> torch.dtype:
        """The load's ``dtype``, else what the model's layers say (model/memory.py)."""
        if self.compute_dtype is not None:
            return self.compute_dtype
        return model_compute_dtype(self.transformer)

    # ---- text, images and sizes ---------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        """Official ``tokenizer(text)["input_ids"]`` (tokenizer's own special-token rules)."""
        return list(self.tokenizer.encode(text).ids)

    def decode_text(self, tokens: list[int]) -> str:
        """Token ids -> text, special tokens dropped (official ``skip_special_tokens=True``)."""
        return self.tokenizer.decode(list(tokens), skip_special_tokens=True)

    def encode_image(self, image: torch.Tensor) -> torch.Tensor:
        """IMAGE float [B, H, W, 3] in [0, 1], sides multiples of ``vq_factor`` -> codes
        LongTensor [B, h*w] (CPU), the official encoding (vq.encode_images)."""
        return encode_images(self.vq, check_image(image, self.vq_factor, "image"),
                             self.vq_factor)

    def decode(self, tokens: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
        """Codes [B, h*w] -> images float [B, h*f, w*f, 3] in [0, 1] (the full VQ decoder)."""
        return decode_codes(self.vq, tokens, grid)

    def use_preview_table(self, path: str | Path) -> None:
        """Use a fitted preview table file (images.py); CheckpointError if it does not fit."""
        read_preview_table(self.vq, path, min(self.preview_size, self.vq_factor),
                           self._preview_copies)

    def preview_table(self, device: torch.device | None = None) -> torch.Tensor:
        """Codebook -> RGB table [K, p, p, 3], on the VQ's device or ``device`` (images.py)."""
        return preview_table(self.vq, self.vq_factor, self.preview_size, self._preview_copies,
                             device)

    def preview(self, tokens: torch.Tensor, masked: torch.Tensor | None,
                grid: tuple[int, int]) -> torch.Tensor:
        """Cheap preview [B, h*p, w*p, 3] on the tokens' device: table gather, masked tokens
        grey; no decoder call, no host copy of the tokens."""
        return preview_from_table(self.preview_table(tokens.device), tokens, masked, grid)

    def layout(self, width: int, height: int, prompts: Sequence[str],
               negative_prompt: str | None = None, source: str | None = None) -> ImageLayout:
        """Validated token grid for a pixel size (denoise/prompt.py ``prompt_layout``)."""
        return prompt_layout(self.encode, self.vq_factor, self.context_length, width, height,
                             prompts, negative_prompt, source)

    def runtime(self) -> Runtime:
        """What a job's denoiser is built from (jobs.Runtime)."""
        return Runtime(self.transformer, self.encode, self.ids, self.encode_image, self.compiled)

    # ---- device memory beyond the weights (model/memory.py) ----------------------------------
    def image_bytes(self, width: int | None = None, height: int | None = None,
                    cache: bool = False) -> int:
        """Of one image in flight, prompts of 96 tokens: to choose how many run at once."""
        grid = ImageLayout((height or self.default_size) // self.vq_factor,
                           (width or self.default_size) // self.vq_factor)
        return working_memory(self.config, 1, grid.length + 96, grid.n_codes,
                              self.ids.codebook_size, cache=cache, dtype=self._compute_dtype())

    def run_memory(self, job: Job, images: int = 1, cache: MLCacheConfig | None = None) -> int:
        """Of a run of ``job``, ``images`` in flight: the largest of its sampling, the decode of
        its images and (no table yet) building the preview table: what a host keeps free."""
        branches, length = job.rows(self.encode)
        grid = job.layout
        sampling = working_memory(self.config, images, length, grid.n_codes,
                                  self.ids.codebook_size, branches=branches,
                                  cache=cache is not None, dtype=self._compute_dtype())
        return max(sampling, self.decode_bytes(grid.w * self.vq_factor, grid.h * self.vq_factor,
                                               len(job.items)), self.preview_bytes())

    def decode_bytes(self, width: int, height: int, images: int = 1) -> int:
        """Of the VQ decode of ``images`` images of ``width`` x ``height`` (images.py)."""
        return decode_bytes(self.vq, width, height, images)

    def preview_bytes(self) -> int:
        """Of building the preview table; 0 once there is one (images.py)."""
        return preview_bytes(self.vq, self.vq_factor)

    def understand_memory(self, job: UnderstandJob, answers: int | None = None) -> int:
        """Of answering ``job``, ``answers`` in flight (None: all), or of encoding one of its
        images, the larger: what a host keeps free when loading (understand.py)."""
        return understand_memory(job, answers, lambda k: self.answering_bytes(job, k),
                                 self.decode_bytes)

    def answers_in_flight(self, job: UnderstandJob, free_bytes: int | None = None) -> int:
        """Answers of ``job`` in one pass when the caller does not say: CPU_IN_FLIGHT on a CPU,
        on a GPU what 80 % of ``free_bytes`` (None = CUDA's) holds (understand.py)."""
        return answers_at_once(job, self.device, free_bytes,
                               lambda k: self.answering_bytes(job, k))

    def answering_bytes(self, job: UnderstandJob, rows: int) -> int:
        """Device memory of one pass of the answer loop over ``job`` with ``rows`` answers in
        flight (understand.answering_bytes at this model's config, dtype and head)."""
        return answering_bytes(self.config, self.transformer, job, rows, self.encode,
                               self._compute_dtype())

    # ---- checking a request once (before any weight is touched): a job, jobs.py -------------
    def prepare_text(self, prompt: str | Sequence[str], negative_prompt: str | None = None,
                     width: int | None = None, height: int | None = None,
                     cfg: float | None = None, batch_size: int = 1) -> TextJob:
        """Text to image (``jobs.text_job`` says every argument)."""
        return jobs.text_job(self.layout, self.default_size, self.default_cfg, prompt,
                             negative_prompt, width, height, cfg, batch_size)

    def prepare_paint(self, prompt: str | Sequence[str], image: Any, mask: Any,
                      options: PaintOptions | None = None, negative_prompt: str | None = None,
                      cfg: float | None = None, batch_size: int = 1,
                      fit_fix: str | None = None, denoise: float = 1.0) -> PaintJob:
        """Inpaint / outpaint, or image to image with ``mask`` None (``jobs.paint_job``)."""
        return jobs.paint_job(self.layout, self.vq_factor, self.default_cfg, prompt, image,
                              mask, options, negative_prompt, cfg, batch_size, fit_fix, denoise)

    def prepare_tokens(self, prompt: str | Sequence[str], tokens: Any, width: int | None = None,
                       height: int | None = None, negative_prompt: str | None = None,
                       cfg: float | None = None, batch_size: int = 1,
                       denoise: float = 1.0) -> PaintJob:
        """Image to image from image tokens instead of a picture (``jobs.tokens_job``)."""
        return jobs.tokens_job(self.layout, self.vq_factor, self.default_size, self.default_cfg,
                               self.ids.codebook_size, prompt, tokens, width, height,
                               negative_prompt, cfg, batch_size, denoise)

    def prepare_edit(self, instruction: str | Sequence[str], image: Any, edit_type: str = "edit",
                     style: Any = None, size: str = "official", cfg: float | None = None,
                     image_cfg: float | None = None, batch_size: int = 1) -> EditJob:
        """Editing by instruction (``jobs.edit_job``)."""
        return jobs.edit_job(self.can_edit, self.encode, self.vq_factor, self.context_length,
                             instruction, image, edit_type, style, size, cfg, image_cfg,
                             batch_size)

    def prepare_understand(self, image: Any, question: str | list[str],
                           max_answer: int | None = None, block_length: int | None = None,
                           steps: int | None = None, rule: str | AnswerRule = "official",
                           temperature: float = 0.0, size: str = "official") -> UnderstandJob:
        """Questions about images (``understand.understand_job`` says every argument)."""
        return understand_job(self.can_understand, self.encode, self.vq_factor,
                              self.context_length, self.ids, self.default_size, image, question,
                              max_answer, block_length, steps, rule, temperature, size)

    # ---- running a checked request ------------------------------------------------------------
    def run(self, job: Job, strategy: Strategy, steps: int | StepSchedule | None = None,
            temperature: float = 1.0, seed: int = 0, cache: MLCacheConfig | None = None,
            callback: Callback | None = None, decode: bool = True,
            max_batch: int | None = None) -> GenerationResult:
        """Sample a checked job (``prepare_*``) with a Strategy object (``LADR.preset("nano")``,
        ``Baseline()``, ...; ``generate`` / ``paint`` / ``edit`` resolve a name). ``steps``: T
        (None = DiMOO's 64) or a StepSchedule with the job's denoise. ``decode=False`` skips
        the VQ decoder. ``max_batch``: images in flight at once (None =
        ``runs.images_in_flight``); the rest roll in as images finish, each the same as alone."""
        plan = jobs.check_run(job, strategy, steps, cache)
        if job.nothing_to_do or plan.left == 0:  # nothing to regenerate: the input, unchanged
            return runs.unchanged(job, plan, self.vq, self.encode_image, decode)  # type: ignore
        if plan.start > 0 and job.plan.generate is None:  # a plan given its re-mask keeps it
            job = runs.start_late(job, plan, seed)  # type: ignore[arg-type]
        if callback is not None and self.vq is not None:  # a callback may draw previews:
            self.preview_table()  # the table is made now, not in the first step beside sampling
        built = job.build(self.runtime(), plan.left, cache)
        if max_batch is None:
            grid = built.denoiser.layout
            max_batch = runs.images_in_flight(self.device, built.denoiser.batch, self.image_bytes(
                grid.w * self.vq_factor, grid.h * self.vq_factor, cache is not None))
        options = runs.RunOptions(strategy, plan, temperature, seed, callback, bool(decode),
                                  max_batch)
        res = runs.run_turns(job, built, options, self.vq, self.device, self.runtime())
        return replace(res, start_step=plan.start) if plan.start else res

    def run_understand(self, job: UnderstandJob, seed: int = 0, callback: Callback | None = None,
                       max_batch: int | None = None) -> AnswerResult:
        """Answer a checked request (``understand``'s arguments): a host checks first, asks for
        ``understand_memory(job, 1)``, then runs it with ``answers_in_flight(job, free)``."""
        return answer(job, seed, callback, max_batch, lambda: self.answers_in_flight(job),
                      self.transformer, self.encode, self.decode_text, self.encode_image,
                      self.ids, self.answer_end_id)

    # ---- one entry point per task: check, then run -------------------------------------------
    def generate(self, prompt: str | Sequence[str], negative_prompt: str | None = None,
                 width: int | None = None, height: int | None = None, steps: int | None = None,
                 cfg: float | None = None, temperature: float = 1.0, seed: int = 0,
                 strategy: str | Strategy = DEFAULT_STRATEGY, cache: MLCacheConfig | None = None,
                 callback: Callback | None = None, batch_size: int = 1, decode: bool = True,
                 max_batch: int | None = None, self_score: SelfScoreConfig | None = None,
                 image: Any = None, denoise: float = 1.0, tokens: Any = None) -> GenerationResult:
        """Text to image: ``prepare_text`` then ``run`` (jobs.generate_job and ``run`` say every
        argument). ``self_score``: also score the final tokens (``self_score()``, same seed).
        ``image`` or ``tokens`` (a run's ``res.tokens``) with ``denoise`` d < 1: image to image
        at strength d. ``steps`` and ``denoise`` become one StepSchedule, checked first."""
        plan = StepSchedule.of(steps, denoise)
        job = jobs.generate_job(self.layout, self.vq_factor, self.default_size, self.default_cfg,
                                self.ids.codebook_size, prompt, negative_prompt, width, height,
                                cfg, batch_size, image, plan.denoise, tokens)
        res = self.run(job, resolve_strategy(strategy), plan, temperature, seed, cache, callback,
                       decode, max_batch)
        if self_score is not None:
            w, h = job.layout.w * self.vq_factor, job.layout.h * self.vq_factor
            guided = job.text.cfg if isinstance(job, PaintJob) else job.cfg
            res.self_score = self.self_score(res.tokens, job.items, negative_prompt, w, h,
                                             guided, seed, self_score)
        return res

    def paint(self, prompt: str | Sequence[str], image: Any, mask: Any,
              options: PaintOptions | None = None, negative_prompt: str | None = None,
              steps: int | None = None, cfg: float | None = None, temperature: float = 1.0,
              seed: int = 0, strategy: str | Strategy = DEFAULT_STRATEGY,
              cache: MLCacheConfig | None = None, callback: Callback | None = None,
              batch_size: int = 1, decode: bool = True, max_batch: int | None = None,
              denoise: float = 1.0) -> GenerationResult:
        """Inpaint / outpaint: ``prepare_paint`` then ``run`` (jobs.paint_job). A mask with
        nothing to regenerate returns the input unchanged (``res.note`` says why);
        ``res.paint`` is the plan a later decode pastes the original pixels back with."""
        plan = StepSchedule.of(steps, denoise)
        job = self.prepare_paint(prompt, image, mask, options, negative_prompt, cfg, batch_size,
                                 denoise=plan.denoise)
        return self.run(job, resolve_strategy(strategy), plan, temperature, seed, cache,
                        callback, decode, max_batch)

    def edit(self, instruction: str | Sequence[str], image: Any, edit_type: str = "edit",
             style: Any = None, size: str = "official", cfg: float | None = None,
             image_cfg: float | None = None, steps: int | None = None, temperature: float = 1.0,
             seed: int = 0, strategy: str | Strategy = DEFAULT_STRATEGY, callback: Callback | None = None,
             batch_size: int = 1, decode: bool = True,
             max_batch: int | None = None) -> GenerationResult:
        """Edit an image by instruction (the official image-to-image path): ``prepare_edit``
        then ``run``. No ML-Cache."""
        plan = StepSchedule.of(steps)
        job = self.prepare_edit(instruction, image, edit_type, style, size, cfg, image_cfg,
                                batch_size)
        return self.run(job, resolve_strategy(strategy), plan, temperature, seed, None,
                        callback, decode, max_batch)

    def understand(self, image: Any, question: str | list[str], max_answer: int | None = None,
                   block_length: int | None = None, steps: int | None = None,
                   rule: str | AnswerRule = "official", temperature: float = 0.0, seed: int = 0,
                   size: str = "official", callback: Callback | None = None,
                   max_batch: int | None = None) -> AnswerResult:
        """Answer ``question`` about ``image`` the official way: ``prepare_understand`` then
        ``run_understand`` (understand.py). ``rule``: an answer rule's name (answer_rules.py)
        or an AnswerRule; ``max_batch``: answers in flight (None: ``answers_in_flight``)."""
        job = self.prepare_understand(image, question, max_answer, block_length, steps, rule,
                                      temperature, size)
        return self.run_understand(job, seed, callback, max_batch)

    def make_denoiser(self, prompts: str | Sequence[str], negative_prompt: str | None = None,
                      width: int | None = None, height: int | None = None,
                      cfg: float | None = None, cache: MLCacheConfig | None = None,
                      steps: int | None = None, batch_size: int = 1,
                      n_generate: list[int] | None = None) -> DiMOODenoiser:
        """The text-to-image ``denoise`` callable of ``prepare_text``'s job (``.stats`` inside).
        ``steps`` (T) places an ML-Cache's refresh steps; ``n_generate``: tokens each item
        generates when some are known (its ML-Cache schedule runs over them)."""
        job = self.prepare_text(prompts, negative_prompt, width, height, cfg, batch_size)
        return job.denoiser(self.runtime(), steps, cache, n_generate)  # type: ignore[arg-type]

    def self_score(self, tokens: torch.Tensor, prompt: str | Sequence[str],
                   negative_prompt: str | None = None, width: int | None = None,
                   height: int | None = None, cfg: float | None = None, seed: int = 0,
                   config: SelfScoreConfig | None = None, chunk: int = 8) -> SelfScore:
        """How plausible this model finds final image tokens [B, h*w] under one prompt or one
        per image (selfscore.py; image i's blocks drawn with seed + i); size and ``cfg`` as in
        the run."""
        from .tasks.selfscore import SelfScoreConfig, score_tokens

        if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2:
            raise ValueError("tokens must be a LongTensor [B, h*w] of image codes "
                             "(GenerationResult.tokens)")
        prompts = jobs.prompt_list(prompt)
        prompts = prompts * tokens.shape[0] if len(prompts) == 1 else prompts
        jobs.positive_int("seed", seed, minimum=0)
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


"""``load_dimoo`` and ``DiMOOPipeline``: load an official folder, generate, decode, preview.

Contract: docs/ARCHITECTURE.md section 2. Generation = prompt layout (prompt.py) -> the
``denoise`` callable (denoiser.py) -> the core ``sample`` loop (sampling.py, any strategy) ->
VQ decode (vq.py). Item i of a batch uses ``item_generator(seed + i, device)``: a
``torch.Generator(device).manual_seed(...)`` that keeps all 64 bits of the seed; seed 0 is an
ordinary seed (the official script treats 0 as "do not seed").
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ..registry import resolve_strategy
from ..step import Strategy
from ..validation import check_steps_arg
from .denoise.cache import MLCacheConfig
from .denoise.denoiser import DiMOODenoiser, valid_cfg
from .denoise.prompt import (
    SIZE_STEP,
    ImageLayout,
    build_prompt_batch,
    check_image_size,
    cond_text,
    uncond_text,
)
from .model.config import DiMOOIds, LLaDAConfig
from .model.transformer import LLaDAModel
from .model.vq import (
    PREVIEW_TABLE_FILE,
    build_preview_table,
    decode_codes,
    encode_images,
    load_preview_table,
    preview_from_table,
)
from .tasks.editing import make_edit_denoiser, plan_edit
from .tasks.painting import PaintOptions, check_image, plan_painting
from .weights.checkpoint import load_checkpoint
from .weights.files import CheckpointError, LoadedCheckpoint, resolve_device

if TYPE_CHECKING:
    from .tasks.selfscore import SelfScore, SelfScoreConfig

__all__ = ["load_dimoo", "DiMOOPipeline", "GenerationResult"]

DEFAULT_SIZE = 1024
DEFAULT_CFG = 4.0  # the official Lumina-DiMOO guidance scale
SEED_MAX = 2**64 - 1  # torch.Generator.manual_seed accepts [0, 2**64)
# Longest sequence accepted for a RoPE model carrying the official DiMOO ids. LLaDA-style
# configs say max_sequence_length 4096, but the official RotaryEmbedding recomputes its sin/cos
# table for longer inputs and the official default size 1024x1024 needs 64 * 65 + 4 = 4164 image
# tokens plus the prompt. 5120 admits 1024x1024 with prompts of up to ~950 tokens.
DIMOO_ROPE_CONTEXT = 5120


def context_length(config: LLaDAConfig, ids: DiMOOIds) -> int:
    """Longest input sequence (tokens) accepted by the image-size check.

    ``config.max_sequence_length`` itself, except for a RoPE model with the official DiMOO
    image ids (the real checkpoint), where positions past it are computed like the official
    code does and the floor is DIMOO_ROPE_CONTEXT. Other checkpoints (the nano model) are held
    to their own ``max_sequence_length``.
    """
    official = ids.image_offset == DiMOOIds().image_offset
    if config.rope and not config.alibi and official:
        return max(config.max_sequence_length, DIMOO_ROPE_CONTEXT)
    return config.max_sequence_length


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


def generator_seed(seed: int, device: torch.device) -> int:
    """The value passed to ``manual_seed`` so that distinct 64-bit seeds get distinct streams.

    The CPU generator (mt19937) keeps only the low 32 bits of its seed, so seeds s and
    s + k * 2**32 drew identical noise (identical images). On CPU a seed >= 2**32 is mixed
    (splitmix64 finaliser) into 32 bits; seeds < 2**32, and every seed on CUDA (Philox keeps 64
    bits), are passed unchanged, so their images are the ones they always were.
    """
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


def _prompt_list(prompt: str | Sequence[str]) -> list[str]:
    if isinstance(prompt, str):
        return [prompt]
    prompts = list(prompt) if isinstance(prompt, Sequence) else []
    if not prompts or not all(isinstance(p, str) for p in prompts):
        raise ValueError("prompt must be a string or a non-empty list of strings")
    return prompts


def _positive_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum} (got {value!r})")
    return value


def _default_cfg(raw: dict) -> float:
    """config.json ``default_cfg`` (our key: the guidance scale the checkpoint was tuned for;
    the nano model writes it), else the official 4.0. A present but bad value is an error."""
    value = raw.get("default_cfg", DEFAULT_CFG)
    if not valid_cfg(value):
        raise CheckpointError(f"config.json: default_cfg must be a finite number >= 0 (got "
                              f"{value!r}); fix or delete the key (absent = {DEFAULT_CFG})")
    return float(value)


class DiMOOPipeline:
    """Native Lumina-DiMOO text-to-image pipeline (see module docstring)."""

    def __init__(self, checkpoint: LoadedCheckpoint, preview_size: int = 4) -> None:
        self.transformer: LLaDAModel = checkpoint.transformer
        self.config: LLaDAConfig = checkpoint.config
        self.tokenizer = checkpoint.tokenizer
        self.vq = checkpoint.vq
        self.ids: DiMOOIds = checkpoint.ids
        self.vq_factor: int = checkpoint.vq_factor
        self.source_folder: Path | None = checkpoint.folder
        size = checkpoint.raw_config.get("default_image_size", DEFAULT_SIZE)
        self.default_size: int = size if isinstance(size, int) and size > 0 else DEFAULT_SIZE
        self.default_cfg: float = _default_cfg(checkpoint.raw_config)
        self.preview_size = preview_size
        self.context_length: int = context_length(self.config, self.ids)
        self._preview_table: torch.Tensor | None = None
        self.compiled: Any = None  # compile.CompiledPasses on a view made by compile()
        self._compiled_views: dict[tuple, DiMOOPipeline] = {}

    def compile(self, backend: str = "inductor", mode: str = "default",
                dynamic: bool = False) -> DiMOOPipeline:
        """Opt-in ``torch.compile`` of the transformer passes (ComfyUI TorchCompileModel-like).

        Returns a view of this pipeline (same weights, tokenizer, VQ) whose denoisers run the
        compiled passes; this pipeline stays eager. The view is kept per (backend, mode,
        dynamic), so calling again returns it with every graph compiled so far: one compile
        per shape, kept as long as this pipeline lives. The one-time cost is logged and
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
        """Device memory one image in flight needs beyond the weights (an estimate, to choose
        how many to run at once): the largest activations of its rows (cond and uncond, each
        ~prompt + image tokens: two [tokens, MLP] buffers at the MLP's peak, in the compute
        dtype), its code-slot logits in float32 (the guided logits and the sampler's two
        [N, K] work buffers) and, with an ML-Cache, every layer's K/V of its rows."""
        cfg, ids = self.config, self.ids
        grid = ImageLayout((height or self.default_size) // self.vq_factor,
                           (width or self.default_size) // self.vq_factor)
        tokens = 2 * (grid.length + 96)  # two rows, a typical prompt length
        width_bytes = next(self.transformer.parameters()).element_size()
        bytes_ = 2 * tokens * cfg.hidden_size * max(width_bytes, 2)
        bytes_ += 3 * grid.n_codes * ids.codebook_size * 4
        if cache:
            kv = 2 * cfg.effective_n_kv_heads * cfg.head_dim * max(width_bytes, 2)
            bytes_ += cfg.n_layers * tokens * kv + 2 * grid.n_codes * ids.codebook_size * 2
        return int(bytes_)

    def encode(self, text: str) -> list[int]:
        """Official ``tokenizer(text)["input_ids"]`` (tokenizer's own special-token rules)."""
        return list(self.tokenizer.encode(text).ids)

    def layout(self, width: int, height: int, prompts: Sequence[str],
               negative_prompt: str | None = None) -> ImageLayout:
        """Validated token grid for a pixel size; ValueError with the nearest valid sizes."""
        cond = max(len(self.encode(cond_text(p))) for p in prompts)
        uncond = len(self.encode(uncond_text(negative_prompt)))
        field, longest = ("negative_prompt", uncond) if uncond > cond else ("prompt", cond)
        return check_image_size(width, height, self.vq_factor, self.context_length, longest,
                                field, math.lcm(self.vq_factor, SIZE_STEP))

    def make_denoiser(self, prompts: str | Sequence[str], negative_prompt: str | None = None,
                      width: int | None = None, height: int | None = None,
                      cfg: float | None = None, cache: MLCacheConfig | None = None,
                      steps: int | None = None, batch_size: int = 1,
                      n_generate: int | list[int] | None = None) -> DiMOODenoiser:
        """The ``denoise`` callable for B = len(prompts) * batch_size items (``.stats`` inside).

        ``steps`` (the sampler's T) is needed with an ML-Cache to place the refresh steps.
        ``cfg`` None = ``default_cfg``; width/height None = ``default_size``. ``n_generate``:
        tokens generated per item when some are known (one int, or one per item; each item's
        ML-Cache schedule runs over its own).
        """
        prompt_list = _prompt_list(prompts)
        _positive_int("batch_size", batch_size)
        if negative_prompt is not None and not isinstance(negative_prompt, str):
            raise ValueError("negative_prompt must be a string or None")
        width = self.default_size if width is None else width
        height = self.default_size if height is None else height
        cfg = self.default_cfg if cfg is None else cfg
        layout = self.layout(width, height, prompt_list, negative_prompt)
        items = [p for p in prompt_list for _ in range(batch_size)]
        batch = build_prompt_batch(self.encode, self.ids, items, negative_prompt, layout,
                                   with_uncond=bool(cfg and cfg > 0))
        denoiser = DiMOODenoiser(self.transformer, batch, self.ids, cfg, cache, steps,
                                 n_generate=n_generate)
        denoiser.forward_hook = self.compiled
        return denoiser

    def generate(self, prompt: str | Sequence[str], negative_prompt: str | None = None,
                 width: int | None = None, height: int | None = None, steps: int | None = None,
                 cfg: float | None = None, temperature: float = 1.0, seed: int = 0,
                 strategy: str | Strategy = "ladr", cache: MLCacheConfig | None = None,
                 callback: Callable[[dict[str, Any]], None] | None = None,
                 batch_size: int = 1, decode: bool = True, init_image: Any = None,
                 mask: Any = None, paint: PaintOptions | None = None,
                 max_batch: int | None = None,
                 self_score: SelfScoreConfig | None = None, reference: Any = None,
                 edit_type: str = "edit", image_cfg: float | None = None,
                 style: Any = None) -> GenerationResult:
        """Text -> images. ``strategy``: a Strategy object (``LADR(policy)``,
        ``LADR.preset("nano")``, ``Baseline()``, ``Prophet(policy)``), a strategy name or an
        LADR preset name (ladr_core.registry). ``steps`` None = the strategy's tuned T (the
        nano preset carries 128), else DiMOO's 64. ``decode=False`` skips the VQ decoder
        (images None), e.g. when decoding elsewhere. ``self_score``: also score the final tokens
        (``self_score()``, same seed), which costs ``self_score.passes`` extra denoiser passes
        per image; None (default) = no score.

        ``max_batch``: images in flight at once (None = all of them). The images of a batch
        leave the transformer passes as they finish; below the batch's size the batch rolls:
        each finished image makes room for the next prompt, which starts at its own step 0.
        Image i (prompt i // batch_size, seed + i) is the same whatever its neighbours: equal
        to its own single run in float32. ``res.item_nfe`` / ``res.item_token_forwards``: the
        forward passes and tokens each image cost.

        Inpainting / outpainting (painting.py): ``init_image`` float [B, H, W, 3] in [0, 1] and
        ``mask`` float [B, H, W] in [0, 1] (1 = regenerate; one mask may serve every image);
        ``paint`` (PaintOptions): coverage threshold, grow, paste-back and feather. The image
        sets the size; known tokens never change; nothing to regenerate returns the input
        unchanged (``res.note`` says why).

        Editing (editing.py): ``reference`` float [B, H, W, 3] in [0, 1] (the image to edit,
        which sets the size), ``prompt`` the instruction, ``edit_type`` one of
        ``editing.EDIT_TYPES``; ``cfg`` (text, None = 2.5) and ``image_cfg`` (None = 4.0) are
        the official image-to-image guidance scales. No ML-Cache. ``edit_type="style"``:
        ``reference`` is the image to transform and ``style`` the style image, which sets the
        output size (as the official script)."""
        from ..sampling import sample

        chosen = resolve_strategy(strategy)
        steps = chosen.run_steps(steps)
        check_steps_arg(steps)
        plan = None
        if init_image is not None or mask is not None:
            plan = plan_painting(self, _prompt_list(prompt), init_image, mask, paint,
                                 _positive_int("batch_size", batch_size), width, height)
            if plan.nothing_to_do:
                return GenerationResult(plan.codes, plan.images if decode else None, 0, 0, 0.0,
                                        0, 0, plan.grid, note=plan.note, paint=plan)
            prompt, width, height = plan.prompts, plan.width, plan.height
        if reference is not None:
            if plan is not None:
                raise ValueError("reference: editing cannot be combined with init_image / mask "
                                 "(painting); pass one or the other")
            if self_score is not None:
                raise ValueError("self_score: the self-score judges text-to-image tokens under "
                                 "their prompt; it is not defined for an edit (reference=...). "
                                 "Leave self_score=None when editing")
            edit = plan_edit(self, _prompt_list(prompt), reference, edit_type,
                             _positive_int("batch_size", batch_size), style=style)
            denoise = make_edit_denoiser(self, edit, cfg, image_cfg, cache, steps)
        else:
            if style is not None:
                raise ValueError("style: a style image needs the image to transform: pass "
                                 "reference=<image> with edit_type='style'")
            denoise = self.make_denoiser(prompt, negative_prompt, width, height, cfg, cache,
                                         steps, batch_size, plan.n_generate() if plan else None)
        layout = denoise.layout
        check_seed(seed, denoise.batch)
        generators = [item_generator(seed + i, self.device) for i in range(denoise.batch)]
        start = time.perf_counter()
        result = sample(denoise, shape=(denoise.batch, layout.h, layout.w), steps=steps,
                        strategy=chosen, temperature=temperature, generator=generators,
                        callback=callback, device=self.device,
                        known=plan.known if plan else None, max_batch=max_batch)
        seconds = time.perf_counter() - start
        start = time.perf_counter()
        # The sampler's codes are in [0, K) by construction: no range check (a host sync).
        images = (decode_codes(self.vq, result.tokens, (layout.h, layout.w), check_range=False)
                  if decode else None)
        if images is not None and plan is not None:
            images = plan.finish(images)
        decode_seconds = time.perf_counter() - start
        scored = None
        if self_score is not None:
            items = [p for p in _prompt_list(prompt) for _ in range(batch_size)]
            scored = self.self_score(result.tokens, items, negative_prompt, width, height, cfg,
                                     seed, self_score)
        return GenerationResult(result.tokens, images, result.nfe, result.steps, seconds,
                                denoise.stats.token_forwards, denoise.stats.token_forwards_full,
                                (layout.h, layout.w), decode_seconds,
                                denoise.stats.compile_seconds, plan.note if plan else "",
                                result.item_nfe, list(denoise.stats.item_token_forwards), scored,
                                plan)

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

    def encode_image(self, image: torch.Tensor) -> torch.Tensor:
        """IMAGE float [B, H, W, 3] in [0, 1] -> codes LongTensor [B, h*w] (CPU), the official
        encoding (vq.encode_images); H and W multiples of ``vq_factor`` (ValueError naming the
        nearest valid sizes otherwise; ``painting.fit_image`` crops or resizes)."""
        return encode_images(self.vq, check_image(image, self.vq_factor, "image"),
                             self.vq_factor)

    def decode(self, tokens: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
        """Codes [B, h*w] -> images float [B, h*f, w*f, 3] in [0, 1] (full VQ decoder)."""
        return decode_codes(self.vq, tokens, grid)

    def use_preview_table(self, path: str | Path) -> None:
        """Use a fitted table file (vq.py ``load_preview_table``); CheckpointError if it does
        not fit this codebook."""
        p = min(self.preview_size, self.vq_factor)
        try:
            table = load_preview_table(path, self.vq.config.num_vq_embeddings, p)
        except ValueError as exc:
            raise CheckpointError(str(exc)) from exc
        self._preview_table = table.to(next(self.vq.parameters()).device)

    def preview_table(self) -> torch.Tensor:
        """Codebook -> RGB table [K, p, p, 3]: the checkpoint's fitted table, else built once
        on first use by probing the decoder (vq.py)."""
        if self._preview_table is None:
            self._preview_table = build_preview_table(self.vq, self.vq_factor, self.preview_size)
        return self._preview_table

    def preview(self, tokens: torch.Tensor, masked: torch.Tensor | None,
                grid: tuple[int, int]) -> torch.Tensor:
        """Cheap preview [B, h*p, w*p, 3]: table gather, masked tokens grey; no decoder call."""
        return preview_from_table(self.preview_table(), tokens, masked, grid)


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
    table = Path(path) / "vqvae" / PREVIEW_TABLE_FILE
    if table.is_file():
        pipe.use_preview_table(table)
    return pipe

"""``load_dimoo`` and ``DiMOOPipeline``: load an official folder, generate, decode, preview.

Contract: docs/ARCHITECTURE.md section 2. Generation = prompt layout (prompt.py) -> the
``denoise`` callable (denoiser.py) -> the core ``sample`` loop (sampling.py, any strategy) ->
VQ decode (vq.py). Item i of a batch uses ``torch.Generator(device).manual_seed(seed + i)``;
seed 0 is an ordinary seed (the official script treats 0 as "do not seed").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..step import Strategy
from .cache import MLCacheConfig
from .checkpoint import CheckpointError, LoadedCheckpoint, load_checkpoint
from .config import DiMOOIds, LLaDAConfig
from .denoiser import DiMOODenoiser, valid_cfg
from .model import LLaDAModel
from .prompt import ImageLayout, build_prompt_batch, check_image_size, cond_text, uncond_text
from .vq import build_preview_table, decode_codes, preview_from_table

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
        size = checkpoint.raw_config.get("default_image_size", DEFAULT_SIZE)
        self.default_size: int = size if isinstance(size, int) and size > 0 else DEFAULT_SIZE
        self.default_cfg: float = _default_cfg(checkpoint.raw_config)
        self.preview_size = preview_size
        self.context_length: int = context_length(self.config, self.ids)
        self._preview_table: torch.Tensor | None = None

    @property
    def device(self) -> torch.device:
        return self.transformer.output_weight().device

    def encode(self, text: str) -> list[int]:
        """Official ``tokenizer(text)["input_ids"]`` (tokenizer's own special-token rules)."""
        return list(self.tokenizer.encode(text).ids)

    def layout(self, width: int, height: int, prompts: Sequence[str],
               negative_prompt: str | None = None) -> ImageLayout:
        """Validated token grid for a pixel size; ValueError with the nearest valid sizes."""
        texts = [cond_text(p) for p in prompts] + [uncond_text(negative_prompt)]
        longest = max(len(self.encode(t)) for t in texts)
        return check_image_size(width, height, self.vq_factor, self.context_length, longest)

    def make_denoiser(self, prompts: str | Sequence[str], negative_prompt: str | None = None,
                      width: int | None = None, height: int | None = None,
                      cfg: float | None = None, cache: MLCacheConfig | None = None,
                      steps: int | None = None,
                      batch_size: int = 1) -> DiMOODenoiser:
        """The ``denoise`` callable for B = len(prompts) * batch_size items (``.stats`` inside).

        ``steps`` (the sampler's T) is needed with an ML-Cache to place the refresh steps.
        ``cfg`` None = ``default_cfg``; width/height None = ``default_size``.
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
        return DiMOODenoiser(self.transformer, batch, self.ids, cfg, cache, steps)

    def generate(self, prompt: str | Sequence[str], negative_prompt: str | None = None,
                 width: int | None = None, height: int | None = None, steps: int | None = None,
                 cfg: float | None = None, temperature: float = 1.0, seed: int = 0,
                 strategy: str | Strategy = "ladr", policy: Any = None,
                 cache: MLCacheConfig | None = None,
                 callback: Callable[[dict[str, Any]], None] | None = None,
                 batch_size: int = 1, decode: bool = True) -> GenerationResult:
        """Text -> images. ``strategy``: a Strategy object (``LADR(policy)``, ``Baseline()``,
        ``Prophet(policy)``) or its name; with a name, ``policy`` is the LADRPolicy (ladr) or
        ProphetPolicy (prophet) to use, or None for the defaults. ``steps`` None = the
        strategy's tuned T (``LADR.preset("nano")`` carries 128), else DiMOO's 64.
        ``decode=False`` skips the VQ decoder (images None), e.g. when decoding elsewhere."""
        from ..sampling import sample
        from ..strategies import as_strategy, default_steps

        chosen = as_strategy(strategy, policy)
        steps = default_steps(chosen) if steps is None else steps
        _positive_int("seed", seed, minimum=0)
        _positive_int("steps", steps)
        denoise = self.make_denoiser(prompt, negative_prompt, width, height, cfg, cache, steps,
                                     batch_size)
        layout = denoise.layout
        if seed + denoise.batch - 1 > SEED_MAX:  # item i uses seed + i; torch seeds are 64-bit
            raise ValueError(f"seed must be <= {SEED_MAX - denoise.batch + 1} for {denoise.batch} "
                             f"items (item i uses seed + i, seeds are 64-bit); got {seed}")
        generators = [torch.Generator(device=self.device).manual_seed(seed + i)
                      for i in range(denoise.batch)]
        start = time.perf_counter()
        result = sample(denoise, shape=(denoise.batch, layout.h, layout.w), steps=steps,
                        strategy=chosen, temperature=temperature, generator=generators,
                        callback=callback, device=self.device)
        seconds = time.perf_counter() - start
        start = time.perf_counter()
        # The sampler's codes are in [0, K) by construction: no range check (a host sync).
        images = (decode_codes(self.vq, result.tokens, (layout.h, layout.w), check_range=False)
                  if decode else None)
        decode_seconds = time.perf_counter() - start
        return GenerationResult(result.tokens, images, result.nfe, result.steps, seconds,
                                denoise.stats.token_forwards, denoise.stats.token_forwards_full,
                                (layout.h, layout.w), decode_seconds)

    def decode(self, tokens: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
        """Codes [B, h*w] -> images float [B, h*f, w*f, 3] in [0, 1] (full VQ decoder)."""
        return decode_codes(self.vq, tokens, grid)

    def preview_table(self) -> torch.Tensor:
        """Codebook -> RGB table [K, p, p, 3], built once on first use."""
        if self._preview_table is None:
            self._preview_table = build_preview_table(self.vq, self.vq_factor, self.preview_size)
        return self._preview_table

    def preview(self, tokens: torch.Tensor, masked: torch.Tensor | None,
                grid: tuple[int, int]) -> torch.Tensor:
        """Cheap preview [B, h*p, w*p, 3]: table gather, masked tokens grey; no decoder call."""
        return preview_from_table(self.preview_table(), tokens, masked, grid)


def load_dimoo(path: str | Path, device: str | torch.device = "cpu",
               dtype: torch.dtype | str = torch.bfloat16) -> DiMOOPipeline:
    """Load an official Lumina-DiMOO folder (see checkpoint.py) into a ``DiMOOPipeline``."""
    return DiMOOPipeline(load_checkpoint(path, device=device, dtype=dtype))

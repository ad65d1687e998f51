"""Values carried by the pack's typed sockets (frozen dataclasses, never string-keyed dicts).

Socket type names are part of saved workflows and must never change:
  LADR_DIMOO_MODEL  -> DiMOOModel      (Load DiMOO Model -> Sampler / VQ Decode)
  LADR_POLICY       -> a ladr_core Strategy: LADR(policy, steps) from LADR Policy (a preset
                       brings its T), Prophet(policy) from Prophet Policy
  LADR_MLCACHE      -> ladr_core.MLCacheConfig
  LADR_TOKENS       -> DiMOOTokens     (Sampler -> VQ Decode)
  LADR_PAINT        -> ladr_core.dimoo.tasks.painting.PaintOptions (Paint Options -> Sampler)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

MODEL_TYPE = "LADR_DIMOO_MODEL"
POLICY_TYPE = "LADR_POLICY"
CACHE_TYPE = "LADR_MLCACHE"
TOKENS_TYPE = "LADR_TOKENS"
PAINT_TYPE = "LADR_PAINT"


@dataclass(frozen=True, eq=False)
class DiMOOModel:
    """A loaded DiMOO pipeline (transformer + tokenizer + VQ) and its ComfyUI memory wrapper.

    `key` identifies the loader inputs (checkpoint folder, dtype, device); tokens remember it so
    VQ Decode can refuse tokens sampled by another checkpoint (different codebook).
    """

    pipe: Any
    key: tuple
    name: str
    patcher: Any | None = None


@dataclass(frozen=True, eq=False)
class DiMOOTokens:
    """Sampled image tokens: `tokens` LongTensor [B, h*w] on CPU, row-major over `grid` (h, w).

    `paint`: the PaintPlan of an inpaint / outpaint run (original pixels, regenerated tokens,
    paste-back options) that VQ Decode applies after decoding; None for text-to-image."""

    tokens: torch.Tensor
    grid: tuple[int, int]
    width: int
    height: int
    model_key: tuple
    stats: dict = field(default_factory=dict)
    paint: Any = None

"""Values carried by the pack's typed sockets (frozen dataclasses, never string-keyed dicts).

Socket type names are part of saved workflows and must never change:
  LADR_DIMOO_MODEL  -> DiMOOModel      (Load DiMOO Model -> Sampler / VQ Decode)
  LADR_POLICY       -> a ladr_core Strategy: LADR(policy, steps) from LADR Policy (a preset
                       brings its T), Prophet(policy) from Prophet Policy
  LADR_MLCACHE      -> ladr_core.MLCacheConfig
  LADR_TOKENS       -> DiMOOTokens     (Sampler -> VQ Decode)
  LADR_PAINT        -> ladr_core.dimoo.PaintOptions (LADR Paint Options -> legacy Sampler)
  LADR_RULE         -> SamplingRule    (DiMOO Sampling Rule -> Sampler)
  LADR_CANVAS       -> Canvas          (DiMOO Canvas / DiMOO Paint Canvas -> Sampler)
  LADR_ANSWER_RULE  -> a ladr_core AnswerRule (DiMOO Answer Rule -> DiMOO Caption / Ask)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:  # annotations only: importing the handles loads no pipeline
    from ladr_core import DiMOOPipeline, Strategy
    from ladr_core.dimoo import PaintOptions

MODEL_TYPE = "LADR_DIMOO_MODEL"
POLICY_TYPE = "LADR_POLICY"
CACHE_TYPE = "LADR_MLCACHE"
TOKENS_TYPE = "LADR_TOKENS"
PAINT_TYPE = "LADR_PAINT"
RULE_TYPE = "LADR_RULE"
CANVAS_TYPE = "LADR_CANVAS"
ANSWER_RULE_TYPE = "LADR_ANSWER_RULE"


@dataclass(frozen=True, eq=False)
class DiMOOModel:
    """A loaded DiMOO pipeline (transformer + tokenizer + VQ) and its ComfyUI memory wrapper.

    `key` identifies the loader inputs (checkpoint folder, dtype, device); tokens remember it so
    VQ Decode can refuse tokens sampled by another checkpoint (different codebook).
    """

    pipe: DiMOOPipeline
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
    step_map: dict | None = None  # the run's final "ladr.step" event (nodes/events.py)


def step_map_ui(tokens: DiMOOTokens) -> dict | None:
    """A sampler node's UI output: its run's final step-map event, which ComfyUI keeps in its
    history, sends again for a cached run and a workflow tab restores (web/ladr_preview.js),
    and its last preview as the node's image (the event's "preview": a temp file)."""
    if tokens.step_map is None:
        return None
    shown = tokens.step_map.get("preview")
    return {"ladr_step_map": [tokens.step_map], **({"images": [shown]} if shown else {})}


@dataclass(frozen=True)
class SamplingRule:
    """Which tokens each step commits: the strategy object, built once by DiMOO Sampling Rule
    (a name becomes an object there, never again), and what the stats line says of the choice
    (a connected policy of another kind, not used). T is settled by the run (nodes/run.py)."""

    strategy: Strategy
    note: str = ""


@dataclass(frozen=True, eq=False)
class Canvas:
    """What the sampler paints on: a size (0 = the checkpoint's default) and a batch for text
    to image (DiMOO Canvas), or a picture (IMAGE [B, H, W, 3]) with its MASK ([B, H, W],
    1 = regenerate) and paint options for inpainting / outpainting (DiMOO Paint Canvas), or
    image tokens to redraw (DiMOO Token Canvas)."""

    width: int = 0
    height: int = 0
    batch_size: int = 1
    image: torch.Tensor | None = None
    mask: torch.Tensor | None = None
    paint: PaintOptions | None = None
    tokens: DiMOOTokens | None = None

    @property
    def painting(self) -> bool:
        return self.image is not None

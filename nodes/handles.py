"""Values carried by the pack's typed sockets (frozen dataclasses, never string-keyed dicts).

Socket type names are part of saved workflows and must never change:
  LADR_DIMOO_MODEL  -> DiMOOModel      (Load DiMOO Model -> Sampler / VQ Decode)
  LADR_POLICY       -> a ladr_core Strategy: LADR(policy) or Prophet(policy) (the policy nodes)
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
    """A loaded DiMOO pipeline and its ComfyUI memory wrapper. `key` identifies the loader
    inputs (nodes/loader.py); tokens remember it, so VQ Decode refuses another codebook's."""

    pipe: DiMOOPipeline
    key: tuple
    name: str
    patcher: Any | None = None


@dataclass(frozen=True, eq=False)
class DiMOOTokens:
    """Image tokens: LongTensor [B, h*w] on CPU, row-major over `grid` (h, w); `paint`: the
    PaintPlan VQ Decode applies after decoding (None for text to image)."""

    tokens: torch.Tensor
    grid: tuple[int, int]
    width: int
    height: int
    model_key: tuple
    stats: dict = field(default_factory=dict)
    paint: Any = None
    step_map: dict | None = None  # the run's final "ladr.step" event (nodes/events.py)


def step_map_ui(tokens: DiMOOTokens) -> dict | None:
    """A sampler node's UI output: the run's final step-map event (ComfyUI keeps it in its
    history and resends it for a cached run: web/ladr_preview.js) and the last preview."""
    if tokens.step_map is None:
        return None
    shown = tokens.step_map.get("preview")
    return {"ladr_step_map": [tokens.step_map], **({"images": [shown]} if shown else {})}


@dataclass(frozen=True)
class SamplingRule:
    """Which tokens each step commits: the strategy object DiMOO Sampling Rule built, and the
    stats line's note on the choice (a connected policy not used); `default`: the sampler's own
    rule, no Sampling Rule connected (no note on a T it brought before the cost contract)."""

    strategy: Strategy
    note: str = ""
    default: bool = False


@dataclass(frozen=True, eq=False)
class Canvas:
    """What the sampler paints on: a size (0 = default) and batch (DiMOO Canvas), a picture
    IMAGE [B, H, W, 3] with its MASK [B, H, W] (1 = regenerate) and paint options (DiMOO Paint
    Canvas), or image tokens to redraw (DiMOO Token Canvas)."""

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

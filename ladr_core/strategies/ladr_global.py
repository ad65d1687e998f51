"""LADR without locality, the ablation of its frontier: `LADRGlobal(policy)` (docs/SAMPLING.md).

Algorithm 1 (ladr.py) with every still-masked token after standard selection (M_std) as a
rescue candidate instead of the frontier C_t of Eq. 9: the same threshold, budget and pick
(Eq. 10, or the adaptive rescue). Unlike the paper's Fig. 5 ablations, which keep the
frontier's budget, it drops locality altogether.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import ClassVar

import torch

from ..registry import register_strategy
from .ladr import LADR
from .policy import PRESETS, LADRPolicy


@register_strategy
@dataclass(frozen=True)
class LADRGlobal(LADR):
    """LADR whose rescue considers every still-masked token (no frontier). policy as
    LADR's; defaults tuned on nano's validation prompts (docs/reports/SAMPLERS.md)."""

    name: ClassVar[str] = "ladr-global"
    policy: LADRPolicy = field(default_factory=lambda: replace(PRESETS["nano"].policy,
                                                               tau=(0.95, 0.95, 0.95)))

    def rescue_pool(self, m_std: torch.Tensor) -> torch.Tensor | None:
        return m_std


__all__ = ["LADRGlobal"]

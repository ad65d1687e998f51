"""Explicit, per-item random draws for the sampler (no global seeding).

Every draw takes a `torch.Generator` (STYLE.md: explicit randomness). Item i draws from its own
generator, so item i of a batch equals a B=1 run with the same generator. Per step and item the
draw order is fixed: Gumbel noise [N, K] for sampling (temperature > 0), Gumbel noise [N] for the
baseline / Prophet re-masking (temperature > 0), uniform noise [N] for LADR's random ablations.
A single generator shared by a batch serves the items one after another in that order.
At temperature 0 nothing is drawn unless a random ablation needs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class StepNoise:
    """One step's noise. gumbel: list of B tensors [N, K] (float32); remask, uniform: [B, N]."""

    gumbel: list[torch.Tensor] | None = None
    remask: torch.Tensor | None = None
    uniform: torch.Tensor | None = None


def generators_for(
    generator: torch.Generator | Sequence[torch.Generator] | None, batch: int
) -> list[torch.Generator | None]:
    """One generator (or None = the device's default generator) per batch item."""
    if generator is None or isinstance(generator, torch.Generator):
        return [generator] * batch
    return list(generator)


def _uniform(
    gen: torch.Generator | None, shape: tuple[int, ...], device: torch.device
) -> torch.Tensor:
    """U[0, 1) float32 drawn on the generator's device, returned on `device`."""
    where = gen.device if gen is not None else device
    return torch.rand(shape, generator=gen, device=where, dtype=torch.float32).to(device)


def gumbel_(u: torch.Tensor) -> torch.Tensor:
    """In place: uniform u -> Gumbel(0, 1) as official `gumbel_noise`: -log(-log(u + eps) + eps)."""
    return u.add_(1e-20).log_().neg_().add_(1e-20).log_().neg_()


def draw_step_noise(run: Any, logits: torch.Tensor) -> StepNoise:
    """Draw everything one step needs for every item, in the documented order.

    run: the sampler state (strategy, temperature, policy, generators, n); logits: [B, N, K].
    """
    n, k = logits.shape[1], logits.shape[2]
    device = logits.device
    hot = run.temperature > 0
    want_remask = hot and run.strategy != "ladr"
    want_uniform = run.strategy == "ladr" and "random" in (run.policy.metric, run.policy.candidates)
    if not (hot or want_uniform):
        return StepNoise()
    gumbel: list[torch.Tensor] = []
    remask: list[torch.Tensor] = []
    uniform: list[torch.Tensor] = []
    for gen in run.generators:
        if hot:
            gumbel.append(gumbel_(_uniform(gen, (n, k), device)))
        if want_remask:
            remask.append(gumbel_(_uniform(gen, (n,), device)))
        if want_uniform:
            uniform.append(_uniform(gen, (n,), device))
    return StepNoise(
        gumbel=gumbel or None,
        remask=torch.stack(remask) if remask else None,
        uniform=torch.stack(uniform) if uniform else None,
    )

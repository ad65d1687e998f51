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
    """One step's random outcome. sampled: LongTensor [B, N] Gumbel-max sample (None at
    temperature 0); remask: Gumbel [B, N]; uniform: U[0, 1) [B, N] (each None if not needed)."""

    sampled: torch.Tensor | None = None
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


def gumbel_argmax_(u: torch.Tensor, logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Official `gumbel_max_sample` for one item, consuming u in place: LongTensor [N].

    u: U[0, 1) [N, K] (overwritten); logits: [N, K]. Computes argmax(logits / temperature + g)
    with g = -log(-log(u + 1e-20) + 1e-20) bit for bit, in 5 passes over u instead of 7:
    1e-20 - a == -a + 1e-20 and s - l == s + (-l) exactly in IEEE arithmetic.
    """
    u.add_(1e-20).log_()
    torch.sub(u.new_tensor(1e-20, device="cpu"), u, out=u)
    u.log_()
    scaled = logits if temperature == 1.0 else logits / temperature
    return torch.sub(scaled, u, out=u).argmax(dim=-1)


def draw_step_noise(run: Any, x: torch.Tensor) -> StepNoise:
    """Draw (and, for sampling, consume) everything one step needs, item by item in order.

    run: the sampler state (strategy, temperature, policy, generators); x: logits [B, N, K].
    Only one [N, K] noise buffer is alive at a time.
    """
    n, k = x.shape[1], x.shape[2]
    device = x.device
    hot = run.temperature > 0
    want_remask = hot and run.strategy != "ladr"
    want_uniform = run.strategy == "ladr" and "random" in (run.policy.metric, run.policy.candidates)
    if not (hot or want_uniform):
        return StepNoise()
    sampled: list[torch.Tensor] = []
    remask: list[torch.Tensor] = []
    uniform: list[torch.Tensor] = []
    for i, gen in enumerate(run.generators):
        if hot:
            sampled.append(gumbel_argmax_(_uniform(gen, (n, k), device), x[i], run.temperature))
        if want_remask:
            remask.append(gumbel_(_uniform(gen, (n,), device)))
        if want_uniform:
            uniform.append(_uniform(gen, (n,), device))
    return StepNoise(
        sampled=torch.stack(sampled) if sampled else None,
        remask=torch.stack(remask) if remask else None,
        uniform=torch.stack(uniform) if uniform else None,
    )

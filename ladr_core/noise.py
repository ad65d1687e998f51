"""Explicit, per-item random draws for the sampler, for the masked rows only (no global seeding).

Every draw takes a `torch.Generator` (docs/CONVENTIONS.md, "Explicit randomness"); item i draws
from its own generator, so item i of a batch equals a B=1 run with the same generator. The draw
order per step and item (official DiMOO `generate_image`: Gumbel [L_i, K] for sampling, Gumbel
[L_i] for re-masking, uniform [L_i] for LADR's random ablations; row j = the item's j-th masked
position; an item with nothing masked draws nothing). `generator` is None, one
`torch.Generator` or a list of B; one generator shared by B > 1 items serves item 0, then item
1, ... each step. Noise is drawn on the generator's device. At temperature 0 nothing is drawn
unless a random ablation needs it (the official loop draws the re-mask noise there too and
multiplies it by 0; we skip that draw). The ablations read their scores only at masked
positions, so their uniforms are drawn for the masked rows as well.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


@dataclass
class StepNoise:
    """One item's draws for its L masked rows, [L] each, scattered by the loop to [B, N]:
    sampled (Gumbel-max; None at temperature 0), remask (Gumbel), uniform (U[0, 1)); None
    when not needed."""

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


def _uniform_into(out: torch.Tensor, gen: torch.Generator | None) -> torch.Tensor:
    """Fill `out` with U[0, 1) exactly as `_uniform(gen, out.shape, out.device)` would (same
    numbers, same generator consumption) without allocating when the devices agree."""
    if gen is None or gen.device == out.device:
        return out.uniform_(generator=gen)
    return out.copy_(torch.rand(out.shape, generator=gen, device=gen.device, dtype=out.dtype))


def gumbel_(u: torch.Tensor) -> torch.Tensor:
    """Uniform u -> Gumbel(0, 1) as official `gumbel_noise`: -log(-log(u + eps) + eps), written
    -log(eps - log(u + eps)): the same numbers bit for bit (-a + c == c - a exactly), one kernel
    fewer. u is consumed."""
    return torch.rsub(u.add_(1e-20).log_(), 1e-20).log_().neg_()


def gumbel_max(u: torch.Tensor, logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Official `gumbel_max_sample` for one item's rows [L, K] (u: U[0, 1), consumed):
    argmax(logits / temperature + g), g written as in ``gumbel_`` (bit for bit the official
    numbers) in 5 in-place passes over u instead of 7, a measurable share of a CPU step."""
    eps = torch.full((), 1e-20, dtype=u.dtype, device=u.device)  # a fill, no host data
    u.add_(1e-20).log_()
    torch.sub(eps, u, out=u).log_()
    scaled = logits if temperature == 1.0 else logits / temperature
    return torch.sub(scaled, u, out=u).argmax(dim=-1)


def draw_item_noise(
    gen: torch.Generator | None,
    rows: torch.Tensor,
    temperature: float,
    buf: torch.Tensor,
    remask: bool,
    uniform: bool,
) -> StepNoise:
    """One item's noise for its L masked rows [L, K], in the module's order. buf: a float32
    [L, K] workspace the Gumbel-max consumes (reused across items); remask / uniform: the
    strategy's `Needs`; Gumbel draws only at temperature > 0."""
    noise = StepNoise()
    hot = temperature > 0
    if hot:
        noise.sampled = gumbel_max(_uniform_into(buf, gen), rows, temperature)
    if hot and remask:
        noise.remask = gumbel_(_uniform(gen, (rows.shape[0],), rows.device))
    if uniform:
        noise.uniform = _uniform(gen, (rows.shape[0],), rows.device)
    return noise

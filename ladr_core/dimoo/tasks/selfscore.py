"""Self-score: how plausible the model finds an image's final tokens, judged by the model itself.

No outside model: random token blocks of each image are masked again and ONE packed pass per
copy (``DiMOODenoiser.masked_logits``) predicts them; at every re-masked position the TRUE
token's log probability (below). Blocks are drawn from a CPU generator seeded seed + i for image
i, so a score depends on the tokens, the prompt and the seed only, not on the batch, the
chunking or the device. Cost: ``passes`` denoiser calls per image (as ``passes`` sampling
steps); images are scored ``chunk`` at a time (``chunk * passes`` items per call):

  cond       mean log p(x_i | prompt, unmasked tokens)          (masked pseudo-log-likelihood)
  uncond     the same under the unconditional row (no prompt)
  adherence  cond - uncond: how much the prompt explains the tokens (pointwise mutual
             information, the model's own image-text agreement)
  guided     mean log softmax of the CFG logits (1 + s) * cond - s * uncond, s = the
             denoiser's guidance scale: what the sampler itself would have assigned
  *_acc      the share of re-masked tokens whose top-1 prediction is the true token

``SelfScore.score`` is the component named by ``SelfScoreConfig.kind``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

import torch

__all__ = ["KINDS", "SelfScore", "SelfScoreConfig", "block_masks", "score_tokens"]

KINDS = ("cond", "uncond", "adherence", "guided", "cond_acc", "guided_acc")
MAX_PASSES = 4


@dataclass(frozen=True)
class SelfScoreConfig:
    """How the self-score re-masks (``block_masks``) and which component (``kind``) it
    reports as ``score``; ``passes``: denoiser calls per image."""

    passes: int = 2
    block: int = 2
    fraction: float = 0.25
    kind: str = "guided"

    def __post_init__(self) -> None:
        p = self.passes
        if isinstance(p, bool) or not isinstance(p, int) or not 1 <= p <= MAX_PASSES:
            raise ValueError(f"self-score passes must be an int in [1, {MAX_PASSES}] (denoiser "
                             f"calls per image); got {p!r}")
        b = self.block
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise ValueError(f"self-score block must be an int >= 1 (tokens per side); got {b!r}")
        f = self.fraction
        if isinstance(f, bool) or not isinstance(f, (int, float)) or not 0.0 < f <= 1.0:
            raise ValueError(f"self-score fraction must be a number in (0, 1]; got {f!r}")
        if self.kind not in KINDS:
            raise ValueError(f"self-score kind must be one of {KINDS}; got {self.kind!r}")


@dataclass
class SelfScore:
    """Per-image self-scores, float32 [B] each (CPU), plus what they cost.

    Without guidance (cfg 0) there is no uncond row: ``uncond`` and ``adherence`` are NaN,
    ``guided`` equals ``cond``. ``calls``: packed passes (one per chunk); ``token_forwards``:
    real tokens pushed through the transformer.
    """

    score: torch.Tensor
    cond: torch.Tensor
    uncond: torch.Tensor
    adherence: torch.Tensor
    guided: torch.Tensor
    cond_acc: torch.Tensor
    guided_acc: torch.Tensor
    config: SelfScoreConfig
    calls: int
    token_forwards: int

    def as_dict(self) -> dict[str, list[float]]:
        """Every per-image component as a list of floats (JSON-ready)."""
        return {f.name: getattr(self, f.name).tolist() for f in fields(self)
                if isinstance(getattr(self, f.name), torch.Tensor)}


def block_masks(grid: tuple[int, int], config: SelfScoreConfig,
                generator: torch.Generator) -> torch.Tensor:
    """Re-mask pattern of ONE image, BoolTensor [passes, h * w]: the grid tiled into
    ``block``-sided squares from a random offset (edge squares cut), shuffled; pass p masks
    squares [p * k, (p + 1) * k) cyclically, k = max(1, round(fraction * squares)), so the
    passes are disjoint while passes * fraction <= 1."""
    h, w = grid
    s = config.block
    oy, ox = (int(v) for v in torch.randint(0, s, (2,), generator=generator))
    rows = (torch.arange(h) + oy) // s
    cols = (torch.arange(w) + ox) // s
    n_cols = int(cols.max()) + 1
    square = (rows[:, None] * n_cols + cols[None, :]).reshape(-1)  # [h * w] square id
    n_squares = int(square.max()) + 1
    order = torch.randperm(n_squares, generator=generator)
    k = max(1, round(config.fraction * n_squares))
    out = torch.zeros(config.passes, h * w, dtype=torch.bool)
    for p in range(config.passes):
        chosen = order[torch.arange(p * k, (p + 1) * k) % n_squares]
        out[p] = torch.isin(square, chosen)
    return out


def _per_row_means(values: torch.Tensor, row: torch.Tensor, n_rows: int) -> torch.Tensor:
    """Sum of ``values`` [M] per row id ``row`` [M] -> float64 [n_rows] (host tensors)."""
    out = torch.zeros(n_rows, dtype=torch.float64)
    return out.index_add_(0, row, values.double())


def _chunk_scores(denoiser: object, tokens: torch.Tensor, masked: torch.Tensor
                  ) -> dict[str, torch.Tensor]:
    """Sums over re-masked positions per copy [R]: {component: float64} and "count", from one
    packed full pass. The float32 per-position values come to the host in one transfer and are
    summed there in float64 (exact widening; no float64 on the device)."""
    cond, uncond_or_none = denoiser.masked_logits(tokens, masked)  # type: ignore[attr-defined]
    cfg = denoiser.cfg  # type: ignore[attr-defined]
    r = tokens.shape[0]
    m = masked.to(cond.device)
    truth = tokens.to(cond.device)[m]
    row = masked.cpu().nonzero()[:, 0]
    branches = 1 if uncond_or_none is None else 2
    uncond = cond if uncond_or_none is None else uncond_or_none
    guided = (1.0 + cfg) * cond - cfg * uncond if branches == 2 else cond
    names = ("cond", "uncond", "guided", "cond_acc", "guided_acc")
    values = [lg.log_softmax(dim=-1).gather(1, truth[:, None])[:, 0].float()
              for lg in (cond, uncond, guided)]
    values += [(lg.argmax(dim=-1) == truth).float() for lg in (cond, guided)]
    host = torch.stack(values).cpu()  # [5, M]: the chunk's one device -> host transfer
    out = {"count": _per_row_means(torch.ones(row.shape[0], dtype=torch.float64), row, r)}
    out |= {name: _per_row_means(v, row, r) for name, v in zip(names, host, strict=True)}
    if branches == 1:  # no uncond row without guidance
        out["uncond"] = torch.full_like(out["cond"], math.nan)
    return out


def score_tokens(make_denoiser: Callable[[list[str]], object], tokens: torch.Tensor,
                 prompts: Sequence[str], grid: tuple[int, int],
                 generators: Sequence[torch.Generator],
                 config: SelfScoreConfig = SelfScoreConfig(), chunk: int = 8) -> SelfScore:
    """Self-scores of B images given as final tokens [B, h * w] (module docstring).
    make_denoiser(prompts): a DiMOODenoiser for exactly those prompts, with the run's size and
    CFG; image i's blocks are drawn from generators[i] (CPU)."""
    b, n = tokens.shape
    if len(prompts) != b:
        raise ValueError(f"self-score: {len(prompts)} prompts for {b} images; give one prompt "
                         "per image (or one prompt for all)")
    if n != grid[0] * grid[1]:
        raise ValueError(f"self-score: tokens have {n} codes per image, the size gives "
                         f"{grid[0]} x {grid[1]} = {grid[0] * grid[1]}; pass the width/height "
                         "the tokens were sampled at")
    if len(generators) != b:
        raise ValueError(f"self-score: {len(generators)} generators for {b} images")
    if not isinstance(chunk, int) or chunk < 1:
        raise ValueError(f"self-score chunk must be an int >= 1; got {chunk!r}")
    p = config.passes
    masks = torch.stack([block_masks(grid, config, g) for g in generators])  # [B, P, N]
    sums: dict[str, list[torch.Tensor]] = {}
    calls = forwards = 0
    with torch.no_grad():
        for lo in range(0, b, chunk):
            hi = min(b, lo + chunk)
            copies = [prompts[i] for i in range(lo, hi) for _ in range(p)]
            denoiser = make_denoiser(copies)
            part = _chunk_scores(denoiser, tokens[lo:hi].repeat_interleave(p, dim=0),
                                 masks[lo:hi].reshape(-1, n))
            for k, v in part.items():
                sums.setdefault(k, []).append(v.view(hi - lo, p).sum(dim=1).cpu())
            calls += 1
            forwards += denoiser.real_tokens  # type: ignore[attr-defined]
    total = {k: torch.cat(v) for k, v in sums.items()}
    count = total.pop("count")
    mean = {k: (v / count).float() for k, v in total.items()}
    mean["adherence"] = mean["cond"] - mean["uncond"]
    return SelfScore(score=mean[config.kind], config=config, calls=calls,
                     token_forwards=forwards, **mean)

"""The measures of the strength study (lab/studies/strength.py): the changed prompt of a spec,
the least-likely choice of tokens to re-mask (per-token scores from the model), the share of a
drawing kept, and a paired interval of a mean difference."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from lab.nano import scenes
from lab.nano.evaluator import MAX_COLOR_DIST


def _next(options: tuple[str, ...], current: str, avoid: set[str]) -> str:
    """The first of ``options`` after ``current`` (cyclically) that is not in ``avoid``."""
    i = options.index(current)
    return next(o for k in range(1, len(options) + 1)
                if (o := options[(i + k) % len(options)]) not in avoid)


def changed_spec(spec: scenes.Spec) -> scenes.Spec:
    """The spec changed in one thing (lab/studies/strength.py): the first object's colour when the
    spec names colours, else its shape (every object's for counting, whose objects share one)."""
    objs = list(spec.objects)
    colours = {c for _, c in objs if c}
    if colours:
        shape, colour = objs[0]
        objs[0] = (shape, _next(tuple(scenes.COLORS), colour, colours))
    else:
        shape = _next(scenes.SHAPES, objs[0][0], {s for s, _ in objs})
        objs = [(shape, c) for _, c in objs] if spec.category == "counting" else \
            [(shape, objs[0][1]), *objs[1:]]
    return scenes.Spec(spec.category, tuple(objs), spec.relation)


def token_scores(pipe: Any, captions: list[str], codes: torch.Tensor, passes: int,
                 seed0: int, chunk: int = 8) -> torch.Tensor:
    """Guided log p of each source code with that token masked: float32 [B, N].

    ``passes`` packed passes per picture, pass p masking the p-th of ``passes`` disjoint random
    token sets that cover the grid (``block_masks`` with 1-token blocks, fraction 1 / passes;
    drawn from seed0 + i); guided = log softmax of (1 + cfg) cond - cfg uncond, the sampler's
    own logits."""
    from ladr_core.dimoo.runs import item_generator
    from ladr_core.dimoo.tasks.selfscore import SelfScoreConfig, block_masks

    b, n = codes.shape
    side = pipe.default_size
    grid = (side // pipe.vq_factor, side // pipe.vq_factor)
    config = SelfScoreConfig(passes=passes, block=1, fraction=1.0 / passes)
    masks = torch.stack([block_masks(grid, config, item_generator(seed0 + i, torch.device("cpu")))
                         for i in range(b)])  # [B, P, N]
    assert bool((masks.sum(1) == 1).all()), "the passes must cover every token once"
    out = torch.zeros(b, passes, n)
    for lo in range(0, b, chunk):
        hi = min(b, lo + chunk)
        denoise = pipe.make_denoiser([c for c in captions[lo:hi] for _ in range(passes)])
        tok = codes[lo:hi].repeat_interleave(passes, dim=0)
        m = masks[lo:hi].reshape(-1, n)
        cond, uncond = denoise.masked_logits(tok, m)
        cfg = denoise.cfg
        guided = cond if uncond is None else (1.0 + cfg) * cond - cfg * uncond
        lp = guided.log_softmax(-1).gather(1, tok.to(guided.device)[m.to(guided.device)][:, None])
        part = torch.zeros(hi - lo, passes, n)
        part.view(-1, n)[m] = lp[:, 0].float().cpu()
        out[lo:hi] = part
    return out.sum(1)


def least_likely(scores_: torch.Tensor, counts: list[int], seed0: int) -> torch.Tensor:
    """BoolTensor [B, N]: per picture the ``counts[i]`` tokens of lowest score (ties broken by
    a draw from seed0 + i)."""
    out = torch.zeros(scores_.shape, dtype=torch.bool)
    for i, (row, k) in enumerate(zip(scores_, counts, strict=True)):
        g = torch.Generator().manual_seed(seed0 + i)
        jitter = torch.rand(row.shape, generator=g) * 1e-6
        out[i, torch.argsort(row + jitter)[:k]] = True
    return out


def palette_labels(images: np.ndarray) -> np.ndarray:
    """int [B, H, W]: each pixel's palette entry as the evaluator assigns it (0 = background,
    1.. = the colours in ``scenes.COLORS`` order, -1 = near none: VQ blur between colours)."""
    palette = np.array([scenes.BACKGROUND, *scenes.COLORS.values()], dtype=np.float32)
    dist = np.linalg.norm(images.astype(np.float32)[..., None, :] - palette, axis=-1)
    label = dist.argmin(-1)
    label[dist.min(-1) > MAX_COLOR_DIST] = -1
    return label


def drawing_kept(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """float [B]: of the pixels drawn (not background) in either picture, the share with the
    same palette label in both (1 when neither draws anything): how much of the drawing stays,
    which the background, most of every picture, would hide in a share of all pixels."""
    drawn = (before != 0) | (after != 0)
    same = ((before == after) & drawn).sum(axis=(1, 2))
    total = drawn.sum(axis=(1, 2))
    return np.where(total > 0, same / np.maximum(total, 1), 1.0)


def mean_diff_ci(a: np.ndarray, b: np.ndarray, n_boot: int = 4000,
                 seed: int = 0) -> dict[str, float]:
    """mean(a - b) over the same pictures with a paired 95 % percentile bootstrap interval."""
    d = np.asarray(a, np.float64) - np.asarray(b, np.float64)
    idx = np.random.default_rng(seed).integers(0, len(d), (n_boot, len(d)))
    boot = d[idx].mean(axis=1)
    return {"diff": float(d.mean()), "lo": float(np.percentile(boot, 2.5)),
            "hi": float(np.percentile(boot, 97.5))}

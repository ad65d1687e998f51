"""Fit a checkpoint's live-preview table on its own decodes: ``python -m lab.nano.fit_preview_table``.

Generates images with the checkpoint (training-style captions for the nano model, every
palette colour x shape plus random GenEval-style specs), decodes them with the VQ decoder, and
writes the per-code mean decoded patch (``ladr_core.dimoo.model.vq.fit_preview_table``) to
``<checkpoint>/vqvae/preview_table.safetensors``, which ``load_dimoo`` then uses for previews.
Codes no generated image used keep the decoder-probe value.

    python -m lab.nano.fit_preview_table [--model PATH] [--seeds 4] [--steps 16]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from lab.nano import scenes


def captions(n_random: int, seed: int = 11) -> list[str]:
    fixed = [f"a {c} {s}" for c in scenes.COLORS for s in scenes.SHAPES]
    rng = np.random.default_rng(seed)
    rand = [scenes.caption_for(scenes.random_spec(rng, scenes.CATEGORIES[i % 6]))
            for i in range(n_random)]
    return fixed + rand


def fit(model: Path, seeds: int, steps: int, n_random: int) -> dict:
    from ladr_core import load_dimoo
    from ladr_core.dimoo.model.vq import (
        PREVIEW_TABLE_FILE,
        build_preview_table,
        fit_preview_table,
        save_preview_table,
    )

    pipe = load_dimoo(model, dtype=torch.float32)
    table = build_preview_table(pipe.vq, pipe.vq_factor, pipe.preview_size)
    counts = torch.zeros(table.shape[0], dtype=torch.long)
    toks, imgs = [], []
    start = time.perf_counter()
    texts = captions(n_random)
    for s in range(seeds):
        res = pipe.generate(texts, steps=steps, seed=1000 * (s + 1), strategy="baseline")
        toks.append(res.tokens)
        imgs.append(res.images)
    tokens, images = torch.cat(toks), torch.cat(imgs)
    table, counts = fit_preview_table(tokens, images, res.grid, table)
    out = model / "vqvae" / PREVIEW_TABLE_FILE
    meta = {"images": str(len(tokens)), "codes_fitted": str(int((counts > 0).sum())),
            "command": f"python -m lab.nano.fit_preview_table --seeds {seeds} --steps {steps} "
                       f"--random {n_random}"}
    save_preview_table(out, table, meta)
    return {**meta, "seconds": round(time.perf_counter() - start, 1), "path": str(out)}


def main() -> None:
    from ladr_core import nano_model_path

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=nano_model_path())
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--random", type=int, default=30)
    a = ap.parse_args()
    torch.set_num_threads(1)
    print(fit(a.model, a.seeds, a.steps, a.random))


if __name__ == "__main__":
    main()

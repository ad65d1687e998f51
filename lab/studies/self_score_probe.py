"""Per-token self-scores of the stored sweep images, for trying new ways to aggregate them.

    OMP_NUM_THREADS=1 nice -n 10 python -m lab.studies.self_score_probe --set validation \
        --prompts 210

For every setting of ``lab.studies.self_score_runs`` (complete chunks only) and every probe in
``PROBES`` (block side, share of blocks per pass, passes), the log probability of the TRUE
token at every re-masked position, per pass, under the cond row, the uncond row and the CFG
logits (``guided``), as float32 maps [images, passes, h * w] (NaN where a pass did not mask the
token), plus each token's block id [images, h * w]. The blocks are those of
``ladr_core.dimoo.tasks.selfscore.block_masks`` with image i's generator seeded ``seed0 + i``, so
the probe ``b2`` restricted to its first two passes is the calibration's current self-score
(``SelfScoreConfig(passes=2, block=2, fraction=0.25)``, checked on every run).

Maps go to ``<runs>/<set>/_probe/<probe>.npz`` (outside git; resumable per probe).
``lab/studies/self_score_variants.py`` aggregates them.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lab.nano import scenes
from lab.studies.self_score import stored_runs
from lab.studies.self_score_runs import load_chunk, save_atomic, settings
from ladr_core import load_dimoo, nano_model_path
from ladr_core.dimoo.runs import item_generator
from ladr_core.dimoo.tasks.selfscore import SelfScoreConfig, block_masks

ROOT = Path(__file__).resolve().parents[2]

PROBES = {
    "b1": SelfScoreConfig(passes=4, block=1, fraction=0.25),
    "b2": SelfScoreConfig(passes=4, block=2, fraction=0.25),
    "b3": SelfScoreConfig(passes=4, block=3, fraction=0.25),
    "b4": SelfScoreConfig(passes=4, block=4, fraction=0.25),
    "b6": SelfScoreConfig(passes=2, block=6, fraction=0.5),
    "all": SelfScoreConfig(passes=1, block=1, fraction=1.0),
    "b2r2": SelfScoreConfig(passes=4, block=2, fraction=0.25),
}
ROUNDS = {"b2r2": 2}
"""``b2r2``: two independent placements of ``b2``'s blocks, 8 passes: the generator of image i
draws ``block_masks`` twice in a row, so the first placement is ``b2``'s (block ids: the
first placement's)."""
BRANCHES = ("guided", "cond", "uncond")
REGEN = {"r4": (SelfScoreConfig(passes=2, block=4, fraction=0.25), 8)}
"""Regeneration probes: (blocks, sampler steps). The blocks are masked and generated again by
the official sampler, greedy (temperature 0), from the rest of the image; the map ``agree`` is
1 where the regenerated token equals the original (cost: passes x steps calls per image)."""


def masks_and_blocks(grid: tuple[int, int], config: SelfScoreConfig, seed: int,
                     rounds: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """(block_masks of image seeded ``seed``, ``rounds`` placements in a row [rounds * P, N],
    each token's block id in the first placement [N])."""
    g = item_generator(seed, torch.device("cpu"))
    twin = torch.Generator().set_state(g.get_state())
    masks = torch.cat([block_masks(grid, config, g) for _ in range(rounds)])
    s = config.block
    oy, ox = (int(v) for v in torch.randint(0, s, (2,), generator=twin))
    rows = (torch.arange(grid[0]) + oy) // s
    cols = (torch.arange(grid[1]) + ox) // s
    n_cols = int(cols.max()) + 1
    return masks, (rows[:, None] * n_cols + cols[None, :]).reshape(-1)


def _chunks(pipe: Any, tokens: torch.Tensor, captions: list[str], masks: torch.Tensor,
            p: int, chunk: int):
    """Per chunk of images: (lo, hi, denoiser of p copies of each prompt, tokens [k*p, N],
    masks [k*p, N]), every image repeated once per placement of its masks."""
    n, size = tokens.shape
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        copies = [captions[i] for i in range(lo, hi) for _ in range(p)]
        yield (lo, hi, pipe.make_denoiser(copies), tokens[lo:hi].repeat_interleave(p, dim=0),
               masks[lo:hi].reshape(-1, size))


def token_maps(pipe: Any, tokens: torch.Tensor, captions: list[str], seed0: int,
               config: SelfScoreConfig, grid: tuple[int, int], chunk: int = 35,
               rounds: int = 1) -> dict[str, np.ndarray]:
    """{branch: float32 [n, P, N]} log p(true token) where masked (NaN elsewhere), "block"."""
    n, size = tokens.shape
    p = config.passes * rounds
    pairs = [masks_and_blocks(grid, config, seed0 + i, rounds) for i in range(n)]
    masks = torch.stack([m for m, _ in pairs])  # [n, P, N]
    out = {b: np.full((n, p, size), np.nan, dtype=np.float32) for b in BRANCHES}
    with torch.no_grad():
        for lo, hi, denoise, tok, m in _chunks(pipe, tokens, captions, masks, p, chunk):
            cond, uncond = denoise.masked_logits(tok, m)
            cfg = denoise.cfg
            truth = tok[m]
            where = m.nonzero()
            for name, lg in (("cond", cond), ("uncond", uncond),
                             ("guided", (1.0 + cfg) * cond - cfg * uncond)):
                logp = lg.log_softmax(-1).gather(1, truth[:, None])[:, 0].numpy()
                flat = np.full((hi - lo) * p * size, np.nan, dtype=np.float32)
                flat[(where[:, 0] * size + where[:, 1]).numpy()] = logp
                out[name][lo:hi] = flat.reshape(hi - lo, p, size)
    out["block"] = torch.stack([b for _, b in pairs]).numpy().astype(np.int16)
    return out


def regen_maps(pipe: Any, tokens: torch.Tensor, captions: list[str], seed0: int,
               config: SelfScoreConfig, steps: int, grid: tuple[int, int], chunk: int = 35
               ) -> dict[str, np.ndarray]:
    """{"agree": float32 [n, P, N] (1 / 0 where regenerated, NaN elsewhere), "block"}."""
    from ladr_core import Baseline, KnownTokens, sample

    n, size = tokens.shape
    p = config.passes
    pairs = [masks_and_blocks(grid, config, seed0 + i) for i in range(n)]
    masks = torch.stack([m for m, _ in pairs])
    agree = np.full((n, p, size), np.nan, dtype=np.float32)
    with torch.no_grad():
        for lo, hi, denoise, tok, m in _chunks(pipe, tokens, captions, masks, p, chunk):
            res = sample(denoise, (tok.shape[0], *grid), steps=steps, strategy=Baseline(),
                         temperature=0.0, known=KnownTokens(tok, m))
            same = (res.tokens.cpu() == tok).float().numpy()
            agree[lo:hi] = np.where(m.numpy(), same, np.nan).reshape(hi - lo, p, size)
    return {"agree": agree, "block": torch.stack([b for _, b in pairs]).numpy().astype(np.int16)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--set", choices=("test", "validation"), default="validation")
    ap.add_argument("--prompts", type=int, default=210)
    ap.add_argument("--batch", type=int, default=35)
    ap.add_argument("--probes", default="all",
                    help=f"comma list of {list(PROBES) + list(REGEN)}; all = {list(PROBES)}")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", default=str(ROOT / "lab" / "results" / "self_score_runs"))
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    names = list(settings())
    folder = Path(a.runs) / a.set
    runs, n = stored_runs(folder, names, a.prompts, a.batch)
    specs = scenes.quality_test_specs(n) if a.set == "test" else scenes.validation_specs(n)
    captions = [scenes.caption_for(s) for s in specs]
    seed0 = scenes.TEST_IMAGE_SEED if a.set == "test" else 0
    pipe = load_dimoo(nano_model_path(), dtype=torch.float32)
    side = scenes.IMAGE_SIZE // pipe.vq_factor
    chosen = list(PROBES) if a.probes == "all" else a.probes.split(",")
    for probe in chosen:
        path = folder / "_probe" / f"{probe}.npz"
        key = repr((PROBES.get(probe) or REGEN[probe], n, names))
        if probe in ROUNDS:
            key = key.replace("kind='guided')", f"kind='guided', rounds={ROUNDS[probe]})")
        if load_chunk(path, key) is not None:
            print(f"{probe}: stored", flush=True)
            continue
        arrays: dict[str, np.ndarray] = {}
        for s in names:
            tokens = torch.from_numpy(runs[s]["tokens"].astype(np.int64))
            if probe in REGEN:
                maps = regen_maps(pipe, tokens, captions, seed0, *REGEN[probe], (side, side),
                                  a.batch)
                arrays.update({f"{s}|{k}": v for k, v in maps.items()})
                print(f"{probe} {s:32s} agree={np.nanmean(maps['agree']):.4f}", flush=True)
                continue
            maps = token_maps(pipe, tokens, captions, seed0, PROBES[probe], (side, side),
                              a.batch, ROUNDS.get(probe, 1))
            arrays.update({f"{s}|{k}": v for k, v in maps.items()})
            print(f"{probe} {s:32s} guided={np.nanmean(maps['guided']):+.4f}", flush=True)
        if probe == "b2":  # its first two passes are the calibration's current self-score
            ref = pipe.self_score(torch.from_numpy(runs[names[0]]["tokens"].astype(np.int64)),
                                  captions, seed=seed0, config=SelfScoreConfig(), chunk=35)
            g = arrays[f"{names[0]}|guided"][:, :2]
            mine = np.nansum(g, axis=(1, 2)) / np.isfinite(g).sum(axis=(1, 2))
            gap = float(np.abs(mine - ref.guided.numpy()).max())
            print(f"b2 first two passes vs pipe.self_score: max gap {gap:.2e}", flush=True)
            if gap > 1e-4:
                raise SystemExit("probe b2 does not reproduce pipe.self_score")
        save_atomic(path, key=np.array(key), **arrays)
    print("done", flush=True)


if __name__ == "__main__":
    main()

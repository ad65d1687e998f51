"""The quality ceiling of the nano VQ: ``python -m lab.nano.ceiling [--prompts N]``.

Renders ground-truth scenes for the benchmark's held-out prompts, turns them into the canonical
codes the transformer was trained on (runs/nano/code_table.pt, written by the vq stage), decodes
them with the shipped VQ through the official decode path and scores them with the evaluator.
No sampler can beat this number; the rendered scenes themselves score 1.0.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from lab.nano import scenes
from lab.nano.evaluator import score_images
from lab.nano.train_all import OUT, RUNS
from lab.nano.vq import CodeTable, decode_codes


def ceiling(n: int, seed: int = 3) -> dict:
    from diffusers import VQModel

    vq = VQModel.from_pretrained(str(OUT / "vqvae")).eval()
    table = CodeTable.load(RUNS / "code_table.pt")
    specs = scenes.heldout_specs(n)
    rng = np.random.default_rng(seed)
    truth = np.stack([scenes.render(scenes.layout_scene(s, rng)) for s in specs])
    rec = decode_codes(vq, table.lookup(truth)).permute(0, 2, 3, 1).numpy()
    out = {"ground_truth": score_images(specs, truth), "vq_round_trip": score_images(specs, rec),
           "mean_abs_error": float(np.abs(rec - truth / 255.0).mean())}
    for v in out.values():
        if isinstance(v, dict):
            v.pop("passed")
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--prompts", type=int, default=240)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    print(json.dumps(ceiling(a.prompts), indent=1))


if __name__ == "__main__":
    main()

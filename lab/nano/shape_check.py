"""Validate the evaluator's shape test on decoded ground truth: ``python -m lab.nano.shape_check``.

Renders the ground-truth scene of every quality test prompt (`scenes.quality_test_specs`),
sends it through the shipped nano VQ (encode, nearest-code quantisation, decode) and scores the
rendered and the decoded images with `lab.nano.evaluator`: how many components the blob test
rejects and the largest misfit among them, i.e. how much room the threshold leaves for the
decoder's rounding. Prints JSON.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from lab.nano import scenes
from lab.nano.evaluator import (
    _label_components,
    detect,
    score_images,
    shape_fit,
    shape_templates,
)
from lab.nano.vq import to_tensor
from ladr_core import nano_model_path


@torch.no_grad()
def vq_round_trip(images: np.ndarray, batch: int = 70) -> np.ndarray:
    """uint8 [n, S, S, 3] -> float [n, S, S, 3] in [0, 1] through the nano VQ."""
    from diffusers import VQModel

    vq = VQModel.from_pretrained(str(nano_model_path() / "vqvae")).eval()
    out = []
    for i in range(0, len(images), batch):
        quant = vq.quantize(vq.encode(to_tensor(images[i:i + batch])).latents)[0]
        out.append(vq.decoder(vq.post_quant_conv(quant), None).clip(0, 1))
    return torch.cat(out).permute(0, 2, 3, 1).numpy()


def best_misfits(image: np.ndarray) -> list[float]:
    """Per component of one float image: the misfit of its best-fitting template."""
    from lab.nano.evaluator import MAX_COLOR_DIST, MIN_AREA

    palette = np.array([scenes.BACKGROUND, *scenes.COLORS.values()], np.float32)
    img = np.clip(image * 255.0, 0, 255).astype(np.float32)
    dist = np.linalg.norm(img[:, :, None] - palette[None, None], axis=-1)
    label = dist.argmin(-1)
    label[dist.min(-1) > MAX_COLOR_DIST] = -1
    out = []
    for ci in range(1, len(palette)):
        for pts in _label_components(label == ci):
            if len(pts) < MIN_AREA:
                continue
            (y0, x0), (y1, x1) = pts.min(0), pts.max(0)
            comp = np.zeros((y1 - y0 + 1, x1 - x0 + 1), dtype=bool)
            comp[pts[:, 0] - y0, pts[:, 1] - x0] = True
            out.append(min(max(shape_fit(comp, t)) for t in shape_templates(*comp.shape).values()))
    return out


def check(n: int, seed: int = 3) -> dict:
    specs = scenes.quality_test_specs(n)
    rng = np.random.default_rng(seed)
    truth = np.stack([scenes.render(scenes.layout_scene(s, rng)) for s in specs])
    decoded = vq_round_trip(truth)
    shapes = [d.shape for im in decoded for d in detect(im)]
    misfits = [m for im in decoded for m in best_misfits(im)]
    return {"prompts": n, "ground_truth_overall": score_images(specs, truth)["score_overall"],
            "vq_round_trip_overall": score_images(specs, decoded)["score_overall"],
            "vq_round_trip_components": len(shapes), "vq_round_trip_blobs": shapes.count("blob"),
            "vq_round_trip_max_misfit": round(max(misfits), 4)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--prompts", type=int, default=490)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    print(json.dumps(check(a.prompts), indent=1))


if __name__ == "__main__":
    main()

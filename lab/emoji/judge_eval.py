"""Train the judge and measure it: ``python -m lab.emoji.judge_eval [--scenes N]``.

Writes the judge to cache/judge and `lab/results/emoji_judge.json`: per category, the share of
ground-truth test scenes the judge passes, for the held-out style (OpenMoji, never trained on)
and for the training styles; per emoji, the share of objects named right in the held-out style;
and the Frechet distance on the judge's features between the styles' pictures of the same
prompts (the scale any later Frechet figure is read against).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

from lab.emoji.bank import load_bank
from lab.emoji.judge import Judge, frechet_distance, prompt_passes, train_judge
from lab.emoji.packages import cache_dir
from lab.emoji.results import provenance
from lab.emoji.scenes import CATEGORIES, MODEL_STYLES, TEST_STYLE, Scene, make_scene, render
from lab.emoji.vocab import NAMES

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "lab" / "results" / "emoji_judge.json"


def judge_dir() -> Path:
    return cache_dir() / "judge"


def test_scenes(n_per_category: int, seed: int) -> list[Scene]:
    rng = np.random.default_rng(seed)
    return [make_scene(rng, c, "test") for c in CATEGORIES for _ in range(n_per_category)]


def _nearest(found, x: float, y: float):
    return min(found, key=lambda f: (f.cx - x) ** 2 + (f.cy - y) ** 2) if found else None


def score(judge: Judge, bank, style: str, scenes: list[Scene]) -> dict:
    """Pass rate per category and naming accuracy per emoji on `style` pictures of `scenes`."""
    passed, named = defaultdict(list), defaultdict(list)
    for sc in scenes:
        img = render(bank, style, sc.placed)
        found = judge.read(img)
        passed[sc.spec.category].append(prompt_passes(sc.spec, found))
        for p in sc.placed:
            f = _nearest(found, *p.centre)
            named[NAMES[p.emoji]].append(f is not None and f.label == p.emoji)
    rate = lambda v: round(float(np.mean(v)), 4)  # noqa: E731
    per_cat = {c: rate(passed[c]) for c in CATEGORIES}
    return {"style": style, "scenes": len(scenes), "pass_rate": per_cat,
            "pass_rate_mean": rate([v for c in CATEGORIES for v in passed[c]]),
            "naming_accuracy": {k: rate(v) for k, v in sorted(named.items())},
            "naming_accuracy_mean": rate([v for vs in named.values() for v in vs])}


def frechet_between_styles(judge: Judge, bank, scenes: list[Scene]) -> dict:
    feats = {s: judge.features(np.stack([render(bank, s, sc.placed) for sc in scenes]))
             for s in (*MODEL_STYLES, TEST_STYLE)}
    return {f"{a}_vs_{b}": round(frechet_distance(feats[a], feats[b]), 3)
            for a, b in [(MODEL_STYLES[0], MODEL_STYLES[1]), (MODEL_STYLES[0], TEST_STYLE),
                         (MODEL_STYLES[1], TEST_STYLE)]}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scenes", type=int, default=200, help="test scenes per category")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reuse", action="store_true", help="score the judge in the cache, no training")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    bank = load_bank()
    if args.reuse:
        judge, stats = Judge.load(judge_dir()), json.loads((judge_dir() / "judge.json").read_text())
    else:
        judge, stats = train_judge(bank, steps=args.steps, batch=args.batch)
        judge.save(judge_dir(), stats)
    scenes = test_scenes(args.scenes, seed=7)
    out = {**provenance(), "command": " ".join(["python -m lab.emoji.judge_eval", *(sys.argv[1:] if argv is None else argv)]),
           "training": {k: v for k, v in stats.items() if k != "history"},
           "held_out_style": score(judge, bank, TEST_STYLE, scenes),
           "training_styles": [score(judge, bank, s, scenes) for s in MODEL_STYLES],
           "frechet_between_styles": frechet_between_styles(judge, bank, scenes)}
    RESULTS.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: out[k] for k in ("held_out_style", "frechet_between_styles")}, indent=1))


if __name__ == "__main__":
    main()

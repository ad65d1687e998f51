"""What goes wrong in the images behind the evaluator's losses, and does a self-score see it?

    OMP_NUM_THREADS=1 nice -n 10 python -m lab.studies.self_score_misses --set test \
        --variants b2p2/guided,b6p2/guided --json lab/results/self_score_misses.json

For each setting of the sweep and each prompt where baseline-64's image passes the nano
evaluator and the setting's image fails (a *loss*), the kind of error, read from the
evaluator's own detections (``lab.studies.self_score_study.error_kind``) in this order:

  malformed  a detected component fits no shape (a broken, bitten or merged shape: "blob");
  count      the number of well-formed objects differs from the prompt's (missing or extra);
  shape      as many objects as asked, some of the wrong shape;
  colour     the right shapes, some of the wrong colour;
  relation   the right objects, the spatial relation does not hold.

Per setting and kind: how many losses, and the mean per-image self-score difference (setting
minus baseline-64, same prompt and seed) of each variant on them, beside its mean over the
prompts where both pass (no loss): a self-score that sees a kind of error puts those images
well below the no-loss ones. ``pooled``: the same over the settings that are not broken, also
in units of the per-prompt spread, so variants on other scales compare. The .png beside the JSON shows example pairs (baseline-64 | setting)
of the settings named in ``--examples``, enlarged 4x.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lab.benchmarks.common import env_info, json_text, save_png
from lab.nano import scenes
from lab.studies.self_score_study import BASE, BROKEN, KINDS, error_kind
from lab.studies.self_score_variants import load_set, variants
from ladr_core import load_dimoo, nano_model_path
from ladr_core.calibrate import paired_spread

ROOT = Path(__file__).resolve().parents[2]


def decode(pipe: Any, tokens: np.ndarray) -> np.ndarray:
    side = scenes.IMAGE_SIZE // pipe.vq_factor
    with torch.no_grad():
        img = pipe.decode(torch.from_numpy(tokens.astype(np.int64)), (side, side))
    return (img.float().clamp(0, 1) * 255).round().to(torch.uint8).numpy()


def sheet(pairs: list[tuple[np.ndarray, np.ndarray, str]], path: Path, scale: int = 4) -> None:
    """Rows of (baseline-64 | setting) with a label, enlarged ``scale`` x (nearest)."""
    from PIL import Image, ImageDraw

    side = scenes.IMAGE_SIZE * scale
    label_w, pad = 420, 4
    out = Image.new("RGB", (2 * (side + pad) + label_w, len(pairs) * (side + pad)), "white")
    d = ImageDraw.Draw(out)
    for r, (a, b, text) in enumerate(pairs):
        y = r * (side + pad)
        for j, im in enumerate((a, b)):
            pic = Image.fromarray(im).resize((side, side), Image.Resampling.NEAREST)
            out.paste(pic, (j * (side + pad), y))
        for k, line in enumerate(text.split("\n")):
            d.text((2 * (side + pad) + 6, y + 6 + 14 * k), line, fill="black")
    save_png(out, path)


def pooled(result: dict[str, Any], values: dict[str, np.ndarray], working: list[str],
           variant: str) -> dict[str, Any]:
    """Over the settings that are not broken: the mean self-score difference of the losses of
    each kind and of the images both pass, also in units of ``spread`` (the median over those
    settings of the sd of the per-prompt differences), so variants on other scales compare."""
    spread = float(np.median([paired_spread(values[s], values[BASE]) for s in working]))
    kinds: dict[str, list[float]] = {}
    for s in working:
        for k, c in result[s]["kinds"].items():
            kinds.setdefault(k, []).extend([result[s][variant]["by_kind"][k]] * c)
    both = [(result[s][variant]["no_loss_mean"], result[s]["both_pass"]) for s in working
            if result[s]["both_pass"]]
    no_loss = sum(m * c for m, c in both) / sum(c for _, c in both)
    return {"settings": working, "spread": spread, "no_loss_mean": no_loss,
            "no_loss_in_spreads": no_loss / spread,
            "by_kind": {k: {"losses": len(x), "mean": float(np.mean(x)),
                            "in_spreads": float(np.mean(x)) / spread}
                        for k, x in kinds.items()}}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--set", choices=("test", "validation"), default="test")
    ap.add_argument("--prompts", type=int, default=490)
    ap.add_argument("--batch", type=int, default=35)
    ap.add_argument("--variants", default="b2p2/guided")
    ap.add_argument("--examples", default="ladr-nano,ladr-adaptive-confidence,ladr-tau0.9")
    ap.add_argument("--per-setting", type=int, default=6)
    ap.add_argument("--runs", default=str(ROOT / "lab" / "results" / "self_score_runs"))
    ap.add_argument("--json", default=str(ROOT / "lab" / "results"
                                          / "self_score_misses.json"))
    a = ap.parse_args(argv)
    maps, evaluator, _, runs = load_set(Path(a.runs), a.set, a.prompts, a.batch)
    n = len(runs[BASE]["passed"])
    specs = scenes.quality_test_specs(n) if a.set == "test" else scenes.validation_specs(n)
    table = variants()
    chosen = a.variants.split(",")
    values = {v: {s: table[v][0](m) for s, m in maps.items()} for v in chosen}
    pipe = load_dimoo(nano_model_path(), dtype=torch.float32)
    base_img = decode(pipe, runs[BASE]["tokens"])
    result: dict[str, Any] = {}
    pairs = []
    for s, r in runs.items():
        if s == BASE:
            continue
        lost = np.flatnonzero(runs[BASE]["passed"] & ~r["passed"])
        both = np.flatnonzero(runs[BASE]["passed"] & r["passed"])
        imgs = decode(pipe, r["tokens"][lost]) if lost.size else []
        kinds = [error_kind(specs[i], im) for i, im in zip(lost, imgs, strict=True)]
        row: dict[str, Any] = {"losses": int(lost.size), "both_pass": int(both.size),
                               "kinds": {k: kinds.count(k) for k in KINDS if k in kinds}}
        for v in chosen:
            diff = values[v][s] - values[v][BASE]
            row[v] = {"no_loss_mean": float(diff[both].mean()) if both.size else None,
                      "by_kind": {k: float(np.mean([diff[i] for i, kk in zip(lost, kinds,
                                                                             strict=True)
                                                    if kk == k]))
                                  for k in KINDS if k in kinds}}
        result[s] = row
        print(s, row["losses"], row["kinds"], flush=True)
        if s in a.examples.split(","):
            for i, im, kind in list(zip(lost, imgs, kinds, strict=True))[: a.per_setting]:
                v = chosen[0]
                d = values[v][s][i] - values[v][BASE][i]
                pairs.append((base_img[i], im, f"{s} | prompt {i}: {scenes.caption_for(specs[i])}"
                              f"\nleft baseline-64 (pass), right {s} (fail: {kind})"
                              f"\n{v} difference {d:+.3f} (no-loss mean "
                              f"{row[v]['no_loss_mean']:+.3f})"))
    out = Path(a.json)
    if pairs:
        sheet(pairs, out.with_suffix(".png"))
    meta = {"set": a.set, "prompts": n, "variants": chosen, "examples": a.examples,
            "command": "python -m lab.studies.self_score_misses " + " ".join(
                sys.argv[1:] if argv is None else argv)}
    working = [s for s in result if evaluator[s]["overall"] >= BROKEN]
    summary = {v: pooled(result, values[v], working, v) for v in chosen}
    for v, row in summary.items():
        print(v, {k: round(x["in_spreads"], 2) for k, x in row["by_kind"].items()}, flush=True)
    out.write_text(json_text({"env": env_info(), "meta": meta, "pooled": summary,
                              "settings": result}))
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()

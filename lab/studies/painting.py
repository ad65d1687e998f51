"""Inpainting and outpainting quality vs cost on the shipped DiMOO-nano model.

    nice -n 10 python -m lab.studies.painting --prompts 21 --threads 1 \
        --json lab/results/painting.json

Ground truth: the test set's scenes (``lab.nano.scenes.quality_test_specs``, spec seed 9) rendered
as the training data is (item i laid out with ``numpy`` seed TEST_IMAGE_SEED + i), the full
caption as the prompt. Three tasks, each mask drawn per item from the same seed:

* ``object``: one object's bounding box and one token around it (the shapes sit on the token
  grid, so the mask is whole tokens; a mask painted over an object leaves a margin) is
  regenerated: the model must draw the named object again, in its place or elsewhere;
* ``quarter``: one of the four quadrants (24 x 24 px of 48) is regenerated;
* ``half``: outpainting: one half (left, right, top or bottom) is kept and the other generated.

Settings per task: ``baseline-64`` (the official schedule), each LADR preset (``--presets``;
at its own T), and ``baseline@<preset>`` = the baseline at T = that preset's mean NFE on the same
task, rounded (the matched-NFE comparison). Every setting generates every item with the same seed
(TEST_IMAGE_SEED + i) in one rolling batch (``--max-batch`` images in flight; each image equals
its own single run). Scored by ``lab.nano.evaluator`` on the delivered image (original pixels
pasted back outside the regenerated tokens, the default). Per setting: NFE per image (the forward
passes the image took part in), pass rate per group and ``overall`` (lab.studies.paired_stats),
``known_unchanged`` (items whose known tokens equal the input's codes; must be all), wall
seconds (a shared CPU: indicative only). ``compare``: paired stratified bootstrap 95 % intervals
of each preset against baseline-64 and against its matched-NFE baseline, and the NFE ratio.
``reference``: the pass rate of the ground truth itself and of its VQ reconstruction.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lab.benchmarks.common import env_info, json_text, save_png, strategy_from
from lab.nano import scenes
from lab.nano.evaluator import score_images
from lab.nano.painting_tasks import SIZE, TASKS, ground_truth, task_masks
from lab.studies import rivals
from lab.studies.paired_stats import group_index, paired_bootstrap, ratio_ci, scores
from ladr_core import load_dimoo, nano_model_path, resolve_strategy

ROOT = Path(__file__).resolve().parents[2]


def run_setting(pipe: Any, captions: list[str], image: torch.Tensor, mask: torch.Tensor,
                strategy: Any, steps: int | None, max_batch: int) -> dict[str, Any]:
    """One setting over every item: delivered images uint8, NFE per image, known tokens kept."""
    job = pipe.prepare_paint(captions, image, mask)
    asked = 64 if steps is None else steps
    start = time.perf_counter()
    res = pipe.run(job, steps=steps, seed=scenes.TEST_IMAGE_SEED, strategy=strategy,
                   max_batch=max_batch)
    wall = time.perf_counter() - start
    known, codes = ~res.paint.region, res.paint.codes
    kept = [bool(torch.equal(res.tokens[i][known[i]], codes[i][known[i]]))
            for i in range(len(captions))]
    return {"images": (res.images.clamp(0, 1) * 255).round().to(torch.uint8).numpy(),
            "nfe": np.array(res.item_nfe, dtype=np.int64), "steps": asked,
            "known_unchanged": int(sum(kept)), "wall_s": wall}


def summary(run: dict[str, Any], specs: list, gidx: np.ndarray) -> dict[str, Any]:
    passed = np.array(score_images(specs, run["images"])["passed"], dtype=bool)
    return {"steps": int(run["steps"]), "nfe_mean": float(run["nfe"].mean()),
            "nfe": run["nfe"].tolist(), "score": scores(passed, gidx),
            "score_overall": scores(passed, gidx)["overall"], "passed": passed.tolist(),
            "known_unchanged": run["known_unchanged"], "items": len(specs),
            "wall_s": round(run["wall_s"], 1), "_images": run["images"]}


def settings(presets: list[str], strategies: list[str]) -> list[tuple[str, str, Any, int | None]]:
    """(row name, label of its matched baseline, strategy, T) of each setting besides
    baseline-64: `ladr-<preset>` for each LADR preset (label: the preset) and each named entry
    of lab/studies/quality.py's strategy table (label: the name), e.g. the rivals'
    `<rival>-n<budget>` picks (lab/studies/rivals.py)."""
    from lab.studies.quality import strategy_table

    out: list[tuple[str, str, Any, int | None]] = [
        (f"ladr-{p}", p, resolve_strategy(p), None) for p in presets]
    table = strategy_table(64)
    for name in strategies:
        args = table[name]
        out.append((name, name, strategy_from(args["strategy"], args.get("policy")),
                    args["steps"]))
    return out


def compare(rows: dict[str, dict], plan: list[tuple[str, str, Any, int | None]],
            gidx: np.ndarray) -> list[dict]:
    """Each setting against baseline-64 and its matched baseline; LADR's frontier against no
    locality where both ran (lab/studies/rivals.ablation_pairs)."""
    pairs = [(name, ref) for name, label, _, _ in plan
             for ref in ("baseline-64", f"baseline@{label}")]
    out = []
    for a_name, b_name in pairs + rivals.ablation_pairs(rows):
        a, b = rows[a_name], rows[b_name]
        ci = paired_bootstrap(np.array(a["passed"]), np.array(b["passed"]), gidx)["overall"]
        out.append({"a": a_name, "b": b_name, "overall_diff": ci,
                    "nfe_ratio": ratio_ci(np.array(b["nfe"]), np.array(a["nfe"]))})
    return out


def run_task(pipe: Any, task: str, gt: tuple, plan: list[tuple[str, str, Any, int | None]],
             max_batch: int, log: Any) -> dict[str, Any]:
    specs, captions, images, objects = gt
    gidx = group_index([scenes.group_of(s) for s in specs])
    image = torch.from_numpy(images).float().div(255.0)
    mask = torch.from_numpy(task_masks(task, objects))
    rows: dict[str, dict] = {}
    baselines: dict[int, dict] = {}  # T -> the baseline's row (one run per T)
    for name, _, strategy, steps in [("baseline-64", "", resolve_strategy("baseline"), 64),
                                     *plan]:
        rows[name] = summary(run_setting(pipe, captions, image, mask, strategy, steps,
                                         max_batch), specs, gidx)
        log(task, name, rows[name])
    baselines[64] = rows["baseline-64"]
    for name, label, _, _ in plan:
        t = max(1, int(round(rows[name]["nfe_mean"])))
        if t not in baselines:
            baselines[t] = summary(run_setting(pipe, captions, image, mask,
                                               resolve_strategy("baseline"), t, max_batch),
                                   specs, gidx)
        rows[f"baseline@{label}"] = baselines[t]
        log(task, f"baseline@{label}", rows[f"baseline@{label}"])
    sheet = sample_sheet(images, mask.numpy(), rows)
    rows = {k: {kk: vv for kk, vv in r.items() if kk != "_images"} for k, r in rows.items()}
    region = mask.view(len(specs), -1).sum(1) / mask[0].numel()
    return {"mask_share_mean": float(region.mean()), "settings": rows,
            "compare": compare(rows, plan, gidx), "_sheet": sheet}


def sample_sheet(images: np.ndarray, masks: np.ndarray, rows: dict[str, dict],
                 n: int = 7) -> np.ndarray:
    """uint8 sheet: one column per item (the first n), rows: ground truth, mask, each setting."""
    n = min(n, len(images))
    bands = [images[:n], np.repeat((masks[:n, ..., None] * 255).astype(np.uint8), 3, axis=3)]
    bands += [r["_images"][:n] for r in rows.values()]
    return np.concatenate([np.concatenate(list(b), axis=1) for b in bands], axis=0)


def reference(pipe: Any, gt: tuple) -> dict[str, float]:
    """Pass rate of the ground truth and of its VQ reconstruction (the ceiling of any run)."""
    specs, _, images, _ = gt
    gidx = group_index([scenes.group_of(s) for s in specs])
    image = torch.from_numpy(images).float().div(255.0)
    recon = pipe.decode(pipe.encode_image(image), (SIZE // pipe.vq_factor,) * 2)
    recon = (recon.clamp(0, 1) * 255).round().to(torch.uint8).numpy()
    return {"ground_truth": scores(np.array(score_images(specs, images)["passed"]), gidx)["overall"],
            "vq_reconstruction": scores(np.array(score_images(specs, recon)["passed"]),
                                        gidx)["overall"]}


def markdown(doc: dict[str, Any]) -> str:
    lines = [f"Prompts per task: {doc['meta']['prompts']}; reference pass rate: ground truth "
             f"{doc['reference']['ground_truth']:.3f}, VQ reconstruction "
             f"{doc['reference']['vq_reconstruction']:.3f}.", ""]
    for task, t in doc["tasks"].items():
        lines += [f"### {task} (mask share {t['mask_share_mean']:.2f})", "",
                  "| setting | T | NFE / image | overall | known tokens unchanged | wall s |",
                  "|---|---:|---:|---:|---:|---:|"]
        lines += [f"| {n} | {r['steps']} | {r['nfe_mean']:.1f} | {r['score_overall']:.3f} | "
                  f"{r['known_unchanged']}/{r['items']} | {r['wall_s']} |"
                  for n, r in t["settings"].items()]
        lines += ["", "| comparison | overall diff [95 % CI] | NFE ratio [95 % CI] |",
                  "|---|---:|---:|"]
        for c in t["compare"]:
            d, r = c["overall_diff"], c["nfe_ratio"]
            lines.append(f"| {c['a']} vs {c['b']} | {d['diff']:+.3f} [{d['lo']:+.3f}, "
                         f"{d['hi']:+.3f}] | {r['ratio']:.2f}x [{r['lo']:.2f}, {r['hi']:.2f}] |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=21)
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--presets", default="nano,paper,adaptive", help="LADR presets, comma separated")
    ap.add_argument("--strategies", default="",
                    help="entries of lab/studies/quality.py's strategy table, comma separated "
                    "(e.g. the rivals' threshold-n12; see quality.py --list)")
    ap.add_argument("--max-batch", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (0 = leave as is)")
    ap.add_argument("--model", default=None, help="checkpoint folder (default: dimoo-nano)")
    ap.add_argument("--json", default=str(ROOT / "lab" / "results" / "painting.json"))
    a = ap.parse_args(argv)
    tasks = a.tasks.split(",")
    presets = [p for p in a.presets.split(",") if p]
    names = [n for n in a.strategies.split(",") if n]
    if a.prompts <= 0 or set(tasks) - set(TASKS):
        ap.error(f"--prompts must be > 0 and --tasks a subset of {TASKS}")
    from lab.studies.quality import strategy_table

    unknown = sorted(set(names) - set(strategy_table(64)))
    if unknown:
        ap.error(f"--strategies: unknown {unknown} (see lab/studies/quality.py --list)")
    plan = settings(presets, names)
    if a.threads:
        torch.set_num_threads(a.threads)
    pipe = load_dimoo(a.model or nano_model_path(), dtype=torch.float32)
    gt = ground_truth(a.prompts)

    def log(task: str, name: str, r: dict) -> None:
        print(f"{task:8s} {name:18s} T={r['steps']:3d} nfe={r['nfe_mean']:6.2f} "
              f"overall={r['score_overall']:.3f} known={r['known_unchanged']}/{r['items']} "
              f"wall={r['wall_s']:.1f}s", flush=True)

    doc = {"meta": {"prompts": a.prompts, "presets": presets, "strategies": names,
                    "max_batch": a.max_batch,
                    "threads": torch.get_num_threads(), "cfg": pipe.default_cfg,
                    "seed0": scenes.TEST_IMAGE_SEED, "model": str(a.model or "dimoo_nano"),
                    "command": "python -m lab.studies.painting " + " ".join(
                        sys.argv[1:] if argv is None else argv)},
           "env": env_info(),
           "reference": reference(pipe, gt),
           "tasks": {t: run_task(pipe, t, gt, plan, a.max_batch, log) for t in tasks}}
    out = Path(a.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    sheets = [doc["tasks"][t].pop("_sheet") for t in tasks]
    from PIL import Image  # noqa: PLC0415 - only for the sample sheet

    save_png(Image.fromarray(np.concatenate(sheets, axis=0)), out.with_name(out.stem + "_samples.png"))
    out.write_text(json_text(doc))
    out.with_suffix(".md").write_text(markdown(doc))
    print(markdown(doc))
    return doc


if __name__ == "__main__":
    main()

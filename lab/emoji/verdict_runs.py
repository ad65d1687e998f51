"""The runs behind ``lab.emoji.verdicts``: every setting generates the same prompts with the same
seeds and the emoji judge scores each picture, so the nano studies' paired statistics
(``lab.studies.paired_stats``) and runners (``lab.studies.quality.generate`` / ``summarise`` /
``comparisons``, ``lab.studies.strength.run_i2i`` / ``sampled_codes``,
``lab.studies.painting.run_setting``) apply unchanged; only the evaluator is the judge.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from lab.emoji.judge import Judge
from lab.emoji.scenes import CELL, SIZE, Scene
from lab.studies import quality, rivals
from lab.studies.paired_stats import paired_bootstrap, ratio_ci, scores
from ladr_core import resolve_strategy

RIVALS = ("ladr-global-n12", "ladr-global-n18", "halton-ladr-n12", "halton-ladr-n18",
          "threshold-n12", "threshold-n18", "entropy-n12", "entropy-n18")
"""nano's validation picks of the training-free rivals (lab/studies/rivals.PICKS), as they are:
tuning them again on this model's validation prompts is not part of the harness."""
EDIT_SETTINGS = {"baseline-64": ("baseline", 64), "ladr-nano": ("nano", None),
                 "ladr-global": ("ladr-global", None)}
"""Image to image and inpainting: row name -> (strategy or preset, T; None = its own), as
lab/studies/strength.SETTINGS; the reference row takes the harness's --steps."""


def judged(judge: Judge, scenes: list[Scene], images: np.ndarray) -> np.ndarray:
    """bool [n]: the judge passes picture i for scene i's prompt."""
    return np.array([judge.passes(sc.spec, img) for sc, img in zip(scenes, images, strict=True)],
                    dtype=bool)


def t2i_table(steps: int, tuned: str | None, calibrated: tuple[Any, int] | None
              ) -> dict[str, dict[str, Any]]:
    """name -> generate() arguments of every text-to-image setting (quality.py's table)."""
    table = quality.strategy_table(steps)
    names = [f"baseline-{steps}", "ladr", "ladr-nano", "ladr-adaptive", *RIVALS,
             "ladr+mlcache-preset"]
    out = {n: table.get(n, {"strategy": "baseline", "steps": steps})
           for n in names}
    if tuned:
        out["ladr-tuned"] = rivals.table_entry(tuned)
    if calibrated is not None:
        out["calibrated"] = {"strategy": calibrated[0], "steps": calibrated[1]}
    return out


def run_t2i(pipe: Any, judge: Judge, scenes: list[Scene], args: dict[str, Any], cfg: float,
            seed0: int, batch: int) -> dict[str, Any]:
    """One setting on every prompt: quality.generate's run plus the judge's verdicts."""
    captions = [sc.caption for sc in scenes]
    run = quality.generate(pipe, captions, seed0, args, cfg, 1.0,
                           1 if args.get("cache") is not None else batch)
    run["passed"] = judged(judge, scenes, run["images"])
    return run


def matched_names(results: dict[str, dict], reference: str) -> dict[str, int]:
    """`baseline-<T>` for each setting's mean NFE (rounded) not already run."""
    out = {}
    for name, r in results.items():
        t = max(1, round(r["nfe_mean"]))
        if not name.startswith("baseline") and f"baseline-{t}" not in results and \
                f"baseline-{t}" != reference:
            out[f"baseline-{t}"] = t
    return out


def t2i_section(pipe: Any, judge: Judge, scenes: list[Scene], gidx: np.ndarray, first: dict,
                table: dict[str, dict], opts: dict[str, Any], log: Any) -> dict[str, Any]:
    """Every text-to-image setting (the reference's run `first` is reused), the official sampler
    at each one's forwards, and quality.comparisons' paired intervals."""
    real = np.array([pipe.make_denoiser(sc.caption, cfg=opts["cfg"]).real_tokens
                     for sc in scenes])
    ref = f"baseline-{opts['steps']}"
    results = {ref: quality.summarise(first, table[ref], gidx, real)}
    for name, args in table.items():
        if name != ref:
            run = run_t2i(pipe, judge, scenes, args, opts["cfg"], opts["seed0"], opts["batch"])
            results[name] = quality.summarise(run, args, gidx, real)
            log("t2i", name, results[name])
    for name, t in matched_names(results, ref).items():
        args = {"strategy": "baseline", "steps": t}
        run = run_t2i(pipe, judge, scenes, args, opts["cfg"], opts["seed0"], opts["batch"])
        results[name] = quality.summarise(run, args, gidx, real)
        log("t2i", name, results[name])
    if ref != "baseline-64" and "baseline-64" not in results:  # comparisons' reference name
        results["baseline-64"] = results[ref]
    compare = [c for c in quality.comparisons(results, gidx)
               if {c["a"], c["b"]} != {ref, "baseline-64"}]
    return {"settings": {k: {kk: vv for kk, vv in v.items() if kk != "_images"}
                         for k, v in results.items()}, "compare": compare}


def edit_settings(steps: int) -> list[tuple[str, Any, int | None]]:
    return [(name, resolve_strategy(s), steps if name == "baseline-64" else t)
            for name, (s, t) in EDIT_SETTINGS.items()]


def _row(judge: Judge, scenes: list[Scene], gidx: np.ndarray, images: np.ndarray,
         nfe: Any, kept: np.ndarray | None = None) -> dict[str, Any]:
    passed = judged(judge, scenes, images)
    out = {"score": scores(passed, gidx), "passed": passed.tolist(),
           "nfe": np.asarray(nfe, dtype=np.int64).tolist(),
           "nfe_mean": float(np.mean(nfe))}
    out["score_overall"] = out["score"]["overall"]
    if kept is not None:
        out["kept_mean"], out["kept"] = float(kept.mean()), [round(float(x), 4) for x in kept]
    return out


def pair_rows(rows: dict[str, dict], pairs: list[tuple[str, str]], gidx: np.ndarray,
              **where: Any) -> list[dict[str, Any]]:
    """Paired bootstrap (overall pass rate) and forwards ratio of each (a, b) both present."""
    return [{**where, "a": a, "b": b,
             "overall_diff": paired_bootstrap(np.array(rows[a]["passed"]),
                                              np.array(rows[b]["passed"]), gidx)["overall"],
             "nfe_ratio": ratio_ci(np.array(rows[b]["nfe"]), np.array(rows[a]["nfe"]))}
            for a, b in pairs if a in rows and b in rows and a != b]


def i2i_route(pipe: Any, judge: Judge, scenes: list[Scene], gidx: np.ndarray,
              source: dict[str, Any], strength: float, opts: dict[str, Any]) -> dict[str, Any]:
    """Every edit setting and its matched official sampler at one strength, from `source`
    ({"pixels", "codes", "view"}: the pipeline whose encoder gives the start codes)."""
    from lab.studies.strength import run_i2i

    captions = [sc.caption for sc in scenes]
    rows: dict[str, dict] = {}

    def add(name: str, strategy: Any, steps: int | None) -> None:
        run = run_i2i(source["view"], captions, source["pixels"], strength, strategy, steps,
                      opts["seed0"], opts["batch"])
        kept = (run["tokens"].cpu() == source["codes"]).float().mean(1).numpy()
        rows[name] = _row(judge, scenes, gidx, run["images"], run["nfe"], kept)

    plan = edit_settings(opts["steps"])
    for name, strategy, steps in plan:
        add(name, strategy, steps)
    for name, _, _ in plan[1:]:
        t = max(1, round(rows[name]["nfe_mean"] / strength))
        add(f"baseline@{name}", resolve_strategy("baseline"), t)
    pairs = [(n, "baseline-64") for n, _, _ in plan[1:]]
    pairs += [(n, f"baseline@{n}") for n, _, _ in plan[1:]]
    return {"settings": rows, "compare": pair_rows(rows, pairs, gidx, strength=strength)}


def object_masks(scenes: list[Scene], seed0: int, size: int) -> np.ndarray:
    """float32 [n, size, size], 1 = regenerate: one object's box and one token around it
    (lab.nano.painting_tasks' `object` task), the object drawn per item from seed0 + i."""
    masks = np.zeros((len(scenes), size, size), np.float32)
    for i, sc in enumerate(scenes):
        p = sc.placed[int(np.random.default_rng(seed0 + i).integers(len(sc.placed)))]
        top, left = max(0, p.y - CELL), max(0, p.x - CELL)
        masks[i, top:p.y + SIZE + CELL, left:p.x + SIZE + CELL] = 1.0
    return masks


def inpaint_section(pipe: Any, judge: Judge, scenes: list[Scene], gidx: np.ndarray,
                    pixels: torch.Tensor, opts: dict[str, Any]) -> dict[str, Any]:
    """Inpainting one object of each ground-truth picture, every edit setting and its matched
    official sampler (lab.studies.painting.run_setting: the product's paint path)."""
    from lab.studies.painting import run_setting

    captions = [sc.caption for sc in scenes]
    mask = torch.from_numpy(object_masks(scenes, opts["seed0"], pixels.shape[1]))
    rows: dict[str, dict] = {}
    plan = edit_settings(opts["steps"])
    for name, strategy, steps in plan:
        run = run_setting(pipe, captions, pixels, mask, strategy, steps, opts["batch"])
        rows[name] = _row(judge, scenes, gidx, run["images"], run["nfe"])
        rows[name]["known_unchanged"] = run["known_unchanged"]
    for name, _, _ in plan[1:]:
        t = max(1, round(rows[name]["nfe_mean"]))
        run = run_setting(pipe, captions, pixels, mask, resolve_strategy("baseline"), t,
                          opts["batch"])
        rows[f"baseline@{name}"] = _row(judge, scenes, gidx, run["images"], run["nfe"])
    pairs = [(n, "baseline-64") for n, _, _ in plan[1:]]
    pairs += [(n, f"baseline@{n}") for n, _, _ in plan[1:]]
    return {"task": "object", "mask_share_mean": float(mask.mean()), "settings": rows,
            "compare": pair_rows(rows, pairs, gidx)}

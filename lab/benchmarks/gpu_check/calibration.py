"""Section d: what a calibration costs at 512 x 512 with 16 prompts on the 8B-shaped model.

A short calibration runs through the calibration's own loop (``ladr_core.calibrate.runner``:
``generate`` in chunks of 8 images, self-scored) with a short T: the reference baseline and the
``nano`` candidate at T = 4, on the 16 built-in prompts. Its wall time per image-call (one
image in one denoiser call, the self-score's passes included) is measured. The full
calibration's calls per image are counted from what it runs (``default_candidates(64)``): the
reference's 64, each candidate's NFE as measured on DiMOO-nano's validation prompts
(lab/results/self_score_validation.json; a candidate it does not hold, the training-free
rivals, from the validation sweep of the same strategy object, samplers_validation.json), the
official sampler at each distinct rounded
NFE, and the self-score's passes for every setting. The full run's time is
projected_seconds(calls per image x 16, ms per image-call) (projection.py): projected.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import torch

from lab.benchmarks.common import RESULTS_DIR, sync_device
from ladr_core import LADR, Baseline
from ladr_core.calibrate import (
    BUILTIN_PROMPTS,
    CALIBRATION_SELF_SCORE,
    Calibration,
    CalibrationConfig,
    Candidate,
    default_candidates,
)

from .models import random_model, shaped_pipeline
from .projection import projected_seconds
from .speed import release, shape

__all__ = ["VALIDATION", "calls_per_image", "section_d"]

VALIDATION = RESULTS_DIR / "self_score_validation.json"
SWEEP = RESULTS_DIR / "samplers_validation.json"
SHORT_T = 4


def calls_per_image(steps: int = 64, passes: int = CALIBRATION_SELF_SCORE.passes
                    ) -> dict[str, Any]:
    """Denoiser calls per image of a full calibration (module docstring), with its parts."""
    measured = json.loads(VALIDATION.read_text())["evaluator"]
    nfe = {}
    for cand in default_candidates(steps):
        if cand.role == "reference":
            continue
        key = f"ladr-{cand.name}"
        nfe[cand.name] = measured[key]["nfe"] if key in measured else _swept_nfe(cand)
    matched = sorted({max(1, round(v)) for v in nfe.values()} - {steps})
    settings = 1 + len(nfe) + len(matched)
    total = steps + sum(nfe.values()) + sum(matched) + passes * settings
    return {"calls_per_image": total, "reference": steps, "candidates_nfe": nfe,
            "matched_baselines": matched, "self_score_passes": passes * settings,
            "file": str(VALIDATION.relative_to(RESULTS_DIR.parents[1])),
            "sweep": str(SWEEP.relative_to(RESULTS_DIR.parents[1]))}


def _swept_nfe(cand: Candidate) -> float:
    """A candidate's mean NFE in the validation sweep: the setting that builds the same
    strategy at the same T (KeyError naming the candidate when the sweep has none)."""
    from lab.studies.rivals import table_entry

    for spec, row in json.loads(SWEEP.read_text())["settings"].items():
        entry = table_entry(spec)
        if entry["strategy"] == cand.strategy and entry["steps"] == cand.steps:
            return row["nfe_mean"]
    raise KeyError(f"no NFE for calibration candidate {cand.name!r} in {VALIDATION.name} or "
                   f"{SWEEP.name}; run it on the validation prompts first")


def section_d(device: torch.device, smoke: bool, deadline: Callable[[], float]) -> dict[str, Any]:
    config, ids, dtype, sizes = shape(smoke)
    size = sizes[1]
    model = random_model(config, device, dtype)
    pipe = shaped_pipeline(model, config, ids, sizes[0])
    prompts = tuple(BUILTIN_PROMPTS[:16])
    cal_config = CalibrationConfig(prompts, size=size, steps=SHORT_T, batch=8)
    candidates = [Candidate(f"baseline-{SHORT_T}", Baseline(), SHORT_T, "reference"),
                  Candidate("nano", LADR.preset("nano"), SHORT_T)]
    pipe.generate(prompts[:2], width=size, height=size, steps=2, strategy="baseline",
                  decode=False)  # warm-up
    sync_device(device)
    start = time.perf_counter()
    runs = Calibration(pipe, cal_config, None, {}, candidates=candidates).run()
    sync_device(device)
    wall = time.perf_counter() - start
    images = len(prompts)
    image_calls = sum(sum(r["nfe"]) + CALIBRATION_SELF_SCORE.passes * images
                      for r in runs.values())
    ms = wall / image_calls * 1e3
    full = calls_per_image()
    projected = projected_seconds(full["calls_per_image"] * images, ms)
    del pipe, model
    release(device)
    return {"size": size, "prompts": images, "batch": cal_config.batch,
            "short_run": {"settings": list(runs), "steps": SHORT_T, "wall_s": wall,
                          "image_calls": image_calls, "ms_per_image_call": ms},
            "full": full, "projected_s": projected, "how": "projected"}

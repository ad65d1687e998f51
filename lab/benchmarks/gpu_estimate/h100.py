"""The method checked against the four peaks measured on an H100 before the rebuild
(lab/results/gpu_nvidia_h100_80gb_hbm3.json, "memory": ``max_memory_allocated`` while
sampling two steps at 1024 x 1024, B = 1, weights included; the ML-Cache row a lean cache over
four steps), in the same setting.

That run's prompt rows held more tokens than gpu_check's prompt gives today (its "step" records
``real_tokens``), and activations and the ML-Cache's K/V grow with the tokens. So the same cases
are estimated twice: with today's prompt, and with the prompt lengthened by as many words as
the old rows had tokens more (``WordTokenizer`` gives one token per word), which leaves only the
code's own changes between the estimate and the measurement.
"""

from __future__ import annotations

import json
from typing import Any

from lab.benchmarks.common import RESULTS_DIR
from lab.benchmarks.gpu_check.speed import prompt

from .measure import measure_case

__all__ = ["OLD_FILE", "ROWS", "compare", "old_run", "rerun"]

OLD_FILE = RESULTS_DIR / "gpu_nvidia_h100_80gb_hbm3.json"
#: (figure, layout, cache, key of the old file's "memory")
ROWS = (("bf16", "bf16", "none", "bf16"), ("bf16 + ML-Cache", "bf16", "ml-cache", "ml_cache"),
        ("fp8 storage", "fp8", "none", "fp8"), ("blocks streamed", "low_vram", "none", "low_vram"))
GIB = 2 ** 30


def old_run() -> dict[str, Any]:
    doc = json.loads(OLD_FILE.read_text())
    return {"file": str(OLD_FILE.relative_to(RESULTS_DIR.parents[1])),
            "commit": doc["env"]["git_commit"], "gpu": doc["env"]["gpu"],
            "torch": doc["env"]["torch"], "real_tokens": doc["step"]["real_tokens"],
            "peak_gib": {k: doc["memory"][k]["peak_gib"] for _, _, _, k in ROWS},
            "resident_gib": {k: doc["memory"][k].get("resident_gib") for _, _, _, k in ROWS},
            "cache_gib": doc["memory"]["ml_cache"].get("cache_gib"),
            "per_image_s": {e["case"]: e["wall_s"] for e in doc.get("end_to_end", [])
                            if e.get("wall_s") is not None}}


def rerun(layout: str, pipe: Any) -> dict[str, Any] | None:
    """The H100 cases of ``layout`` (bf16: plain and ML-Cache; fp8: plain) with the old run's
    token count, or None for the layouts the H100 run did not measure this way."""
    caches = [c for _, lay, c, _ in ROWS if lay == layout]
    if not caches:
        return None
    target = old_run()["real_tokens"]
    now = pipe.make_denoiser(prompt(), width=1024, height=1024).real_tokens
    if target <= now:
        return None
    text = prompt() + " word" * (target - now)
    return {f"1024/1/{c}": measure_case(pipe, 1024, 1, c == "ml-cache", text) for c in caches}


def compare(layouts: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per H100 figure: measured, estimated (today's prompt, the old token count)."""
    old = old_run()
    rows = []
    for figure, layout, cache, key in ROWS:
        row = layouts.get(layout, {})
        case = row.get("cases", {}).get(f"1024/1/{cache}")
        matched = row.get("h100", {}).get(f"1024/1/{cache}")
        if case is None:
            continue
        est = case["peak_allocated"] / GIB
        same = None if matched is None else matched["peak_allocated"] / GIB
        rows.append({"figure": figure, "layout": layout, "cache": cache,
                     "measured_gib": old["peak_gib"][key], "estimated_gib": est,
                     "estimated_old_tokens_gib": same,
                     "difference": est / old["peak_gib"][key] - 1,
                     "difference_old_tokens": None if same is None
                     else same / old["peak_gib"][key] - 1})
    return rows

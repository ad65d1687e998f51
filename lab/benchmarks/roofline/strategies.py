"""The strategies priced per image: baseline-64 (the official sampler) and each LADR strategy
of the committed test-set run without an ML-Cache, at their mean forwards (denoiser calls,
both CFG branches packed into one) on DiMOO-nano's test set."""

from __future__ import annotations

import json
from typing import Any

from lab.benchmarks.common import RESULTS_DIR

__all__ = ["QUALITY", "strategies"]

QUALITY = RESULTS_DIR / "quality_test.json"


def strategies() -> dict[str, dict[str, Any]]:
    """label -> its mean NFE and where it comes from."""
    runs = json.loads(QUALITY.read_text())["strategies"]
    file = str(QUALITY.relative_to(RESULTS_DIR.parents[1]))
    return {label: {"nfe_mean": s["nfe_mean"], "strategy": s["strategy"], "steps": s["steps"],
                    "prompts": len(s["nfe"]), "file": file}
            for label, s in runs.items()
            if s["cache"] is None and (label == "baseline-64" or s["strategy"] == "ladr")}

"""The roofline against the one GPU measurement of the 8B model: an H100 (the SXM5 board, its
name "NVIDIA H100 80GB HBM3") at commit c522164, lab/results/gpu_nvidia_h100_80gb_hbm3.json:
``step.packed_ms`` (one full denoiser call at 1024 px, B = 1, CFG rows packed, eager) and
``end_to_end`` baseline-64's ``wall_s`` (one image, 64 calls and the sampler). That run's
prompt rows held more tokens than today's prompt gives (``step.real_tokens``), so the H100
trace is made at that length too (run.py ``old_tokens``). The ratios are reported as found:
the card's constants are spec-sheet values and are not fitted to this."""

from __future__ import annotations

import json
from typing import Any

from lab.benchmarks.common import RESULTS_DIR
from tests.kit.cuda_emu import CARDS

from .cost import seconds

__all__ = ["MEASURED", "check", "old_tokens"]

MEASURED = RESULTS_DIR / "gpu_nvidia_h100_80gb_hbm3.json"


def _run() -> dict[str, Any]:
    return json.loads(MEASURED.read_text())


def old_tokens() -> tuple[int, int]:
    """(px, real tokens) of the H100 run's step (16 px per code)."""
    run = _run()
    return 16 * run["grid"][0], int(run["step"]["real_tokens"])


def check(doc: dict[str, Any]) -> dict[str, Any]:
    """Estimated and measured seconds, their ratio, and the estimate's parts."""
    trace = doc["traces"].get(doc["trace_of"].get("h100/bf16", ""), {}).get("bf16", {})
    old = trace.get("old_tokens")
    if old is None:
        return {}
    run, h100 = _run(), CARDS["h100"]
    step, first = seconds(old["call"], h100), seconds(old["first"], h100)
    image = first["seconds"] + 63 * step["seconds"]
    base = next(e for e in run["end_to_end"] if e["case"] == "baseline-64")
    rows = [{"figure": "one full call, 1024 px, CFG rows packed (eager)",
             "measured_s": run["step"]["packed_ms"] / 1e3, "estimated_s": step["seconds"]},
            {"figure": "baseline-64, one 1024 px image", "measured_s": base["wall_s"],
             "estimated_s": image}]
    for r in rows:
        r["ratio"] = r["estimated_s"] / r["measured_s"]
    return {"file": str(MEASURED.relative_to(RESULTS_DIR.parents[1])),
            "commit": run["env"]["git_commit"], "gpu": run["env"]["gpu"],
            "torch": run["env"]["torch"], "real_tokens": old["real_tokens"],
            "measured_tflops": run["step"]["packed_tflops"], "step": step,
            "bf16_peak": h100.peak("bfloat16"), "rows": rows}

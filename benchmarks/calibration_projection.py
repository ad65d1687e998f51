"""PROJECTED GPU time of a calibration of the 8B Lumina-DiMOO with the built-in prompt list.

    python -m benchmarks.calibration_projection

Nothing here is measured on the 8B model. Inputs (both committed):

* the H100 per-step figure: one full denoiser call of the 8B model at 1024 x 1024, bf16, both
  CFG rows packed (``step.packed_ms`` of ``benchmarks/results/gpu_nvidia_h100_80gb_hbm3.json``;
  it records the commit it ran on, which predates the current code);
* the denoiser calls per image of a calibration: every setting's mean NFE plus the self-score's
  passes per setting, from the nano calibration of ``benchmarks/calibration_nano.py``
  (``benchmarks/results/calibration_nano_48.json``); the 8B model's own NFEs are unknown here.

An image's call costs about what one image's call costs alone (the measured call already fills
the GPU: ~8,400 tokens at ~490 TFLOPS), so GPU time = prompts x seeds x calls per image x
ms per call (``benchmarks.gpu_check.projection.projected_seconds``, the one projection
function). Model loading, the probe call and VQ decoding of the contact sheet are left out.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import RESULTS_DIR, write_result  # noqa: E402
from benchmarks.gpu_check.projection import projected_seconds  # noqa: E402
from ladr_core.calibrate.prompts import BUILTIN_COUNT, HANDWRITTEN  # noqa: E402

GPU_FILE = RESULTS_DIR / "gpu_nvidia_h100_80gb_hbm3.json"
NANO_FILE = RESULTS_DIR / "calibration_nano_48.json"


def calls_per_image(nano: dict[str, Any]) -> tuple[float, dict[str, float]]:
    """(calls per image, per setting) of a calibration: NFE + the self-score's passes."""
    passes = nano["conditions"]["self_score_passes_per_image"]
    per = {c["name"]: c["nfe"] + passes for c in nano["candidates"]}
    return sum(per.values()), per


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default=str(RESULTS_DIR))
    a = ap.parse_args(argv)
    gpu = json.loads(GPU_FILE.read_text())
    nano = json.loads(NANO_FILE.read_text())
    ms = gpu["step"]["packed_ms"]
    calls, per = calls_per_image(nano)
    rows = []
    for label, prompts in (("built-in list (as long as the margin needs)", BUILTIN_COUNT),
                           ("the sixteen hand-written prompts", len(HANDWRITTEN))):
        seconds = projected_seconds(prompts * calls, ms)
        rows.append({"list": label, "prompts": prompts, "seeds": 1,
                     "calls_per_image": calls, "ms_per_call": ms,
                     "projected_gpu_s": seconds, "projected_gpu_h": seconds / 3600.0})
        print(f"{label}: {prompts} prompts x {calls:.1f} calls x {ms:.1f} ms = "
              f"{seconds / 3600:.1f} h (projected)")
    payload = {"projected": True, "size": 1024, "rows": rows, "calls_per_setting": per,
               "inputs": {"per_call": f"{GPU_FILE.name}: step.packed_ms (commit "
                                      f"{gpu['env']['git_commit']}, {gpu['env']['gpu']})",
                          "calls": f"{NANO_FILE.name}: NFE of every setting + self-score "
                                   "passes (DiMOO-nano; the 8B model's NFEs are unknown)"},
               "note": "projected, not measured: the per-call figure was measured on code that "
                       "predates the current sampler and denoiser; 512 px is not measured"}
    write_result("calibration_projection", payload, Path(a.out))
    return payload


if __name__ == "__main__":
    main()

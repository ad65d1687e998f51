"""The calibration's figures of one result each, one subcommand per figure.

``margin``: Fit the calibration's non-inferiority margin on DiMOO-nano's VALIDATION set.

    OMP_NUM_THREADS=1 nice -n 10 python -m lab.studies.calibration margin \
        --variant b2p2/guided --json lab/results/calibration_margin.json

Inputs: the validation sweep of ``lab.studies.self_score_runs`` (final tokens and evaluator
verdicts of every setting, 210 prompts) and the per-token maps of
``lab.studies.self_score_probe``, aggregated as ``--variant`` (``lab.studies.self_score_variants``;
it must be the self-score the calibration reports). Method (``self_score_variants.fit``): over
the settings the evaluator does not score as broken (overall >= 0.35), the self-score
difference to baseline-64 against the evaluator's overall difference, a least-squares line
through the reference's (0, 0); the margin is that line's self-score difference at an evaluator
drop of 0.05, with a 95 % bootstrap interval (prompts resampled within their category, the fit
repeated). The spread is the sd of the per-prompt paired differences, the median over the
three settings the evaluator puts closest to baseline-64 (the spread grows with the loss, and a
calibration hopes to accept the near ones; the median over all is recorded too);
``prompts_needed`` the prompts at which a setting as good as the reference qualifies 4 times
out of 5 at that spread (``ladr_core.calibrate.margin``). ``ladr_core/calibrate/margin.py``
carries ``margin`` and ``spread`` (rounded) and cites ``calibration_margin.json``.

``projection``: PROJECTED GPU time of a calibration of the 8B Lumina-DiMOO with the built-in
prompt list.

    python -m lab.studies.calibration projection

Nothing here is measured on the 8B model. Inputs (both committed):

* the H100 per-step figure: one full denoiser call of the 8B model at 1024 x 1024, bf16, both
  CFG rows packed (``step.packed_ms`` of ``lab/results/gpu_nvidia_h100_80gb_hbm3.json``;
  it records the commit it ran on, which predates the current code);
* the denoiser calls per image of a calibration: every setting's mean NFE plus the self-score's
  passes per setting, from the nano calibration of ``lab/studies/calibration_nano.py``
  (``lab/results/calibration_nano_48.json``); the 8B model's own NFEs are unknown here.

An image's call costs about what one image's call costs alone (the measured call already fills
the GPU: ~8,400 tokens at ~490 TFLOPS), so GPU time = prompts x seeds x calls per image x
ms per call (``lab.benchmarks.gpu_check.projection.projected_seconds``, the one projection
function). Model loading, the probe call and VQ decoding of the contact sheet are left out.

``time``: Wall time of the calibration command on DiMOO-nano with its built-in prompt list.

    python -m lab.studies.calibration time      # run it on an otherwise idle machine

Runs ``python -m ladr_core.calibrate nano`` exactly as a user types it (the built-in nano list,
the default threads), with its report and calibration file in a temporary folder so the
shipped checkpoint folder stays untouched, and writes ``lab/results/calibration_time.json``:
the command, its exit status, the wall time, the machine's load average before and after (an
idle machine reads near 0 before), the recommendation and the denoiser calls the report counts.

The calibration's two studies have scripts of their own: ``lab/studies/calibration_nano.py``
(the calibrate command on nano beside the evaluator's verdicts) and
``lab/studies/calibration_error_rate.py`` (how often the rule errs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from lab.benchmarks.common import RESULTS_DIR, write_result
from lab.benchmarks.gpu_check.projection import projected_seconds
from lab.nano import scenes
from lab.studies.paired_stats import group_index
from lab.studies.self_score_study import BASE, BROKEN, DROP, fit, margin_interval
from lab.studies.self_score_variants import load_set, variants
from ladr_core.calibrate import BUILTIN_COUNT, HANDWRITTEN, paired_spread

ROOT = Path(__file__).resolve().parents[2]

GPU_FILE = RESULTS_DIR / "gpu_nvidia_h100_80gb_hbm3.json"
NANO_FILE = RESULTS_DIR / "calibration_nano_48.json"


def margin(a: argparse.Namespace, argv: list[str]) -> dict:
    """``margin`` (module docstring): writes calibration_margin.json."""
    maps, evaluator, gidx, runs = load_set(Path(a.runs), "validation", a.prompts, a.batch)
    agg, calls = variants()[a.variant]
    values = {s: agg(m) for s, m in maps.items()}
    f = fit(values, evaluator)
    passed = {s: r["passed"] for s, r in runs.items()}
    n = len(values[BASE])
    specs = scenes.validation_specs(n)
    strat = group_index([scenes.group_of(s) for s in specs])
    assert np.array_equal(strat, gidx)
    points = [{"setting": s, "evaluator_diff": evaluator[s]["diff"]["diff"],
               "evaluator_ci": [evaluator[s]["diff"]["lo"], evaluator[s]["diff"]["hi"]],
               "self_score_diff": float((values[s] - values[BASE]).mean()),
               "spread": paired_spread(values[s], values[BASE]),
               "nfe": evaluator[s]["nfe"]} for s in f["settings"]]
    payload = {
        "set": "validation", "prompts": n, "variant": a.variant,
        "self_score_calls_per_image": calls, "reference": BASE, "evaluator_drop": DROP,
        "broken_below": BROKEN, "method": "least squares through (0, 0) of the self-score "
        "difference on the evaluator difference, settings not broken; margin = slope x drop",
        "slope": f["slope"], "margin": f["margin"],
        "margin_ci95": margin_interval(values, passed, gidx, f["settings"]),
        "spread": f["spread"], "spread_nearest_settings": f["spread_nearest_settings"],
        "spread_all_median": f["spread_all_median"], "prompts_needed": f["prompts_needed"],
        "points": points, "worst_ladr_ratio": f["worst_ratio"], "ladr_ratios": f["ratios"],
        "command": "python -m lab.studies.calibration " + " ".join(argv)}
    path = write_result(Path(a.json).stem, payload, Path(a.json).parent)
    print(f"margin {f['margin']:.5f} {payload['margin_ci95']} slope {f['slope']:.4f} spread "
          f"{f['spread']:.4f} prompts needed {f['prompts_needed']}\nwrote {path}")
    return payload



def calls_per_image(nano: dict[str, Any]) -> tuple[float, dict[str, float]]:
    """(calls per image, per setting) of a calibration: NFE + the self-score's passes."""
    passes = nano["conditions"]["self_score_passes_per_image"]
    per = {c["name"]: c["nfe"] + passes for c in nano["candidates"]}
    return sum(per.values()), per


def projection(a: argparse.Namespace, argv: list[str]) -> dict[str, Any]:
    """``projection`` (module docstring): writes calibration_projection.json."""
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



def wall_time(a: argparse.Namespace, argv: list[str]) -> dict:
    """``time`` (module docstring): writes calibration_time.json."""
    with tempfile.TemporaryDirectory() as tmp:
        report, calib = Path(tmp) / "report.json", Path(tmp) / "calibration.json"
        cmd = [sys.executable, "-m", "ladr_core.calibrate", "nano", "--json", str(report),
               "--calibration-file", str(calib)]
        load_before = os.getloadavg()[0]
        start = time.perf_counter()
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
        wall = time.perf_counter() - start
        load_after = os.getloadavg()[0]
        doc = json.loads(report.read_text()) if report.is_file() else {}
    result = {"benchmark": "calibration_time",
              "command": "python -m ladr_core.calibrate nano (report and calibration file "
                         "in a temporary folder)",
              "exit_status": done.returncode, "wall_s": round(wall, 1),
              "load_before": load_before, "load_after": load_after,
              "recommended": doc.get("recommended"), "why": doc.get("why"),
              "settings": len(doc.get("candidates", [])),
              "denoiser_calls": doc.get("denoiser_calls"),
              "stderr_tail": done.stderr[-2000:]}
    path = write_result("calibration_time", result,
                        Path(a.out) if a.out else None)
    print(f"calibration on nano: {wall / 60:.1f} min (exit {done.returncode}, load "
          f"{load_before:.2f} before, {load_after:.2f} after) -> {path}")
    return result



def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="figure", required=True)
    m = sub.add_parser("margin", help="the non-inferiority margin, fitted on validation")
    m.add_argument("--variant", required=True, help="a name of self_score_variants.variants()")
    m.add_argument("--prompts", type=int, default=210)
    m.add_argument("--batch", type=int, default=35)
    m.add_argument("--runs", default=str(ROOT / "lab" / "results" / "self_score_runs"))
    m.add_argument("--json", default=str(RESULTS_DIR / "calibration_margin.json"))
    p = sub.add_parser("projection", help="the projected GPU time of an 8B calibration")
    p.add_argument("--out", default=str(RESULTS_DIR))
    t = sub.add_parser("time", help="the calibrate command's wall time on nano")
    t.add_argument("--out", default=None, help="results folder (default lab/results)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    argv = sys.argv[1:] if argv is None else argv
    a = parse(argv)
    return {"margin": margin, "projection": projection, "time": wall_time}[a.figure](a, argv)


if __name__ == "__main__":
    main()

"""Wall time of the calibration command on DiMOO-nano with its built-in prompt list.

    python -m benchmarks.calibration_time            # run it on an otherwise idle machine

Runs ``python -m ladr_core.calibrate nano`` exactly as a user types it (the built-in nano list,
the default threads), with its report and calibration file in a temporary folder so the
shipped checkpoint folder stays untouched, and writes ``benchmarks/results/calibration_time.json``:
the command, its exit status, the wall time, the machine's load average before and after (an
idle machine reads near 0 before), the recommendation and the denoiser calls the report counts.
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

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import write_result  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=None, help="results folder (default benchmarks/results)")
    a = ap.parse_args(argv)
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


if __name__ == "__main__":
    main()
